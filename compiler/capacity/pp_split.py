"""Which layers a pipeline-parallel rank holds, as SGLang 0.5.23 splits them: get_pp_indices
(srt/distributed/utils.py) over the layers, SGLANG_PP_LAYER_PARTITION when set, and the node-to-stage map of
data_parallel_controller.py (one GPU per node: node_rank // (nnodes // pp))."""

from __future__ import annotations

from dataclasses import dataclass

PARTITION_ENV = "SGLANG_PP_LAYER_PARTITION"
# Model classes that build lm_head only on the last stage (PPMissingLayer elsewhere: deepseek_v2.py,
# deepseek_v4.py, qwen2.py); the others (Qwen3-MoE, Qwen3-Next, GLM-4.5, gpt-oss, Llama) build it on every stage.
LM_HEAD_ON_LAST_STAGE = ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV4ForCausalLM",
                         "Qwen2ForCausalLM")


class PartitionError(ValueError):
    """SGLANG_PP_LAYER_PARTITION does not fit the model (SGLang raises the same at load)."""


@dataclass(frozen=True, slots=True)
class Stage:
    """One pipeline stage's layers [start, end) of ``layers``; the first holds the embedding, the last the norm."""

    start: int
    end: int
    layers: int
    pp: int = 1
    holds_lm_head: bool = True
    partition: str | None = None  # SGLANG_PP_LAYER_PARTITION as the rank's environment sets it

    @property
    def first(self) -> bool:
        """Whether this stage holds the embedding."""
        return self.start == 0

    @property
    def last(self) -> bool:
        """Whether this stage holds the final norm, the logits and (EAGLE) the draft."""
        return self.end == self.layers

    def share(self) -> float:
        """This stage's fraction of the layers."""
        return (self.end - self.start) / self.layers if self.layers else 1.0


def pp_indices(layers: int, pp_rank: int, pp_size: int, partition: str | None) -> tuple[int, int]:
    """get_pp_indices: layers split evenly, the last (layers % pp) stages one more; or the written partition."""
    if partition is not None and pp_size > 1:
        try:
            sizes = [int(part) for part in partition.split(",")]
        except ValueError as err:
            raise PartitionError(f"{PARTITION_ENV}={partition!r} is not a list of integers") from err
        if len(sizes) != pp_size or sum(sizes) != layers:
            raise PartitionError(f"{PARTITION_ENV}={partition} does not split {layers} layers over pp {pp_size}")
        start = sum(sizes[:pp_rank])
        return start, start + sizes[pp_rank]
    base, extra = divmod(layers, pp_size)
    if pp_rank >= pp_size - extra:
        start = pp_rank * (base + 1) - (pp_size - extra)
        return start, start + base + 1
    return pp_rank * base, (pp_rank + 1) * base


def stage_of(rank: int, nodes: int, pp: int, layers: int, partition: str | None, architecture: str) -> Stage:
    """The stage of the rank on node ``rank`` (one GPU per node)."""
    if pp <= 1:
        return Stage(0, layers, layers)
    pp_rank = min(rank // max(nodes // pp, 1), pp - 1)
    start, end = pp_indices(layers, pp_rank, pp, partition)
    return Stage(start, end, layers, pp, end == layers or architecture not in LM_HEAD_ON_LAST_STAGE, partition)


def stage_ranges(stage: Stage) -> tuple[tuple[int, int], ...]:
    """Every stage's layers [start, end) of the pipeline ``stage`` belongs to."""
    return tuple(pp_indices(stage.layers, rank, stage.pp, stage.partition) for rank in range(stage.pp))
