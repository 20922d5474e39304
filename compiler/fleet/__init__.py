"""fleet: what the fleet's operation scripts read and run, from the plan. `data` writes each profile's fleet.env
and fleet.json, `audit_plan` its audit.json, `scripts` the profile's fleet/ folder and the one shared
fleet_scripts/ folder: templates/fleet/'s static scripts with `audit` (the comparison) and common's
`engram_rows`, shipped as they are. It may import stages/, common/, capacity/, spec/ and overlay/.
"""
