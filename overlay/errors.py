"""The overlay's exceptions. Standard library only: imported at interpreter start."""

from __future__ import annotations


class OverlayError(Exception):
    """The overlay refuses to let this process run as configured."""


class OverlayConfigError(OverlayError):
    """A SPARK_* variable is unknown or malformed, or an enabled hook cannot be armed."""


class OverlayHookError(OverlayError, RuntimeError):
    """A hook failed on its target module.

    A RuntimeError and not an ImportError on purpose: code that imports optional modules under
    ``except ImportError`` must not swallow it and carry on with the stock, unpatched code.
    """
