"""What an importer reads, before mapping: words with the source line they came from, and one launch per node."""

from __future__ import annotations

from spark_compile.overlay.value_class import field, value_class


@value_class
class Origin:
    """A place in a source file: its name as given and a 1-based line."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@value_class
class Word:
    """One shell word after quote removal, and where it started."""

    text: str
    origin: Origin


@value_class
class Leftover:
    """A setting of the source that the profile does not carry, and why."""

    origin: Origin
    text: str
    why: str


@value_class(frozen=False)
class Launch:
    """One node's container: docker options (flag, value or None) in order, image, and the engine command."""

    origin: Origin
    options: list[tuple[Word, Word | None]] = field(default_factory=list)
    image: Word | None = None
    command: list[Word] = field(default_factory=list)
    env: list[tuple[str, str, Origin]] = field(default_factory=list)  # -e and --env-file, in docker's order
    words: list[Word] = field(default_factory=list)  # the command as written, `run` onwards
    ssh: str | None = None  # the host a traced launcher ran this line on, when it went through ssh
    own_container: bool = True  # False: the tool behind the source (sparkrun) sets the container options itself
