"""A server started by a shell inside the container: `docker run … IMAGE bash -lc "export X=1; exec python3 -m
sglang.launch_server …"`. The -c string is split with the project's shell words (nothing is run); the server's
words become the container's command and the string's assignments its variables."""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from spark_compile.common.errors import InputError
from spark_compile.importer.argv import launcher_split
from spark_compile.importer.shell import ShellWord, commands
from spark_compile.importer.source import Launch, Leftover, Origin, Word

SHELLS = frozenset({"bash", "sh", "dash", "zsh"})
# Commands of the string that change nothing the server runs with.
_INERT = frozenset({"set", "echo", "printf", ":", "true"})
ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.S)  # NAME=value
REFERENCE = re.compile(r"\$(?:([A-Za-z_][A-Za-z0-9_]*)|\{([A-Za-z_][A-Za-z0-9_]*)\})")  # $NAME or ${NAME}


def is_shell(word: Word) -> bool:
    """Whether a command's first word is a POSIX shell (bash, sh, /bin/bash, ...)."""
    return PurePosixPath(word.text).name in SHELLS


def _script(command: list[Word]) -> int | None:
    """Where the -c string of `SHELL [OPTIONS] -c STRING` (-lc, -ec, -l -c, --login -c) is, else None."""
    if not command or not is_shell(command[0]):
        return None
    for i, word in enumerate(command[1:], 1):
        text = word.text
        if not text.startswith("-") or text == "-":
            return None
        if not text.startswith("--") and "c" in text[1:]:
            return i + 1 if i + 1 < len(command) else None
    return None


def _expanded(word: ShellWord, known: dict[str, str]) -> ShellWord:
    """``word`` with each `$NAME`/`${NAME}` of a variable the container has; unchanged while any other remains."""
    if not word.expands:
        return word
    names = [m.group(1) or m.group(2) for m in REFERENCE.finditer(word.text)]
    text = REFERENCE.sub(lambda m: known.get(m.group(1) or m.group(2), m.group(0)), word.text)
    if not names or any(n not in known for n in names) or "$" in text or "`" in text:
        return word
    return ShellWord(text, word.origin)


def _assignments(words: list[ShellWord]) -> tuple[list[tuple[str, ShellWord]], list[ShellWord], bool]:
    """The `NAME=value` words before a command (behind `export`, `env` and `exec`, in any order), the command,
    and whether `exec` replaces the shell with it."""
    pairs, replaced = [], False
    for i, word in enumerate(words):
        match = ASSIGNMENT.fullmatch(word.text)
        if match is not None:
            pairs.append((match.group(1), ShellWord(match.group(2), word.origin, word.expands)))
        elif word.text in ("export", "env", "exec"):
            replaced = replaced or word.text == "exec"
        else:
            return pairs, words[i:], replaced
    return pairs, [], replaced


def _server(words: list[list[ShellWord]], known: dict[str, str], env: list[tuple[str, str, Origin]],
            left: list[Leftover]) -> tuple[int, list[ShellWord]] | None:
    """The index and words of the command of the string that starts the server, its `$NAME`s replaced; each
    assignment before it (and its own) is added to ``env``."""
    for index, found in enumerate(words):
        pairs, rest, _ = _assignments(found)
        for name, written in pairs:
            value = _expanded(written, known)
            if value.expands:
                left.append(Leftover(value.origin, f"{name}={value.text}", f"{value.text!r} is expanded by the "
                                     "container's shell; its value is not in the source"))
                continue
            known[name] = value.text
            env.append((name, value.text, value.origin))
        if rest and launcher_split(list(rest)) is not None:
            return index, [_expanded(w, known) for w in rest]
    return None


def unwrap_shell(launch: Launch, left: list[Leftover], notes: list[str] | None) -> bool:
    """Make a container command that is a shell running the server in its -c string that server's command; its
    assignments become the container's variables, any other command of the string is left out."""
    at = _script(launch.command)
    if at is None:
        return False
    script = launch.command[at]
    try:
        words = [[ShellWord(w.text, script.origin, w.expands) for w in found]
                 for found in commands(script.text, str(script.origin))]
    except InputError:
        return False  # not shell text (an unclosed quote): the container's command stays as written
    env: list[tuple[str, str, Origin]] = []
    unknown: list[Leftover] = []
    found = _server(words, {name: value for name, value, _ in launch.env}, env, unknown)
    if found is None:
        return False
    left.extend(unknown)
    index, server = found
    _, _, replaced = _assignments(words[index])
    for number, others in enumerate(words):
        rest = _assignments(others)[1]
        if number == index or not rest or rest[0].text in _INERT or (replaced and number > index):
            continue  # after `exec` nothing runs
        when = "before the server" if number < index else "after the server ends"
        left.append(Leftover(script.origin, " ".join(w.text for w in others), f"the container's shell runs this "
                             f"{when}, and the profile's container runs only the server"))
    options = launch.command[1:at]
    shell = " ".join(w.text for w in [launch.command[0], *options])
    login = any(w.text == "--login" or (not w.text.startswith("--") and "l" in w.text[1:]) for w in options)
    launch.env.extend(env)
    launch.command = list(server)
    if notes is not None:
        notes.append(f"{script.origin}: the server command inside `{shell}`'s string; imported as the container's "
                     "command" + (", the string's variables as the container's" if env else "") +
                     ("; the login shell's profile files are not read (set what they export in engine.env)"
                      if login else ""))
    return True
