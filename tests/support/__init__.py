"""Test support: prove generated artifacts with the real tools (docker CLI, systemd, shellcheck, bash).

Import as ``from support.tools import ...`` (pytest puts tests/ on sys.path, as for ``conftest``); the
modules use relative imports, so ``tests.support.tools`` works too when the repo root is on sys.path.
CI installs the tools with ``.ci/install-tools [VENV]``.
"""
