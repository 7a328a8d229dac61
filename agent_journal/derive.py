"""Derivation: events in, what they mean out. Pure; no I/O.

Invariants:
- The result is a function of the *set* of events: any order of the same
  events derives the same state (everything is folded in `Event.sort_key`
  order, and every tie is settled by event id).
- A tombstoned id is invisible: no derived view lists it as an entry or
  observation, whatever else is known about it. It also takes no part in
  deriving anything else (its dependsOn edges and its invalidations are
  ignored): its bytes may already be erased on one replica and present on
  another, and what every reader derives must not depend on which.
- An invalidated entry stays visible with `outcome: invalidated`; every entry
  that depends on it, transitively, is `suppressed`. Neither is live.
- Nothing derived here is stored: read paths call `derive` every time.
"""

from __future__ import annotations

from collections.abc import Iterable

from agent_journal.model import (
    ENTRY,
    INVALIDATION,
    KNOWN_TYPES,
    OBSERVATION,
    TOMBSTONE,
    Event,
)

TYPE_CHECKING = False  # `typing` costs ~5 ms to import; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any

LIVE = "live"
INVALIDATED = "invalidated"
SUPPRESSED = "suppressed"

OBSERVATION_FIELDS = ("tool", "callId", "input", "output", "status", "exitCode",
                      "durationMs", "artifact")


class Derived:
    """Everything the read commands need, derived from one set of events."""

    def __init__(self) -> None:
        # entry id -> the winning record event (earliest sort_key)
        self.entry_events: dict[str, Event] = {}
        # entry id -> event ids of other records of the same id (merge conflicts)
        self.conflicts: dict[str, list[str]] = {}
        # observation id -> its events, in sort_key order
        self.observation_events: dict[str, list[Event]] = {}
        # target id -> invalidation events, in sort_key order
        self.invalidations: dict[str, list[Event]] = {}
        # target id -> tombstone events, in sort_key order
        self.tombstones: dict[str, list[Event]] = {}
        self.unclassified: list[Event] = []
        # entry id -> outcome and, for suppressed entries, the invalidated roots
        self.outcome: dict[str, str] = {}
        self.suppressed_through: dict[str, list[str]] = {}
        self.event_count = 0

    # -- questions every read path asks -------------------------------------------------

    def is_tombstoned(self, some_id: str) -> bool:
        return some_id in self.tombstones

    def is_live(self, entry_id: str) -> bool:
        return (entry_id in self.entry_events and not self.is_tombstoned(entry_id)
                and self.outcome.get(entry_id) == LIVE)

    def visible_entry_ids(self) -> list[str]:
        """Entry ids a reader may see, in (ts, id) order."""
        ids = [i for i in self.entry_events if not self.is_tombstoned(i)]
        return sorted(ids, key=lambda i: (self.entry_events[i].ts, i))

    def visible_observation_ids(self) -> list[str]:
        ids = [i for i in self.observation_events if not self.is_tombstoned(i)]
        return sorted(ids, key=lambda i: (self.observation_events[i][0].ts, i))

    def holds(self, some_id: str) -> bool:
        """True when an entry or observation with this id is present (tombstoned or not)."""
        return some_id in self.entry_events or some_id in self.observation_events

    # -- views ---------------------------------------------------------------------------

    def entry_view(self, entry_id: str) -> dict[str, Any]:
        ev = self.entry_events[entry_id]
        data = ev.data
        outcome = self.outcome.get(entry_id, LIVE)
        invalidation = None
        if outcome == INVALIDATED:
            first = self.invalidations[entry_id][0]
            invalidation = {"reason": first.data.get("reason"), "author": first.author,
                            "ts": first.ts}
        return {
            "type": ENTRY,
            "id": entry_id,
            "kind": ev.kind,
            "fields": data.get("fields", {}),
            "subject": data.get("subject"),
            "anchors": list(data.get("anchors", [])),
            "dependsOn": list(data.get("dependsOn", [])),
            "author": ev.author,
            "session": ev.session,
            "ts": ev.ts,
            "eventId": ev.event_id,
            "live": outcome == LIVE,
            "outcome": outcome,
            "invalidation": invalidation,
            "suppressedThrough": list(self.suppressed_through.get(entry_id, [])),
            "conflicts": list(self.conflicts.get(entry_id, [])),
        }

    def observation_view(self, obs_id: str) -> dict[str, Any]:
        events = self.observation_events[obs_id]
        folded: dict[str, Any] = {name: None for name in OBSERVATION_FIELDS}
        for ev in events:
            for name in OBSERVATION_FIELDS:
                value = ev.data.get(name)
                if value is not None:
                    folded[name] = value
        first, last = events[0], events[-1]
        # The latest event's status wins even when it is the only field it carries.
        folded["status"] = last.data.get("status") or folded["status"]
        view: dict[str, Any] = {
            "type": OBSERVATION,
            "id": obs_id,
            "kind": first.kind,
        }
        view.update(folded)
        view.update({
            "author": first.author,
            "session": first.session,
            "ts": first.ts,
            "lastTs": last.ts,
            "eventIds": [e.event_id for e in events],
        })
        return view


def derive(events: Iterable[Event]) -> Derived:
    d = Derived()
    ordered = sorted(events, key=lambda e: e.sort_key)
    d.event_count = len(ordered)
    for ev in ordered:
        t = ev.type
        if t == ENTRY:
            assert ev.id is not None
            if ev.id in d.entry_events:
                d.conflicts.setdefault(ev.id, []).append(ev.event_id)
            else:
                d.entry_events[ev.id] = ev
        elif t == OBSERVATION:
            assert ev.id is not None
            d.observation_events.setdefault(ev.id, []).append(ev)
        elif t == INVALIDATION:
            assert ev.id is not None
            d.invalidations.setdefault(ev.id, []).append(ev)
        elif t == TOMBSTONE:
            assert ev.id is not None
            d.tombstones.setdefault(ev.id, []).append(ev)
        elif t not in KNOWN_TYPES:
            d.unclassified.append(ev)
    _derive_outcomes(d)
    return d


def _derive_outcomes(d: Derived) -> None:
    """Invalidation closure over dependsOn edges (cycles allowed).

    Tombstoned entries are left out of the closure, as roots and as links:
    compaction and merge may erase their bytes on one replica before another,
    so counting them would make liveness depend on which replica is asked.
    """
    tombstoned = d.tombstones
    dependents: dict[str, list[str]] = {}
    for entry_id, ev in d.entry_events.items():
        if entry_id in tombstoned:
            continue
        for dep in ev.data.get("dependsOn", []):
            dependents.setdefault(dep, []).append(entry_id)
    invalidated = sorted(i for i in d.invalidations
                         if i in d.entry_events and i not in tombstoned)
    through: dict[str, set[str]] = {}
    for root in invalidated:
        stack = list(dependents.get(root, []))
        seen: set[str] = set()
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            through.setdefault(current, set()).add(root)
            stack.extend(dependents.get(current, []))
    for entry_id in d.entry_events:
        if entry_id in d.invalidations:
            d.outcome[entry_id] = INVALIDATED
        elif entry_id in through:
            d.outcome[entry_id] = SUPPRESSED
            d.suppressed_through[entry_id] = sorted(through[entry_id])
        else:
            d.outcome[entry_id] = LIVE
