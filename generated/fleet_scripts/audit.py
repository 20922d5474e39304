#!/usr/bin/env python3
"""The fleet audit: each node's captured state against the compiled plan (audit.json), key by key, per rank.

Standard library only, and no spark_compile import: this file ships as fleet/audit.py (run by `launch.sh
audit` on the operator's machine) and is imported by `spark-compile audit`, so both compare the same way.

    audit.py [--format text|json] [--plan audit.json] DIR     (DIR: one rankN-NODE.audit capture per node)

Exit status: 0 the fleet matches; 1 drift; 2 a node unreachable, not running or not captured; 64 usage.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

EXIT_MATCH, EXIT_DRIFT, EXIT_DOWN, EXIT_USAGE = 0, 1, 2, 64
MAGIC = b"spark-audit 1\n"
MAX_CAPTURE = 32 * 1024 * 1024  # a node's capture: docker inspect of one container and one image is ~30 KiB
MAX_FILES = 4096
MAX_SHOWN = 160  # characters of a value shown in a line (JSON keeps the same, cut, text)
REDACTED = "(redacted)"
_SECTION = re.compile(rb"([a-z0-9_]{1,32}) (-?[0-9]{1,3}) ([0-9]{1,9})\n")
_SHA_LINE = re.compile(r"([0-9a-f]{64}) [ *](.+)")


class CaptureError(Exception):
    """A capture file that is not one (its message names the file)."""


@dataclass(frozen=True)
class Difference:
    """One key that differs on one rank: what was found, what the plan says, the profile key behind it."""

    rank: int
    subject: str
    found: str
    planned: str
    source: str

    def line(self) -> str:
        """`rank 2: env X is "1", plan says "0" (overlay.x)`."""
        return f"rank {self.rank}: {self.subject} is {self.found}, plan says {self.planned} ({self.source})"


@dataclass(frozen=True)
class Down:
    """A rank whose state could not be compared: unreachable, not running, or not captured."""

    rank: int
    node: str
    reason: str

    def line(self) -> str:
        """`rank 2 (spark-2): unreachable: ...`."""
        return f"rank {self.rank} ({self.node}): {self.reason}"


@dataclass
class Capture:
    """One node's capture: named sections, each with the exit status of what produced it and its bytes."""

    sections: dict[str, tuple[int, bytes]]

    def status(self, name: str) -> int | None:
        """The section's exit status; None when the section is absent."""
        return self.sections[name][0] if name in self.sections else None

    def text(self, name: str) -> str:
        """The section's text ('' when absent), undecodable bytes replaced."""
        return self.sections.get(name, (0, b""))[1].decode("utf-8", "replace")

    def document(self, name: str) -> dict[str, Any] | None:
        """The first object of a `docker inspect` JSON array; None when absent, failed or not such JSON."""
        if self.status(name) != 0:
            return None
        try:
            data = json.loads(self.sections[name][1])
        except (ValueError, RecursionError):
            return None
        if isinstance(data, list) and data and isinstance(data[0], dict):
            return data[0]
        return None


# -- reading -------------------------------------------------------------------------------------------------
def parse_capture(data: bytes, where: str) -> Capture:
    """`spark-audit 1` then sections `NAME STATUS LENGTH\\n<LENGTH bytes>\\n`; CaptureError on anything else."""
    if not data.startswith(MAGIC):
        raise CaptureError(f"{where}: not a capture (its first line is not 'spark-audit 1')")
    sections: dict[str, tuple[int, bytes]] = {}
    at = len(MAGIC)
    while at < len(data):
        header = _SECTION.match(data, at)
        if header is None:
            raise CaptureError(f"{where}: byte {at}: expected a section line 'NAME STATUS LENGTH'")
        length, start = int(header.group(3)), header.end()
        if start + length + 1 > len(data) or data[start + length:start + length + 1] != b"\n":
            raise CaptureError(f"{where}: section {header.group(1).decode()} is cut short ({length} bytes announced)")
        sections[header.group(1).decode()] = (int(header.group(2)), data[start:start + length])
        at = start + length + 1
    return sections_capture(sections, where)


def sections_capture(sections: dict[str, tuple[int, bytes]], where: str) -> Capture:
    """A Capture whose rank section is a rank number."""
    if not re.fullmatch(rb"[0-9]{1,6}", sections.get("rank", (0, b""))[1]):
        raise CaptureError(f"{where}: no 'rank' section holding a rank number")
    return Capture(sections)


