"""agent-journal: an append-only, mergeable event journal for AI coding agents.

Kept import-light on purpose: the hook and write commands import this package
on every agent tool call, so nothing here may pull in heavy modules.
"""

__version__ = "0.1.0"
