"""``python -m spark_overlay ...`` / ``python -m spark_compile.overlay ...``: see cli.py."""

from __future__ import annotations

import sys

from .cli import main

sys.exit(main())
