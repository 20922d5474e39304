"""`spark-compile import`: read the sources, build the profile, write it (or print it), report what was left out."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from spark_compile.common.errors import EXIT_FINDINGS, EXIT_OK, InputError, UsageError
from spark_compile.importer.docker_run import launches, read_source
from spark_compile.importer.draft import Draft, comment, render
from spark_compile.importer.profile import Request, build, safe_name
from spark_compile.importer.recipe import is_recipe, metadata, recipe_launches
from spark_compile.importer.source import Launch, Leftover
from spark_compile.importer.trace import traced_launches
from spark_compile.stages.write import write_file

MARK = "# Written by spark-compile import from "


def read_launches(sources: list[Path], request: Request, left: list[Leftover],
                  notes: list[str]) -> tuple[list[Launch], Request]:
    """Every node's launch in the sources (docker run lines or sparkrun recipes), and the request completed with
    what a recipe says beyond its launches."""
    found: list[Launch] = []
    if request.trace:  # `--trace SCRIPT ARG...`: one launcher, run with its arguments
        found = traced_launches(sources[0], request.hosts, request.env, left, notes, request.interface,
                                request.rdma_devices, args=tuple(map(str, sources[1:])), fabric=request.fabric)
        sources = []
    for source in sources:
        text = read_source(source)
        if is_recipe(text, str(source)):
            found += recipe_launches(text, str(source), request.hosts, left, notes)
            description = metadata(text, str(source)).get("description")
            request = replace(request, container_name=request.container_name or safe_name(source.stem) or "sglang",
                              description=description if isinstance(description, str) else None)
        else:
            found += launches(text, str(source), source.parent, left, notes)
            request = replace(request, container_name=request.container_name or safe_name(source.stem) or "sglang")
    if not found and request.trace:
        raise InputError(f"{notes[-1]}\n(no `docker run … sglang.launch_server` call was recorded)")
    if not found:
        raise InputError(f"{', '.join(map(str, sources))}: no `docker run … sglang.launch_server` line and no "
                         "sparkrun recipe found")
    return found, request


def _report(draft: Draft) -> None:
    for note in draft.notes:
        sys.stderr.write(f"spark-compile import: note: {comment(note)}\n")
    for item in draft.left:
        sys.stderr.write(f"spark-compile import: left out: {comment(str(item.origin))}: {comment(item.text)}: "
                         f"{comment(item.why)}\n")
    if draft.left:
        sys.stderr.write(f"spark-compile import: {len(draft.left)} setting(s) left out; the profile does not "
                         "reproduce the source until they are resolved\n")


def run_import(sources: list[Path], output: Path | None, request: Request, *, force: bool) -> int:
    """Import ``sources`` into one profile; exit 1 when anything was left out."""
    if output is not None and output.suffix not in (".yaml", ".yml"):
        raise UsageError(f"-o {output}: a profile is a .yaml file")
    if request.trace:
        shown = comment(", ".join(map(str, sources)))
        sys.stderr.write(f"spark-compile import: --trace RUNS {shown} in a sandbox (stand-in "
                         "docker, ssh, nvidia-smi, ip, ...; no network; a throwaway HOME; read-only outside a copy "
                         "of its folder; a time limit) and imports the docker run lines it records\n")
    left: list[Leftover] = []
    notes: list[str] = []
    found, request = read_launches(sources, request, left, notes)
    draft = build(found, request)
    draft.left[:0] = left
    draft.notes[:0] = notes
    header = [MARK.removeprefix("# ") + ", ".join(map(str, sources)) + ".",
              "Review it: `spark-compile check` it, and see what import reported as left out.", ""]
    text = render(draft, header)
    if output is None:
        sys.stdout.write(text)
    else:
        write_file(output, text.encode("utf-8"), ours=MARK.encode("utf-8"), force=force)
    _report(draft)
    return EXIT_FINDINGS if draft.left else EXIT_OK
