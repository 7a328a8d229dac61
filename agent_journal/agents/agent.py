"""The agents that write to us through hooks, each one record of what differs.

An agent is: the name its commands carry (`hook NAME`, `hooks install NAME`), what its hook
payloads call things and how a call's end is read (`payloads`, a capture.hook_payload
HookFormat), the hook events installed and how each handler is written (timeouts, which run
in the background, extra keys), its hooks file at each scope, and what its hook does beyond
journaling the payload (`more`: observations the payload implies; `settle`: work after it
is journaled). One generic hook (agents/hook.py), one installer (agents/hook_install.py)
and doctor serve every agent through its record; a new agent is one capture module, one
record module here (named in AGENTS) and their tests.

Invariant: a record is data and small functions; importing one costs the hook no more than
its capture module (this module imports nothing of the package).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from agent_journal.capture.hook_payload import HookFormat
    from agent_journal.storage.workspace import Workspace

# Each agent by the name its commands carry, and the module of agents/ holding its record.
AGENTS = {"claude-code": "claude_code", "codex": "codex"}


class Target:
    """One hooks file: where it is, the folder it must stay inside, and who shares it."""

    def __init__(self, path: str, boundary: str | None, shared: bool) -> None:
        self.path = path
        self.boundary = boundary  # the project folder, None for a user-level file
        self.shared = shared      # committed to the project: seen by every teammate


class Agent:
    """What one agent does differently from the others; see the module's docstring."""

    def __init__(self, *, name: str, payloads: HookFormat, events: tuple[str, ...],
                 scopes: tuple[str, ...], settings: Callable[[str, str | None], Target],
                 timeouts: dict[str, int] | None = None, default_timeout: int = 30,
                 background: frozenset[str] = frozenset(),
                 extra_keys: dict[str, dict[str, Any]] | None = None,
                 allowed_top: tuple[str, ...] | None = None,
                 new_file: dict[str, Any] | None = None,
                 more: Callable[[dict[str, Any], Any], list[dict[str, Any]]] | None = None,
                 settle: Callable[[Workspace, dict[str, Any], Any], None] | None = None,
                 exec_form: bool = False,
                 pending: Callable[[str], str] | None = None) -> None:
        self.name = name
        self.payloads = payloads
        self.events = events            # the hook events installed, in the order written
        self.scopes = scopes            # where its hooks file may be, the first the default
        self.settings = settings        # (scope, project folder) -> its hooks file there
        self.timeouts = timeouts or {}  # seconds, by event; default_timeout for the others
        self.default_timeout = default_timeout
        self.background = background    # events whose handler runs without holding the agent
        self.extra_keys = extra_keys or {}  # further keys of an event's handler
        self.allowed_top = allowed_top  # the keys its hooks file may hold at its top level
        self.new_file = new_file or {}  # what a hooks file the install creates starts as
        # (payload, redactor) -> redacted observations the payload implies, each with
        # its own eventId, journaled with it unless a tombstone names them
        self.more = more
        # (workspace, payload, redactor), after the payload is journaled and before a
        # SessionStart context is built (a failure of it at SessionStart is logged and the
        # context still printed)
        self.settle = settle
        # Whether its hooks file runs a handler in exec form (`command` the executable,
        # `args` its arguments: no shell is started) rather than as a shell command line.
        self.exec_form = exec_form
        # (scope) -> what the user must still do before hooks just written run, said by
        # the install (an agent that runs only the hooks the user trusted)
        self.pending = pending

    def handler(self, event: str, words: list[str]) -> dict[str, Any]:
        """The handler its hooks file holds for `event`, running the command `words`."""
        found: dict[str, Any] = {"type": "command"}
        if self.exec_form:
            found.update(command=words[0], args=words[1:])
        else:
            import shlex

            found["command"] = shlex.join(words)
        found["timeout"] = self.timeouts.get(event, self.default_timeout)
        if event in self.background:
            found["async"] = True
        found.update(self.extra_keys.get(event, {}))
        return found

    def handlers(self, words: list[str]) -> dict[str, dict[str, Any]]:
        return {event: self.handler(event, words) for event in self.events}

    def ours(self, handler: Any) -> bool:
        """An agent-journal hook handler for this agent, whichever installation or
        workspace."""
        from agent_journal.agents.hook_command import is_ours_for

        return is_ours_for(self.name, handler)

    def empty(self, settings: dict[str, Any]) -> bool:
        """True when what is left of the file is only what install itself put in it."""
        return all(settings.get(k) == v for k, v in self.new_file.items()) and \
            set(settings) <= set(self.new_file)


def agent(name: str) -> Agent:
    """The record of the agent named `name` (a KeyError for one AGENTS does not name)."""
    module = __import__(f"agent_journal.agents.{AGENTS[name]}", fromlist=["AGENT"])
    return module.AGENT  # type: ignore[no-any-return]


def every_agent() -> list[Agent]:
    return [agent(name) for name in AGENTS]
