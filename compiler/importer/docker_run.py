"""`docker run … IMAGE python3 -m sglang.launch_server …` lines: found in shell text, split into options, image,
environment and the engine command. Parsed as words only; nothing is executed."""

from __future__ import annotations

import re
from pathlib import Path

from spark_compile.common.errors import InputError
from spark_compile.importer.argv import launcher_split
from spark_compile.importer.shell import ShellWord, commands
from spark_compile.importer.source import Launch, Leftover, Origin, Word
from spark_compile.importer.wrapped import ASSIGNMENT, REFERENCE, is_shell, unwrap_shell

# docker run's options that take no value (docker 28's `docker run --help`); every other option takes one.
SWITCHES = frozenset({
    "-d", "--detach", "-i", "--interactive", "-t", "--tty", "--rm", "--privileged", "--init", "--read-only",
    "-P", "--publish-all", "--no-healthcheck", "--oom-kill-disable", "-q", "--quiet", "--sig-proxy",
    "--disable-content-trust", "--help",
})
_SHORT_SWITCHES = frozenset("ditPq")
MAX_SOURCE = 4 << 20  # a launcher or runbook larger than this is not a launcher


def read_source(path: Path) -> str:
    """A source file's text (UTF-8, undecodable bytes replaced), refusing what is not a regular file of sane size."""
    try:
        if not path.is_file():
            raise InputError(f"{path}: not a regular file")
        if path.stat().st_size > MAX_SOURCE:
            raise InputError(f"{path}: larger than {MAX_SOURCE} bytes; not a launcher or recipe")
        return path.read_bytes().decode("utf-8", errors="replace")
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None


def _docker_run_start(words: list[ShellWord], verb: str = "run") -> int | None:
    """Index of the first word after `docker run` / `docker container run` (behind sudo or env), or None."""
    texts = [w.text for w in words]
    for i, text in enumerate(texts):
        if Path(text).name != "docker":
            continue
        if texts[i + 1:i + 2] == [verb]:
            return i + 2
        if texts[i + 1:i + 3] == ["container", verb]:
            return i + 3
    return None


def _split_option(word: ShellWord, rest: list[ShellWord]) -> tuple[list[tuple[Word, Word | None]], int]:
    """One option (or a bundle of short switches) and how many further words it used."""
    text = word.text
    if text.startswith("--"):
        name, eq, value = text.partition("=")
        if eq:
            return [(Word(name, word.origin), Word(value, word.origin))], 0
        if name in SWITCHES:
            return [(word, None)], 0
        if not rest:
            raise InputError(f"{word.origin}: docker option {name} needs a value and the line ends")
        return [(word, rest[0])], 1
    if len(text) > 2 and all(c in _SHORT_SWITCHES for c in text[1:]):  # -it, -dit
        return [(Word(f"-{c}", word.origin), None) for c in text[1:]], 0
    if len(text) > 2:  # -eNAME=value, -v/a:/b
        return [(Word(text[:2], word.origin), Word(text[2:], word.origin))], 0
    if text in SWITCHES:
        return [(word, None)], 0
    if not rest:
        raise InputError(f"{word.origin}: docker option {text} needs a value and the line ends")
    return [(word, rest[0])], 1


_FROM_SHELL = ("the value comes from the launching shell's environment, which the source does not show; set it "
               "in engine.env (or secrets.env for a secret)")


def parse_env_file(path: Path, shown: str, left: list[Leftover]) -> list[tuple[str, str, Origin]]:
    """docker's --env-file format: NAME=VALUE per line, taken literally (no quotes); # comments and blanks skipped;
    a bare NAME (docker takes it from the launching shell's environment) is left over."""
    out = []
    for number, line in enumerate(read_source(path).splitlines(), 1):
        stripped = line.lstrip()
        if not stripped or stripped.startswith("#"):
            continue
        name, eq, value = stripped.partition("=")
        if not eq:
            left.append(Leftover(Origin(shown, number), name, _FROM_SHELL))
            continue
        out.append((name, value, Origin(shown, number)))
    return out


