"""Runs the installed console script with SIGINT sent at the K-th module import from the package's first
one on (K=0: none sent; the number of imports goes to stderr): an interrupt at a chosen point, not a delay.
It imports nothing the interpreter's start-up has not, so the program's own imports are all still to come."""

import os
import sys

_SIGINT = 2


class _Interrupter:
    """Counts the imports that start after the package's own; sends SIGINT at the chosen one."""

    def __init__(self, at: int) -> None:
        self.at, self.seen, self.armed = at, 0, False

    def find_spec(self, name: str, path: object, target: object = None) -> None:
        """Only counts: the real finders load the module."""
        if self.armed:
            self.seen += 1
            if self.seen == self.at:
                os.kill(os.getpid(), _SIGINT)
        self.armed = self.armed or name == "spark_compile"


def main() -> None:
    """argv: the console script, K, then the command line."""
    script, at = sys.argv[1], int(sys.argv[2])
    probe = _Interrupter(at)
    sys.meta_path.insert(0, probe)
    sys.argv = [script, *sys.argv[3:]]
    with open(script) as source:
        code = compile(source.read(), script, "exec")
    try:
        exec(code, {"__name__": "__main__", "__file__": script})  # the console script, as its interpreter runs it
    finally:
        if at == 0:
            os.write(2, f"imports: {probe.seen}\n".encode())


main()
