"""spark-compile: typed fleet profiles compiled into per-rank SGLang launch artifacts."""

# The interrupt handler goes in before anything else is imported: `_signal`, `os` and `sys` are already loaded
# by the interpreter's start-up, so no Ctrl-C lands in an import of ours with the interpreter's traceback.
import _signal  # type: ignore[import-not-found]  # no stubs; `signal` would import enum first
import os
import sys

__version__ = "0.2.0"


def _interrupted(signum: int, frame: object) -> None:
    """Ctrl-C while the program's modules load: a message and exit 130, never a traceback."""
    os.write(2, b"spark-compile: interrupted\n")
    os._exit(130)


def _set_up_the_program() -> None:
    """Only when spark-compile is the program (not when a test or a tool imports the package): the
    interrupt handler, which the CLI's main() hands back to KeyboardInterrupt once its own handler is in
    place."""
    program = os.path.basename(sys.argv[0]) if sys.argv else ""
    if program in ("-m", "spark-compile"):
        _signal.signal(_signal.SIGINT, _interrupted)
        # The interrupt test signals once this handler is in place, not after a guessed delay.
        ready = os.environ.get("SPARK_COMPILE_TEST_READY_FD", "")
        if ready.isascii() and ready.isdigit() and len(ready) <= 9:  # a file descriptor, nothing else
            try:  # noqa: SIM105 - contextlib is not loaded yet
                os.write(int(ready), b"r")
            except OSError:
                pass  # the test's pipe is gone: nothing to tell


_set_up_the_program()