def _env(launch: Launch, flag: str, value: Word, base: Path, left: list[Leftover]) -> None:
    if isinstance(value, ShellWord) and value.expands:
        left.append(Leftover(value.origin, f"{flag} {value.text}", f"{value.text!r} is expanded by the shell; its "
                             "value is not in the source (import the script with --trace)"))
        return
    if flag in ("-e", "--env"):
        name, eq, val = value.text.partition("=")
        if not eq:
            left.append(Leftover(value.origin, f"{flag} {value.text}", _FROM_SHELL))
            return
        launch.env.append((name, val, value.origin))
        return
    target = Path(value.text)
    path = target if target.is_absolute() else base / target
    if not path.is_file():
        left.append(Leftover(value.origin, f"{flag} {value.text}", "the env file is not readable next to the source"))
        return
    launch.env.extend(parse_env_file(path, value.text, left))


def _options(launch: Launch, words: list[ShellWord], start: int, base: Path, left: list[Leftover]) -> int:
    """Read docker's options from ``start`` into ``launch`` (variables apart); the index of the first other word."""
    i = start
    while i < len(words) and words[i].text.startswith("-") and words[i].text != "-":
        pairs, used = _split_option(words[i], words[i + 1:])
        for flag, value in pairs:
            if flag.text in ("-e", "--env", "--env-file") and value is not None:
                _env(launch, flag.text, value, base, left)
            else:
                launch.options.append((flag, value))
        i += 1 + used
    return i


def parse_launch(words: list[ShellWord], base: Path, left: list[Leftover],
                 notes: list[str] | None = None) -> Launch | None:
    """The launch of one `docker run` command, or None when the command is no `docker run`; a shell running the
    server in its -c string is read as that server (wrapped.py)."""
    start = _docker_run_start(words)
    if start is None:
        return None
    launch = Launch(words[start - 1].origin, words=list(words[start - 1:]))
    i = _options(launch, words, start, base, left)
    if i >= len(words):
        raise InputError(f"{launch.origin}: docker run names no image")
    launch.image, launch.command = words[i], list(words[i + 1:])
    _entrypoint_first(launch)
    unwrap_shell(launch, left, notes)
    return launch


# How `docker exec` attaches to the container: nothing of what the container runs.
_ATTACH = frozenset({"-d", "--detach", "-i", "--interactive", "-t", "--tty", "--detach-keys"})


def parse_exec(words: list[ShellWord], base: Path, left: list[Leftover], started: dict[str, Launch],
               notes: list[str] | None = None) -> Launch | None:
    """A server started by `docker exec [OPTIONS] CONTAINER COMMAND` in a container ``started`` holds (by name, a
    `docker run -d --name C … sleep infinity`): that run's options and image, with the exec's variables, options
    and command; a lone shell (`docker exec -it C bash`, for a server typed into it) too; else None."""
    start = _docker_run_start(words, "exec")
    if start is None:
        return None
    own = Launch(words[start - 1].origin)
    i = _options(own, words, start, base, left)
    if i >= len(words):
        raise InputError(f"{own.origin}: docker exec names no container")
    run = started.get(words[i].text)
    own.env[:0] = run.env if run is not None else []  # a shell's string reads the run's variables too
    own.command = list(words[i + 1:])
    unwrap_shell(own, left, notes)
    server = launcher_split(own.command) is not None
    if not server and not (len(own.command) == 1 and is_shell(own.command[0])):
        return None
    if run is None:
        if server:
            left.append(Leftover(own.origin, f"docker exec {words[i].text}", "no docker run of this container "
                                 "comes before it in the source, so its image and options are unknown"))
        return None
    ours = [o for o in own.options if o[0].text not in _ATTACH]  # -w, -u, --privileged: the exec's win
    options = [o for o in run.options if o[0].text not in {flag.text for flag, _ in ours}] + ours
    if notes is not None and server:
        notes.append(f"{own.origin}: the server started with docker exec in the container of {run.origin}; "
                     "imported as that container's command, with its docker options and variables")
    return Launch(run.origin, options, run.image, own.command, own.env, [*run.words, *own.words], run.ssh)


def container_name(launch: Launch) -> str | None:
    """The --name a docker run gives its container, or None."""
    return next((v.text for f, v in reversed(launch.options) if f.text == "--name" and v is not None), None)


