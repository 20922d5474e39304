#!/usr/bin/env python3
"""spark-compile's benchmark: cold commands, synthetic fleets and a profile repository, in one run.

    python bench/run.py            # full run (about 2-3 minutes on the 2-core project machine)
    python bench/run.py --quick    # smoke run: every row, fewer repetitions

"Cold" here means what a pre-commit hook or a CI step meets: a new interpreter process for every sample,
with warm bytecode caches (__pycache__ written by the warm-up run; PYTHONDONTWRITEBYTECODE is removed from
the children's environment so that it can be) and a warm OS page cache. spark-compile keeps no cache of its
own. Every row is whole processes started from sys.executable; the rows are warmed up once, then run
round-robin, and medians are reported. Peak memory is each child's own ru_maxrss (os.wait4). Compiles write
into a fresh empty directory on a tmpfs (/dev/shm) by default: on the shared project VM, creating files on the
disk costs anywhere from 0.1 to 2 ms each depending on the neighbours, which would drown the compiler's own
cost; `--out-base /tmp` measures with the disk. Prints a table; writes bench/results/latest.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness
import profiles
import report
from harness import Bench, BenchError, Output, Validator, exit_ok

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = Path("spec/profiles/dsv41-4spark.yaml")
RELEASES = (Path("spec/profiles/releases/production-1.7.yaml"),
            Path("spec/profiles/releases/production-1.7.1.yaml"))
FLEET_SIZES = (4, 64, 256, 1024)
VARIANTS = 50
COLD_DEFINITION = (
    "a new interpreter process per sample (sys.executable), warm bytecode caches (written by a warm-up "
    "run; PYTHONDONTWRITEBYTECODE removed from the child environment), warm OS page cache: as a pre-commit "
    "hook runs"
)


# `check` with the capacity stage (its inputs from disk and the budget) replaced by nothing, the capacity rules
# then finding no budget: paired round by round with the reference's check, the difference is what the stage
# costs a check (its modules are imported either way, so their import is not in it).
NO_CAPACITY = ("import sys; import spark_compile.pipeline as p; p.capacity_inputs = lambda *a, **k: None; "
               "p.build_capacity = lambda *a, **k: None; from spark_compile.cli import main; "
               "sys.exit(main(sys.argv[1:]))")


@dataclass(frozen=True)
class Mode:
    """How many times each row runs."""

    name: str
    warmup: int
    reps: int
    fleet_reps: dict[int, int]


FULL = Mode("full", 1, 7, {4: 7, 64: 7, 256: 5, 1024: 3})
QUICK = Mode("quick", 1, 2, {4: 2, 64: 2, 256: 1, 1024: 1})


def cli(*args: str | Path) -> list[str]:
    """The argv of one spark-compile run in a new interpreter."""
    return [sys.executable, "-m", "spark_compile.cli", *map(str, args)]


def says(text: str, *codes: int) -> Validator:
    """Valid when the exit code is one of ``codes`` (default 0) and stdout contains ``text``."""
    code_ok = exit_ok(*(codes or (0,)))

    def check(output: Output) -> str | None:
        reason = code_ok(output)
        if reason is None and text not in output.stdout:
            reason = f"expected {text!r} in the output, got {output.stdout.strip()[-200:]!r}"
        return reason

    return check


def fresh_dir(path: Path) -> tuple[Callable[[], None], Callable[[], None]]:
    """(before, after) hooks: an empty ``path`` before each sample, gone after it (both untimed)."""

    def before() -> None:
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)

    def after() -> None:
        shutil.rmtree(path, ignore_errors=True)

    return before, after


def compile_bench(name: str, profile: Path, out: Path, reps: int) -> Bench:
    """A full compile into an empty output directory: every file is written, none compared."""
    before, after = fresh_dir(out)
    return Bench(name, cli(profile, "--out", out), reps, says(" written, "), before, after)


def assert_clean(paths: list[Path], env: dict[str, str], what: str) -> None:
    """`check --format json` over ``paths`` must report 0 errors, or the benchmark stops here."""
    _, output = harness.run_once(cli("check", *paths, "--format", "json"), env)
    try:
        body = json.loads(output.stdout)
    except json.JSONDecodeError:
        raise BenchError(f"{what}: check did not answer JSON (exit {output.exit_code}): "
                         f"{(output.stderr or output.stdout).strip()[-400:]}") from None
    if body.get("errors") != 0 or body.get("profiles") != len(paths):
        found = "; ".join(f"{f['file']}:{f['line']}: {f['rule']} {f['message']}"
                          for f in body["findings"][:5])
        raise BenchError(f"{what}: check reports {body.get('errors')} error(s): {found}")


def diff_bench(env: dict[str, str], reps: int) -> Bench:
    """The release diff; unavailable (not failed) when the releases or the command are missing."""
    bench = Bench("cold diff (production 1.7 -> 1.7.1)", cli("diff", *RELEASES), reps, exit_ok(0, 1))
    missing = [str(p) for p in RELEASES if not p.is_file()]
    if missing:
        bench.unavailable = f"{', '.join(missing)} missing"
        return bench
    _, output = harness.run_once(bench.argv, env)
    bench.unavailable = bench.valid(output)
    return bench


def paired_ms(with_it: Bench, without: Bench, cpu: bool) -> float:
    """The median over rounds of one row's time less the other's in the same round, in ms."""
    pairs = zip(with_it.samples, without.samples, strict=True)
    return statistics.median((a.cpu_s - b.cpu_s) if cpu else (a.wall_s - b.wall_s) for a, b in pairs) * 1000


def progress(text: str) -> None:
    print(f"  .. {text}", file=sys.stderr, flush=True)


def write_profiles(work: Path) -> tuple[list[Path], dict[int, Path]]:
    """The variant repository and the synthetic fleets, written under ``work``."""
    reference = profiles.reference_data(REFERENCE)
    profiles.check_round_trip(reference, REFERENCE)
    repo_dir, fleet_dir = work / "repo", work / "fleets"
    repo_dir.mkdir()
    fleet_dir.mkdir()
    variants = [profiles.write(repo_dir, profiles.variant(reference, i), f"variant {i} of {REFERENCE}")
                for i in range(VARIANTS)]
    fleets = {n: profiles.write(fleet_dir, profiles.fleet(reference, n), f"{n}-node fleet from {REFERENCE}")
              for n in FLEET_SIZES}
    return variants, fleets


def run_all(mode: Mode, env: dict[str, str], work: Path) -> dict[str, object]:
    """Every row, the targets and the fits; prints the report, returns its data."""
    variants, fleets = write_profiles(work)
    progress("checking the generated profiles (each must give 0 errors)")
    assert_clean(variants, env, f"{VARIANTS} variant profiles")
    for n, path in fleets.items():
        assert_clean([path], env, f"{n}-node fleet {path}")

    imports = "import yaml, pydantic, jinja2"
    floor_pass = Bench("floor: python -c pass", [sys.executable, "-c", "pass"], mode.reps)
    floor = Bench(f"floor: {imports}", [sys.executable, "-c", imports], mode.reps)
    check = Bench("cold check (reference)", cli("check", REFERENCE), mode.reps, says("0 errors"))
    bare = Bench("cold check (reference), no capacity stage", [sys.executable, "-c", NO_CAPACITY, "check",
                                                               str(REFERENCE)], mode.reps, says("0 errors"))
    plan = Bench("cold plan --json (reference)", cli("plan", REFERENCE, "--json"), mode.reps, says('"ranks"'))
    full = compile_bench("cold compile (reference, to a tmp dir)", REFERENCE, work / "out-ref", mode.reps)
    one = Bench("check 1 variant profile", cli("check", variants[0]), mode.reps, says("0 errors"))
    many = Bench(f"check {VARIANTS} variant profiles, 1 process", cli("check", *variants), mode.reps,
                 says(f" in {VARIANTS} profiles"))
    cold = [floor_pass, floor, check, bare, plan, full, diff_bench(env, mode.reps), one, many]
    progress(f"cold commands: {mode.warmup} warm-up, then {mode.reps} interleaved rounds")
    harness.run_interleaved(cold, env, mode.warmup, progress)

    fleet_rows = [compile_bench(f"compile fleet of {n} nodes", path, work / f"out-{n}", mode.fleet_reps[n])
                  for n, path in fleets.items()]
    progress(f"fleets of {', '.join(map(str, FLEET_SIZES))} nodes: {mode.warmup} warm-up, then up to "
             f"{max(mode.fleet_reps.values())} interleaved rounds")
    harness.run_interleaved(fleet_rows, env, mode.warmup, progress)

    fits = report.fleet_fits(FLEET_SIZES, fleet_rows)
    targets = [
        report.Target("cold check / floor", check.wall / floor.wall, 1.3, "x", check.cpu / floor.cpu),
        report.Target("capacity stage on check (paired)", paired_ms(check, bare, False), 5.0, "ms",
                      paired_ms(check, bare, True)),
        report.Target("cold full compile / floor", full.wall / floor.wall, 1.6, "x", full.cpu / floor.cpu),
        report.Target("marginal compile cost per rank", fits.wall.slope * 1000, 2.0, "ms",
                      fits.cpu.slope * 1000),
        report.Target(f"{VARIANTS} profiles in one check / one", many.wall / one.wall, 3.0, "x",
                      many.cpu / one.cpu),
    ]
    print()
    print(report.table([*cold, *fleet_rows], floor.wall))
    print()
    print(report.targets_table(targets))
    print()
    print("\n".join(fits.lines()))
    return {
        "floor": floor.name, "floor_median_wall_s": floor.wall,
        "benches": [b.as_json() for b in [*cold, *fleet_rows]],
        "targets": [t.as_json() for t in targets],
        "fleet": fits.as_json(),
    }


def default_out_base() -> Path | None:
    """/dev/shm when it is a writable tmpfs directory, else None (the system's temporary directory)."""
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK | os.X_OK) else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions: a smoke run of every row")
    parser.add_argument("--json", type=Path, default=ROOT / "bench" / "results" / "latest.json",
                        help="where to write the results (default bench/results/latest.json)")
    parser.add_argument("--out-base", type=Path, default=default_out_base(),
                        help="where the generated profiles and compile outputs go (default /dev/shm if "
                             "writable, else the system temporary directory)")
    args = parser.parse_args(argv)
    mode = QUICK if args.quick else FULL
    out = args.json.resolve()
    os.chdir(ROOT)
    started, load_before = time.perf_counter(), os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="spark-bench-", dir=args.out_base))
    try:
        results = run_all(mode, harness.child_env(), work)
    except BenchError as exc:
        print(f"bench: FAILED: {exc}", file=sys.stderr)
        return 2
    finally:
        shutil.rmtree(work, ignore_errors=True)
    duration = round(time.perf_counter() - started, 1)
    document = {"mode": mode.name, "cold_definition": COLD_DEFINITION, "duration_s": duration,
                "work_dir_base": str(args.out_base or tempfile.gettempdir()),
                "machine": report.machine(ROOT, load_before), **results}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, indent=2) + "\n")
    print(f"\nwrote {out} ({mode.name} run, {duration} s; load average {load_before[0]:.2f} -> "
          f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
