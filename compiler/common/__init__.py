"""What every part of the compiler shares: the one exception base and the exit codes (errors), findings with
their source positions (findings), quoting for each consumer of a generated value (quoting), the redaction
every printed line passes through (secrets), the colour of findings and verdicts on a terminal (colour), and
the Engram row arithmetic shared with the shipped engram.py (engram_rows, standard library only). It imports
nothing else of the compiler: spec/ and overlay/ only."""
