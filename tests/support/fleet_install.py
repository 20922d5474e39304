"""A compiled profile installed as an operator installs it: fleet_scripts/install.py PROFILE_DIR DEST."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPTS = "fleet_scripts"


def install(profile_dir: Path, dest: Path) -> Path:
    """``dest``, holding the profile's folder with the shared scripts in fleet/ (from the folder beside it)."""
    installer = profile_dir.parent / SCRIPTS / "install.py"
    proc = subprocess.run([sys.executable, str(installer), str(profile_dir), str(dest)], capture_output=True,
                          text=True, check=False, timeout=60)
    if proc.returncode != 0:
        raise RuntimeError(f"install.py {profile_dir} {dest}: exit {proc.returncode}\n{proc.stdout}{proc.stderr}")
    return dest


def installed_fleet(profile_dir: Path, dest: Path) -> Path:
    """The fleet/ folder of ``profile_dir`` installed into ``dest``: where launch.sh runs."""
    return install(profile_dir, dest) / "fleet"
