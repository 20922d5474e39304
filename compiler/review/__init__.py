"""review: TODO."""
