"""The documented exit codes, and the base of the errors the CLI turns into a message and a non-zero one."""

from __future__ import annotations

from spark_compile.common.findings import Finding

EXIT_OK = 0
EXIT_FINDINGS = 1  # findings of error severity (or warnings under --strict), drift, or a diff that differs
EXIT_USAGE = 2  # bad command line, unreadable file, I/O failure
EXIT_INTERNAL = 3  # a bug in spark-compile: reported in one line, never as a traceback


class SparkCompileError(Exception):
    """Base of every error spark-compile reports to the user; carries its exit code."""

    exit_code = EXIT_USAGE


class UsageError(SparkCompileError):
    """The command line asks for something that cannot be done."""


class InputError(SparkCompileError):
    """A file cannot be read or written."""


class UnquotableError(SparkCompileError):
    """A value its consumer (bash, systemd, an env file...) cannot carry; the profile must change."""

    exit_code = EXIT_FINDINGS


class RejectedError(SparkCompileError):
    """Stop here: a profile the command needs has these findings. Every command prints their report, exit 1."""

    exit_code = EXIT_FINDINGS

    def __init__(self, findings: list[Finding]) -> None:
        super().__init__(f"{len(findings)} finding(s)")
        self.findings = findings
