"""The NCCL catalog against NCCL itself: the names libnccl.so 2.30.7 reads, scanned from its .rodata.

The library comes from the nvidia-nccl-cu13 wheel on PyPI (pip download, cached in .cache/nccl/, which git
ignores); without network the test skips, which fails the run under CI (tests/support/ci_skips.py).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / ".cache" / "nccl"
WHEEL = ("nvidia-nccl-cu13", "2.30.7")  # the NCCL of the catalog; the cu12 build reads the same names
NCCL_JSON = REPO / "spec" / "catalogs" / "nccl-2.30.7.json"


def _generator() -> ModuleType:
    path = REPO / "spec" / "generators" / "make_nccl_catalog.py"
    spec = importlib.util.spec_from_file_location("make_nccl_catalog", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def wheel() -> Path:
    """The nvidia-nccl wheel of NCCL 2.30.7 for this machine, downloaded once."""
    pattern = f"{WHEEL[0].replace('-', '_')}-{WHEEL[1]}-*.whl"
    if not sorted(CACHE.glob(pattern)):
        CACHE.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                   "--disable-pip-version-check", "-q", "-d", str(CACHE), f"{WHEEL[0]}=={WHEEL[1]}"]
        try:
            subprocess.run(command, capture_output=True, text=True, timeout=600, check=True)
        except subprocess.CalledProcessError as exc:
            pytest.skip(f"pip could not download {WHEEL[0]}=={WHEEL[1]}: {exc.stderr.strip()[-500:]}")
        except subprocess.TimeoutExpired:
            pytest.skip(f"downloading {WHEEL[0]}=={WHEEL[1]} took over 10 minutes")
    return sorted(CACHE.glob(pattern))[-1]


def test_names_the_library_reads_are_the_catalogs(wheel: Path) -> None:
    generator = _generator()
    found = generator.cross_check(json.loads(NCCL_JSON.read_text(encoding="utf-8")),
                                  generator.library_names(wheel))
    assert (found["only_in_library"], found["only_in_catalog"]) == ([], [])
    assert len(found["library"]) == len(found["catalog"]) == 245
    # Spot checks of each way a name gets into the library: NCCL_PARAM, ncclGetEnv, a typed param.
    assert {"NCCL_IB_TIMEOUT", "NCCL_SOCKET_IFNAME", "NCCL_DEBUG"} <= set(found["library"])


def test_generator_cross_checks_before_writing(wheel: Path, tmp_path: Path) -> None:
    out = tmp_path / "nccl.json"
    script = REPO / "spec" / "generators" / "make_nccl_catalog.py"
    run = subprocess.run([sys.executable, str(script), "--from-lib", str(wheel), "--out", str(out)],
                         capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[:3] == [f"{wheel.name}: 245 names read; catalog: 245",
                                           "  only in library: none", "  only in catalog: none"]
    assert out.read_bytes() == NCCL_JSON.read_bytes()


def test_library_strings() -> None:
    """How names are told from other text in .rodata (the layouts met in libnccl 2.30.7)."""
    rodata = (b"\0NCCL_IB_HCA\0NCCL_DEBUG_SUBSYS\0"
              b"ncclConfig_t argument not initialized via NCCL_CONFIG_INITIALIZER\0"  # a message, not a name
              b"00000000:00:00.0NCCL_SOCKET_MAGIC\0"  # after a fixed-size array that has no NUL of its own
              b"NCCL_SOCKET_MAGIC invalid value \"%s\", using built-in default\0"
              b"SPARK_NCCL_X\0NCCL_\0NCCL_%s\0")
    assert set(_generator().LIBRARY_NAME.findall(rodata)) == {b"NCCL_IB_HCA", b"NCCL_DEBUG_SUBSYS",
                                                              b"NCCL_SOCKET_MAGIC"}


def test_cross_check_names_the_differences() -> None:
    catalog = {"variables": [{"name": "NCCL_A", "source": "nccl"}, {"name": "NCCL_B", "source": "nccl"},
                             {"name": "NCCL_C", "source": "newer"}]}
    assert _generator().cross_check(catalog, {"NCCL_A", "NCCL_C", "NCCL_D"}) == {
        "catalog": ["NCCL_A", "NCCL_B"], "library": ["NCCL_A", "NCCL_C", "NCCL_D"],
        "only_in_library": ["NCCL_C (catalog: newer)", "NCCL_D"], "only_in_catalog": ["NCCL_B"]}
