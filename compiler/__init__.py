"""spark-compile: typed fleet profiles compiled into per-rank SGLang launch artifacts."""

__version__ = "0.1.0"
