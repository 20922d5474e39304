"""Stage: render the plan into files ({relative path: bytes}) through Jinja2 templates.

Every template (the artifacts' and the review page's) loads through environment(), StrictUndefined;
templates format the plan and decide nothing (the fleet's scripts are static files driven by generated
data, see spark_compile.fleet.scripts).
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import markupsafe

from spark_compile import __version__, templates
from spark_compile.common import quoting
from spark_compile.common.secrets import redact
from spark_compile.spec.model import Profile
from spark_compile.stages.launch_plan import LaunchPlan, RankPlan
from spark_compile.stages.model_paths import served_id
from spark_compile.stages.plan import ENGINE_SECRETS, secrets_dir
from spark_compile.stages.readme import readme_context

# The templates are package data in their package's folder, in a checkout and an installed wheel alike.
TEMPLATES = Path(templates.__file__).parent
SCRIPT_MODE = 0o755
FILE_MODE = 0o644


@dataclass(frozen=True, slots=True)
class Artifact:
    """One rendered file: its path under generated/<profile>/, its bytes and mode."""

    path: str
    content: bytes
    mode: int = FILE_MODE

    @property
    def sha256(self) -> str:
        """Hex digest of the content."""
        return hashlib.sha256(self.content).hexdigest()


def argv_lines(argv: list[str] | tuple[str, ...]) -> list[list[str]]:
    """Filter: an argv grouped one option (with its values) per line, for readable scripts."""
    lines: list[list[str]] = []
    for arg in argv:
        if not lines or (arg.startswith("-") and len(arg) > 1) or len(lines[-1]) > 1:
            lines.append([arg])
        else:
            lines[-1].append(arg)
    return lines


def sh_command(argv: list[str] | tuple[str, ...], first: str = "", indent: str = "  ") -> str:
    """Filter: an argv as a bash command, one option per line with continuations, every word quoted."""
    return sh_lines(argv_lines(argv), first, indent)


def sh_lines(lines: list[list[str]] | tuple[tuple[str, ...], ...], first: str = "", indent: str = "  ") -> str:
    """Filter: argv words already grouped one per line (an option with all its values) as a bash command."""
    quoted = [quoting.bash_words(line) for line in lines]
    body = f" \\\n{indent}".join(quoted)
    return f"{first}{body}"


def _redacted(value: Any) -> Any:
    """Every value the review page prints passes redaction and the terminal-safe escaping (no bidi control
    reorders the page); markup a template built itself is already done."""
    if isinstance(value, str) and not isinstance(value, markupsafe.Markup):
        return quoting.terminal_text(redact(value))
    return value


@functools.cache
def environment(autoescape: bool = False) -> jinja2.Environment:
    """The Jinja environment of the package's templates: StrictUndefined, our filters. autoescape=True is
    the review page's: every value HTML-escaped and redacted by construction."""
    # Jinja's own loader, without a bytecode cache: each run compiles the templates it renders, so an edit
    # of a template or of these options shows in the very next run's output.
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES), undefined=jinja2.StrictUndefined,
        autoescape=autoescape, finalize=_redacted if autoescape else None, keep_trailing_newline=True,
        trim_blocks=True, lstrip_blocks=True,
    )
    env.filters.update(sh=quoting.bash_word, sh_command=sh_command, sh_lines=sh_lines, systemd=quoting.systemd_exec_arg,
                       systemd_exec=quoting.systemd_command, systemd_path=quoting.systemd_path_setting,
                       systemd_text=quoting.systemd_text, envfile=quoting.env_file,
                       heredoc=quoting.heredoc_line, md=quoting.markdown_text, md_code=quoting.markdown_code,
                       tojson_sorted=lambda v: json.dumps(v, indent=2, sort_keys=True))
    return env


def _render(template: str, **context: Any) -> bytes:
    return environment().get_template(template).render(version=__version__, **context).encode()


def ipv4_mapped_gid(ip: str) -> str:
    """The last three groups of the IPv4-mapped GID of ``ip`` as sysfs prints them: ffff:c000:020b."""
    a, b, c, d = (int(part) for part in ip.split("."))
    return f"ffff:{a:02x}{b:02x}:{c:02x}{d:02x}"


