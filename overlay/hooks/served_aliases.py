"""served_aliases (SPARK_SERVED_ALIASES): extra model ids served by the one model.

Target sglang.srt.entrypoints.http_server (SGLang 0.5.23). Patches:
- the app's ``GET /v1/models`` route (``available_models``): one card per alias after the served
  model's, a copy of its card under the alias id;
- the app's ``GET /v1/models/{model:path}`` route (``retrieve_model``): an alias answers 200 with
  the served model's card under the alias id instead of 404;
- ``openai.serving_base.OpenAIServingBase._parse_model_parameter``: ``alias`` and ``alias:adapter``
  resolve like the served name, so every OpenAI-compatible handler treats the alias as the served
  model (LoRA parsing; the Responses API's unknown-model check goes through it too) while the
  response still echoes the id the client asked for, as SGLang does for the served name.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from . import mark

HOOK = "served_aliases"
SERVING_BASE = "sglang.srt.entrypoints.openai.serving_base"


def aliases_of(flags: Mapping[str, object]) -> tuple[str, ...]:
    raw = flags["SPARK_SERVED_ALIASES"]
    items = raw if isinstance(raw, list) else []
    return tuple(dict.fromkeys(str(item).strip() for item in items if str(item).strip()))


def _served_name(http_server: ModuleType) -> str:
    return str(http_server.get_global_state().tokenizer_manager.served_model_name)


def replace_route(app: Any, path: str, method: str, wrap: Callable[[Any], Any]) -> None:
    """Swap one route's endpoint for ``wrap(endpoint)``, keeping its place and options.

    FastAPI compiles a route's endpoint when it is added, so replacing the module attribute does
    nothing: the route itself is rebuilt through the app (its route class and all) and put back at
    the old index, so route matching order is unchanged.
    """
    routes = app.router.routes
    for index, route in enumerate(routes):
        if getattr(route, "path", None) == path and method in (getattr(route, "methods", None) or ()):
            app.router.add_api_route(
                path,
                wrap(route.endpoint),
                methods=sorted(route.methods),
                name=route.name,
                response_class=route.response_class,
                dependencies=list(route.dependencies),
                include_in_schema=route.include_in_schema,
                tags=list(route.tags),
                summary=route.summary,
                description=route.description,
            )
            routes.insert(index, routes.pop())
            routes.pop(index + 1)
            return
    raise LookupError(f"no {method} {path} route in the app")


def _wrap_list(http_server: ModuleType, aliases: tuple[str, ...]) -> Callable[[Any], Any]:
    def wrap(original: Any) -> Any:
        @functools.wraps(original)
        async def available_models() -> Any:
            listing = await original()
            served = _served_name(http_server)
            cards = list(listing.data)
            ids = {card.id for card in cards}
            base_index = next((i for i, card in enumerate(cards) if card.id == served), None)
            extra = []
            for alias in aliases:
                if alias in ids:
                    continue
                if base_index is None:
                    extra.append(http_server.ModelCard(id=alias, root=served))
                else:
                    extra.append(cards[base_index].model_copy(update={"id": alias}))
            at = 0 if base_index is None else base_index + 1
            listing.data = cards[:at] + extra + cards[at:]
            return listing

        return mark(available_models, HOOK)

    return wrap


def _wrap_retrieve(http_server: ModuleType, aliases: tuple[str, ...]) -> Callable[[Any], Any]:
    def wrap(original: Any) -> Any:
        @functools.wraps(original)
        async def retrieve_model(model: str) -> Any:
            served = _served_name(http_server)
            if model in aliases and model != served:
                card = await original(served)
                model_copy = getattr(card, "model_copy", None)
                return model_copy(update={"id": model}) if model_copy is not None else card
            return await original(model)

        return mark(retrieve_model, HOOK)

    return wrap


def _patch_model_parameter(serving_base: ModuleType, aliases: tuple[str, ...]) -> None:
    cls = serving_base.OpenAIServingBase
    original = cls._parse_model_parameter

    @functools.wraps(original)
    def _parse_model_parameter(self: Any, model: str) -> Any:
        served = self.tokenizer_manager.served_model_name
        if model in aliases and model != served:
            return served, None
        for alias in aliases:
            if alias != served and model.startswith(alias + ":"):
                return original(self, served + model[len(alias) :])
        return original(self, model)

    cls._parse_model_parameter = mark(_parse_model_parameter, HOOK)


def apply(module: ModuleType, flags: Mapping[str, object]) -> None:
    aliases = aliases_of(flags)
    if not aliases:
        return
    replace_route(module.app, "/v1/models", "GET", _wrap_list(module, aliases))
    replace_route(module.app, "/v1/models/{model:path}", "GET", _wrap_retrieve(module, aliases))
    # http_server imports the OpenAI handlers (and so their base class) before this runs.
    _patch_model_parameter(importlib.import_module(SERVING_BASE), aliases)
    # The peer's boot log carries this line; relaunch checks grep for it.
    sys.stderr.write(f"overlay: Served-model aliases: {', '.join(aliases)}\n")
