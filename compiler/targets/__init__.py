"""The targets beyond the per-rank systemd/docker files stages/render writes: the Kubernetes LeaderWorkerSet
(k8s, k8s_render, and k8s_check, what its rules verify on the manifest) and the sparkrun recipe export
(sparkrun). Imports common/, stages/ and importer/ (sparkrun's facts)."""
