"""What an importer reads, before mapping: words with the source line they came from, and one launch per node."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Origin:
    """A place in a source file: its name as given and a 1-based line."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True, slots=True)
class Word:
    """One shell word after quote removal, and where it started."""

    text: str
    origin: Origin


@dataclass(frozen=True, slots=True)
class Leftover:
    """A setting of the source that the profile does not carry, and why."""

    origin: Origin
    text: str
    why: str


@dataclass(slots=True)
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