def _read_regular(path: Path, limit: int) -> bytes:
    """A regular file's bytes, opened without blocking (a FIFO never hangs the audit) and without following a
    symlink, sized before it is read (a sparse 10 GiB file is refused unread); OSError for anything else."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        too_large = OSError(errno.EFBIG, f"larger than {limit} bytes")
        if info.st_size > limit:
            raise too_large
        chunks: list[bytes] = []
        size = 0
        while size <= limit:  # bounded still: the file can grow after its size was taken
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            size += len(chunk)
        raise too_large
    finally:
        os.close(fd)


def read_captures(directory: Path) -> tuple[dict[int, Capture], list[str]]:
    """Every *.audit file of a folder by rank, and one message per file that could not be used."""
    captures: dict[int, Capture] = {}
    errors: list[str] = []
    paths = sorted(directory.glob("*.audit"))[:MAX_FILES]
    for path in paths:
        try:
            capture = parse_capture(_read_regular(path, MAX_CAPTURE), str(path))
        except OSError as exc:
            errors.append(f"{path}: cannot be read: {exc.strerror or exc}")
            continue
        except CaptureError as exc:
            errors.append(str(exc))
            continue
        rank = int(capture.text("rank"))
        if rank in captures:
            errors.append(f"{path}: a second capture of rank {rank}")
        captures[rank] = capture
    return captures, errors


# -- showing -------------------------------------------------------------------------------------------------
def safe(text: str) -> str:
    """Node text for a terminal: control and non-ASCII characters escaped, cut to MAX_SHOWN characters."""
    escaped = json.dumps(text, ensure_ascii=True)[1:-1]
    return escaped if len(escaped) <= MAX_SHOWN else f"{escaped[:MAX_SHOWN]}...({len(escaped)} characters)"


def shown(value: Any) -> str:
    """A value as a line shows it: JSON (quoted, escaped), cut to MAX_SHOWN characters."""
    text = json.dumps(value, ensure_ascii=True, sort_keys=True, separators=(",", ":"))
    return text if len(text) <= MAX_SHOWN else f"{text[:MAX_SHOWN]}...({len(text)} characters)"


def unset_or_shown(value: Any) -> str:
    """unset for Docker's empty values, else the value shown."""
    return "unset" if _empty(value) is None else shown(value)


def _empty(value: Any) -> Any:
    """Docker writes an unset setting as null, [], {}, '', false or 0: all mean unset."""
    unset = value in (None, "", [], {}) or value is False or (type(value) is int and value == 0)
    return None if unset else value


def _get(document: Any, path: Iterable[Any]) -> Any:
    for part in path:
        if isinstance(part, str) and isinstance(document, dict):
            document = document.get(part)
        else:
            return None
    return document


