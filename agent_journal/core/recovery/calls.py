"""One observation's events folded into a `Call`, the unit every derivation reads.

Invariant: `fold` is the fold `Derived.observation_view` does (`latest_wins` of
`core/observation_fold.py`: the latest event that says anything wins), applied to
`facts.event_facts` of each event;
`call_from_view` gives the same Call from a view of the whole observation. A tool call
failed when its status or exit code says so, or when its command ran an HTTP client that
printed an error answer (`httpError`, core/recovery/http_errors.py) and exited 0, or when
its exit status was its pipe's and its runner printed that it failed (`failedLine`,
core/recovery/exit_lines.py).
"""

from __future__ import annotations

from operator import attrgetter

from agent_journal.core.observation_fold import latest_wins
from agent_journal.core.recovery.facts import FAILED_STATUSES, TOOL_CALL, event_facts
from agent_journal.core.recovery.record import Record
from agent_journal.core.recovery.run_summary import RunSummary

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

STARTED = "started"
FAILED = "failed"
OK = "ok"
_UNSET = object()
_ORDER = attrgetter("ts", "id")


class Call(Record):
    """An observation as the recovery derivations see it (a tool call, or something said)."""

    __slots__ = ("id", "kind", "session", "ts", "last_ts", "facts", "_state", "_run")
    DEFAULTS = {"facts": dict}

    def __init__(self, id: str, kind: str, session: str | None, ts: str, last_ts: str,
                 facts: dict[str, Any] | None = None) -> None:
        # Written out: a journal folds into a Call per observation, and the generic
        # Record.__init__ costs several times this.
        self.id = id
        self.kind = kind
        self.session = session
        self.ts = ts
        self.last_ts = last_ts
        self.facts = facts = {} if facts is None else facts
        # What the status says, decided once: every derivation asks.
        state = None
        if kind == TOOL_CALL:
            status, exit_code = facts.get("status"), facts.get("exit")
            if status == STARTED:
                state = STARTED
            elif status in FAILED_STATUSES or (isinstance(exit_code, int) and exit_code != 0):
                state = FAILED
            elif "httpError" in facts and _http_client(facts.get("target")):
                # `curl -s` exits 0 on an error answer: the call failed all the same.
                state = FAILED
                facts.setdefault("reason", facts["httpError"])
            elif "failedLine" in facts and facts.get("piped") and "check" not in facts:
                # `pnpm test | tail` exits with tail's 0; pnpm said it failed.
                state = FAILED
                facts.setdefault("reason", facts["failedReason"])
            else:
                state = OK
        self._state = state
        self._run: Any = _UNSET

    id: str
    kind: str
    session: str | None
    ts: str
    last_ts: str
    facts: dict[str, Any]

    def get(self, name: str) -> Any:
        return self.facts.get(name)

    @property
    def is_tool_call(self) -> bool:
        return self.kind == TOOL_CALL

    @property
    def tool(self) -> str | None:
        return self.facts.get("tool")

    @property
    def target(self) -> str | None:
        return self.facts.get("target")

    @property
    def status(self) -> str | None:
        return self.facts.get("status")

    @property
    def unfinished(self) -> bool:
        return self._state == STARTED

    @property
    def failed(self) -> bool:
        return self._state == FAILED

    @property
    def succeeded(self) -> bool:
        return self._state == OK

    @property
    def masked(self) -> bool:
        """Whether its verdict is unknown: it printed something, no runner summary, and
        its exit status was its pipe's last command's (shell_words.piped)."""
        facts = self.facts
        return bool(facts.get("piped") and facts.get("printed")) and "check" not in facts

    @property
    def check(self) -> RunSummary | None:
        if self._run is _UNSET:
            raw = self.facts.get("check")
            self._run = RunSummary.from_dict(raw) if isinstance(raw, dict) else None
        return self._run  # type: ignore[no-any-return]

    def fields(self) -> tuple[Any, ...]:
        return (self.id, self.kind, self.session, self.ts, self.last_ts, self.facts)

    @property
    def said(self) -> str | None:
        return self.facts.get("said")

    @property
    def text(self) -> str | None:
        return self.facts.get("text")

    def key(self) -> tuple[str | None, str | None]:
        """What makes two calls "the same call": the tool and what it acted on."""
        return (self.tool, self.target)


def fold(obs_id: str, kind: str, session: str | None, timed: Iterable[tuple[str, Any]]
         ) -> Call:
    """A Call from an observation's (ts, facts-or-None) pairs, in event order."""
    parts: list[dict[str, Any] | None] = []
    first = last = ""
    for ts, event in timed:
        if not first:
            first = ts
        last = ts
        parts.append(event)
    facts = latest_wins(parts, no_nulls=True)  # event_facts never holds a None value
    return Call(obs_id, kind, session, first, last, facts)


def call_from_view(view: dict[str, Any]) -> Call:
    """A Call from a `Derived.observation_view` dict."""
    facts = event_facts(view["kind"], view) or {}
    return Call(view["id"], view["kind"], view.get("session"), view["ts"],
                view.get("lastTs") or view["ts"], facts)


class Ordered(list):  # type: ignore[type-arg]
    """A list of calls already in (ts, id) order: `ordered` hands it back as it is, so
    the digest's derivations, each of which asks for the order, sort the calls once."""


def ordered(calls: Iterable[Call]) -> list[Call]:
    """Calls in (ts, id) order: the one order every derivation reads them in."""
    if isinstance(calls, Ordered):
        return calls
    return Ordered(sorted(calls, key=_ORDER))


def _http_client(target: Any) -> bool:
    from agent_journal.core.recovery.http_errors import runs_http_client

    return isinstance(target, str) and runs_http_client(target)
