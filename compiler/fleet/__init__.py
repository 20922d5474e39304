"""The fleet's operations folder: the data the static scripts read (data), what each node must show when audited
(audit_plan) and the comparison itself (audit, standard library only: it also runs on the nodes), and the
scripts and watchdog units (scripts). Imports common/, stages/ and capacity/."""
