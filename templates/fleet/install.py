#!/usr/bin/env python3
"""Install a compiled profile with the shared fleet scripts, every file checked by its sha256.

    install.py PROFILE_DIR DEST

PROFILE_DIR is a profile's generated folder (generated/<profile>/, beside this folder). DEST, a folder that
does not exist yet, receives every file the profile's MANIFEST.json lists and, in DEST/fleet/, the scripts
this folder's MANIFEST.json lists. Every file must have the sha256 its manifest gives, and both manifests
the same spark-compile version: on a hand-edited file, or a profile compiled by another version than the
scripts, nothing is installed. Then run DEST/fleet/launch.sh (--dry-run, install, start).

A static file of spark-compile (generated/fleet_scripts/). Standard library only. Exit status: 0 installed;
1 nothing installed (a file differs from its manifest, or DEST cannot be made); 64 usage.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any, NoReturn

HERE = Path(__file__).resolve().parent
MANIFEST = "MANIFEST.json"
FLEET = "fleet"
EXIT_USAGE = 64


class InstallError(Exception):
    """Nothing was installed (exit 1)."""


class Parser(argparse.ArgumentParser):
    """argparse, with the fleet scripts' usage status."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"install.py: {message}\n")


def manifest(folder: Path) -> dict[str, Any]:
    """A generated folder's MANIFEST.json, as spark-compile writes it."""
    try:
        data = json.loads((folder / MANIFEST).read_bytes())
    except (OSError, ValueError) as err:
        raise InstallError(f"{folder} has no readable {MANIFEST} ({err}): give a folder spark-compile wrote") from None
    if not (isinstance(data, dict) and str(data.get("compiler", "")).startswith("spark-compile")
            and isinstance(data.get("files"), dict)):
        raise InstallError(f"{folder / MANIFEST} is not a spark-compile manifest")
    return data


def checked(path: Path, entry: Any, listed_in: Path) -> tuple[bytes, int]:
    """The bytes and mode of ``path``, which must have the sha256 ``listed_in`` gives it."""
    if not (isinstance(entry, dict) and isinstance(entry.get("sha256"), str)
            and isinstance(entry.get("mode"), str) and entry["mode"] in ("644", "755")):
        raise InstallError(f"{listed_in}: its entry for {path.name} has no sha256 and mode 644 or 755")
    try:
        data = path.read_bytes()
    except OSError as err:
        raise InstallError(f"{path}: cannot read: {err.strerror or err}") from None
    if hashlib.sha256(data).hexdigest() != entry["sha256"]:
        raise InstallError(f"{path} is not the file {listed_in} lists (its sha256 differs): recompile the profile, "
                           "do not edit generated files")
    return data, int(entry["mode"], 8)


def relative(name: str, listed_in: Path) -> str:
    """A manifest's path, refused when it would leave DEST."""
    path = PurePosixPath(name)
    if path.is_absolute() or not path.parts or ".." in path.parts:
        raise InstallError(f"{listed_in} lists {name!r}, a path outside the folder")
    return str(path)


def install_files(profile_dir: Path) -> dict[str, tuple[bytes, int]]:
    """{path under DEST: (bytes, mode)}: the profile's files and the fleet scripts, each checked."""
    profile, shared = manifest(profile_dir), manifest(HERE)
    own, ours = profile_dir / MANIFEST, HERE / MANIFEST
    if profile["compiler"] != shared["compiler"]:
        raise InstallError(f"{profile_dir} was compiled by {profile['compiler']}, the scripts in {HERE} by "
                           f"{shared['compiler']}: compile the profile again (spark-compile PROFILE --out "
                           f"{HERE.parent}), so its data and the scripts come from one compiler")
    scripts = shared.get("scripts")
    if not isinstance(scripts, list) or not all(isinstance(name, str) and "/" not in name for name in scripts):
        raise InstallError(f"{ours} lists no scripts to install")
    files = {relative(name, own): checked(profile_dir / name, entry, own) for name, entry in profile["files"].items()}
    files[MANIFEST] = ((profile_dir / MANIFEST).read_bytes(), 0o644)
    for name in scripts:
        files[f"{FLEET}/{relative(name, ours)}"] = checked(HERE / name, shared["files"].get(name), ours)
    return files


def write(dest: Path, files: dict[str, tuple[bytes, int]]) -> None:
    """Write ``files`` into a new folder beside DEST, then rename it to DEST: DEST is whole or absent."""
    if os.path.lexists(dest) and not (dest.is_dir() and not dest.is_symlink() and not any(dest.iterdir())):
        raise InstallError(f"{dest} exists: install into a new folder (an install is a fresh, checked copy)")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.install-", dir=dest.parent))
    except OSError as err:
        raise InstallError(f"{dest}: cannot make it: {err.strerror or err}") from None
    try:
        for name, (data, mode) in sorted(files.items()):
            path = staging / name
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                os.fchmod(handle.fileno(), mode)  # the umask may have narrowed it
        for top, _dirs, _files in os.walk(staging):
            os.chmod(top, 0o755)
        os.rename(staging, dest)
    except OSError as err:
        with contextlib.suppress(OSError):
            shutil.rmtree(staging)
        raise InstallError(f"{dest}: cannot install: {err.strerror or err}") from None


def main(argv: list[str] | None = None) -> int:
    parser = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("profile_dir", type=Path, help="the profile's generated folder, e.g. generated/dsv41-4spark")
    parser.add_argument("dest", type=Path, help="a new folder to install into")
    args = parser.parse_args(argv)
    try:
        files = install_files(args.profile_dir)
        write(args.dest, files)
    except InstallError as err:
        print(f"install.py: nothing installed: {err}", file=sys.stderr)
        return 1
    print(f"installed {args.profile_dir} into {args.dest}: {len(files)} files, each with its manifest's sha256; "
          f"next: {args.dest / FLEET / 'launch.sh'} --dry-run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