# -- comparing -----------------------------------------------------------------------------------------------
class _Rank:
    """The differences of one rank, collected as they are found."""

    def __init__(self, rank: int, plan: dict[str, Any], pattern: re.Pattern[str], value: re.Pattern[str]) -> None:
        self.rank, self.plan = rank, plan
        self.out: list[Difference] = []
        self.secret_name, self.secret_value = pattern, value

    def add(self, subject: str, found: str, planned: str, source: str) -> None:
        self.out.append(Difference(self.rank, subject, found, planned, source or "not in the profile"))

    def secret(self, name: str, value: str) -> bool:
        return bool(self.secret_name.search(name) or self.secret_value.search(value))

    def fields(self, document: dict[str, Any], unset: list[dict[str, Any]]) -> None:
        for field in [*self.plan["fields"], *unset]:
            label = ".".join(field["path"])
            found = _get(document, field["path"])
            if "items" in field:
                self.items(label, field, found)
            elif _empty(found) != _empty(field["value"]):
                self.add(label, unset_or_shown(found), unset_or_shown(field["value"]), field["source"])

    def items(self, label: str, field: dict[str, Any], found: Any) -> None:
        """A list docker keeps unordered in meaning (caps, binds, devices, ulimits): compared item by item."""
        wanted = {item["id"]: item for item in field["items"]}
        seen = {item_id(field["id"], item): item for item in (found if isinstance(found, list) else [])}
        for key in sorted(set(wanted) | set(seen)):
            plan_item, got = wanted.get(key), seen.get(key)
            if plan_item is None:
                self.add(f"{label} {safe(key)}", shown(got), "unset", "")
            elif got is None:
                self.add(f"{label} {safe(key)}", "unset", shown(plan_item["value"]), plan_item["source"])
            elif got != plan_item["value"]:
                self.add(f"{label} {safe(key)}", shown(got), shown(plan_item["value"]), plan_item["source"])

    def env(self, document: dict[str, Any], image: dict[str, Any] | None) -> None:
        found, defaults = env_map(_get(document, ["Config", "Env"])), env_map(_get(image, ["Config", "Env"]))
        planned = {var["name"]: var for var in self.plan["env"]}
        for name in sorted(set(planned) | set(found)):
            var, got = planned.get(name), found.get(name)
            subject = f"env {safe(name)}"
            if var is None:
                if got is not None and defaults.get(name) != got:
                    self.add(subject, REDACTED if self.secret(name, got) else shown(got), "unset", "")
            elif got is None:
                wanted = "set" if var["value"] is None or var["secret"] else shown(var["value"])
                self.add(subject, "unset", wanted, var["source"])
            elif var["value"] is not None and not var["secret"] and got != var["value"]:
                hide = self.secret(name, got)
                self.add(subject, REDACTED if hide else shown(got), shown(var["value"]), var["source"])

    def argv(self, document: dict[str, Any]) -> None:
        plan = self.plan["argv"]
        entrypoint, cmd = _get(document, ["Config", "Entrypoint"]), _get(document, ["Config", "Cmd"])
        if entrypoint != plan["entrypoint"]:
            self.add("entrypoint", shown(entrypoint), shown(plan["entrypoint"]), plan["source"])
        if not isinstance(cmd, list) or not all(isinstance(word, str) for word in cmd):
            self.add("command", shown(cmd), shown(plan["prefix"]), plan["source"])
            return
        prefix = len(plan["prefix"])
        if cmd[:prefix] != plan["prefix"]:
            self.add("command", shown(cmd[:prefix]), shown(plan["prefix"]), plan["source"])
        found, loose = engine_options(cmd[prefix:])
        if loose:
            self.add("engine arguments", shown(loose), "none before the first --flag", plan["source"])
        wanted = {option["flag"]: option for option in plan["options"]}
        for flag in sorted(set(wanted) | set(found)):
            option, got = wanted.get(flag), found.get(flag)
            # A secret's flag is named with a word after it: a redactor reads the word after --api-key as its value.
            named = self.secret_name.search(flag) is not None
            subject = f"engine flag {safe(flag)}" + (" (a secret)" if named else "")
            hide = named or any(self.secret(flag, " ".join(values)) for values in got or [])
            if option is None:
                self.add(subject, REDACTED if hide else flag_text(got or []), "unset", "")
            elif got != option["occurrences"]:
                self.add(subject, "unset" if not got else REDACTED if hide else flag_text(got),
                         "set" if named else flag_text(option["occurrences"]), option["source"])

    def files(self, capture: Capture) -> None:
        sums: dict[str, str] = {}
        for line in capture.text("sha256").splitlines():
            match = _SHA_LINE.fullmatch(line)
            if match:
                sums[match.group(2)] = match.group(1)
        for planned in self.plan["files"]:
            got = sums.get(planned["path"])
            if got != planned["sha256"]:
                self.add(f"file {safe(planned['path'])}", f"sha256 {got[:12]}" if got else "missing",
                         f"sha256 {planned['sha256'][:12]}", planned["source"])

    def unit(self, capture: Capture, unit: str) -> None:
        state = capture.text("unit_state").strip() or "unknown"
        if state != "active":
            self.add(f"unit {safe(unit)}", shown(state), shown("active"), "launch.sh start")


def item_id(kind: str, item: Any) -> str:
    """The identity of one item of an unordered docker list: a bind's target, a ulimit's name, ..."""
    if kind == "bind" and isinstance(item, str):
        parts = item.split(":")
        return parts[1] if len(parts) > 1 else item
    if kind != "self" and isinstance(item, dict) and isinstance(item.get(kind), str):
        return str(item[kind])
    return item if isinstance(item, str) else shown(item)


def env_map(entries: Any) -> dict[str, str]:
    """Docker's Env list as the process sees it: NAME=value entries, a later entry of a name wins."""
    out: dict[str, str] = {}
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, str):
            name, _, value = entry.partition("=")
            out[name] = value
    return out


