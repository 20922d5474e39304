"""Stage: `spark-compile import` — an existing deployment (docker run line, sparkrun recipe, traced launcher)
becomes a minimal profile, with every value's source line and every setting that does not map reported."""
