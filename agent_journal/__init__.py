"""agent-journal: an append-only, mergeable event journal for AI coding agents.

Kept import-light on purpose: the hook and write commands import this package
on every agent tool call, so nothing here may pull in heavy modules.
"""

__version__ = "0.1.0"

# The core reads a tool call's name through its tool vocabulary; every agent's names go
# into it here, before anything of the core can ask (capture/tool_vocabulary.py).
from agent_journal.capture import tool_vocabulary as _tool_vocabulary  # noqa: E402, F401
