"""capacity: TODO."""