def engine_options(words: list[str]) -> tuple[dict[str, list[list[str]]], list[str]]:
    """The engine's argv as {--flag: [values of each occurrence]}, and any words before the first --flag."""
    options: dict[str, list[list[str]]] = {}
    loose: list[str] = []
    current: list[str] | None = None
    for word in words:
        if word.startswith("--"):
            current = []
            options.setdefault(word, []).append(current)
        elif current is None:
            loose.append(word)
        else:
            current.append(word)
    return options, loose


def flag_text(occurrences: list[list[str]]) -> str:
    """set, "value", or every occurrence of a repeated flag."""
    texts = [shown(" ".join(values)) if values else "set" for values in occurrences]
    return texts[0] if len(texts) == 1 else "set " + str(len(texts)) + " times: " + ", ".join(texts)


def image_checks(plan: dict[str, Any], running: dict[int, str], tags: dict[int, str]) -> list[Difference]:
    """A pinned digest: each rank's image must carry it (see compare). Without one: every rank runs the image
    most ranks run, and the one its node's tag names now (a re-tag shows before the next restart)."""
    image, out = plan["image"], []
    if image["digest"] is None and running:
        counts = Counter(running.values())
        # The image most ranks run; of equally many, the lowest rank's (dicts keep rank order).
        common = max(dict.fromkeys(running[rank] for rank in sorted(running)), key=counts.__getitem__)
        for rank, image_id in sorted(running.items()):
            if image_id != common:
                out.append(Difference(rank, "image", shown(image_id), f"the other ranks' {shown(common)}",
                                      f"{image['source']}: no digest pinned"))
    for rank, tag_id in sorted(tags.items()):
        if rank in running and tag_id != running[rank]:
            out.append(Difference(rank, f"image tag {shown(image['ref'])}", shown(tag_id),
                                  f"the running container's {shown(running[rank])}",
                                  f"{image['source']}: the next start runs another image"))
    return out


def digest_check(check: _Rank, image: dict[str, Any], running: dict[str, Any] | None) -> None:
    """A pinned digest must be among the running image's RepoDigests."""
    repo_digests = _get(running, ["RepoDigests"])
    digests = [d.split("@", 1)[1] for d in repo_digests if isinstance(d, str) and "@" in d] \
        if isinstance(repo_digests, list) else []
    if image["digest"] is not None and image["digest"] not in digests:
        check.add("image digest", shown(digests[0] if digests else None), shown(image["digest"]), image["source"])


def watchdog_check(check: _Rank, watchdog: dict[str, Any], capture: Capture) -> None:
    """On the head, an enabled watchdog's timer is active and its lock is present."""
    if not watchdog["enabled"]:
        return
    state = capture.text("watchdog_timer").strip() or "unknown"
    if state != "active":
        check.add(f"watchdog timer {safe(watchdog['timer'])}", shown(state), shown("active"), watchdog["source"])
    if capture.status("watchdog_lock") != 0:
        check.add(f"watchdog lock {safe(watchdog['lock'])}", "absent", "present",
                  f"{watchdog['source']}; launch.sh start writes it")


def container_check(check: _Rank, plan: dict[str, Any], capture: Capture) -> str | None:
    """The running container against the plan; why it cannot be compared, if it is not running."""
    document = capture.document("container")
    if document is None or _get(document, ["State", "Running"]) is not True:
        what = f"status {shown(_get(document, ['State', 'Status']))}" if document else \
            safe(capture.text("container").strip()[-200:] or "no docker inspect")
        return f"container {safe(plan['container'])} is not running ({what})"
    container_image = capture.document("container_image")
    check.fields(document, plan["unset"])
    check.env(document, container_image)
    check.argv(document)
    # The plan sets no --user: the container runs as its image says.
    user, image_user = _get(document, ["Config", "User"]), _get(container_image, ["Config", "User"])
    if container_image is not None and _empty(user) != _empty(image_user):
        check.add("Config.User", unset_or_shown(user), f"the image's {unset_or_shown(image_user)}", "")
    digest_check(check, plan["image"], container_image)
    return None