def _entrypoint_first(launch: Launch) -> None:
    """`--entrypoint PROG IMAGE ARGS`: the container runs PROG ARGS, so PROG is the command's first word (the plan
    writes the launcher's first word as --entrypoint again)."""
    found = [(flag, value) for flag, value in launch.options if flag.text == "--entrypoint" and value is not None]
    if found and found[-1][1] is not None and found[-1][1].text:
        launch.options = [option for option in launch.options if option[0].text != "--entrypoint"]
        launch.command = [found[-1][1], *launch.command]


_FENCE = re.compile(r"\s*(```|~~~)")


def shell_blocks(text: str) -> str:
    """A Markdown page's fenced code blocks as shell text, every other line blanked (lines keep their numbers)."""
    out, inside = [], False
    for line in text.split("\n"):
        fence = _FENCE.match(line)
        out.append("" if fence or not inside else line)
        inside = inside != bool(fence)
    return "\n".join(out)


def _typed_inside(launch: Launch, words: list[ShellWord], notes: list[str] | None) -> bool:
    """A server command typed into the shell an interactive `docker run … bash` opened becomes its command."""
    if len(launch.command) != 1 or not is_shell(launch.command[0]) or launcher_split(list(words)) is None:
        return False
    launch.command = list(words)
    if notes is not None:
        notes.append(f"{words[0].origin}: the server command typed into the shell of the container started at "
                     f"{launch.origin}; imported as that container's command")
    return True




def _substituted(words: list[ShellWord], assigned: dict[str, str], notes: list[str] | None) -> list[ShellWord]:
    """A command with each word that is exactly `$NAME` of a variable the text set earlier to a literal
    (`NAME=value`, `export NAME=value`) replaced by that value; an assignment is remembered (nothing is run)."""
    texts = [w.text for w in words]
    body = words[1:] if texts[:1] == ["export"] else words
    pairs = [ASSIGNMENT.fullmatch(w.text) for w in body]
    if body and all(pairs):
        for word, pair in zip(body, pairs, strict=True):
            if pair is not None:
                assigned[pair.group(1)] = "" if word.expands else pair.group(2)
        return words
    if _docker_run_start(words) is None and _docker_run_start(words, "exec") is None:
        return words  # only a container's words are read
    out = []
    for word in words:
        match = REFERENCE.fullmatch(word.text) if word.expands else None
        value = assigned.get((match.group(1) or match.group(2)) if match else "")
        if match and value:
            out.append(ShellWord(value, word.origin))
            if notes is not None:
                notes.append(f"{word.origin}: {word.text} read as {value!r}, the value the text gives it earlier")
        else:
            out.append(word)
    return out


def launches(text: str, file: str, base: Path, left: list[Leftover], notes: list[str] | None = None) -> list[Launch]:
    """Every `docker run` of an SGLang server in a shell text (a Markdown page's code blocks), in order; a server
    command typed into a container's shell is that container's (other containers are noted and skipped)."""
    found: list[Launch] = []
    shell: Launch | None = None
    assigned: dict[str, str] = {}
    started: dict[str, Launch] = {}  # containers started without a server, by name: a docker exec may start one
    for written in commands(shell_blocks(text) if file.endswith(".md") else text, file):
        words = _substituted(written, assigned, notes)
        launch = parse_launch(words, base, left, notes)
        if launch is None:
            if shell is not None and _typed_inside(shell, words, notes):
                found.append(shell)
                shell = None
            elif (executed := parse_exec(words, base, left, started, notes)) is not None:
                if launcher_split(executed.command) is None:
                    shell = executed  # `docker exec -it C bash`: the server is typed next
                else:
                    found.append(executed)
            continue
        if len(launch.command) == 1 and is_shell(launch.command[0]):
            shell = launch
            continue
        if launcher_split(launch.command) is None:
            started[container_name(launch) or ""] = launch
            if notes is not None:
                notes.append(f"{launch.origin}: a docker run of {launch.image.text if launch.image else '?'} that "
                             "starts no SGLang server; not imported")
            continue
        found.append(launch)
    return found
