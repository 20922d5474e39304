"""The SPARK_* flag registry: the one list the compiler, its docs and the container-side parser read.

Standard library only: this module is imported inside the serving container at interpreter start.
Facts (defaults, hooks, targets, releases) come from the peer deployment's 1.7.1 launcher and overlay.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

REGISTRY_VERSION = "1.7.1"

FlagKind = Literal["switch", "int", "float", "size", "enum", "list", "rows", "path"]
# Who sets a flag: the profile's overlay section, or the launch plan (derived from other sections).
FlagSource = Literal["profile", "plan", "pinnable"]

SRT = "sglang.srt."


@dataclass(frozen=True, slots=True)
class Hook:
    """An import hook: the modules it patches and whether it needs GB10 kernels or the dev image."""

    name: str
    targets: tuple[str, ...]
    doc: str
    needs_gb10: bool = True
    first_on: tuple[str, ...] = ()  # targets where this hook patches before the others (registry order elsewhere)


@dataclass(frozen=True)  # no slots: cached_property keeps its value in the instance's __dict__
class Flag:
    """One SPARK_* environment variable, typed, with the hook it gates."""

    name: str
    kind: FlagKind
    default: str | None
    doc: str
    hook: str
    since: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    requires: tuple[tuple[str, str], ...] = ()  # (flag, value) that must hold when this one is on
    source: FlagSource = "profile"
    since_inferred: bool = False

    @functools.cached_property  # read for every flag of every rank
    def key(self) -> str:
        """The profile key: the name without SPARK_, lower case."""
        return self.name.removeprefix("SPARK_").lower()

    @property
    def targets(self) -> tuple[str, ...]:
        """The SGLang (or Triton) modules this flag's hook patches."""
        return HOOKS[self.hook].targets


