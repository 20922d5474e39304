"""engine: TODO."""
