"""targets: TODO."""
