"""The benchmark's report: the table, the targets, the fleet fits, and the machine it ran on."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from harness import DROP_ENV, Bench, Fit, fmt_seconds, linear_fit

PACKAGES = ("spark-compile", "pydantic", "pydantic-core", "PyYAML", "Jinja2")


@dataclass(frozen=True)
class Target:
    """A number the project promises, and the limit it is held to (value <= limit passes)."""

    name: str
    value: float  # from median wall times: what PASS/MISS is judged on
    limit: float
    unit: str
    cpu_value: float  # the same from median CPU times (user+sys): less sensitive to the machine's load

    @property
    def result(self) -> str:
        return "PASS" if self.value <= self.limit else "MISS"

    def line(self) -> str:
        limit = f"<= {self.limit:g}{self.unit}"
        return (f"{self.name:<40} {self.value:>8.2f}{self.unit:<2} {self.cpu_value:>8.2f}{self.unit:<2} "
                f"{limit:>9}  {self.result}")

    def as_json(self) -> dict[str, object]:
        return {"name": self.name, "value": self.value, "limit": self.limit, "unit": self.unit,
                "result": self.result, "value_from_cpu_time": self.cpu_value}


@dataclass(frozen=True)
class FleetFits:
    """Time and peak memory against ranks, and whether memory grows linearly."""

    ranks: tuple[int, ...]
    wall: Fit
    cpu: Fit
    rss: Fit
    rss_small: Fit  # fit of every fleet but the largest, to predict the largest
    rss_measured_largest: float
    linear_r2_min: float = 0.99
    linear_error_max: float = 0.10

    @property
    def rss_predicted_largest(self) -> float:
        return self.rss_small.intercept + self.rss_small.slope * self.ranks[-1]

    @property
    def rss_extrapolation_error(self) -> float:
        return (self.rss_measured_largest - self.rss_predicted_largest) / self.rss_measured_largest

    @property
    def rss_linear(self) -> bool:
        close = abs(self.rss_extrapolation_error) <= self.linear_error_max
        return self.rss.r2 >= self.linear_r2_min and close

    def lines(self) -> list[str]:
        sizes = ", ".join(map(str, self.ranks[:-1]))
        residuals = ", ".join(f"{r:+.1f}" for r in self.rss.residuals)
        verdict = "grows linearly" if self.rss_linear else "does NOT grow linearly"
        return [
            f"fleet compile time: {self.wall.slope * 1000:.2f} ms/rank wall, "
            f"{self.cpu.slope * 1000:.2f} ms/rank CPU, fixed part {self.wall.intercept * 1000:.0f} ms "
            f"(least squares, R^2 {self.wall.r2:.4f})",
            f"fleet peak memory: {self.rss.slope * 1024:.1f} KiB/rank over {self.rss.intercept:.1f} MiB "
            f"(R^2 {self.rss.r2:.4f}; residuals {residuals} MiB)",
            f"  the fit of {sizes} nodes predicts {self.rss_predicted_largest:.1f} MiB at {self.ranks[-1]}, "
            f"measured {self.rss_measured_largest:.1f} MiB ({self.rss_extrapolation_error:+.1%}): "
            f"peak memory {verdict} (R^2 >= {self.linear_r2_min}, prediction within "
            f"{self.linear_error_max:.0%})",
        ]

    def as_json(self) -> dict[str, object]:
        return {
            "ranks": list(self.ranks), "wall_s_vs_ranks": self.wall.as_json(),
            "cpu_s_vs_ranks": self.cpu.as_json(), "maxrss_mib_vs_ranks": self.rss.as_json(),
            "maxrss_mib_vs_ranks_without_largest": self.rss_small.as_json(),
            "maxrss_predicted_largest_mib": self.rss_predicted_largest,
            "maxrss_measured_largest_mib": self.rss_measured_largest,
            "maxrss_extrapolation_error": self.rss_extrapolation_error, "maxrss_linear": self.rss_linear,
        }


def fleet_fits(sizes: Sequence[int], rows: Sequence[Bench]) -> FleetFits:
    """Least-squares fits of the fleet rows (one per size, in order) against their rank counts."""
    ranks = [float(n) for n in sizes]
    rss = [b.rss_kib / 1024 for b in rows]
    return FleetFits(
        tuple(sizes), linear_fit(ranks, [b.wall for b in rows]), linear_fit(ranks, [b.cpu for b in rows]),
        linear_fit(ranks, rss), linear_fit(ranks[:-1], rss[:-1]), rss[-1],
    )


def table(rows: Sequence[Bench], floor: float) -> str:
    """One line per row: medians, the fastest sample, CPU, peak RSS and the ratio to the floor."""
    head = (f"{'benchmark':<40} {'reps':>4} {'median':>9} {'min':>9} {'cpu med':>9} {'peak RSS':>9} "
            f"{'x floor':>8}")
    lines = [head, "-" * len(head)]
    for b in rows:
        if b.unavailable is not None or not b.samples:
            lines.append(f"{b.name:<40} {'-':>4} n/a (command unavailable): {b.unavailable}")
            continue
        lines.append(
            f"{b.name:<40} {len(b.samples):>4} {fmt_seconds(b.wall):>9} {fmt_seconds(b.wall_min):>9} "
            f"{fmt_seconds(b.cpu):>9} {b.rss_kib / 1024:>6.1f} MB {b.wall / floor:>7.2f}x"
        )
    return "\n".join(lines)


def targets_table(targets: Sequence[Target]) -> str:
    head = f"{'target (PASS/MISS on wall medians)':<40} {'wall':>10} {'cpu':>10} {'limit':>9}  result"
    return "\n".join([head, "-" * len(head), *(t.line() for t in targets)])


def _git(root: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)
    except OSError:
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def machine(root: Path, load_before: tuple[float, float, float]) -> dict[str, object]:
    """What the numbers were measured on, and under which load."""
    import yaml

    modified = _git(root, "status", "--porcelain", "--untracked-files=no") or ""
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "nproc": os.cpu_count(), "cpus_usable": len(os.sched_getaffinity(0)),
        "python": sys.version.split()[0], "implementation": platform.python_implementation(),
        "executable": os.path.relpath(sys.executable, root) if sys.executable.startswith(str(root)) else
        os.path.basename(sys.executable), "platform": platform.platform(),
        "loadavg_before": list(load_before), "loadavg_after": list(os.getloadavg()),
        "git_commit": _git(root, "rev-parse", "HEAD"),
        "git_modified_files": len(modified.splitlines()),  # measured the work tree as it was
        "libyaml": bool(getattr(yaml, "__with_libyaml__", False)),
        "packages": {dist: _version(dist) for dist in PACKAGES},
        "env_removed_for_children": [name for name in DROP_ENV if name in os.environ],
    }
