"""fleet: TODO."""
