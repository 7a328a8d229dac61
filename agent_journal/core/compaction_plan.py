"""Compaction planning: which events a compaction removes, and why. Pure; no I/O.

Invariants:
- A plan is a function of the events read, the clock reading and the two
  TTLs; nothing here touches a file, so a dry run and `--apply` see the same plan.
- Removed: every entry, observation and invalidation event about an id a
  tombstone names, and the events of entries and observations past their own
  axis's TTL. Tombstones and events of unknown types are never removed.
- Tombstone suppression is decided before pins: a tombstoned observation goes
  even when a live entry cites it. Only live entries that survive the run pin.
- The run never changes what a surviving entry derives. An invalidated or
  suppressed entry that a surviving entry still depends on is held back from
  expiry; a tombstoned entry counts in derivation only through the graph its
  tombstone carried from the start (derive.py), so erasing it changes nothing.
- A tombstone is marked purged only when this run removes its target's bytes.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from agent_journal.core import clock
from agent_journal.core.derive import Derived, derive
from agent_journal.core.errors import UsageError
from agent_journal.core.model import (
    ENTRY,
    INVALIDATION,
    KNOWN_TYPES,
    OBSERVATION,
    Event,
    anchor_ref,
)
from agent_journal.core.observation_ages import AgeFold, all_canonical, summarize

TOMBSTONED = "tombstoned"
EXPIRED = "expired"


class CompactionPlan:
    """What one compaction run removes and rewrites, and the report it gives."""

    def __init__(self, entry_ttl_days: int | None, observation_ttl_days: int | None) -> None:
        self.entry_ttl_days = entry_ttl_days
        self.observation_ttl_days = observation_ttl_days
        # Report lists, already in report order.
        self.expired: list[str] = []
        self.tombstoned: list[str] = []
        self.pinned: list[str] = []
        self.downgraded: list[str] = []
        self.unclassified: list[str] = []
        # event id -> the id (entry/observation) whose removal deletes it;
        # see `deletions`
        self._deletions: dict[str, str] = {}
        # The expired observations' first events, whose entries in `deletions`
        # are made only when it is read (a dry run never reads it, and at a
        # million expired ids it is most of the plan)
        self._unread: _Unread | None = None
        self._expired_ids: set[str] = set()  # the observation ids expired
        # removed id -> why (TOMBSTONED or EXPIRED), but for the expired
        # observations until `reasons` is read (a dry run never reads it)
        self._reasons: dict[str, str] = {}
        self._expired_reasons = False  # the expired observations are in _reasons
        # live entry id -> the removed ids its anchors cite
        self.citations: dict[str, list[str]] = {}
        # tombstone event id -> its current event (every tombstone the run rewrites)
        self.tombstone_events: dict[str, Event] = {}
        # tombstone event id -> event ids that must all be gone before it reads purged
        self.flips: dict[str, tuple[str, ...]] = {}
        # entries due on their TTL but kept because a survivor still derives through them
        self.held: list[str] = []
        # every id some tombstone read names
        self.tombstone_targets: set[str] = set()

    def unaffected_by(self, events: Iterable[Event | None]) -> bool:
        """Whether events appended after the read leave this plan exactly as it is.

        True only for plain appends: observations, and entries records, about
        ids the plan neither removes nor finds tombstoned, citing (`tool_use:`)
        and depending on nothing it removes. Such an event cannot make an item
        due or not due, pin, hold back, or add content a tombstone names. Any
        other event (a tombstone, an invalidation, an unknown type, a row that
        did not decode: None) could, and makes the caller leave its segment.
        """
        removed, targets = self.reasons, self.tombstone_targets
        for ev in events:
            if ev is None or ev.id is None or ev.id in removed or ev.id in targets:
                return False
            if ev.type == OBSERVATION:
                continue
            if ev.type != ENTRY:
                return False
            data = ev.data
            deps = data.get("dependsOn") or []
            anchors = data.get("anchors") or []
            if not isinstance(deps, list) or not isinstance(anchors, list):
                return False
            if any(not isinstance(d, str) or d in removed or d in targets for d in deps):
                return False
            for anchor in anchors:
                if not isinstance(anchor, str):
                    return False
                scheme, ref = anchor_ref(anchor)
                if scheme == "tool_use" and (ref in removed or ref in targets):
                    return False
        return True

    @property
    def deletions(self) -> dict[str, str]:
        """event id -> the id (entry or observation) whose removal deletes it"""
        if self._unread is not None:
            first, expired = self._unread
            self._unread = None
            self._deletions.update({first[o].event_id: o for o in expired & first.keys()})
        return self._deletions

    def _remove(self, item: str, events: Iterable[Event], reason: str) -> None:
        for ev in events:
            self._deletions[ev.event_id] = item
        self._reasons[item] = reason

    @property
    def reasons(self) -> dict[str, str]:
        """removed id -> why (TOMBSTONED or EXPIRED)"""
        if not self._expired_reasons:
            self._expired_reasons = True
            self._reasons.update(dict.fromkeys(self._expired_ids, EXPIRED))
        return self._reasons

    @property
    def expired_observations(self) -> set[str]:
        """The observation ids this run expires (their TTL, and no live citation)."""
        return self._expired_ids

    def delete_expired(self, events: Iterable[tuple[str, str]]) -> None:
        """Add to `deletions` these observation events, (event id, id) read after
        the plan was made from their ages alone, of the ids it expires."""
        expired, deletions = self._expired_ids, self.deletions
        for event_id, oid in events:
            if oid in expired:
                deletions[event_id] = oid

    @property
    def tombstones_marked_purged(self) -> list[str]:
        return sorted(self.flips)

    def rewritten(self, tomb_event_id: str) -> Event:
        """The tombstone as compaction writes it back: purged flipped, nothing else."""
        return self.tombstone_events[tomb_event_id].purged()

    def report(self, *, apply: bool, removed: set[str] | None = None,
               marked_purged: list[str] | None = None,
               skipped: list[str] | None = None) -> dict[str, Any]:
        """The JSON report. An applied run passes what it actually did.

        `removed`: ids of which at least one event was deleted; ids the run
        did not reach (their segment was skipped) drop out of the lists.
        """
        def done(ids: list[str]) -> list[str]:
            return ids if removed is None else [i for i in ids if i in removed]

        downgraded = self.downgraded
        if removed is not None:
            downgraded = [e for e in downgraded
                          if any(c in removed for c in self.citations.get(e, []))]
        report: dict[str, Any] = {
            "apply": apply,
            "entryTtlDays": self.entry_ttl_days,
            "observationTtlDays": self.observation_ttl_days,
            "expired": done(self.expired),
            "tombstoned": done(self.tombstoned),
            "pinned": list(self.pinned),
            "downgraded": downgraded,
            "unclassified": list(self.unclassified),
            "tombstonesMarkedPurged": (self.tombstones_marked_purged if marked_purged is None
                                       else sorted(marked_purged)),
        }
        if skipped:
            report["skipped"] = sorted(skipped)
        return report


def check_ttl(value: int | None, flag: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UsageError(f"{flag} takes a whole number of days, 0 or more, not {value!r}")
    return value


def _instant(ts: str, cache: dict[str, datetime | None]) -> datetime | None:
    if ts in cache:
        return cache[ts]
    try:
        value: datetime | None = clock.parse_instant(ts)
    except UsageError:
        value = None  # an unreadable time is never old enough to expire
    cache[ts] = value
    return value


class _Cutoff:
    """The latest instant an item may carry and be due, as an instant and as
    the canonical text of its millisecond (a stamp of whole milliseconds is at
    or before the instant exactly when its text sorts at or before that text)."""

    __slots__ = ("at", "now", "text", "cache")

    def __init__(self, now: datetime, at: datetime) -> None:
        self.now = now
        self.at = at
        utc = at if at.tzinfo is None else at.astimezone(UTC)
        self.text = (f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T{utc.hour:02d}:"
                     f"{utc.minute:02d}:{utc.second:02d}.{utc.microsecond // 1000:03d}Z")
        self.cache: dict[str, datetime | None] = {}

    def due(self, stamps: list[str]) -> bool:
        """Due when the latest stamp is at least the TTL old.

        A stamp in the future (clock skew between replicas) counts as now, so
        a 0-day window still makes it due and no other does.
        """
        if not stamps:
            return False
        if all_canonical(stamps):
            return max(stamps) <= self.text or self.now <= self.at
        latest: datetime | None = None
        for ts in stamps:
            at = _instant(ts, self.cache)
            if at is None:
                return False
            if latest is None or at > latest:
                latest = at
        assert latest is not None
        return min(latest, self.now) <= self.at

    def ok(self, ts: str) -> bool:
        """Whether one stamp is old enough: an item is due when it has stamps
        and every one of them is (so `due`, stamp by stamp)."""
        at = _instant(ts, self.cache)
        return at is not None and min(at, self.now) <= self.at

    def fold(self) -> AgeFold:
        """An empty fold of observation ages under this cutoff."""
        return AgeFold(self.text, self.now <= self.at, self.ok)


def _cutoff(now: datetime, days: int | None) -> _Cutoff | None:
    """None when nothing is due."""
    if days is None:
        return None
    try:
        return _Cutoff(now, now - timedelta(days=days))
    except OverflowError:
        return None  # a window longer than the calendar: nothing is that old


def observation_ages(now: datetime, observation_ttl_days: int | None) -> AgeFold | None:
    """The fold a read gives observation ages to, for a plan with this clock
    reading and TTL (`plan_compaction`'s `ages`); None when nothing is due."""
    cut = _cutoff(now, check_ttl(observation_ttl_days, "--observation-ttl-days"))
    return None if cut is None else cut.fold()


def plan_compaction(events: Iterable[Event], now: datetime, entry_ttl_days: int | None,
                    observation_ttl_days: int | None,
                    unfinished: Mapping[str, str] | None = None,
                    ages: AgeFold | None = None) -> CompactionPlan:
    """Plan one run.

    `unfinished`: tombstone event id -> target, the flips an interrupted
    `--apply` meant to make after removing those targets. Only compaction
    removes events, so a target that run saw here and that is now gone was
    removed by it: its tombstone is flipped now.

    `ages`: observation ages already folded (`observation_ages` with the same
    clock reading and TTL), of observations that need not be among `events`;
    the observations among `events` are folded in too. A plan from it is the
    plan from every observation's events, except that `deletions` holds only
    the events read here: `delete_expired` adds the others.
    """
    entry_ttl_days = check_ttl(entry_ttl_days, "--entry-ttl-days")
    observation_ttl_days = check_ttl(observation_ttl_days, "--observation-ttl-days")
    plan = CompactionPlan(entry_ttl_days, observation_ttl_days)
    events = events if isinstance(events, list) else list(events)
    journal = _Journal.of(events)
    plan.unclassified = sorted(set(journal.unclassified))
    # Observations take no part in liveness or the dependency graph, and they
    # are most of a journal: derive the rest only.
    d = derive(journal.others)
    fold = journal.gather_observations(events, _cutoff(now, observation_ttl_days), ages,
                                       d.tombstones)
    _remove_tombstoned(plan, d, journal)
    _resume_flips(plan, d, journal, unfinished or {})
    due_entries = _due_entries(plan, d, journal, _cutoff(now, entry_ttl_days))
    _expire(plan, d, journal, due_entries, fold)
    return plan


class _Journal:
    """The events a plan is made from, grouped by what they are about."""

    __slots__ = ("records", "invalidations", "observations", "others", "unclassified")

    def __init__(self) -> None:
        self.records: dict[str, list[Event]] = {}  # entry id -> its records
        self.invalidations: dict[str, list[Event]] = {}  # target -> its invalidations
        self.observations = _Observations()
        self.others: list[Event] = []  # every event but the observations
        self.unclassified: list[str] = []  # event ids of unknown types

    @classmethod
    def of(cls, events: list[Event]) -> _Journal:
        journal = cls()
        journal.others = [ev for ev in events if ev.type != OBSERVATION]
        records, invalidations = journal.records, journal.invalidations
        for ev in journal.others:
            t = ev.type
            if t == ENTRY:
                records.setdefault(str(ev.id), []).append(ev)
            elif t == INVALIDATION:
                invalidations.setdefault(str(ev.id), []).append(ev)
            elif t not in KNOWN_TYPES:
                journal.unclassified.append(ev.event_id)
        return journal

    def gather_observations(self, events: list[Event], cut: _Cutoff | None,
                            ages: AgeFold | None, tombstoned: Container[str]
                            ) -> AgeFold | None:
        """Group the observations a plan looks at, and fold their ages.

        Observations matter only as a tombstone's target, unless their TTL can
        expire them (`cut`): then their ages are folded (observation_ages.py)
        into `ages` (or a fold of their own), which is returned, and their
        events grouped by id (a dict build bound by memory) only as far as read.
        """
        observed = [ev for ev in events if ev.type == OBSERVATION]
        fold = None
        if cut is not None:
            fold = cut.fold() if ages is None else ages
            if (fold.text, fold.every) != (cut.text, cut.now <= cut.at):
                raise ValueError("observation ages folded under another cutoff")
            fold.add(summarize([ev.id for ev in observed], [ev.ts for ev in observed]))
        else:
            observed = [ev for ev in observed if ev.id in tombstoned]
        self.observations.extend(observed)
        return fold

    def about(self, target: str) -> list[Event]:
        """Every event about `target`: records, observations, invalidations."""
        return (self.records.get(target, []) + self.observations.get(target)
                + self.invalidations.get(target, []))


def _remove_tombstoned(plan: CompactionPlan, d: Derived, journal: _Journal) -> None:
    """Tombstones first: nothing pins or holds back what a tombstone names.

    One rule for every target: all its events go (records, observations,
    invalidations), and its tombstones are flipped once those are gone, unless
    only invalidations were here (the target itself never was). Targets are
    walked in the order their tombstones were read, the order they lie in memory.
    """
    deletions, reasons = plan._deletions, plan._reasons
    tombstone_events, flips = plan.tombstone_events, plan.flips
    tombstoned = d.tombstones
    plan.tombstone_targets = set(tombstoned)
    record_get, invalidation_get = journal.records.get, journal.invalidations.get
    first_get, more_get = journal.observations.first.get, journal.observations.more.get
    for target, tombs in tombstoned.items():
        recs = record_get(target)
        first_obs = first_get(target)
        invs = invalidation_get(target)
        about = [] if recs is None else list(recs)
        if first_obs is not None:
            about.append(first_obs)
            about += more_get(target, ())
        if invs is not None:
            about += invs
        if not about:
            continue  # nothing here: the tombstone keeps purged: false
        gone = tuple([ev.event_id for ev in about])
        deletions.update(dict.fromkeys(gone, target))
        reasons[target] = TOMBSTONED
        if recs is None and first_obs is None:
            continue  # only invalidations were here: the target itself never was
        for tomb in tombs:
            tombstone_events[tomb.event_id] = tomb
            if tomb.data.get("purged") is False:
                flips[tomb.event_id] = gone


def _resume_flips(plan: CompactionPlan, d: Derived, journal: _Journal,
                  unfinished: Mapping[str, str]) -> None:
    """The flips an interrupted run meant to make (see `plan_compaction`)."""
    if not unfinished:
        return
    tombstones_by_event = {t.event_id: t for ts in d.tombstones.values() for t in ts}
    for tomb_id, target in sorted(unfinished.items()):
        left_tomb = tombstones_by_event.get(tomb_id)
        if left_tomb is None or left_tomb.id != target or tomb_id in plan.flips \
                or left_tomb.data.get("purged") is not False:
            continue
        # The interrupted run saw the target here; whatever of it is left (an
        # invalidation in a segment it had not reached) goes in this run first.
        plan.tombstone_events[tomb_id] = left_tomb
        plan.flips[tomb_id] = tuple(ev.event_id for ev in journal.about(target))


def _due_entries(plan: CompactionPlan, d: Derived, journal: _Journal,
                 cut: _Cutoff | None) -> set[str]:
    """The entries this run expires: past their TTL (their records' and
    invalidations' latest stamp), untombstoned, and held back (`plan.held`)
    when not live and a surviving entry derives its outcome through them:
    the survivor would turn live once they are gone."""
    records, invalidations = journal.records, journal.invalidations
    due = set() if cut is None else {
        e for e, recs in records.items()
        if e not in d.tombstones
        and cut.due([ev.ts for ev in recs + invalidations.get(e, [])])
    }

    def not_live(node: str) -> bool:
        return node in d.roots or node in d.reached

    survivors = [e for e in records if e not in d.tombstones and e not in due]
    queue = [e for e in survivors if not_live(e)]
    seen = set(queue)
    held: set[str] = set()
    while queue:
        node = queue.pop()
        for dep in d.depends.get(node, []):
            if dep in seen or not not_live(dep):
                continue
            seen.add(dep)
            if dep in due:
                due.discard(dep)
                held.add(dep)
            queue.append(dep)
    plan.held = sorted(held)
    return due


def _expire(plan: CompactionPlan, d: Derived, journal: _Journal, due_entries: set[str],
            fold: AgeFold | None) -> None:
    """Remove the entries due and the observations due that no live survivor
    cites (those it cites are pinned), and write the report's lists."""
    first, more = journal.observations.first, journal.observations.more
    # Which of the removed ids so far (tombstones' targets), and of the entries
    # due, are observed too, asked before the fold is spent below.
    known: Container[str] = first if fold is None else _Either(first, fold)
    tombstoned_here = list(plan._reasons)  # only tombstones have removed anything so far
    plan.tombstoned = _report_order(tombstoned_here, known)
    observed_entries = {e for e in due_entries if e in known}
    due_obs: set[str] = set()
    if fold is not None:
        due_obs = fold.due()  # (the fold's own set, a million ids at times: changed in place)
        due_obs.difference_update(d.tombstones)

    live = sorted(e for e in journal.records if e not in d.tombstones
                  and e not in due_entries and d.is_live(e))
    cited = {ref for e in live for scheme, ref in map(anchor_ref, _anchors(d, e))
             if scheme == "tool_use"}
    plan.pinned = sorted(due_obs & cited)
    due_obs -= cited
    expired_obs = due_obs
    for e in due_entries:
        plan._remove(e, journal.records[e] + journal.invalidations.get(e, []), EXPIRED)
    plan._unread = _Unread(first, expired_obs)
    plan._expired_ids = expired_obs
    for o in expired_obs & more.keys():
        plan._remove(o, more[o], EXPIRED)

    for e in live:
        hits = sorted({ref for scheme, ref in map(anchor_ref, _anchors(d, e))
                       if scheme == "tool_use" and (ref in plan._reasons or ref in expired_obs)})
        if hits:
            plan.citations[e] = hits
    plan.expired = _report_order(due_entries, observed_entries, observed=expired_obs)
    plan.downgraded = sorted(plan.citations)


class _Either:
    """Membership in either of two containers."""

    __slots__ = ("one", "other")

    def __init__(self, one: Container[str], other: Container[str]) -> None:
        self.one = one
        self.other = other

    def __contains__(self, item: object) -> bool:
        return item in self.one or item in self.other


class _Unread(NamedTuple):
    """The expired observations whose events are not in `deletions` yet."""

    first: Mapping[str, Event]  # observation id -> its first event
    expired: set[str]  # the observation ids expired


class _Observations:
    """Observation events by id, in the order read. Most ids have one event, and
    a list for each of a million ids cost more than the rest of the planning:
    only ids seen again keep a list of the events after the first."""

    __slots__ = ("first", "more")

    def __init__(self) -> None:
        self.first: dict[str, Event] = {}
        self.more: dict[str, list[Event]] = {}

    def extend(self, observed: list[Event]) -> None:
        """Add these events (to an empty grouping). Grouped with C-level list and
        dict builds, and one by one only when an id repeats."""
        first, more = self.first, self.more
        first.update(zip([str(ev.id) for ev in observed], observed, strict=True))
        if len(first) != len(observed):
            first.clear()
            for ev in observed:
                if first.setdefault(ev.id, ev) is not ev:  # type: ignore[arg-type]
                    more.setdefault(str(ev.id), []).append(ev)

    def __contains__(self, oid: object) -> bool:
        return oid in self.first

    def get(self, oid: str) -> list[Event]:
        ev = self.first.get(oid)
        if ev is None:
            return []
        return [ev, *self.more.get(oid, ())]


def _anchors(d: Derived, entry_id: str) -> list[str]:
    anchors = d.entry_events[entry_id].data.get("anchors", [])
    return [a for a in anchors if isinstance(a, str)]


def _report_order(items: Iterable[str], observations: Container[str],
                  observed: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """Evidence before conclusions: observations first, then entries, each by
    id, of `items` and `observed` (ids known to be observations). (Partitioned,
    then sorted in C: a sort key in Python cost a tenth of a large plan.)"""
    items = list(items)
    return sorted(observed.union([i for i in items if i in observations])) \
        + sorted([i for i in items if i not in observations])
