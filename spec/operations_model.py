"""operations.* sections beyond the watchdog and smoke tests: image check, previous stack, boot verification.

Defaults and their sources: the deployment document (KV pool range, idle gather cost, `free -g`) and the
peer launcher's facts (image check by reading sitecustomize, PREVIOUS_STACK_STOP / _RELAUNCH).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from spark_compile.spec.checks import check_operator_check, check_previous_stack, check_window_names
from spark_compile.spec.fields import Port, Positive, Text
from spark_compile.spec.section import Section

ImageCheckMode = Literal["sitecustomize", "cli", "off"]


class PreviousStack(Section):
    """The stack this release replaces (same port, same GPUs): stopped at cutover, restored by rollback."""

    unit: Annotated[str, Field(pattern=r"^[a-zA-Z0-9_][a-zA-Z0-9:_.@-]{0,246}\.(service|target)$")] | None = Field(
        None,
        description="A systemd unit on every node: `systemctl stop` at cutover (head first), `systemctl start` "
        "on rollback (workers first).",
    )
    stop: list[Text] = Field(
        [],
        description="Instead of a unit: the argv (no shell) that stops the previous stack, run where launch.sh "
        "runs (the peer's PREVIOUS_STACK_STOP).",
    )
    relaunch: list[Text] = Field(
        [],
        description="The argv (no shell) that brings the previous stack back, run where launch.sh runs "
        "(the peer's PREVIOUS_STACK_RELAUNCH).",
    )

    _one_way = model_validator(mode="after")(check_previous_stack)


class Verify(Section):
    """What verify.sh expects of a boot beyond the plan's own values (document step 4)."""

    kv_tokens: tuple[Positive, Positive] = Field(
        (4_200_000, 6_600_000),
        description="Range of the head's KV pool (`DSV4 memory calculation ... full_token=`): 4.2-6.6M tokens "
        "depending on the boot (deployment document, step 4).",
    )
    engram_gather_us_max: Positive = Field(
        2000,
        description="Highest idle Engram gather cost per layer (`gather_us_per_call`) accepted; the document "
        "expects about 1,000 us at idle, and the 1.2 stall was far above it.",
    )
    hooks_armed: Positive | None = Field(
        None,
        description="The exact count of `overlay: N (import) hooks armed` on every rank. Unset: the count this "
        "project's overlay arms for the rank's SPARK_* values; pin it for an image whose overlay counts "
        "differently (the peer's 1.7.1 overlay arms all of its 21 import hooks whatever the flags).",
    )
    min_free_gib: Annotated[int, Field(ge=0)] = Field(
        4,
        description="Least `free -g` available memory every node must keep after the boot (on GB10 host memory "
        "is the GPU's memory).",
    )


class ImageCheck(Section):
    """How preflight asks the image which SPARK_* names its overlay reads."""

    mode: ImageCheckMode = Field(
        "sitecustomize",
        description="`sitecustomize` reads the image's sitecustomize (and its overlay folder) for SPARK_* names, "
        "as the peer launcher does, which works with the reference image; `cli` asks this project's overlay "
        "(`python3 -m spark_overlay flags`); `off` skips the check.",
    )





class OperatorCheck(Section):
    """A deployment's own gate check: a prompt and the answer it must give, no code needed."""

    name: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]{0,62}$")] = Field(
        description="The check's name in the gate's output and the verdict (lowercase, digits, dashes).",
    )
    prompt: Text = Field(description="The user message, asked at temperature 0.")
    expect: Text | None = Field(None, description="The exact answer (surrounding blanks and a final period ignored).")
    pattern: Text | None = Field(None, description="Instead of expect: a Python regular expression the answer must "
                                 "contain a match of.")
    max_tokens: Positive = Field(256, description="Longest answer asked for.")
    thinking: bool = Field(False, description="Ask with thinking on (the answer is still the content only).")

    _one_expectation = model_validator(mode="after")(check_operator_check)


class Window(Section):
    """The release window (`launch.sh window`): defaults from the peer's window-sgl.sh (peer-launcher-facts §3)."""

    port: Port = Field(8888, description="The test port the candidate serves on during the window (production "
                       "keeps its own); the candidate is compiled with engine.port set to it.")
    deadline_seconds: Positive = Field(
        6600, description="The whole window's budget; when it runs out the gate stops and production is restored.",
    )
    memory_interval_seconds: Positive = Field(15, description="Seconds between two `free -g` samples on every node.")
    bench_tolerance: Annotated[float, Field(gt=0, lt=1)] = Field(
        0.10,
        description="The fixed-prompt bench fails when tokens/s falls, or time to first token rises, by more than "
        "this fraction against the previous verdict's figures.",
    )
    bench_runs: Annotated[int, Field(ge=1, le=20)] = Field(
        3, description="Runs of the fixed-prompt bench; the median of each figure counts.",
    )
    checks: list[OperatorCheck] = Field([], description="The deployment's own gate checks (prompt and answer).")

    _distinct_names = model_validator(mode="after")(check_window_names)
