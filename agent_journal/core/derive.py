"""Derivation: events in, what they mean out. Pure; no I/O.

Invariants:
- The result is a function of the *set* of events: any order of the same
  events derives the same state (everything is folded in `Event.sort_key`
  order, and every tie is settled by event id).
- A tombstoned id is invisible: no derived view lists it as an entry or
  observation, whatever else is known about it. In the dependency graph it
  counts only through the graph its tombstones carry, so erasing its bytes
  (compaction) or lacking them (a replica that never had them) changes
  nothing any reader derives.
- An invalidated entry stays visible with `outcome: invalidated`; every entry
  that depends on it, transitively, is `suppressed`. Neither is live.
- Nothing derived here is stored: read paths call `derive` every time.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable

from agent_journal.core.model import (
    CHECKPOINT,
    ENTRY,
    INVALIDATION,
    KNOWN_TYPES,
    OBSERVATION,
    TOMBSTONE,
    Event,
)
from agent_journal.core.observation_fold import latest_wins
from agent_journal.core.outcomes import INVALIDATED, LIVE, SUPPRESSED, outcome_of, reached_from

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any


OBSERVATION_FIELDS = ("tool", "callId", "input", "output", "status", "exitCode",
                      "durationMs", "artifact")
# An observation view's own fields, which no data key may overwrite.
_VIEW_HEADER = frozenset({"type", "id", "kind", "author", "session", "ts", "lastTs",
                          "eventIds"})
_NO_FIELDS = dict.fromkeys(OBSERVATION_FIELDS)


class Derived:
    """Everything the read commands need, derived from one set of events."""

    def __init__(self) -> None:
        # entry id -> the winning record event (earliest sort_key)
        self.entry_events: dict[str, Event] = {}
        # entry id -> event ids of other records of the same id (merge conflicts)
        self.conflicts: dict[str, list[str]] = {}
        # entry id -> those other records themselves, in sort_key order
        self.conflict_events: dict[str, list[Event]] = {}
        # observation id -> its events, in sort_key order
        self.observation_events: dict[str, list[Event]] = {}
        # target id -> invalidation events, in sort_key order
        self.invalidations: dict[str, list[Event]] = {}
        # target id -> tombstone events, in sort_key order
        self.tombstones: dict[str, list[Event]] = {}
        self.unclassified: list[Event] = []
        # checkpoint name -> its events, in sort_key order (the first is the one
        # a name means; others came from replicas that chose the same name)
        self.checkpoints: dict[str, list[Event]] = {}
        # entry id -> outcome and, for suppressed entries, the invalidated roots
        self.outcome: dict[str, str] = {}
        self.suppressed_through: dict[str, list[str]] = {}
        # The dependency graph the outcomes were folded from, over entry ids and
        # ids known only from a tombstone's kept graph: id -> ids it depends on,
        # the invalidated roots, and id -> the roots that reach it.
        self.depends: dict[str, list[str]] = {}
        self.roots: set[str] = set()
        self.reached: dict[str, set[str]] = {}
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
        # (ts, id) pairs sorted as they are: a key function called per id cost
        # a second on a million-event journal.
        tombstoned = self.tombstones
        keyed = [(evs[0].ts, i) for i, evs in self.observation_events.items()
                 if i not in tombstoned]
        keyed.sort()
        return [i for _, i in keyed]

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
        view = {
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
        if entry_id in self.conflict_events:
            # Only present when there are conflicts, so documents without any
            # stay byte for byte what they were.
            view["conflictVersions"] = self.conflict_versions(entry_id)
        return view

    def conflict_versions(self, entry_id: str) -> list[dict[str, Any]]:
        """The other records of an entry id (replicas that chose it independently):
        who wrote each, where, when, and what it said."""
        return [{"eventId": ev.event_id, "author": ev.author, "session": ev.session,
                 "replica": ev.replica, "ts": ev.ts, "kind": ev.kind,
                 "fields": ev.data.get("fields", {}), "subject": ev.data.get("subject"),
                 "anchors": list(ev.data.get("anchors", [])),
                 "dependsOn": list(ev.data.get("dependsOn", []))}
                for ev in self.conflict_events.get(entry_id, [])]

    def find_event(self, event_id: str) -> Event | None:
        """The event with this event id, unless it is about a tombstoned id."""
        groups: list[Any] = [self.observation_events, self.invalidations, self.tombstones,
                             self.checkpoints, self.conflict_events]
        for ev in self.entry_events.values():
            if ev.event_id == event_id:
                return None if self.is_tombstoned(str(ev.id)) else ev
        for group in groups:
            for subject, evs in group.items():
                for ev in evs:
                    if ev.event_id == event_id:
                        hidden = ev.type != TOMBSTONE and self.is_tombstoned(subject)
                        return None if hidden else ev
        for ev in self.unclassified:
            if ev.event_id == event_id:
                return ev
        return None

    def observation_view(self, obs_id: str) -> dict[str, Any]:
        events = self.observation_events[obs_id]
        if len(events) == 1:
            ev = events[0]
            data = ev.data
            if _VIEW_HEADER.isdisjoint(data) and None not in data.values():
                # The fold of one event with no null and no header key is its data
                # over the call's fields: built in one go (most views are this).
                return {"type": OBSERVATION, "id": obs_id, "kind": ev.kind, **_NO_FIELDS,
                        **data, "author": ev.author, "session": ev.session, "ts": ev.ts,
                        "lastTs": ev.ts, "eventIds": [ev.event_id]}
        # Every data key, not only the call's fields: what the session said (`text`) and
        # the context a hook or transcript gave (`hook`, `transcript`) are shown as stored.
        folded = latest_wins((ev.data for ev in events), dict.fromkeys(OBSERVATION_FIELDS),
                             skip=_VIEW_HEADER)
        first, last = events[0], events[-1]
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
    # The cyclic collector is paused: deriving from a large read builds a few
    # objects per event, and the collector's full passes over every event
    # already held would cost more than the derivation (nothing here forms a
    # cycle; reference counting frees it all).
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _derive(events)
    finally:
        if was_enabled:
            gc.enable()


def _derive(events: Iterable[Event]) -> Derived:
    d = Derived()
    # Group first and order within each group: sorting a million events as a
    # whole cost more than everything else a read does.
    entries: dict[str, list[Event]] = {}
    observations = d.observation_events
    invalidations = d.invalidations
    tombstones = d.tombstones
    count = 0
    for ev in events:
        count += 1
        t = ev.type
        if t == OBSERVATION:
            observations.setdefault(ev.id, []).append(ev)  # type: ignore[arg-type]
        elif t == ENTRY:
            entries.setdefault(ev.id, []).append(ev)  # type: ignore[arg-type]
        elif t == INVALIDATION:
            invalidations.setdefault(ev.id, []).append(ev)  # type: ignore[arg-type]
        elif t == TOMBSTONE:
            tombstones.setdefault(ev.id, []).append(ev)  # type: ignore[arg-type]
        elif t == CHECKPOINT:
            d.checkpoints.setdefault(ev.id, []).append(ev)  # type: ignore[arg-type]
        elif t not in KNOWN_TYPES:
            d.unclassified.append(ev)
    d.event_count = count
    # attrgetter is Event.sort_key without a Python call per event; imported here
    # because the write path imports this module and never derives.
    from operator import attrgetter

    key = attrgetter("ts", "event_id")
    for group in (observations, invalidations, tombstones, d.checkpoints):
        for evs in group.values():
            if len(evs) == 2:
                # Most observations are a started and a finished event, usually
                # already in order: compare rather than sort.
                a, b = evs
                if a.ts > b.ts or (a.ts == b.ts and a.event_id > b.event_id):
                    evs.reverse()
            elif len(evs) > 2:
                evs.sort(key=key)
    for entry_id, evs in entries.items():
        if len(evs) > 1:
            evs.sort(key=key)
            d.conflicts[entry_id] = [e.event_id for e in evs[1:]]
            d.conflict_events[entry_id] = evs[1:]
        d.entry_events[entry_id] = evs[0]
    d.unclassified.sort(key=key)
    _derive_outcomes(d)
    return d


def tombstone_graph(ev: Event) -> tuple[list[str], bool] | None:
    """The graph a tombstone carries for its target (written with it), if well-formed."""
    graph = ev.data.get("graph")
    if not isinstance(graph, dict):
        return None
    deps = graph.get("dependsOn", [])
    invalidated = graph.get("invalidated", False)
    if not isinstance(deps, list) or not all(isinstance(x, str) for x in deps) \
            or not isinstance(invalidated, bool):
        return None
    return deps, invalidated


def _derive_outcomes(d: Derived) -> None:
    """Invalidation closure over dependsOn edges (cycles allowed).

    A tombstoned entry takes part only through the graph its tombstones carry
    (`data.graph`: its dependsOn edges and whether it was invalidated, copied
    when the tombstone was written), never through its own record or
    invalidations: compaction erases those on one replica while another still
    holds them, and a merge never brings them back, so reading them would make
    an outcome depend on which replica is asked. The graph travels with the
    tombstone, so every replica that has the tombstone derives the same.
    """
    tombstoned = d.tombstones
    depends: dict[str, list[str]] = {}
    for entry_id, ev in d.entry_events.items():
        if entry_id not in tombstoned:
            depends[entry_id] = list(ev.data.get("dependsOn", []))
    roots = {i for i in d.invalidations if i in d.entry_events and i not in tombstoned}
    for target, tombs in tombstoned.items():
        for tomb in tombs:
            kept = tombstone_graph(tomb)
            if kept is None:
                continue
            edges = depends.setdefault(target, [])
            edges.extend(x for x in kept[0] if x not in edges)
            if kept[1]:
                roots.add(target)
    through = reached_from(depends, roots)
    d.depends, d.roots, d.reached = depends, roots, through
    for entry_id in d.entry_events:
        d.outcome[entry_id] = outcome_of(entry_id, d.invalidations, through)
        if d.outcome[entry_id] == SUPPRESSED:
            # A tombstoned root is still why this entry is suppressed, but its id
            # must not be shown anywhere.
            d.suppressed_through[entry_id] = sorted(
                r for r in through[entry_id] if r not in d.tombstones
            )
