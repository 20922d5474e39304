"""A description that still states a changed value is pointed out; a number that only happens to match is not."""

from __future__ import annotations

from spark_compile.review.artifact_diff import ProfileChange
from spark_compile.review.diff_stale import stale_mentions
from spark_compile.stages.resolve import Resolved

TEXT = "DeepSeek-V4.1-Flash, 4x DGX Spark, TP4/EP4, DSpark block 5, port 8210."


def _stale(*changes: ProfileChange) -> list[str]:
    return stale_mentions(Resolved("p.yaml", {"description": TEXT}), list(changes))


def test_a_value_next_to_its_key_glued_or_spelled_is_stale() -> None:
    assert _stale(ProfileChange("engine.parallel.tp", 4, 8, "a.yaml:3", "b.yaml:3"),
                  ProfileChange("engine.port", 8210, 8211, None, "b.yaml:4")) == [
        "description still says 'TP4', but engine.parallel.tp is now 8",
        "description still says 'port 8210', but engine.port is now 8211",
    ]


def test_a_number_without_its_key_a_default_and_the_description_itself_are_not() -> None:
    from spark_compile.review.diff import Default

    assert _stale(ProfileChange("engine.limits.max_running_requests", 4, 8, None, None),
                  ProfileChange("container.stop_timeout", Default(5), 61, None, None),
                  ProfileChange("description", TEXT, TEXT + "!", None, None)) == []