def compare(plan: dict[str, Any], captures: dict[int, Capture], missing: str = "no capture") -> tuple[
        list[Difference], list[Down]]:
    """Every difference of every rank, and the ranks that could not be compared (in rank order)."""
    differences: list[Difference] = []
    down: list[Down] = []
    running: dict[int, str] = {}
    tags: dict[int, str] = {}
    name_pattern, value_pattern = re.compile(plan["secret_name"], re.I), re.compile(plan["secret_value"])
    for rank_plan in plan["ranks"]:
        rank, node = rank_plan["rank"], rank_plan["node"]
        capture = captures.get(rank)
        if capture is None or capture.text("node") != node:
            down.append(Down(rank, node, missing if capture is None else
                             f"the capture is of node {shown(capture.text('node'))}"))
            continue
        status = capture.status("unreachable")
        if status is not None:
            said = capture.text("unreachable").strip().splitlines() or ["no message"]
            what = "unreachable" if status == 255 else f"the capture failed on the node (exit {status})"
            down.append(Down(rank, node, f"{what}: {safe(said[-1])}"))
            continue
        check = _Rank(rank, rank_plan, name_pattern, value_pattern)
        check.files(capture)
        check.unit(capture, plan["unit"])
        if rank == 0:
            watchdog_check(check, plan["watchdog"], capture)
        not_running = container_check(check, plan, capture)
        if not_running:
            down.append(Down(rank, node, not_running))
        else:
            running_id, tag_id = _get(capture.document("container"), ["Image"]), _get(capture.document("image"), ["Id"])
            if isinstance(running_id, str):
                running[rank] = running_id
            if isinstance(tag_id, str):
                tags[rank] = tag_id
        differences += check.out
    differences += image_checks(plan, running, tags)
    planned = {rank_plan["rank"] for rank_plan in plan["ranks"]}
    down += [Down(rank, safe(capture.text("node")), "captured, but the plan has no such rank")
             for rank, capture in sorted(captures.items()) if rank not in planned]
    return sorted(differences, key=lambda d: d.rank), down


# -- the verdict ---------------------------------------------------------------------------------------------
def exit_code(differences: list[Difference], down: list[Down]) -> int:
    """2 when a rank could not be compared, else 1 on any difference, else 0."""
    return EXIT_DOWN if down else EXIT_DRIFT if differences else EXIT_MATCH


def render(plan: dict[str, Any], differences: list[Difference], down: list[Down], fmt: str,
           down_exit: int = EXIT_DOWN) -> str:
    """The text report (one line per difference, or the one `fleet matches` line) or the JSON document, whose
    `exit` is the printing command's own code (``down_exit``: `spark-compile audit` says 4 where audit.py says 2)."""
    title = " ".join(part for part in (plan["profile"], plan.get("release") or "") if part)
    code = exit_code(differences, down)
    if fmt == "json":
        status = {EXIT_MATCH: "match", EXIT_DRIFT: "drift", EXIT_DOWN: "down"}[code]
        document = {"profile": plan["profile"], "release": plan.get("release"), "status": status,
                    "exit": down_exit if code == EXIT_DOWN else code,
                    "down": [{**asdict(d), "line": d.line()} for d in down],
                    "differences": [{**asdict(d), "line": d.line()} for d in differences]}
        return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=True) + "\n"
    if code == EXIT_MATCH:
        return f"fleet matches {title}\n"
    lines = [d.line() for d in down] + [d.line() for d in differences]
    return "".join(line + "\n" for line in lines)


def main(argv: list[str]) -> int:
    """`audit.py [--format text|json] [--plan FILE] DIR`."""
    fmt, plan_path, rest = "text", Path(__file__).resolve().parent / "audit.json", list(argv)
    while rest and rest[0].startswith("--"):
        option = rest.pop(0)
        if option in ("--format", "--plan") and rest:
            value = rest.pop(0)
            if option == "--format" and value in ("text", "json"):
                fmt = value
            elif option == "--plan":
                plan_path = Path(value)
            else:
                return usage(f"--format takes text or json, not {safe(value)}")
        else:
            return usage(f"unknown option {safe(option)}")
    try:
        folder = len(rest) == 1 and Path(rest[0]).is_dir()
    except OSError:  # a name the system refuses (too long)
        folder = False
    if not folder:
        return usage("name the folder of the captures")
    try:
        plan = json.loads(_read_regular(plan_path, MAX_CAPTURE))
    except (OSError, ValueError, RecursionError) as exc:
        return usage(f"cannot read the plan {plan_path}: {exc}")
    captures, errors = read_captures(Path(rest[0]))
    for error in errors:
        sys.stderr.write(safe(error) + "\n")
    differences, down = compare(plan, captures, f"no capture in {safe(rest[0])}")
    sys.stdout.write(render(plan, differences, down, fmt))
    return EXIT_DOWN if errors else exit_code(differences, down)


def usage(message: str) -> int:
    sys.stderr.write(f"audit.py: {message}\nusage: audit.py [--format text|json] [--plan audit.json] DIR\n")
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
