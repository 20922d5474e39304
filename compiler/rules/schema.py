"""SC1xx: the file and the schema. Raised by the loader and by model validation, documented here."""

from __future__ import annotations

from spark_compile.rules.registry import define

define("SC101", "error", "unknown key",
       "Every section is closed: a key the schema does not know is a typo or belongs elsewhere. "
       "The message suggests the closest known key.",
       "engine:\n  prot: 8210", "engine:\n  port: 8210")
define("SC102", "error", "value of the wrong type",
       "The value does not have the type the key takes (a number, a string, true/false, a list, a mapping).",
       "engine:\n  port: eighty", "engine:\n  port: 8210")
define("SC103", "error", "required key missing",
       "The key has no default and must be written in the profile (or in a profile it extends).",
       "fleet:\n  nodes:\n    - {name: spark-0}",
       "fleet:\n  nodes:\n    - {name: spark-0, fabric_ip: 192.0.2.11, ssh: spark@192.0.2.11, home: /home/spark}")
define("SC104", "error", "duplicate key",
       "PyYAML keeps the last of two equal keys without a word; spark-compile refuses the file.",
       "engine:\n  port: 8210\n  port: 8888", "engine:\n  port: 8210")
define("SC105", "error", "YAML syntax",
       "The file is not valid YAML, or uses a YAML feature profiles do not take (merge keys, custom tags).",
       "engine: {port: 8210", "engine: {port: 8210}")
define("SC106", "error", "not a mapping",
       "A profile is one YAML mapping at the top level.", "- name: dsv41", "name: dsv41")
define("SC107", "error", "not UTF-8", "Profiles are UTF-8 text.", "(a Latin-1 file)", "(the same file saved as UTF-8)")
define("SC108", "error", "file too large or too deep",
       "A profile over 1 MiB, or whose anchors and aliases expand past 100,000 values, is refused "
       "before it can exhaust memory.", "a: &a [*b, *b, *b ...]", "(write values out, or use extends:)")
define("SC109", "error", "value out of range",
       "A number outside the range its key allows (ports 1-65535, reasoning effort 1-100, ...), or a list "
       "shorter than required.", "engine:\n  chat: {reasoning_effort: 101}", "engine:\n  chat: {reasoning_effort: 100}")
define("SC110", "error", "value not among the choices",
       "The key takes one of a fixed set of values; the message lists them.",
       "nccl:\n  preset: trimmed", "nccl:\n  preset: trim")
define("SC111", "error", "badly formed value",
       "The value has the right type but not the right form: an IPv4 address, a CIDR subnet, a size such "
       "as 112g, a name usable in paths, an absolute path, an image reference, an environment name.",
       "container:\n  memory: 112q", "container:\n  memory: 112g")
define("SC112", "error", "broken extends chain",
       "extends: names a missing file, an absolute path, or closes a cycle.",
       "extends: ./missing.yaml", "extends: base.yaml")
define("SC113", "error", "hidden or control character",
       "A control character in a value (NUL, escape, ...) reaches no consumer intact, and a line or paragraph "
       "separator (U+2028, U+2029, U+0085) is a line break to YAML but not to editors, grep or git diff: a key "
       "after one hides in what looks like a comment.",
       'port: 8210  # API port\u2029  host: 127.0.0.1', "port: 8210  # API port\nhost: 127.0.0.1")
define("SC114", "error", "YAML 1.1 number form",
       "YAML 1.1 reads 017 as octal 15, 8_210 as 8210 and 5:35:0 as base 60; a profile refuses these forms "
       "instead of converting them. Write plain decimal, or quote the value to mean text.",
       "engine:\n  port: 017", "engine:\n  port: 17")
