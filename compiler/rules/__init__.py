"""rules: every check over a validated profile and its launch plan, one module per concern, each registering its
rules on import: SC1xx schema and file (schema), SC2xx cross-field (engine, overlay, secrets, sglang_model,
sglang_gpu, interactions), SC3xx catalogs (catalogs, images), SC4xx fleet and hardware (fleet, fabric, deployment;
SC44x memory: capacity), SC5xx Kubernetes (k8s), SC6xx `check --engine` (resolution). registry.py holds the registry
and the Context the checks read; stage.py runs them and places their findings. May import common, stages, capacity,
importer, targets and fleet, spec/ and overlay/.
"""

from __future__ import annotations

from spark_compile.rules import (  # noqa: F401 - imported to register their rules
    capacity,
    catalogs,
    deployment,
    engine,
    fabric,
    fleet,
    images,
    interactions,
    k8s,
    overlay,
    resolution,
    schema,
    secrets,
    sglang_gpu,
    sglang_model,
)
from spark_compile.rules.registry import RULES, Rule


def load_all() -> dict[str, Rule]:
    """Every rule, by id: importing this package imported every rule module, which registered its own."""
    return RULES
