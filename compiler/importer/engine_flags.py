"""Engine flags the mapper reads beyond its tables: the chat template's keywords (one JSON value onto typed keys)
and the flags only an older SGLang build knows, taken one by one."""

from __future__ import annotations

import json

from spark_compile.importer.argv import EngineOption, older_only
from spark_compile.importer.draft import Draft, Scalar
from spark_compile.stages import model_keys


def chat_kwargs(draft: Draft, option: EngineOption) -> bool:
    """--default-chat-template-kwargs JSON onto engine.chat.thinking and template_kwargs, when each keyword fits."""
    try:
        kwargs = json.loads(option.values[0]) if len(option.values) == 1 else None
    except ValueError:
        return False
    if not isinstance(kwargs, dict) or not kwargs:
        return False
    thinking = kwargs.get("thinking")
    rest = {k: v for k, v in kwargs.items() if not (k == "thinking" and isinstance(thinking, bool))}
    if rest and model_keys.problem(("engine", "chat", "template_kwargs"), rest):
        return False
    if isinstance(thinking, bool):
        draft.set(("engine", "chat", "thinking"), thinking, option.origin)
    for key, value in rest.items():
        draft.set(("engine", "chat", "template_kwargs", key), value, option.origin)
    if list(kwargs) != (["thinking"] if isinstance(thinking, bool) else []) + list(rest) or \
            json.dumps(kwargs, separators=(",", ":")) != option.values[0]:
        draft.notes.append(f"{option.origin}: {option.written} is written as compact JSON, thinking first (the same "
                           "keywords and values)")
    return True


def older_flags(draft: Draft, options: list[EngineOption]) -> None:
    """Flags only an older build knows, beside ones only the newest knows: each is taken on its own (the catalog
    stays the newest, which the others need); one kept raw is named in engine.catalog_extra.flags, as the image's
    own build must know both."""
    extra: list[Scalar] = []
    for option in options:
        build = older_only(option)
        name = option.flag.removeprefix("--")
        if build is None:
            continue
        if ("engine", "args", name) in draft.values:
            extra.append(name)
            draft.notes.append(f"{option.origin}: {option.written} is a flag of {build} that the newest catalog "
                               "lacks, written beside flags only the newest has: kept in engine.args and named in "
                               "engine.catalog_extra.flags (the image's own build knows both)")
        else:
            draft.notes.append(f"{option.origin}: {option.written} is {build}'s name of a setting the newest "
                               "catalog spells otherwise; the compiled command writes the newest's spelling, as "
                               "the source's other flags need that build")
    if extra:
        draft.set(("engine", "catalog_extra", "flags"), extra, options[0].origin)
