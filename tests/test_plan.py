"""Compaction planning, pure: rules on hand-built journals, laws on random ones."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agent_journal.core.clock import format_ts
from agent_journal.core.compaction_plan import CompactionPlan, plan_compaction
from agent_journal.core.derive import derive
from agent_journal.core.errors import UsageError
from agent_journal.core.model import Event
from agent_journal.core.observation_ages import summarize

NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)
_counter = iter(range(10**9))


def ts(days_ago: float = 1.0) -> str:
    return format_ts(NOW - timedelta(days=days_ago))


def ev(type_: str, subject: str | None, data: dict[str, Any], *, days_ago: float = 1.0,
       kind: str | None = None, event_id: str | None = None) -> Event:
    return Event(event_id=event_id or f"e{next(_counter):06d}", type=type_,
                 kind=kind or {"entry": "finding", "observation": "tool_call"}.get(type_, type_),
                 id=subject, ts=ts(days_ago), author="human", session=None, replica="r1",
                 data=data)


def entry(eid: str, *, anchors: tuple[str, ...] = (), depends: tuple[str, ...] = (),
          days_ago: float = 1.0, kind: str = "finding") -> Event:
    fields = {"claim": f"claim of {eid}"} if kind == "finding" else {"text": f"text of {eid}"}
    return ev("entry", eid, {"fields": fields, "anchors": list(anchors),
                             "dependsOn": list(depends), "subject": None},
              days_ago=days_ago, kind=kind)


def obs(oid: str, *, days_ago: float = 1.0, status: str = "ok") -> Event:
    return ev("observation", oid, {"tool": "Bash", "callId": f"c-{oid}", "input": None,
                                   "output": f"output of {oid}", "status": status,
                                   "exitCode": 0, "durationMs": 1}, days_ago=days_ago)


def inval(target: str, *, days_ago: float = 1.0) -> Event:
    return ev("invalidation", target, {"reason": "wrong premise"}, days_ago=days_ago)


def tomb(target: str, *, days_ago: float = 1.0, purged: bool = False,
         graph: dict[str, Any] | None = None) -> Event:
    data: dict[str, Any] = {"reason": "must go", "purged": purged}
    if graph is not None:
        data["graph"] = graph
    return ev("tombstone", target, data, days_ago=days_ago)


def plan(events: list[Event], entry_ttl: int | None = None,
         obs_ttl: int | None = None) -> CompactionPlan:
    return plan_compaction(events, NOW, entry_ttl, obs_ttl)


def report(p: CompactionPlan) -> dict[str, Any]:
    return p.report(apply=False)


def apply_in_memory(events: list[Event], p: CompactionPlan) -> list[Event]:
    """What the store ends up holding after a clean, unskipped apply of `p`."""
    out = []
    for e in events:
        if e.event_id in p.deletions:
            continue
        if e.event_id in p.flips:
            e = p.rewritten(e.event_id)
        out.append(e)
    return out


# -- the rules ----------------------------------------------------------------------------

def test_no_ttl_and_no_tombstone_purges_nothing_however_old():
    events = [entry("f1", days_ago=4000), obs("o1", days_ago=4000), inval("f1", days_ago=3000)]
    p = plan(events)
    assert p.deletions == {}
    assert report(p) == {
        "apply": False, "entryTtlDays": None, "observationTtlDays": None, "expired": [],
        "tombstoned": [], "pinned": [], "downgraded": [], "unclassified": [],
        "tombstonesMarkedPurged": []}


def test_tombstone_purges_records_observations_and_invalidations_of_its_target():
    f1 = [entry("f1"), inval("f1")]
    o1 = [obs("o1", status="started"), obs("o1", days_ago=0.5)]
    t1, t2 = tomb("f1"), tomb("o1")
    p = plan(f1 + o1 + [t1, t2, entry("keep")])
    assert set(p.deletions) == {e.event_id for e in f1 + o1}
    assert p.tombstoned == ["o1", "f1"]
    assert p.tombstones_marked_purged == sorted([t1.event_id, t2.event_id])


def test_ghost_tombstone_is_not_listed_and_keeps_purged_false():
    t = tomb("ghost")
    p = plan([entry("f1"), t])
    assert p.deletions == {} and p.tombstoned == [] and p.tombstones_marked_purged == []


def test_invalidation_of_a_ghost_goes_but_its_tombstone_stays_unpurged():
    i, t = inval("ghost"), tomb("ghost")
    p = plan([i, t])
    assert set(p.deletions) == {i.event_id}
    assert p.tombstoned == ["ghost"]
    assert p.tombstones_marked_purged == []  # the target itself was never here


def test_already_purged_tombstone_is_not_flipped_again():
    f1, t = entry("f1"), tomb("f1", purged=True)
    p = plan([f1, t])
    assert set(p.deletions) == {f1.event_id}
    assert p.tombstones_marked_purged == []


def test_every_tombstone_of_a_removed_target_is_flipped():
    f1, t1, t2 = entry("f1"), tomb("f1"), tomb("f1", days_ago=0.1)
    assert plan([f1, t1, t2]).tombstones_marked_purged == sorted([t1.event_id, t2.event_id])


def test_tombstones_and_unknown_types_are_never_purged():
    t = tomb("f1", days_ago=9000)
    future = ev("retention-hint", "f1", {"x": 1}, days_ago=9000)
    p = plan([entry("f1", days_ago=9000), t, future], entry_ttl=0, obs_ttl=0)
    assert t.event_id not in p.deletions and future.event_id not in p.deletions
    assert p.unclassified == [future.event_id]


def test_pinned_observation_survives_its_ttl_while_a_live_entry_cites_it():
    o, d = obs("obs-migrate", days_ago=2), entry("d-migrate", anchors=("tool_use:obs-migrate",))
    p = plan([o, d], obs_ttl=0)
    assert p.pinned == ["obs-migrate"] and p.expired == [] and p.deletions == {}


def test_an_expired_entry_stops_pinning():
    o, d = obs("obs-migrate", days_ago=2), entry("d-migrate", anchors=("tool_use:obs-migrate",))
    p = plan([o, d], entry_ttl=0, obs_ttl=0)
    assert p.pinned == [] and p.expired == ["obs-migrate", "d-migrate"]


def test_another_live_citation_still_pins():
    o = obs("o1", days_ago=30)
    old = entry("old", anchors=("tool_use:o1",), days_ago=30)
    new = entry("new", anchors=("tool_use:o1",), days_ago=1)
    p = plan([o, old, new], entry_ttl=10, obs_ttl=10)
    assert p.expired == ["old"] and p.pinned == ["o1"]


@pytest.mark.parametrize("how", ["invalidated", "suppressed", "tombstoned"])
def test_only_live_entries_pin(how):
    o = obs("o1", days_ago=5)
    events = [o, entry("base", days_ago=1)]
    if how == "suppressed":
        events.append(entry("cite", anchors=("tool_use:o1",), depends=("base",)))
        events.append(inval("base"))
    else:
        events.append(entry("cite", anchors=("tool_use:o1",)))
        events.append(inval("cite") if how == "invalidated" else tomb("cite"))
    p = plan(events, obs_ttl=1)
    assert p.pinned == [] and "o1" in p.expired


def test_tombstone_is_checked_before_pins():
    o, t = obs("o1"), tomb("o1")
    d = entry("d1", anchors=("tool_use:o1",))
    p = plan([o, t, d], obs_ttl=0)
    assert p.tombstoned == ["o1"] and p.pinned == [] and p.expired == []
    assert p.downgraded == ["d1"]


def test_downgraded_lists_live_entries_citing_what_the_run_removes():
    o1, o2 = obs("o1"), obs("o2")
    live = entry("f-live", anchors=("tool_use:o1", "file:README.md"))
    dead = entry("f-dead", anchors=("tool_use:o1",))
    other = entry("f-other", anchors=("tool_use:o2",))
    p = plan([o1, o2, live, dead, other, inval("f-dead"), tomb("o1")])
    assert p.downgraded == ["f-live"]
    assert p.citations == {"f-live": ["o1"]}


def test_age_is_from_the_latest_event_and_due_at_exactly_the_ttl():
    at_ttl = obs("o-at", days_ago=10)
    younger = [obs("o-young", days_ago=30), obs("o-young", days_ago=9.99)]
    entry_inval_recent = [entry("f1", days_ago=30), inval("f1", days_ago=2)]
    p = plan([at_ttl, *younger, *entry_inval_recent], entry_ttl=10, obs_ttl=10)
    assert p.expired == ["o-at"]


def test_an_event_from_the_future_counts_as_now():
    future = obs("o-future", days_ago=-3)
    assert plan([future], obs_ttl=0).expired == ["o-future"]
    assert plan([future], obs_ttl=1).expired == []


def test_axes_are_independent():
    events = [obs("o1", days_ago=50), entry("f1", days_ago=50)]
    assert plan(events, obs_ttl=10).expired == ["o1"]
    assert plan(events, entry_ttl=10).expired == ["f1"]


def test_expiry_takes_an_entrys_invalidations_and_conflicting_records():
    a, b, i = entry("f1", days_ago=40), entry("f1", days_ago=39), inval("f1", days_ago=38)
    p = plan([a, b, i], entry_ttl=30)
    assert set(p.deletions) == {a.event_id, b.event_id, i.event_id}


def test_a_ttl_longer_than_the_calendar_expires_nothing():
    assert plan([obs("o1", days_ago=1000)], obs_ttl=10**12).expired == []


def test_an_unreadable_timestamp_never_expires():
    odd = Event(event_id="e-odd", type="observation", kind="tool_call", id="o1",
                ts="sometime last week", author="human", session=None, replica="r1",
                data={"status": "ok"})
    assert plan([odd], obs_ttl=0).expired == []


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True])
def test_bad_ttls_are_usage_errors(bad):
    with pytest.raises(UsageError):
        plan_compaction([], NOW, bad, None)


def test_an_invalidated_root_is_held_while_a_surviving_dependent_derives_through_it():
    root = entry("root", days_ago=40)
    mid = entry("mid", depends=("root",), days_ago=40)
    leaf = entry("leaf", depends=("mid",), days_ago=1)
    events = [root, mid, leaf, inval("root", days_ago=40)]
    p = plan(events, entry_ttl=30)
    assert p.expired == [] and p.held == ["mid", "root"]
    after = derive(apply_in_memory(events, p))
    assert after.outcome["leaf"] == "suppressed" and after.suppressed_through["leaf"] == ["root"]


def test_a_live_dependency_expires_without_changing_its_dependent():
    base, leaf = entry("base", days_ago=40), entry("leaf", depends=("base",), days_ago=1)
    p = plan([base, leaf], entry_ttl=30)
    assert p.expired == ["base"]
    assert derive(apply_in_memory([base, leaf], p)).outcome["leaf"] == "live"


def test_a_whole_dead_chain_expires_together():
    events = [entry("root", days_ago=40), entry("leaf", depends=("root",), days_ago=35),
              inval("root", days_ago=40)]
    p = plan(events, entry_ttl=30)
    assert p.expired == ["leaf", "root"] and p.held == []


def test_erasing_an_invalidated_entry_keeps_its_dependents_suppressed():
    # `tombstone` copies the entry's place in the graph into the tombstone it writes.
    root, leaf = entry("root"), entry("leaf", depends=("root",))
    i = inval("root")
    t = tomb("root", graph={"dependsOn": [], "invalidated": True})
    events = [root, leaf, i, t]
    assert derive(events).outcome["leaf"] == "suppressed"
    p = plan(events)
    assert set(p.deletions) == {root.event_id, i.event_id}
    after = apply_in_memory(events, p)
    assert [e.data.get("graph") for e in after if e.type == "tombstone"] == \
        [{"dependsOn": [], "invalidated": True}]
    d = derive(after)
    assert d.outcome["leaf"] == "suppressed" and d.suppressed_through["leaf"] == []
    assert plan(after).deletions == {}


def test_erasing_a_suppressed_middle_keeps_the_chain():
    events = [entry("root"), entry("mid", depends=("root",)), entry("leaf", depends=("mid",)),
              inval("root"), tomb("mid", graph={"dependsOn": ["root"], "invalidated": False})]
    assert derive(events).outcome["leaf"] == "suppressed"
    d = derive(apply_in_memory(events, plan(events)))
    assert d.outcome["leaf"] == "suppressed" and d.suppressed_through["leaf"] == ["root"]


def test_compaction_writes_no_graph_of_its_own():
    # Adding one at compaction time would change what dependents derive then.
    events = [entry("root"), entry("leaf", depends=("root",)), inval("root"), tomb("root")]
    p = plan(events)
    assert all("graph" not in p.rewritten(t).data for t in p.tombstone_events)
    assert derive(events).outcome["leaf"] == "live"  # no graph: the tombstoned id takes no part
    assert derive(apply_in_memory(events, p)).outcome["leaf"] == "live"


# -- laws on random journals ---------------------------------------------------------------

ENTRY_IDS = ["a", "b", "c", "d", "e", "x"]
OBS_IDS = ["o1", "o2", "o3", "x"]  # "x" is both an entry and an observation id
ALL_IDS = sorted(set(ENTRY_IDS + OBS_IDS + ["ghost"]))


@st.composite
def journals(draw: Any) -> list[Event]:
    events: list[Event] = []
    n = draw(st.integers(min_value=0, max_value=25))
    for i in range(n):
        days = draw(st.sampled_from([0.0, 0.5, 1.0, 3.0, 10.0, 40.0, -1.0]))
        what = draw(st.sampled_from(["entry", "entry", "obs", "obs", "inval", "tomb",
                                     "unknown"]))
        eid = f"r{i:03d}"
        if what == "entry":
            anchors = draw(st.lists(st.sampled_from(OBS_IDS), max_size=2))
            deps = draw(st.lists(st.sampled_from(ENTRY_IDS + ["ghost"]), max_size=2))
            e = entry(draw(st.sampled_from(ENTRY_IDS)), days_ago=days,
                      kind=draw(st.sampled_from(["finding", "constraint"])),
                      anchors=tuple(f"tool_use:{a}" for a in anchors), depends=tuple(deps))
        elif what == "obs":
            e = obs(draw(st.sampled_from(OBS_IDS)), days_ago=days,
                    status=draw(st.sampled_from(["started", "ok"])))
        elif what == "inval":
            e = inval(draw(st.sampled_from(ALL_IDS)), days_ago=days)
        elif what == "tomb":
            e = tomb(draw(st.sampled_from(ALL_IDS)), days_ago=days,
                     purged=draw(st.booleans()))
        else:
            e = ev("future-kind", draw(st.sampled_from(ALL_IDS)), {"n": i}, days_ago=days)
        events.append(e.replace(event_id=eid))
    return events


def read_views(events: list[Event]) -> dict[str, Any]:
    """Everything a read command renders, derived from the events."""
    d = derive(events)
    return {
        "entries": [d.entry_view(i) for i in d.visible_entry_ids()],
        "observations": [d.observation_view(i) for i in d.visible_observation_ids()],
        "live": sorted(i for i in d.entry_events if d.is_live(i)),
    }


def tombstones_without_flags(events: list[Event]) -> list[tuple[str, Any]]:
    out = []
    for e in events:
        if e.type == "tombstone":
            data = {k: v for k, v in e.data.items() if k not in ("purged", "graph")}
            out.append((e.event_id, sorted(data.items())))
    return sorted(out)


@settings(max_examples=100, deadline=None)
@given(journals())
def test_without_ttls_compaction_changes_no_read_output(events):
    p = plan(events)
    after = apply_in_memory(events, p)
    assert read_views(after) == read_views(events)
    assert tombstones_without_flags(after) == tombstones_without_flags(events)
    assert plan(after).deletions == {}


@settings(max_examples=100, deadline=None)
@given(journals(), st.sampled_from([None, 0, 2, 20]), st.sampled_from([None, 0, 2, 20]))
def test_surviving_entries_keep_their_outcome_and_a_second_run_purges_nothing(
        events, entry_ttl, obs_ttl):
    p = plan(events, entry_ttl, obs_ttl)
    after = apply_in_memory(events, p)
    before_d, after_d = derive(events), derive(after)
    for entry_id in after_d.entry_events:
        assert after_d.outcome[entry_id] == before_d.outcome[entry_id]
        assert after_d.suppressed_through.get(entry_id) == \
            before_d.suppressed_through.get(entry_id)
    again = plan(after, entry_ttl, obs_ttl)
    assert again.deletions == {} and again.tombstones_marked_purged == []
    assert again.pinned == p.pinned


@settings(max_examples=100, deadline=None)
@given(journals(), st.sampled_from([None, 0, 2]), st.sampled_from([None, 0, 2]))
def test_report_lists_are_disjoint_sorted_and_never_name_a_tombstone(events, e_ttl, o_ttl):
    p = plan(events, e_ttl, o_ttl)
    assert not set(p.expired) & set(p.tombstoned)
    assert not set(p.pinned) & set(p.tombstoned)
    # One id may name an entry and an observation: its entry can expire while
    # its observation is pinned. Otherwise an id is in one list only.
    both = {e.id for e in events if e.type == "entry"} & \
        {e.id for e in events if e.type == "observation"}
    assert set(p.pinned) & set(p.expired) <= both
    assert all(events_by_id(events)[e].type != "tombstone" for e in p.deletions)
    assert all(events_by_id(events)[e].type in ("entry", "observation", "invalidation")
               for e in p.deletions)
    r = p.report(apply=False)
    for key in ("pinned", "downgraded", "unclassified", "tombstonesMarkedPurged"):
        assert r[key] == sorted(r[key])


def events_by_id(events: list[Event]) -> dict[str, Event]:
    return {e.event_id: e for e in events}


def _due_by_parsing(stamps: list[str], now: datetime, days: int) -> bool:
    """Age as the parser reads it: the latest instant (the future counts as
    now) at least `days` old; any stamp that does not parse is never due."""
    from agent_journal.core.clock import parse_instant

    try:
        latest = max(parse_instant(s) for s in stamps)
    except UsageError:
        return False
    return min(latest, now) <= now - timedelta(days=days)


_instants = st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 30),
                         timezones=st.just(UTC))
# Canonical stamps, and spellings around them: other offsets, no milliseconds,
# out-of-range fields, days that exist in some months only, year 0.
_stamps = st.one_of(
    _instants.map(format_ts),
    _instants.map(lambda t: t.isoformat()),
    _instants.map(lambda t: format_ts(t)[:19] + "Z"),
    _instants.map(lambda t: format_ts(t).replace("Z", "+00:00")),
    st.builds(lambda y, m, d, h, s: f"{y:04d}-{m:02d}-{d:02d}T{h:02d}:00:{s:02d}.000Z",
              st.sampled_from([0, 1, 2024, 2100, 9999]), st.sampled_from([0, 1, 2, 4, 12, 13]),
              st.sampled_from([0, 1, 28, 29, 30, 31, 32]), st.sampled_from([0, 23, 24]),
              st.sampled_from([0, 59, 60, 61])),
    st.text(max_size=30),
)


@settings(max_examples=400, deadline=None)
@given(stamps=st.lists(_stamps, min_size=1, max_size=4),
       now=st.datetimes(min_value=datetime(4, 1, 1), max_value=datetime(9999, 12, 30),
                        timezones=st.just(UTC)),
       days=st.integers(0, 800))
@example(stamps=["2100-02-29T00:00:00.000Z"], now=NOW, days=1)  # no such day
@example(stamps=["2025-04-31T00:00:00.000Z"], now=NOW, days=1)
@example(stamps=["2025-05-31T23:59:59.999Z"], now=NOW, days=0)
@example(stamps=["2024-02-29T00:00:00.000Z", "2025-06-01T12:00:00Z"], now=NOW, days=0)
def test_law_stamps_compared_as_text_are_due_exactly_when_parsed_ones_are(
        stamps: list[str], now: datetime, days: int) -> None:
    # Some stamps lie close to the cutoff, where text order and time order
    # could first part.
    from agent_journal.core.compaction_plan import _cutoff

    near = now - timedelta(days=days)
    close = [format_ts(near), format_ts(near + timedelta(milliseconds=1))]
    stamps = stamps + close[:len(stamps) % 3]
    cut = _cutoff(now, days)
    assert cut is not None
    assert cut.due(stamps) == _due_by_parsing(stamps, now, days)
    # Each stamp as the one stamp of its own id, judged all at once.
    ids = [f"o{k}" for k in range(len(stamps))]
    fold = cut.fold()
    fold.add(summarize(ids, stamps))
    assert fold.due() == {
        o for o, s in zip(ids, stamps, strict=True) if _due_by_parsing([s], now, days)}


@settings(max_examples=300, deadline=None)
@given(pairs=st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d"]), _stamps), max_size=10),
       cuts=st.lists(st.integers(0, 10), max_size=4),
       now=st.datetimes(min_value=datetime(4, 1, 1), max_value=datetime(9999, 12, 30),
                        timezones=st.just(UTC)),
       days=st.integers(0, 800))
def test_law_ages_folded_from_any_split_are_the_ages_of_the_whole(
        pairs: list[tuple[str, str]], cuts: list[int], now: datetime, days: int) -> None:
    """An id is due when every stamp it has anywhere is: summaries of the pairs
    cut into groups (segments), some merged again (a segment that grew),
    fold to the verdict on each id's stamps together."""
    from agent_journal.core.compaction_plan import _cutoff
    from agent_journal.core.observation_ages import ids_of, merged

    near = now - timedelta(days=days)
    pairs = pairs + [("a", format_ts(near)), ("b", format_ts(near + timedelta(milliseconds=1)))]
    cut = _cutoff(now, days)
    assert cut is not None
    bounds = sorted({0, len(pairs), *(min(c, len(pairs)) for c in cuts)})
    groups = [pairs[lo:hi] for lo, hi in zip(bounds, bounds[1:], strict=False)]
    summaries = [summarize([o for o, _ in g], [t for _, t in g]) for g in groups]
    if len(summaries) > 1 and len(cuts) % 2:
        summaries[:2] = [merged(summaries[0], summaries[1])]
    fold = cut.fold()
    for summary in summaries:
        fold.add(summary)
    by_id: dict[str, list[str]] = {}
    for oid, ts in pairs:
        by_id.setdefault(oid, []).append(ts)
    assert fold.due() == {o for o, ts in by_id.items() if _due_by_parsing(ts, now, days)}
    assert fold.due() == {o for o, ts in by_id.items() if cut.due(ts)}
    assert {o for s in summaries for o in ids_of(s)} == set(by_id)
    assert all(o in fold for o in by_id) and "zz" not in fold


