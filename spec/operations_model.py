"""operations.* sections beyond the watchdog and smoke tests: image check, previous stack, boot verification.

Defaults and their sources: the deployment document (KV pool range, idle gather cost, `free -g`) and the
peer launcher's facts (image check by reading sitecustomize, PREVIOUS_STACK_STOP / _RELAUNCH).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from spark_compile.spec.fields import Positive, Text

ImageCheckMode = Literal["sitecustomize", "cli", "off"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class PreviousStack(_Section):
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

    @model_validator(mode="after")
    def _one_way(self) -> PreviousStack:
        if self.unit is not None and (self.stop or self.relaunch):
            raise ValueError("give either unit or stop/relaunch commands, not both")
        if self.unit is None and not (self.stop and self.relaunch):
            raise ValueError("give a unit, or both a stop and a relaunch command")
        return self


class Verify(_Section):
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


class ImageCheck(_Section):
    """How preflight asks the image which SPARK_* names its overlay reads."""

    mode: ImageCheckMode = Field(
        "sitecustomize",
        description="`sitecustomize` reads the image's sitecustomize (and its overlay folder) for SPARK_* names, "
        "as the peer launcher does, which works with the reference image; `cli` asks this project's overlay "
        "(`python3 -m spark_overlay flags`); `off` skips the check.",
    )



