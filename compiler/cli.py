"""The command line: parses arguments, runs the command, prints, and maps every outcome to an exit code.

The exit codes are compiler/common/errors.py's table. An internal error (a bug) is one line naming the log
file its traceback went to (commands/error_log.py), or with --traceback the traceback on stderr; Ctrl-C is a
line and 130, never a traceback.
Everything printed passes through one redaction step (spark_compile.common.secrets.redact; JSON is redacted value by
value before serialisation) and one terminal-safe escaping (spark_compile.common.quoting.terminal_text); on a
terminal, findings and verdicts are then coloured (spark_compile.common.colour; NO_COLOR turns it off).
"""

from __future__ import annotations

import io
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

from spark_compile import _interrupted
from spark_compile.commands.error_log import traceback_text, write_log
from spark_compile.commands.parser import parse
from spark_compile.commands.run import error_line, render
from spark_compile.common.colour import colourise, wants_colour
from spark_compile.common.errors import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    InputError,
    RejectedError,
    SparkCompileError,
)
from spark_compile.common.quoting import terminal_text
from spark_compile.common.secrets import Redacted, redact


class _Redacting(io.TextIOBase):
    """A text stream that passes everything written through the one redaction step (unless its values were
    redacted before serialisation) and the one terminal-safe escaping of control and bidi characters, then,
    on a terminal, colours its findings and verdicts (never JSON, which is redacted before it is written)."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.colour = wants_colour(stream, os.environ)

    def write(self, text: str) -> int:
        if isinstance(text, Redacted):
            self.stream.write(text)
        else:
            safe = terminal_text(redact(text))
            self.stream.write(colourise(safe) if self.colour else safe)
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def fileno(self) -> int:
        return int(self.stream.fileno())


def _silence_stdout() -> None:
    """Point fd 1 at /dev/null so the interpreter's own flush at exit cannot fail a second time."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
    except OSError:
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: the one place that turns every error into a message and an exit code."""
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process
    if sys.stdout is None:
        sys.stderr.write("spark-compile: error: standard output is closed\n")
        return EXIT_USAGE
    # pydantic looks for plugins through importlib.metadata on first model build (~35 ms on a pre-commit
    # hot path); the compiler uses none.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Redacting(stdout), _Redacting(stderr)
    program = signal.getsignal(signal.SIGINT) is _interrupted  # spark-compile is the process, not a test's call
    try:
        if program:
            signal.signal(signal.SIGINT, signal.default_int_handler)  # from here, cleanup runs on Ctrl-C
        code = _run_guarded(argv)
        try:
            sys.stdout.flush()
        except OSError as exc:
            code = _io_error(exc)
        return code
    except KeyboardInterrupt:  # after the command, while its output is flushed
        stderr.write("spark-compile: interrupted\n")
        return EXIT_INTERRUPTED
    finally:
        if program:  # a Ctrl-C between here and the exit: the message and 130 too, never a traceback
            signal.signal(signal.SIGINT, _interrupted)
        sys.stdout, sys.stderr = stdout, stderr


def _io_error(exc: OSError) -> int:
    if isinstance(exc, BrokenPipeError):
        _silence_stdout()
        return EXIT_OK  # the reader went away (`| head`): what it wanted, it got
    _silence_stdout()
    sys.stderr.write(f"spark-compile: error: cannot write the output: {exc.strerror or exc}\n")
    return EXIT_USAGE


def _run_guarded(argv: Sequence[str] | None) -> int:
    show_traceback = False
    try:
        args = parse(list(sys.argv[1:] if argv is None else argv))
        show_traceback = args.traceback
        code: int = args.func(args)
        return code
    except RejectedError as stop:  # any command, any profile it needs: the findings report, exit 1
        sys.stdout.write(render(stop.findings, "text", 1))
        return stop.exit_code
    except SparkCompileError as exc:
        sys.stderr.write(error_line(exc))
        return exc.exit_code
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    except KeyboardInterrupt:
        sys.stderr.write("spark-compile: interrupted\n")
        return EXIT_INTERRUPTED
    except OSError as exc:
        if exc.errno is None:
            return _internal(exc, show_traceback)
        if exc.filename is not None:  # a path the user named that the system refuses (too long, no access)
            sys.stderr.write(error_line(InputError(f"{exc.filename}: {exc.strerror or exc}")))
            return EXIT_USAGE
        return _io_error(exc)
    except RecursionError:
        sys.stderr.write("spark-compile: error: the input nests too deeply\n")
        return EXIT_USAGE
    except Exception as exc:
        return _internal(exc, show_traceback)


def _internal(exc: BaseException, show_traceback: bool) -> int:
    """A bug: its traceback on stderr (--traceback) or in the log file, and one line that says where."""
    text = traceback_text(exc)
    if show_traceback:
        sys.stderr.write(text)
        where = "with the traceback above"
    else:
        log = write_log(text)
        where = f"with the traceback in {log}" if log else "with the traceback --traceback prints"
    sys.stderr.write(f"spark-compile: internal error: {type(exc).__name__}: "
                     f"{terminal_text(str(exc)[:300], one_line=True)} (please report this, {where})\n")
    return EXIT_INTERNAL


if __name__ == "__main__":
    raise SystemExit(main())
