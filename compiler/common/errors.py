"""spark-compile's one table of exit codes, and the base of the errors the CLI turns into a message and a code."""

from __future__ import annotations

from spark_compile.common.findings import Finding

EXIT_OK = 0
EXIT_FINDINGS = 1  # the answer is no: findings, drift, a diff that differs, an import left incomplete
EXIT_USAGE = 2  # the command cannot run as asked: the command line, an unreadable file, a failed write (argparse's)
EXIT_INTERNAL = 3  # a bug in spark-compile: one line naming the log file that holds the traceback
EXIT_DOWN = 4  # audit: a rank unreachable, not running or not captured
EXIT_SANDBOX = 5  # import --trace: the script was stopped in its sandbox
EXIT_INTERRUPTED = 130  # Ctrl-C, as a shell reports SIGINT

# The table `spark-compile --help` prints and README.md's "Exit codes" section holds (tests/test_exit_codes.py).
EXIT_CODES: tuple[tuple[int, str], ...] = (
    (EXIT_OK, "fine"),
    (EXIT_FINDINGS, "findings (errors, or warnings with --strict), drift (of generated/, of the catalogs, or of a "
                    "fleet from `audit`), a diff that differs, or an import that left something out"),
    (EXIT_USAGE, "usage or I/O error: a bad command line, an unreadable file, an output spark-compile will not "
                 "replace, a closed or full standard output"),
    (EXIT_INTERNAL, "internal error (a bug): one line naming the log file that holds the traceback (--traceback "
                    "prints it instead)"),
    (EXIT_DOWN, "`audit`: a rank unreachable, not running or not captured"),
    (EXIT_SANDBOX, "`import --trace`: the script was stopped in its sandbox (a write outside its folder, a "
                   "connection attempt, the time limit)"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C)"),
)


class SparkCompileError(Exception):
    """Base of every error spark-compile reports to the user; carries its exit code."""

    exit_code = EXIT_USAGE


class UsageError(SparkCompileError):
    """The command line asks for something that cannot be done."""


class InputError(SparkCompileError):
    """A file cannot be read or written."""


class SandboxError(SparkCompileError):
    """A traced launcher did what its sandbox refuses (`import --trace`): nothing was imported."""

    exit_code = EXIT_SANDBOX


class UnquotableError(SparkCompileError):
    """A value its consumer (bash, systemd, an env file...) cannot carry; the profile must change."""

    exit_code = EXIT_FINDINGS


class RejectedError(SparkCompileError):
    """Stop here: a profile the command needs has these findings. Every command prints their report, exit 1."""

    exit_code = EXIT_FINDINGS

    def __init__(self, findings: list[Finding]) -> None:
        super().__init__(f"{len(findings)} finding(s)")
        self.findings = findings