_HOOK_LIST = (
    Hook("engram_store", (SRT + "layers.engram",), "Engram rows gathered inside the CUDA graph by the C row store."),
    Hook(
        "engram_staged",
        (SRT + "layers.engram", SRT + "model_executor.model_runner"),
        "Engram rows hashed, gathered by a thread pool and staged before every forward.",
    ),
    Hook("engram_prefetch", (SRT + "managers.scheduler",), "Prefetches Engram rows for queued requests."),
    Hook("mxfp8", (SRT + "layers.quantization.fp8_utils",), "Routes block-scaled FP8 GEMMs to an MXFP8 backend."),
    Hook(
        "indexer_schedule",
        (SRT + "layers.attention.dsv4.metadata",),
        "Schedules the DSv4 indexer's metadata for SM 12.x (no flag: armed with the overlay).",
    ),
    Hook(
        "sm120_prefill_pages",
        ("sglang.kernels.ops.attention.flash_mla_sm120",),
        "Pages the SM 12.x FlashMLA prefill so it fits GB10 (no flag: armed with the overlay).",
    ),
    Hook(
        "real_heads",
        (SRT + "models.deepseek_v4",),
        "Decodes with each GPU's real attention heads instead of padding them to 64.",
    ),
    Hook("prefill_flush", (SRT + "model_executor.model_runner",), "Flushes long prefills in token slices."),
    Hook(
        "page_cache_release",
        (SRT + "model_executor.model_runner",),
        "Drops the checkpoint's files from the page cache once the weights are loaded.",
        needs_gb10=False,
    ),
    Hook(
        "roce_collectives",
        (SRT + "distributed.parallel_state",),
        "All-reduce and all-gather over RoCE with the b12x runtime instead of NCCL.",
    ),
    Hook(
        "roce_health",
        (SRT + "model_executor.model_runner",),
        "Checks the b12x RoCE runtime's health from the model runner (armed with the RoCE collectives).",
    ),
    Hook(
        "request_guard",
        (SRT + "managers.tokenizer_manager",),
        "Refuses requests the engine would crash on before they reach the scheduler (no flag: armed with the "
        "overlay).",
    ),
    Hook(
        "served_aliases",
        (SRT + "entrypoints.http_server",),
        "Lists extra model ids in /v1/models and serves requests naming them.",
        needs_gb10=False,
    ),
    Hook(
        "late_tail",
        (
            SRT + "model_executor.model_runner",
            SRT + "managers.scheduler",
            SRT + "models.deepseek_v4",
            SRT + "layers.attention.deepseek_v4_backend",
        ),
        "Trims or skips the late layers' prefill work that decode never reads.",
    ),
    Hook(
        "kernel_load_guard",
        ("triton.compiler.compiler",),
        "Retries a kernel load the driver refused with 'operation not permitted'.",
        needs_gb10=False,
    ),
    Hook(
        "inline_system",
        (SRT + "entrypoints.anthropic.serving",),
        "Folds mid-conversation system notes into the next user message instead of hoisting them.",
        needs_gb10=False,
    ),
    Hook("wo_a_w8a16", (SRT + "models.deepseek_v4",), "W8A16 for the wo_a projection, checked against a tolerance."),
    Hook(
        "step_timers",
        (
            SRT + "models.deepseek_v4",
            SRT + "models.deepseek_v2",
            SRT + "layers.engram",
            SRT + "layers.attention.deepseek_v4_backend",
        ),
        "Capture-safe CUDA event timers inside the decode step.",
    ),
    Hook(
        "lookup_draft",
        (SRT + "speculative.ngram_embedding_manager", SRT + "speculative.dspark_draft"),
        "Prompt-lookup drafting on top of DSpark.",
    ),
    Hook(
        "lookup_wide",
        (
            SRT + "speculative.spec_info",
            SRT + "speculative.dspark_planner",
            SRT + "speculative.dspark_worker_v2",
            SRT + "model_executor.decode_cuda_graph_runner",
            SRT + "layers.engram",
            SRT + "layers.attention.dsv41_sparse",
            SRT + "layers.attention.deepseek_v4_backend",
        ),
        "Wide verify: a lookup continuation verified past DSpark's block.",
        # It must see the Engram layer before the row store wraps it (peer-launcher facts: "first there").
        first_on=(SRT + "layers.engram",),
    ),
    Hook("overlay", (), "The overlay's master switch; gates every other hook.", needs_gb10=False),
    # Added after the peer's list: no flag of its own, armed whenever the overlay is (master switch on).
    Hook(
        "sm_family_gate",
        (SRT + "utils.common", SRT + "model_loader.utils"),
        "Capability checks that test for exactly SM 12.0 accept the SM 12.x family (GB10 is 12.1).",
        needs_gb10=False,
    ),
)
HOOKS: dict[str, Hook] = {hook.name: hook for hook in _HOOK_LIST}

_ON, _OFF = "1", "0"
_WIDE = (("SPARK_LOOKUP_DRAFT", _ON), ("SPARK_LOOKUP_MODE", "wide"))


def _switch(name: str, default: str, doc: str, hook: str, since: str, **kw: object) -> Flag:
    return Flag(name, "switch", default, doc, hook, since, choices=(_OFF, _ON), **kw)  # type: ignore[arg-type]


def _count(name: str, default: int, doc: str, hook: str, since: str, minimum: int = 0, **kw: object) -> Flag:
    return Flag(name, "int", str(default), doc, hook, since, minimum=minimum, **kw)  # type: ignore[arg-type]


