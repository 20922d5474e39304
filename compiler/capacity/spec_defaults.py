"""The speculative settings SGLang 0.5.23 resolves when the profile leaves them unset (arg_groups/speculative_hook.py):
the draft-token count, steps and top-k the KV pool is sized for."""

from __future__ import annotations

from dataclasses import dataclass

from spark_compile.capacity.kv_dsv4 import Speculation
from spark_compile.spec.model import Profile

# _auto_choose_speculative_params: (steps, topk, draft tokens) for an EAGLE-family run that sets none of them.
EAGLE_AUTO = (3, 1, 4)
EAGLE_AUTO_WIDE = (5, 4, 8)  # Llama and Grok
WIDE_ARCHS = ("LlamaForCausalLM", "Grok1ForCausalLM", "Grok1VForCausalLM")
NGRAM_DRAFT_TOKENS = 12  # _handle_ngram's default
NGRAM_MAX_BFS_BREADTH = 10  # --speculative-ngram-max-bfs-breadth's default (fields/spec.py)
EAGLE_FAMILY = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE")


@dataclass(frozen=True, slots=True)
class Written:
    """The speculative settings as the profile writes them (None: left to SGLang)."""

    algorithm: str | None
    num_draft_tokens: int | None
    num_steps: int | None
    topk: int | None
    dspark_block_size: int | None
    ngram_breadth: int | None = None


def written(profile: Profile) -> Written:
    """The profile's speculative settings (engine.speculative; the n-gram breadth from engine.args)."""
    spec = profile.engine.speculative
    breadth = profile.engine.args.get("speculative-ngram-max-bfs-breadth")
    return Written(None if spec.algorithm == "none" else spec.algorithm, spec.num_draft_tokens, spec.num_steps,
                   spec.eagle_topk, spec.dspark_block_size,
                   breadth if isinstance(breadth, int) and not isinstance(breadth, bool) else None)


def _eagle(w: Written, architecture: str) -> Speculation | None:
    if w.num_steps is None:  # SGLang requires topk and draft tokens unset too, and picks all three
        steps, topk, tokens = EAGLE_AUTO if w.algorithm == "STANDALONE" or architecture not in WIDE_ARCHS \
            else EAGLE_AUTO_WIDE
        return Speculation(tokens, steps, topk)
    if w.topk == 1:  # "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1"
        return Speculation(w.num_steps + 1, w.num_steps, 1)
    if w.topk is None or w.num_draft_tokens is None:
        return None
    return Speculation(w.num_draft_tokens, w.num_steps, w.topk)


def resolve_speculation(w: Written, architecture: str) -> Speculation | None:
    """(draft tokens, steps, top-k) as SGLang resolves them; None without speculation or where the count
    depends on what this model does not read (a DSPARK draft's own gamma, DFLASH's block)."""
    if w.algorithm is None:
        return None
    if w.algorithm in EAGLE_FAMILY:
        return _eagle(w, architecture)
    if w.algorithm == "NGRAM":
        topk = w.ngram_breadth or NGRAM_MAX_BFS_BREADTH
        tokens = w.num_draft_tokens or NGRAM_DRAFT_TOKENS
        return Speculation(tokens, w.num_steps or tokens // topk, topk)
    if w.algorithm == "DSPARK" and w.dspark_block_size is not None:  # verify window = gamma + 1
        return Speculation(w.dspark_block_size + 1)
    if w.num_draft_tokens is not None:
        return Speculation(w.num_draft_tokens, w.num_steps or 1, w.topk or 1)
    return None
