#!/usr/bin/env bash
# Set up everything the test suite needs on a fresh machine of this project's kind, then run it.
#   bash tests/run.sh [pytest args...]
# Creates .venv (the compiler and its dev tools) and .venv-engine (SGLang 0.5.23, CPU-only, for the
# engine-parser, catalog and overlay tests), sparkrun 0.4.2 in .cache/sparkrun-0.4.2 (the import/export tests'
# oracle), installs the system tools the artifact tests use
# (shellcheck, the docker CLI, systemd-analyze) and the fleet test's (openssh-server, iproute2), then
# runs pytest. Exits with pytest's status. Needs root for the apt installs and the network namespaces.
set -euo pipefail
cd "$(dirname "$0")/.."

# The engine venv and sparkrun's (pip, mostly waiting on downloads) are built while the compiler's venv and
# the system tools (apt) install, so on a fresh machine their downloads overlap instead of queueing.
bash .ci/install-engine "$PWD/.venv-engine" &
engine=$!
bash .ci/install-sparkrun "$PWD/.cache/sparkrun-0.4.2" &
sparkrun=$!
trap 'kill "$engine" "$sparkrun" 2>/dev/null || true' EXIT  # a failed step: the background installs get SIGTERM
if [[ ! -x .venv/bin/python ]]; then
  python3 -m venv .venv
fi
.venv/bin/pip install -q --disable-pip-version-check -e '.[dev]' --config-settings editable_mode=strict
bash .ci/install-tools "$PWD/.venv"
bash .ci/setup-fleet
wait "$engine" || { echo "tests/run.sh: .ci/install-engine failed" >&2; exit 1; }
wait "$sparkrun" || { echo "tests/run.sh: .ci/install-sparkrun failed" >&2; exit 1; }
trap - EXIT
export ENGINE_PYTHON="$PWD/.venv-engine/bin/python"
export PATH="$PWD/.venv/bin:$PATH"

# One worker per core, each taking whole files (--dist loadfile): a module's fixtures (the fleet bed, one
# Chromium) stay in one process and its tests keep their file order. The slowest 20 are printed at the end.
exec .venv/bin/python -m pytest -n auto --dist loadfile --durations=20 "$@"