# -- the plan is one function of the events, however they come -------------------------------

def _whole(p: CompactionPlan) -> tuple[Any, ...]:
    """Everything a plan decides, order aside (a flip's events come in read order)."""
    return (report(p), dict(p.deletions), dict(p.reasons), p.held, dict(p.citations),
            {t: sorted(waits) for t, waits in p.flips.items()}, sorted(p.tombstone_events),
            sorted(p.tombstone_targets), sorted(p.expired_observations))


@settings(max_examples=100, deadline=None)
@given(journals(), st.sampled_from([None, 0, 2, 20]), st.sampled_from([None, 0, 2, 20]),
       st.randoms(use_true_random=False))
def test_law_the_order_events_are_read_in_changes_no_plan(events, e_ttl, o_ttl, rnd):
    shuffled = list(events)
    rnd.shuffle(shuffled)
    assert _whole(plan(shuffled, e_ttl, o_ttl)) == _whole(plan(events, e_ttl, o_ttl))


@settings(max_examples=100, deadline=None)
@given(journals(), st.sampled_from([None, 0, 2, 20]), st.sampled_from([0, 2, 20]),
       st.lists(st.booleans(), max_size=25))
def test_law_a_plan_from_ages_is_the_plan_from_every_observation(events, e_ttl, o_ttl, aged):
    """Observations that enter the plan as their ages only (a read that keeps the
    ages of the plain ones, segment by segment) give the same plan, once the events
    of those it expires are added back (`delete_expired`)."""
    from agent_journal.core.compaction_plan import observation_ages

    # (Only observations no tombstone names can be read as ages: those named are read.)
    named = {e.id for e in events if e.type == "tombstone"}
    plain = [e for e in events if e.type == "observation" and e.id not in named]
    as_ages = [e for e, a in zip(plain, aged, strict=False) if a]
    ages = observation_ages(NOW, o_ttl)
    assert ages is not None
    ages.add(summarize([e.id for e in as_ages], [e.ts for e in as_ages]))
    read = [e for e in events if not any(e is a for a in as_ages)]
    p = plan_compaction(read, NOW, e_ttl, o_ttl, ages=ages)
    p.delete_expired((e.event_id, str(e.id)) for e in as_ages)
    assert _whole(p) == _whole(plan(events, e_ttl, o_ttl))


@settings(max_examples=100, deadline=None)
@given(journals(), st.sampled_from([None, 0, 20]), st.data())
def test_law_a_run_resumed_from_its_intent_flips_only_what_it_removed(events, o_ttl, data):
    """An interrupted run's flips (its intent) are planned again only for a tombstone
    still unpurged whose target it saw; they wait for whatever of the target is left."""
    tombs = [e for e in events if e.type == "tombstone" and e.data["purged"] is False]
    unfinished = {t.event_id: str(t.id) for t in tombs if data.draw(st.booleans())}
    # The interrupted run removed the targets' records and observations.
    left = [e for e in events if not (e.type in ("entry", "observation")
                                      and e.id in set(unfinished.values()))]
    p = plan_compaction(left, NOW, None, o_ttl, unfinished)
    fresh = plan_compaction(left, NOW, None, o_ttl)
    for tomb_id, target in unfinished.items():
        assert tomb_id in p.flips and tomb_id not in fresh.flips
        assert set(p.flips[tomb_id]) == {e.event_id for e in left if e.id == target
                                         and e.type == "invalidation"}
    assert set(p.flips) - set(unfinished) == set(fresh.flips)
