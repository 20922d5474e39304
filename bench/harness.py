"""A small process benchmark harness: run whole commands after a warm-up, keep wall/CPU time and peak RSS.

Every sample is one new child process started with ``os.posix_spawn`` and reaped with ``os.wait4``, so the
resource usage (CPU time, ``ru_maxrss``) is that child's alone. Stdlib only.
"""

from __future__ import annotations

import math
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

# Variables that would make a child slower than a user's run, or not "cold with warm caches".
DROP_ENV = ("PYTHONDONTWRITEBYTECODE", "PYTHONPROFILEIMPORTTIME", "PYTHONMALLOCSTATS", "PYTHONTRACEMALLOC",
             "PYTHONDEVMODE", "PYTHONINSPECT", "PYTHONVERBOSE", "PYTHONBREAKPOINT")


class BenchError(RuntimeError):
    """A benchmarked command failed, or its output was not what the benchmark expects."""


def child_env() -> dict[str, str]:
    """The environment of every child: ours, minus what would defeat warm bytecode caches or add overhead."""
    return {k: v for k, v in os.environ.items() if k not in DROP_ENV}


@dataclass(frozen=True)
class Sample:
    """One run of one command."""

    wall_s: float
    cpu_s: float
    maxrss_kib: int
    exit_code: int


@dataclass(frozen=True)
class Output:
    """What one run printed, for the checks that decide a run is valid."""

    exit_code: int
    stdout: str
    stderr: str


def shown_argv(argv: Sequence[str]) -> list[str]:
    """argv as the results file records it: paths inside the working directory relative to it (no machine path)."""
    here = os.getcwd() + os.sep
    return [arg[len(here):] if arg.startswith(here) else arg for arg in argv]


def run_once(argv: Sequence[str], env: dict[str, str]) -> tuple[Sample, Output]:
    """Spawn ``argv`` once in our working directory; time it from spawn to reap.

    stdout and stderr go to files (read after the timed span), stdin is /dev/null.
    """
    with tempfile.TemporaryDirectory(prefix="spark-bench-io-") as io_dir:
        out_path, err_path = os.path.join(io_dir, "out"), os.path.join(io_dir, "err")
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        actions = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, out_path, flags, 0o600),
            (os.POSIX_SPAWN_OPEN, 2, err_path, flags, 0o600),
        ]
        start = time.perf_counter()
        pid = os.posix_spawn(argv[0], list(argv), env, file_actions=actions)
        _, status, usage = os.wait4(pid, 0)
        wall = time.perf_counter() - start
        code = os.waitstatus_to_exitcode(status)
        sample = Sample(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss, code)
        stdout = Path(out_path).read_text(errors="replace")
        output = Output(code, stdout, Path(err_path).read_text(errors="replace"))
    return sample, output


Validator = Callable[[Output], str | None]


def exit_ok(*codes: int) -> Validator:
    """A validator accepting the given exit codes; it returns the reason a run is invalid, or None."""

    def check(output: Output) -> str | None:
        if output.exit_code in codes:
            return None
        tail = (output.stderr.strip() or output.stdout.strip()).splitlines()[-3:]
        return f"exit {output.exit_code} (expected {' or '.join(map(str, codes))}): {' / '.join(tail)}"

    return check


@dataclass
class Bench:
    """One row of the benchmark: a command, how often to run it, and what makes a run valid.

    ``before`` runs before every sample, outside the timed span (e.g. a fresh empty output directory);
    ``after`` runs after it, also untimed.
    """

    name: str
    argv: list[str]
    reps: int
    valid: Validator = field(default_factory=lambda: exit_ok(0))
    before: Callable[[], None] | None = None
    after: Callable[[], None] | None = None
    samples: list[Sample] = field(default_factory=list)
    unavailable: str | None = None  # set when the command cannot run here: the row says n/a and why

    def run(self, env: dict[str, str], *, keep: bool) -> None:
        """One run; kept as a sample unless it is the warm-up. An invalid run raises BenchError."""
        if self.before:
            self.before()
        try:
            sample, output = run_once(self.argv, env)
        finally:
            if self.after:
                self.after()
        reason = self.valid(output)
        if reason is not None:
            raise BenchError(f"{self.name}: {reason}")
        if keep:
            self.samples.append(sample)

    @property
    def wall(self) -> float:
        return statistics.median(s.wall_s for s in self.samples)

    @property
    def wall_min(self) -> float:
        return min(s.wall_s for s in self.samples)

    @property
    def cpu(self) -> float:
        return statistics.median(s.cpu_s for s in self.samples)

    @property
    def rss_kib(self) -> int:
        """Peak RSS: the median over samples of each child's ru_maxrss (KiB on Linux)."""
        return round(statistics.median(s.maxrss_kib for s in self.samples))

    def as_json(self) -> dict[str, object]:
        if self.unavailable is not None or not self.samples:
            return {"name": self.name, "argv": shown_argv(self.argv), "available": False, "reason": self.unavailable}
        return {
            "name": self.name, "argv": shown_argv(self.argv), "available": True, "reps": len(self.samples),
            "median_wall_s": self.wall, "min_wall_s": self.wall_min, "median_cpu_s": self.cpu,
            "median_maxrss_kib": self.rss_kib,
            "samples": [{"wall_s": s.wall_s, "cpu_s": s.cpu_s, "maxrss_kib": s.maxrss_kib}
                        for s in self.samples],
        }


def run_interleaved(benches: Sequence[Bench], env: dict[str, str], warmup: int,
                    progress: Callable[[str], None]) -> None:
    """Warm every bench up, then run them round-robin (one sample each per round) until each has its reps.

    Interleaving spreads a change in the machine's load over all rows instead of biasing the rows that
    happened to run during it: ratios between rows stay meaningful on a shared machine.
    """
    live = [b for b in benches if b.unavailable is None]
    for bench in live:
        for _ in range(warmup):
            bench.run(env, keep=False)
    rounds = max((b.reps for b in live), default=0)
    for index in range(rounds):
        progress(f"round {index + 1}/{rounds}")
        for bench in live:
            if index < bench.reps:
                bench.run(env, keep=True)


@dataclass(frozen=True)
class Fit:
    """A least-squares line y = intercept + slope * x, with its goodness of fit."""

    slope: float
    intercept: float
    r2: float
    residuals: tuple[float, ...]

    def as_json(self) -> dict[str, object]:
        return {"slope": self.slope, "intercept": self.intercept, "r2": self.r2,
                "residuals": list(self.residuals)}


def linear_fit(xs: Sequence[float], ys: Sequence[float]) -> Fit:
    """Ordinary least squares over paired points (at least two distinct x)."""
    if len(xs) != len(ys) or len(set(xs)) < 2:
        raise ValueError("a linear fit needs at least two distinct x values")
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    slope = sxy / sxx
    intercept = my - slope * mx
    residuals = tuple(y - (intercept + slope * x) for x, y in zip(xs, ys, strict=True))
    ss_tot = sum((y - my) ** 2 for y in ys)
    r2 = 1.0 - sum(r * r for r in residuals) / ss_tot if ss_tot > 0 else 1.0
    return Fit(slope, intercept, r2, residuals)


def fmt_seconds(seconds: float) -> str:
    """Milliseconds below 10 s, else seconds."""
    if math.isnan(seconds):
        return "n/a"
    return f"{seconds * 1000:.0f} ms" if seconds < 10 else f"{seconds:.2f} s"