FLAGS: tuple[Flag, ...] = (
    Flag(
        "SPARK_ENGRAM_DIR", "path", None,
        "Master switch and Engram row source: the node-local copy or the snapshot's shards.",
        "overlay", "production-1.1", source="plan",
    ),
    Flag(
        "SPARK_ENGRAM_MODE", "enum", "hostnode",
        "Engram implementation: hostnode (gathered inside the CUDA graph) or staged (gathered before each forward).",
        "engram_store", "production-1.1", choices=("hostnode", "staged"), since_inferred=True,
    ),
    Flag(
        "SPARK_ENGRAM_ROWS", "rows", None,
        "This rank's Engram rows as L:lo:hi,...; only where rows are read straight from the shards.",
        "engram_store", "production-1.1", source="plan",
    ),
    _count("SPARK_ENGRAM_THREADS", 64, "Row-store gather threads.", "engram_store", "production-1.1", minimum=1),
    _count(
        "SPARK_ENGRAM_MAX_IDS", 262144, "Largest id batch one gather takes; derived as max(chunk, 8 x requests) x 32.",
        "engram_store", "production-1.1", minimum=1, source="pinnable",
    ),
    _count("SPARK_ENGRAM_STATS_SECONDS", 60, "Seconds between gather statistics lines; 0 = off.",
           "engram_store", "production-1.1"),
    Flag(
        "SPARK_ENGRAM_CACHE_GB", "float", "4", "Row-cache budget in GB; 0 = unbounded.",
        "engram_store", "production-1.3", minimum=0.0,
    ),
    _count("SPARK_ENGRAM_CACHE_SECONDS", 5, "Seconds a cached row batch is kept.", "engram_store",
           "production-1.3", since_inferred=True),
    _switch("SPARK_ENGRAM_EARLY", _ON, "Gather a layer's rows early, ahead of the layer.", "engram_store",
            "production-1.2"),
    _switch("SPARK_ENGRAM_EARLY_VERIFY", _OFF, "Early gathers in the verify step too.", "engram_store",
            "production-1.2", since_inferred=True),
    _switch("SPARK_ENGRAM_PREFETCH", _ON, "Prefetch rows for queued requests.", "engram_prefetch",
            "production-1.1", since_inferred=True),
    Flag(
        "SPARK_MXFP8_BACKEND", "enum", "cutlass",
        "Backend of the block-scaled FP8 GEMMs: b12x (MXFP8) or cutlass (stock).",
        "mxfp8", "production-1.1", choices=("b12x", "cutlass"), since_inferred=True,
        requires=(),
    ),
    _switch("SPARK_SM120_REAL_HEADS", _OFF, "Decode with the real 16 heads per GPU, not padded to 64.",
            "real_heads", "production-1.4"),
    _count("SPARK_PREFILL_FLUSH_TOKENS", 8192, "Prefill flush threshold in tokens; 0 = off.", "prefill_flush",
           "production-1.1", since_inferred=True),
    _switch("SPARK_PAGE_CACHE_RELEASE", _ON, "Release the checkpoint's page cache after loading.",
            "page_cache_release", "production-1.3"),
    _switch("SPARK_ROCE_AR", _OFF, "All-reduce over RoCE (b12x) for messages up to SPARK_ROCE_AR_MAX.",
            "roce_collectives", "production-1.1", since_inferred=True),
    Flag("SPARK_ROCE_AR_MAX", "size", "1MB", "Largest all-reduce sent over RoCE.", "roce_collectives",
         "production-1.1", since_inferred=True),
    Flag("SPARK_ROCE_AG_MAX", "size", "16MB", "Largest all-gather sent over RoCE.", "roce_collectives",
         "production-1.1", since_inferred=True),
    _switch("SPARK_ROCE_AG", _ON, "All-gather over RoCE.", "roce_collectives", "production-1.1",
            since_inferred=True),
    Flag(
        "SPARK_SERVED_ALIASES", "list", "", "Extra model ids served by the one model; empty = none.",
        "served_aliases", "production-1.1", source="plan", since_inferred=True,
    ),
    _switch("SPARK_LATE_TAIL_SKIP", _OFF, "Run the late layers' prefill tail on one token only.", "late_tail",
            "production-1.4"),
    _switch("SPARK_LATE_TAIL_SKIP_ALL", _OFF, "Skip the late layers' prefill tail outright.", "late_tail",
            "production-1.5", requires=(("SPARK_LATE_TAIL_SKIP", _ON),)),
    _switch("SPARK_LATE_TAIL_TIMERS", _OFF, "Time the late-tail work.", "late_tail", "production-1.4"),
    _count("SPARK_KERNEL_LOAD_RETRIES", 5, "Retries of a refused kernel load; 0 = off.", "kernel_load_guard",
           "production-1.6"),
    _switch("SPARK_INLINE_SYSTEM_IN_PLACE", _ON, "Keep mid-conversation system notes in place.",
            "inline_system", "production-1.7.1"),
    _switch("SPARK_WO_A_W8A16", _OFF, "W8A16 wo_a projection.", "wo_a_w8a16", "production-1.5"),
    Flag("SPARK_WO_A_W8A16_TOL", "float", "0.02", "Tolerance of the W8A16 check.", "wo_a_w8a16",
         "production-1.5", minimum=0.0),
    Flag("SPARK_STEP_TIMERS", "enum", "0", "Step timers: 0 off, 1 summary, 2 detailed.", "step_timers",
         "production-1.2", choices=("0", "1", "2")),
    _count("SPARK_STEP_TIMERS_EVERY", 100, "Steps between timer samples.", "step_timers", "production-1.2",
           minimum=1),
    _switch("SPARK_STEP_TIMERS_ATTN", _OFF, "Time attention separately.", "step_timers", "production-1.2"),
    _count("SPARK_STEP_TIMERS_SECONDS", 60, "Seconds between timer reports (late-tail timers too).",
           "step_timers", "production-1.2"),
    _switch("SPARK_LOOKUP_DRAFT", _OFF, "Prompt-lookup drafting on top of DSpark.", "lookup_draft",
            "production-1.7"),
    Flag("SPARK_LOOKUP_MODE", "enum", "replace", "Lookup mode: replace, extend or wide.", "lookup_draft",
         "production-1.7", choices=("replace", "extend", "wide")),
    _count("SPARK_LOOKUP_MIN_TOKENS", 2, "Shortest match that drafts.", "lookup_draft", "production-1.7",
           minimum=1),
    _count("SPARK_LOOKUP_WINDOW", 0, "Tokens searched back; 0 = all.", "lookup_draft", "production-1.7"),
    _count("SPARK_LOOKUP_LOG_SECONDS", 60, "Seconds between lookup statistics lines.", "lookup_draft",
           "production-1.7"),
    _count("SPARK_LOOKUP_EXT_KEY", 8, "Match length that earns an extension.", "lookup_draft", "production-1.7",
           minimum=1),
    _count("SPARK_LOOKUP_BASE", 5, "Base draft length.", "lookup_draft", "production-1.7", minimum=1),
    _count("SPARK_LOOKUP_EXT_BUDGET", 10 * 2,
           "Lookup tokens a wide verify step is sized for: graphs are captured at 6b, 6b+10 and 6b+20 tokens, "
           "and a row carrying a continuation verifies up to 10 of them past DSpark's block (as SC226 says).",
           "lookup_wide",
           "production-1.7", requires=_WIDE),
    _switch("SPARK_LOOKUP_SYNC_GATE", _OFF, "Deterministic sync gate for wide rows.", "lookup_wide",
            "production-1.7", requires=_WIDE),
    _count("SPARK_LOOKUP_GATE_HOLD", 32, "Steps the gate holds.", "lookup_wide", "production-1.7", requires=_WIDE),
    _switch("SPARK_LOOKUP_GATE_OVERRIDE", _OFF, "Force the gate open.", "lookup_wide", "production-1.7",
            requires=_WIDE),
    _switch("SPARK_LOOKUP_NARROW_SLOTS", _OFF, "Narrow verify slots.", "lookup_wide", "production-1.7",
            requires=_WIDE),
    _switch("SPARK_LOOKUP_FUSED_C2", _OFF, "Fused second compaction.", "lookup_wide", "production-1.7",
            requires=(*_WIDE, ("SPARK_LOOKUP_NARROW_SLOTS", _ON))),
    _switch("SPARK_LOOKUP_EAGER_VERIFY", _OFF, "Verify wide rows eagerly.", "lookup_wide", "production-1.7",
            requires=_WIDE),
)

FLAGS_BY_NAME: dict[str, Flag] = {flag.name: flag for flag in FLAGS}
