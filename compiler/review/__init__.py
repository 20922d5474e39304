"""Reviewing a change: the diff of two profiles and of their rendered files (diff, artifact_diff, diff_format,
diff_sources, diff_stale), the release history of extends chains (history) and the static HTML review page
(page, page_values, page_fleet). Imports everything up to the pipeline, and fleet/'s data."""