def _secret_source(ref: Any) -> dict[str, str]:
    return {"kind": "file", "source": ref.file} if ref.file is not None else {"kind": "env", "source": ref.env}


def secrets_context(profile: Profile) -> dict[str, Any]:
    """Where each secret is read on the node: (name, {kind, source}) pairs and the API key's source."""
    secrets = profile.secrets
    return {"secret_env": [(name, _secret_source(ref)) for name, ref in secrets.env.items()],
            "api_key": _secret_source(secrets.api_key) if secrets.api_key is not None else None,
            "secrets_dir": secrets_dir(profile), "engine_secrets": ENGINE_SECRETS}


def _rank_context(plan: LaunchPlan, profile: Profile, rank: RankPlan) -> dict[str, Any]:
    return {"plan": plan, "rank": rank, "profile": profile, "gid_suffix": ipv4_mapped_gid(rank.fabric_ip),
            "deploy": profile.deploy,
            "fabric_kind": profile.fleet.fabric.kind if profile.fleet.fabric else "single-node",
            **secrets_context(profile)}


def rank_artifacts(plan: LaunchPlan, profile: Profile, rank: RankPlan) -> list[Artifact]:
    """The files of one rank: env files, docker-run.sh, preflight.sh and the systemd unit."""
    ctx = _rank_context(plan, profile, rank)
    base = rank.directory
    files = [Artifact(f"{base}/{env_file.name}", _render("env.j2", env_file=env_file, **ctx))
             for env_file in rank.env_files]
    files.append(Artifact(f"{base}/docker-run.sh", _render("docker-run.sh.j2", **ctx), SCRIPT_MODE))
    files.append(Artifact(f"{base}/preflight.sh", _render("preflight.sh.j2", **ctx), SCRIPT_MODE))
    files.append(Artifact(f"{base}/{plan.unit_name}", _render("unit.service.j2", **ctx)))
    return files


def render_plan(plan: LaunchPlan, profile: Profile, extra: list[Artifact] | None = None) -> list[Artifact]:
    """Every file of a profile except MANIFEST.json, sorted by path."""
    files = [a for rank in plan.ranks for a in rank_artifacts(plan, profile, rank)]
    files.append(Artifact("plan.json", plan_json_text(plan.to_json()).encode()))
    files.append(Artifact("README.md", _render("README.md.j2", plan=plan, profile=profile, served=served_id(profile),
                                               **readme_context(plan, profile))))
    files += extra or []
    return sorted(files, key=lambda a: a.path)


def plan_json_text(plan: dict[str, Any]) -> str:
    """plan.json: one line per top-level key and per rank field, each value compact.

    Readable in a review, and fast: json's C encoder only runs without indent, and a 1,024-rank plan
    pretty-printed in full took longer than rendering every file."""
    def dump(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False)

    lines = ["{"]
    items = [(key, value) for key, value in plan.items() if key != "ranks"]
    lines += [f"  {dump(key)}: {dump(value)}," for key, value in items]
    ranks = []
    for rank in plan["ranks"]:
        fields = [f"      {dump(key)}: {dump(value)}" for key, value in rank.items()]
        ranks.append("    {\n" + ",\n".join(fields) + "\n    }")
    lines.append('  "ranks": [\n' + ",\n".join(ranks) + "\n  ]")
    return "\n".join(lines) + "\n}\n"


def digests(files: list[Artifact]) -> dict[str, dict[str, str]]:
    """A MANIFEST.json's "files": each path with its sha256 and octal mode."""
    return {a.path: {"sha256": a.sha256, "mode": f"{a.mode:o}"} for a in files}


def manifest(files: list[Artifact], profile_files: list[tuple[str, str]], name: str) -> Artifact:
    """MANIFEST.json: compiler version, the profile chain with sha256s, every file with its sha256."""
    body = {
        "compiler": f"spark-compile {__version__}", "profile": name,
        "sources": [{"path": path, "sha256": digest} for path, digest in profile_files],
        "files": digests(files),
    }
    return Artifact("MANIFEST.json", (json.dumps(body, indent=2, sort_keys=True) + "\n").encode())
