"""spark_compile.spec.catalog: the NCCL catalog against its fact table, the loaders, and every value check."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from spark_compile.spec import catalog
from spark_compile.spec import nccl_catalog as nccl_module
from spark_compile.spec.catalog import (
    CatalogNotFound,
    available_engine_catalogs,
    engine_catalog,
    env_catalog,
    nccl_catalog,
)

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).with_name("catalog_fixtures")
FACT_TABLE = REPO / "spec" / "catalogs" / "sources" / "nccl-env-2.30.7.md"
NCCL_JSON = REPO / "spec" / "catalogs" / "nccl-2.30.7.json"


def _clear_caches() -> None:
    for loader in (engine_catalog, env_catalog, nccl_catalog):
        loader.cache_clear()


@pytest.fixture
def fixtures(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Point the loaders at tests/catalog_fixtures (small catalogs in the engine-catalog format)."""
    _clear_caches()
    monkeypatch.setattr(catalog, "_directories", lambda: (FIXTURES,))
    yield
    _clear_caches()  # the next test loads the shipped catalogs again


def _load_generator() -> ModuleType:
    path = REPO / "spec" / "generators" / "make_nccl_catalog.py"
    spec = importlib.util.spec_from_file_location("make_nccl_catalog", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------------------------------------- NCCL data


def test_nccl_catalog_is_what_the_generator_makes_from_the_fact_table() -> None:
    built = _load_generator().build(FACT_TABLE.read_text(encoding="utf-8"))
    assert json.dumps(built, indent=1, ensure_ascii=False) + "\n" == NCCL_JSON.read_text(encoding="utf-8")


def test_nccl_catalog_shape() -> None:
    data = json.loads(NCCL_JSON.read_text(encoding="utf-8"))
    names = [v["name"] for v in data["variables"]]
    assert (data["format"], data["catalog"]) == (1, "nccl-2.30.7")
    assert names == sorted(set(names))
    checked = set(nccl_module.CHECKS) | {"string", "plugin", "other"}
    assert {v["kind"] for v in data["variables"]} <= checked
    foreign = [v for v in data["variables"] if v["source"] not in ("nccl", "gloo", "removed")]
    assert {v["kind"] for v in foreign} == {"other"}
    # 250 names in the tables of sections 3-5, less the 5 that section 6 lists as no longer read.
    assert sum(v["source"] == "nccl" for v in data["variables"]) == 245


# Checked by hand against the fact table, spec/catalogs/sources/nccl-env-2.30.7.md: (name, kind, default,
# choices, since, deprecated, replacement, source, min, max). The generator explains how it reads ambiguous rows.
HAND_CHECKED = [
    ("NCCL_IB_GID_INDEX", "int", "-1", None, None, False, None, "nccl", -1, None),
    ("NCCL_IB_TIMEOUT", "int", "20", None, None, False, None, "nccl", 0, 31),
    ("NCCL_SOCKET_IFNAME", "iflist", None, None, None, False, None, "nccl", None, None),
    ("NCCL_IB_HCA", "hcalist", None, None, None, False, None, "nccl", None, None),
    ("NCCL_PROTO", "proto", None, None, None, False, None, "nccl", None, None),
    ("NCCL_BUFFSIZE", "size_bytes", "4194304", None, None, False, None, "nccl", None, None),
    ("NCCL_CROSS_NIC", "tristate", "2", ("0", "1", "2"), None, False, None, "nccl", None, None),
    ("NCCL_IB_ADDR_FAMILY", "enum", "AF_INET", ("AF_INET", "AF_INET6"), "2.21", False, None, "nccl",
     None, None),
    ("NCCL_DEBUG", "enum", None, ("VERSION", "WARN", "INFO", "ABORT", "TRACE"), None, False, None, "nccl",
     None, None),
    ("NCCL_MAX_NCHANNELS", "int", "-2", None, None, True, "NCCL_MAX_CTAS", "nccl", 1, None),
    ("NCCL_MIN_NRINGS", "int", "-2", None, None, True, "NCCL_MIN_CTAS", "nccl", None, None),
    ("NCCL_IB_SUBNET_PREFIX_LEN", "int", "24", None, "2.30.7", False, None, "nccl", 1, 32),
    ("NCCL_IB_SUBNET_AWARE_ROUTING", "bool01", "0", None, "2.30.7", False, None, "nccl", None, None),
    ("NCCL_WORK_FIFO_BYTES", "size_bytes", "1048576", None, "2.22", False, None, "nccl", None, None),
    ("NCCL_SOCKET_POLL_TIMEOUT_MSEC", "int", "0", None, "2.29", False, None, "nccl", 0, None),
    ("NCCL_MNNVL", "other", None, None, None, True, "NCCL_MNNVL_ENABLE", "removed", None, None),
    ("NCCL_BLOCKING_WAIT", "other", None, None, None, True, "TORCH_NCCL_BLOCKING_WAIT", "pytorch",
     None, None),
    ("NCCL_SHM_LOCALITY", "int", "2", ("1", "2"), None, False, None, "nccl", None, None),
    ("NCCL_SET_THREAD_NAME", "bool", "0", ("0", "1", "F", "T", "FALSE", "TRUE"), None, False, None, "nccl",
     None, None),
    ("NCCL_NET_MERGE_LEVEL", "enum", "PORT", ("LOC", "PORT", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS"),
     "2.24", False, None, "nccl", None, None),
    ("NCCL_LL128_BUFFSIZE", "size_bytes", "-2", None, None, False, None, "nccl", None, None),
    ("NCCL_CTA_POLICY", "ctapolicy", None, ("DEFAULT", "EFFICIENCY", "ZERO"), "2.27", False, None, "nccl",
     None, None),
    ("NCCL_IB_PKEY_VALUE", "other", None, None, "2.31", False, None, "newer", None, None),
    ("GLOO_SOCKET_IFNAME", "ifnames", None, None, None, False, None, "gloo", None, None),
]


@pytest.mark.parametrize("row", HAND_CHECKED, ids=[row[0] for row in HAND_CHECKED])
def test_hand_checked_entries(row: tuple[Any, ...]) -> None:
    var = nccl_catalog().lookup(row[0])
    assert var is not None
    got = (var.name, var.kind, var.default, var.choices, var.since, var.deprecated, var.replacement,
           var.source, var.min, var.max)
    assert got == row


def test_nccl_flags_from_the_prose() -> None:
    cat = nccl_catalog()
    assert [v.name for v in cat.variables if v.case_sensitive] == [
        "NCCL_IB_ADDR_FAMILY", "NCCL_NET_GDR_LEVEL", "NCCL_NET_MERGE_LEVEL", "NCCL_P2P_LEVEL",
        "NCCL_SOCKET_FAMILY"]
    assert [v.name for v in cat.variables if v.empty_ok] == ["NCCL_DEBUG_TIMESTAMP_FORMAT",
                                                             "NCCL_DEBUG_TIMESTAMP_LEVELS"]
    assert [v.name for v in cat.variables if v.pow2] == ["NCCL_WORK_FIFO_BYTES"]
    assert cat.protocols == ("LL", "LL128", "Simple")
    assert cat.by_name["NCCL_SINGLE_RING_THRESHOLD"].last == "2.2.x"


# ---------------------------------------------------------------------------------------------- NCCL values

# Every NCCL variable of the reference deployment's docker command (placeholders filled in from the
# design's fabric), plus the ones its launcher's other preset sets.
DEPLOYMENT = {
    "NCCL_NET": "IB", "NCCL_IB_DISABLE": "0", "NCCL_IB_HCA": "rocep1s0f0,roceP2p1s0f0",
    "NCCL_SOCKET_IFNAME": "enp1s0f0np0", "GLOO_SOCKET_IFNAME": "enp1s0f0np0", "NCCL_IB_ROCE_VERSION_NUM": "2",
    "NCCL_IB_ADDR_FAMILY": "AF_INET", "NCCL_IB_ADDR_RANGE": "192.0.2.0/24", "NCCL_IB_SUBNET_PREFIX_LEN": "24",
    "NCCL_IB_GID_INDEX": "3", "NCCL_CROSS_NIC": "1", "NCCL_IB_MERGE_NICS": "0",
    "NCCL_IB_SUBNET_AWARE_ROUTING": "1", "NCCL_CUMEM_ENABLE": "0", "NCCL_P2P_DISABLE": "1",
    "NCCL_SHM_DISABLE": "1", "NCCL_BUFFSIZE": "1048576", "NCCL_LL128_BUFFSIZE": "262144",
    "NCCL_PROTO": "^LL128", "NCCL_MAX_NCHANNELS": "8", "NCCL_MIN_NCHANNELS": "4", "NCCL_ALGO": "Ring",
    "NCCL_DEBUG": "INFO",
}


@pytest.mark.parametrize(("name", "value"), DEPLOYMENT.items())
def test_deployment_variables_are_known_and_accepted(name: str, value: str) -> None:
    var = nccl_catalog().lookup(name)
    assert var is not None and var.is_read
    assert nccl_catalog().check_value(name, value) is None


ACCEPTED = [
    ("NCCL_IB_GID_INDEX", "-1"), ("NCCL_CUMEM_ENABLE", "-2"), ("NCCL_NTHREADS", "512"),
    ("NCCL_IB_TIMEOUT", "31"), ("NCCL_BUFFSIZE", "007"), ("NCCL_DEBUG", "info"),
    ("NCCL_NET_MERGE_POLICY", "rail"), ("NCCL_P2P_LEVEL", "NVL"), ("NCCL_P2P_LEVEL", "5"),
    ("NCCL_ALGO", "ring,tree;allreduce:^tree"), ("NCCL_PROTO", "ll,SIMPLE"),
    ("NCCL_ALGO", "AllGather:NVLS,Ring"), ("NCCL_IB_HCA", "^=mlx5_0:1,mlx5_1::0:0"),
    ("NCCL_IB_HCA", "=mlx5_0"), ("NCCL_SOCKET_IFNAME", "^docker,lo"),
    ("NCCL_NET_FORCE_MERGE", "mlx5_0,mlx5_1;mlx5_2,mlx5_3"), ("NCCL_IB_ADDR_RANGE", "fd00::/64"),
    ("NCCL_DEBUG_SUBSYS", "^init,coll"), ("NCCL_DEBUG_TIMESTAMP_LEVELS", ""),
    ("NCCL_DEBUG_TIMESTAMP_FORMAT", "[%F %T.%3f] "), ("NCCL_DEBUG_TIMESTAMP_FORMAT", "%%6f %6f"),
    ("NCCL_CTA_POLICY", "efficiency|ZERO"), ("NCCL_CTA_POLICY", "1"), ("NCCL_NETDEVS_POLICY", "max:2"),
    ("NCCL_COMM_ID", "[fd00::1]:5000"), ("NCCL_RAS_ADDR", "localhost:28028"),
    ("NCCL_SOCKET_MAGIC", "0xdeadbeef"), ("NCCL_SOCKET_MAGIC", "18446744073709551615"),
    ("NCCL_SET_THREAD_NAME", "true"), ("NCCL_WARN_ENABLE_DEBUG_INFO", "F"),
    ("NCCL_NO_CACHE", "NCCL_PROTO,ALL"), ("NCCL_THREAD_THRESHOLDS", "8 8 64"), ("NCCL_PROXY_CPUSET", "0-3,8"),
    ("NCCL_CONF_FILE", "/etc/spark/nccl.conf"), ("NCCL_NET_PLUGIN", "none"), ("NCCL_HOSTID", "spark-0"),
    ("NCCL_WORK_FIFO_BYTES", "2097152"), ("GLOO_SOCKET_IFNAME", "eth0,eth1"),
    # Nothing in libnccl 2.30.7 parses these, so there is no value to check; the name is the finding.
    ("NCCL_MNNVL", "anything"), ("NCCL_BLOCKING_WAIT", "1"), ("NCCL_INSPECTOR_WHATEVER", "x"),
]


@pytest.mark.parametrize(("name", "value"), ACCEPTED)
def test_values_accepted(name: str, value: str) -> None:
    assert nccl_catalog().check_value(name, value) is None


REJECTED = [
    ("NCCL_BUFFSIZE", "4M",
     "NCCL_BUFFSIZE takes a whole number of bytes in decimal; '4M' would be read as 4."),
    ("NCCL_IB_DISABLE", "true", "NCCL_IB_DISABLE takes 0 or 1; 'true' would be read as 0."),
    ("NCCL_PROTO", "LL128^",
     "NCCL_PROTO takes a comma list of the protocols LL, LL128 or Simple, optionally after one leading ^; "
     "'LL128^' is not one."),
    ("NCCL_IB_GID_INDX", "3",
     "NCCL_IB_GID_INDX is not a variable NCCL reads; did you mean NCCL_IB_GID_INDEX?"),
    ("nccl_ib_disable", "1", "nccl_ib_disable is not a variable NCCL reads; did you mean NCCL_IB_DISABLE?"),
    ("NCCL_BUFFSIZE", "1e6",
     "NCCL_BUFFSIZE takes a whole number of bytes in decimal; '1e6' would be read as 1."),
    ("NCCL_BUFFSIZE", "010",
     "NCCL_BUFFSIZE takes a whole number of bytes in decimal; '010' would be read as 8."),
    ("NCCL_BUFFSIZE", "0x10",
     "NCCL_BUFFSIZE takes a whole number of bytes in decimal; '0x10' would be read as 16."),
    ("NCCL_BUFFSIZE", "-5", "NCCL_BUFFSIZE takes a whole number of bytes of at least 0; got -5."),
    ("NCCL_BUFFSIZE", " 1048576", "NCCL_BUFFSIZE takes a value without surrounding spaces; got ' 1048576'."),
    ("NCCL_BUFFSIZE", "", "NCCL_BUFFSIZE takes a value; an empty one means unset, so drop it."),
    ("NCCL_IB_GID_INDEX", "99999999999999999999",
     "NCCL_IB_GID_INDEX takes a whole number in decimal; 99999999999999999999 overflows 64 bits, so NCCL "
     "would use its default."),
    ("NCCL_IB_GID_INDEX", "-2", "NCCL_IB_GID_INDEX takes a whole number of at least -1; got -2."),
    ("NCCL_IB_TIMEOUT", "32", "NCCL_IB_TIMEOUT takes a whole number from 0 to 31; got 32."),
    ("NCCL_IB_DISABLE", "2", "NCCL_IB_DISABLE takes 0 or 1; got 2."),
    ("NCCL_CROSS_NIC", "yes", "NCCL_CROSS_NIC takes 0, 1 or 2; 'yes' would be read as 0."),
    ("NCCL_NTHREADS", "100", "NCCL_NTHREADS takes 64, 128, 256 or 512; got 100."),
    ("NCCL_WORK_FIFO_BYTES", "1000000", "NCCL_WORK_FIFO_BYTES takes a power of two; got 1000000."),
    ("NCCL_IB_ADDR_FAMILY", "af_inet",
     "NCCL_IB_ADDR_FAMILY takes AF_INET or AF_INET6 (case-sensitive); got 'af_inet'."),
    ("NCCL_DEBUG", "verbose", "NCCL_DEBUG takes VERSION, WARN, INFO, ABORT or TRACE; got 'verbose'."),
    ("NCCL_NET_MERGE_LEVEL", "port",
     "NCCL_NET_MERGE_LEVEL takes LOC, PORT, PIX, PXB, P2C, PXN, PHB or SYS (case-sensitive); got 'port'."),
    ("NCCL_P2P_LEVEL", "nvl",
     "NCCL_P2P_LEVEL takes LOC, NVL, NVB, C2C, PIX, PXB, P2C, PXN, PHB or SYS (case-sensitive), or an older "
     "number (0 LOC, 1 PIX, 2 PXB, 3 PHB, 4 and up SYS); got 'nvl'."),
    ("NCCL_ALGO", "ring;tree",
     "NCCL_ALGO takes a collective name before each list but the first, as in 'ring;allreduce:^tree'."),
    ("NCCL_PROTO", "^LL128;",
     "NCCL_PROTO takes a collective name before each list but the first, as in '^LL128;allreduce:LL'."),
    ("NCCL_ALGO", "allgatherv:ring",
     "NCCL_ALGO takes the collective names Broadcast, Reduce, AllGather, ReduceScatter or AllReduce; "
     "'allgatherv' is not one."),
    ("NCCL_ALGO", "Collnet",
     "NCCL_ALGO takes a comma list of the algorithms Ring, Tree, CollNetDirect, CollNetChain, NVLS, "
     "NVLSTree or PAT, optionally after one leading ^; 'Collnet' is not one."),
    ("NCCL_PROTO", "LL,^Simple",
     "NCCL_PROTO takes a comma list of the protocols LL, LL128 or Simple, optionally after one leading ^; "
     "'^Simple' is not one."),
    ("NCCL_IB_HCA", "=^mlx5_0",
     "NCCL_IB_HCA takes ^ and = once each, at the start, ^ first; got '=^mlx5_0'."),
    ("NCCL_IB_HCA", "mlx5_0,=mlx5_1",
     "NCCL_IB_HCA takes ^ and = once each, at the start, ^ first; got 'mlx5_0,=mlx5_1'."),
    ("NCCL_IB_HCA", "mlx5_0,,mlx5_1",
     "NCCL_IB_HCA takes a name in every comma-separated entry; got 'mlx5_0,,mlx5_1'."),
    ("NCCL_IB_HCA", "mlx5_0:one",
     "NCCL_IB_HCA takes entries shaped name[:port[:rail[:plane]]] with numbers; got 'mlx5_0:one'."),
    ("NCCL_IB_HCA", "mlx5_0:1:0:0:0",
     "NCCL_IB_HCA takes entries shaped name[:port[:rail[:plane]]] with numbers; got 'mlx5_0:1:0:0:0'."),
    ("NCCL_IB_HCA", "mlx5_0:0", "NCCL_IB_HCA takes port numbers from 1; got 'mlx5_0:0'."),
    ("NCCL_SOCKET_IFNAME", "e",
     "NCCL_SOCKET_IFNAME takes at least 2 characters; NCCL ignores 'e' and picks interfaces itself."),
    ("NCCL_SOCKET_IFNAME", "eth0:1",
     "NCCL_SOCKET_IFNAME takes interface names of at most 15 characters with no ':' fields (NCCL would "
     "ignore them); got 'eth0:1'."),
    ("NCCL_SOCKET_IFNAME", "enp1s0f0np0-extra",
     "NCCL_SOCKET_IFNAME takes interface names of at most 15 characters with no ':' fields (NCCL would "
     "ignore them); got 'enp1s0f0np0-extra'."),
    ("GLOO_SOCKET_IFNAME", "^lo", "GLOO_SOCKET_IFNAME takes no ^ or = flags; got '^lo'."),
    ("NCCL_NET_FORCE_MERGE", "mlx5_0;;mlx5_1",
     "NCCL_NET_FORCE_MERGE takes a name in every comma-separated entry; got ''."),
    ("NCCL_IB_ADDR_RANGE", "192.0.2.0",
     "NCCL_IB_ADDR_RANGE takes an address range such as 192.0.2.0/24; NCCL ignores '192.0.2.0'."),
    ("NCCL_IB_ADDR_RANGE", "192.0.2.0/33",
     "NCCL_IB_ADDR_RANGE takes an address range such as 192.0.2.0/24; NCCL ignores '192.0.2.0/33'."),
    ("NCCL_DEBUG_SUBSYS", "INIT,^NET",
     "NCCL_DEBUG_SUBSYS takes a comma list of INIT, COLL, P2P, SHM, NET, GRAPH, TUNING, ENV, ALLOC, "
     "ALLOC_HOST, CALL, PROXY, NVLS, BOOTSTRAP, REG, PROFILE, RAS, DESTROY or ALL, optionally after one "
     "leading ^; got 'INIT,^NET'."),
    ("NCCL_DEBUG_SUBSYS", "", "NCCL_DEBUG_SUBSYS takes a value; an empty one means unset, so drop it."),
    ("NCCL_DEBUG_TIMESTAMP_FORMAT", "%3f %6f",
     "NCCL_DEBUG_TIMESTAMP_FORMAT takes strftime codes and one %Nf at most; got '%3f %6f'."),
    ("NCCL_DEBUG_TIMESTAMP_FORMAT", "%0f",
     "NCCL_DEBUG_TIMESTAMP_FORMAT takes strftime codes and one %Nf at most; got '%0f'."),
    ("NCCL_CTA_POLICY", "3",
     "NCCL_CTA_POLICY takes DEFAULT, EFFICIENCY or ZERO joined by |, or an older digit 0, 1 or 2; got '3'."),
    ("NCCL_NETDEVS_POLICY", "MAX:0",
     "NCCL_NETDEVS_POLICY takes AUTO, ALL or MAX:N with N a whole number above 0; got 'MAX:0'."),
    ("NCCL_COMM_ID", "10.0.0.1",
     "NCCL_COMM_ID takes host:port, an IPv6 address as [addr]:port; got '10.0.0.1'."),
    ("NCCL_COMM_ID", "head:65536",
     "NCCL_COMM_ID takes host:port, an IPv6 address as [addr]:port; got 'head:65536'."),
    ("NCCL_SOCKET_MAGIC", "18446744073709551616",
     "NCCL_SOCKET_MAGIC takes a whole number in decimal or 0x hex below 2^64; got '18446744073709551616'."),
    ("NCCL_SOCKET_MAGIC", "-1",
     "NCCL_SOCKET_MAGIC takes a whole number in decimal or 0x hex below 2^64; got '-1'."),
    ("NCCL_SET_THREAD_NAME", "yes", "NCCL_SET_THREAD_NAME takes 1, 0, T, F, TRUE or FALSE; got 'yes'."),
    ("NCCL_CONF_FILE", "~/.nccl.conf",
     "NCCL_CONF_FILE takes a path that does not start with '~', which nothing expands; got '~/.nccl.conf'."),
    ("NCCL_PROXY_CPUSET", "0-3;8",
     "NCCL_PROXY_CPUSET takes CPU numbers and ranges such as 0-3,8; got '0-3;8'."),
    ("NCCL_THREAD_THRESHOLDS", "1 2 3 4 5 6 7",
     "NCCL_THREAD_THRESHOLDS takes up to 6 whole numbers separated by spaces; got '1 2 3 4 5 6 7'."),
    ("NCCL_NO_CACHE", "NCCL_MNNVL",
     "NCCL_NO_CACHE takes full NCCL variable names, comma-separated, or ALL; 'NCCL_MNNVL' is not one."),
]


@pytest.mark.parametrize(("name", "value", "message"), REJECTED)
def test_values_rejected(name: str, value: str, message: str) -> None:
    assert nccl_catalog().check_value(name, value) == message


def test_names_nccl_does_not_read() -> None:
    cat = nccl_catalog()
    assert cat.lookup("NCCL_IB_GID_INDX") is None
    assert cat.suggest("NCCL_IB_GID_INDX")[0] == "NCCL_IB_GID_INDEX"
    # NCCL_MNNVL is the closest name of all, but no longer read, so never suggested.
    assert cat.suggest("NCCL_MNNVLL") == ["NCCL_MNNVL_ENABLE", "NCCL_MNNVL_UUID"]
    removed = cat.lookup("NCCL_WORK_FIFO_DEPTH")
    assert removed is not None and not removed.is_read and removed.replacement == "NCCL_WORK_FIFO_BYTES"
    family = cat.family_of("NCCL_INSPECTOR_DUMP_DIR")
    assert family is not None and (family.prefix, family.source) == ("NCCL_INSPECTOR_", "plugin")
    assert cat.family_of("NCCL_PROFILER_PLUGIN") is None
    assert {v.source for v in cat.variables} == {"nccl", "gloo", "removed", "newer", "pytorch", "plugin",
                                                  "contrib", "patched", "image", "build", "none"}


def test_strtoll_reading() -> None:
    readings = {"4M": 4, "1e6": 1, "true": 0, "010": 8, "08": 0, "0x1F": 31, "0x": 0, " -12abc": -12, "+7": 7}
    assert {text: nccl_module._strtoll(text) for text in readings} == readings


# ---------------------------------------------------------------------------------------------- loading


def test_importing_reads_no_catalog_and_no_heavy_package() -> None:
    """A catalog is read when it is first asked for, not on import."""
    code = ("import sys; before = set(sys.modules); import spark_compile.spec.catalog as c; "
            "heavy = {'pydantic', 'jinja2', 'yaml'}; print(sorted(heavy & (set(sys.modules) - before))); "
            "print([f.cache_info().currsize for f in (c.engine_catalog, c.env_catalog, c.nccl_catalog)])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split("\n")[:2] == ["[]", "[0, 0, 0]"]


def test_catalog_not_found(fixtures: None) -> None:
    assert available_engine_catalogs() == ["sglang-0.5.23"]
    with pytest.raises(CatalogNotFound) as engine:
        engine_catalog("sglang-0.5.99")
    assert str(engine.value) == "no engine catalog named 'sglang-0.5.99'; available: sglang-0.5.23"
    assert engine.value.available == ["sglang-0.5.23"]
    with pytest.raises(CatalogNotFound) as env:
        env_catalog("vllm-0.1")
    assert str(env.value) == "no environment catalog named 'vllm-0.1'; available: sglang-0.5.23"
    with pytest.raises(CatalogNotFound) as nccl:
        nccl_catalog()
    assert str(nccl.value) == "no NCCL catalog named 'nccl-2.30.7'; available: none"


def test_loaders_are_cached(fixtures: None) -> None:
    assert engine_catalog("sglang-0.5.23") is engine_catalog("sglang-0.5.23")
    assert env_catalog("sglang-0.5.23") is env_catalog("sglang-0.5.23")


# ---------------------------------------------------------------------------------------------- engine flags


def test_engine_lookup_and_abbreviations(fixtures: None) -> None:
    cat = engine_catalog("sglang-0.5.23")
    assert (cat.name, cat.package, cat.version, len(cat.flags)) == ("sglang-0.5.23", "sglang", "0.5.23", 18)
    tp = cat.lookup("--tp-size")
    assert tp is not None and tp is cat.lookup("--tensor-parallel-size") and tp.dest == "tp_size"
    assert cat.lookup("--tp") is None
    assert cat.abbreviation_of("--tp") is tp
    assert cat.abbreviation_of("--tp=4") is tp
    assert cat.abbreviation_of("--tensor") is tp
    assert cat.abbreviation_of("--tp-size") is None  # exact, not an abbreviation
    assert cat.abbreviation_of("--ep") is None  # --ep is a real option string of ep_size
    assert cat.abbreviation_of("--expert") is cat.lookup("--ep-size")
    assert cat.abbreviation_of("--to") is None  # --tokenizer-path and --tokenizer-mode
    assert cat.abbreviation_of("--t") is None
    assert cat.abbreviation_of("--enable-decoder") is not None  # one option string starts so
    assert cat.abbreviation_of("--cuda-graph") is None  # --cuda-graph-max-bs-decode and --cuda-graph-bs
    assert cat.abbreviation_of("--nope") is None
    assert cat.suggest("--attention-backand") == ["--attention-backend"]
    assert cat.suggest("--TP-SIZE")[0] == "--tp-size"


ENGINE_VALUES = [
    ("--tp-size", "4", None),
    ("--tp-size", "four", "--tensor-parallel-size takes a whole number; got 'four'."),
    ("--mem-fraction-static", "0.80", None),
    ("--mem-fraction-static", "most", "--mem-fraction-static takes a number; got 'most'."),
    ("--attention-backend", "dsv4", None),
    ("--attention-backend", "dsv5", "--attention-backend takes dsv4, flashinfer, triton or fa3; got 'dsv5'."),
    ("--fp8-gemm-backend", "flashinfer_cutlass", None),
    ("--speculative-algorithm", "DSPARK", None),
    ("--default-chat-template-kwargs", '{"thinking":true}', None),
    ("--default-chat-template-kwargs", "{thinking: true}",
     "--default-chat-template-kwargs takes JSON; got '{thinking: true}'."),
    ("--trust-remote-code", "true",
     "--trust-remote-code is an on/off switch and takes no value; got 'true'."),
    ("--enable-decoder-swa-bounded-replay", "1",
     "--enable-decoder-swa-bounded-replay is an on/off switch and takes no value; got '1'."),
    ("--lora-paths", "a=/x", None),  # a custom action: SGLang's own converter, not mirrored
    ("--enable-p2p-check", "maybe", None),  # a "bool" flag that takes a value: the same
    ("--cuda-graph-bs", "8", None),
]


@pytest.mark.parametrize(("option", "value", "message"), ENGINE_VALUES)
def test_engine_check_value(fixtures: None, option: str, value: str, message: str | None) -> None:
    flag = engine_catalog("sglang-0.5.23").lookup(option)
    assert flag is not None
    assert flag.check_value(value) == message


def test_engine_flag_fields(fixtures: None) -> None:
    cat = engine_catalog("sglang-0.5.23")
    old = cat.lookup("--disable-cuda-graph")
    assert old is not None and old.deprecated and old.replacement == "--cuda-graph-backend-decode=disabled"
    assert old.option == "--disable-cuda-graph" and not old.takes_value
    tp = cat.lookup("--tp-size")
    assert tp is not None and tp.option == "--tensor-parallel-size" and tp.takes_value and tp.choices is None
    bs = cat.lookup("--cuda-graph-bs")
    assert bs is not None and bs.nargs == "+"


# ---------------------------------------------------------------------------------------------- engine env

BOOL_HELP = "takes true/false, 1/0, yes/no or y/n in any case; SGLang would warn about"
ENV_VALUES = [
    ("SGLANG_FLASHINFER_MOE_FUSED_FINALIZE", "0", None),
    ("SGLANG_FLASHINFER_MOE_FUSED_FINALIZE", "True", None),
    ("SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE", "Y", None),
    ("SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE", "on",
     f"SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE {BOOL_HELP} 'on' and use the default."),
    ("SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE", " 1",
     f"SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE {BOOL_HELP} ' 1' and use the default."),
    ("SGLANG_DSV41_REASONING_EFFORT", "100", None),
    ("SGLANG_DSV41_REASONING_EFFORT", "max",
     "SGLANG_DSV41_REASONING_EFFORT takes a whole number; SGLang would warn about 'max' and use the "
     "default."),
    ("SGLANG_DSV41_REASONING_EFFORT", "1e2",
     "SGLANG_DSV41_REASONING_EFFORT takes a whole number; SGLang would warn about '1e2' and use the "
     "default."),
    ("SGLANG_WARMUP_TIMEOUT", "1e3", None),
    ("SGLANG_WARMUP_TIMEOUT", "soon",
     "SGLANG_WARMUP_TIMEOUT takes a number; SGLang would warn about 'soon' and use the default."),
    ("SGLANG_CACHE_DIR", "/cache", None),
    ("SGLANG_DISABLED_MODEL_ARCHS", "a,b", None),
    ("SGLANG_USE_AITER", "whatever", None),  # read straight from os.environ: its parser is per call site
    ("SGLANG_FLASHINFER_MOE_FUSED_FINALISE", "0",
     "sglang-0.5.23 does not read SGLANG_FLASHINFER_MOE_FUSED_FINALISE; did you mean "
     "SGLANG_FLASHINFER_MOE_FUSED_FINALIZE?"),
]


@pytest.mark.parametrize(("name", "value", "message"), ENV_VALUES)
def test_env_check_value(fixtures: None, name: str, value: str, message: str | None) -> None:
    assert env_catalog("sglang-0.5.23").check_value(name, value) == message


def test_env_lookup(fixtures: None) -> None:
    cat = env_catalog("sglang-0.5.23")
    old = cat.lookup("SGLANG_NSA_FUSE_TOPK")
    assert old is not None and old.deprecated and old.replacement == "SGLANG_DSA_FUSE_TOPK"
    assert cat.lookup("SGLANG_NOPE") is None
    assert cat.suggest("SGLANG_WARMUP_TIMOUT") == ["SGLANG_WARMUP_TIMEOUT"]


# ---------------------------------------------------------------------------------------------- shipped


def test_shipped_sglang_catalog_knows_the_deployment() -> None:
    _clear_caches()
    cat = engine_catalog("sglang-0.5.23")
    argv = {"--tp-size": "4", "--ep-size": "4", "--nnodes": "4", "--attention-backend": "dsv4",
            "--moe-runner-backend": "flashinfer_mxfp4", "--fp8-gemm-backend": "flashinfer_cutlass",
            "--load-format": "safetensors", "--tool-call-parser": "deepseekv41",
            "--reasoning-parser": "deepseek-v41",
            "--speculative-algorithm": "DSPARK", "--speculative-dspark-block-size": "5",
            "--mem-fraction-static": "0.80", "--default-chat-template-kwargs": '{"thinking":true}'}
    problems = {option: flag.check_value(value) if (flag := cat.lookup(option)) else "unknown"
                for option, value in argv.items()}
    assert problems == dict.fromkeys(argv)
    assert cat.abbreviation_of("--tp") is cat.lookup("--tp-size")
    env = env_catalog("sglang-0.5.23")
    assert env.check_value("SGLANG_FLASHINFER_MOE_FUSED_FINALIZE", "0") is None
