"""SC23x: secrets by reference (see issue on releases)."""
