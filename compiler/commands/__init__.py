"""commands: TODO."""
