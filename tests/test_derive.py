"""Derivation laws: suppression equals a reference closure; event order is irrelevant."""

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_journal.core.derive import INVALIDATED, LIVE, SUPPRESSED, derive
from agent_journal.core.model import Event

_n = 0


def ev(type_, id_, *, kind=None, ts="2026-01-01T00:00:00.000Z", data=None, eid=None):
    global _n
    _n += 1
    default = {"entry": {"fields": {"text": id_}, "anchors": [], "dependsOn": [],
                         "subject": None},
               "invalidation": {"reason": "wrong"},
               "tombstone": {"reason": "leak", "purged": False},
               "observation": {"tool": "Bash", "status": "ok"}}.get(type_, {})
    return Event(event_id=eid or f"e{_n:06d}", type=type_, kind=kind or {
        "entry": "note", "observation": "tool_call"}.get(type_, type_), id=id_, ts=ts,
        author="human", session=None, replica="r", data=data if data is not None else default)


def entry(id_, deps=(), ts="2026-01-01T00:00:00.000Z", kind="note", eid=None):
    return ev("entry", id_, kind=kind, ts=ts, eid=eid, data={
        "fields": {"text": id_}, "anchors": [], "dependsOn": list(deps), "subject": None})


def test_invalidation_suppresses_dependents_transitively():
    d = derive([entry("a"), entry("b", ["a"]), entry("c", ["b"]), entry("x"),
                ev("invalidation", "a")])
    assert d.outcome == {"a": INVALIDATED, "b": SUPPRESSED, "c": SUPPRESSED, "x": LIVE}
    assert d.entry_view("c")["suppressedThrough"] == ["a"]
    assert d.entry_view("a")["invalidation"]["reason"] == "wrong"
    assert not d.is_live("b") and d.is_live("x")


def test_cycles_terminate():
    d = derive([entry("a", ["b"]), entry("b", ["a"]), ev("invalidation", "a")])
    assert d.outcome == {"a": INVALIDATED, "b": SUPPRESSED}


def test_tombstoned_ids_are_invisible_and_take_no_part():
    # Once a tombstone names `a`, what is derived must not depend on whether a's
    # bytes (or its invalidation's) are still here: compaction and merges erase
    # them replica by replica. So `a` is neither a root nor a link.
    events = [entry("a"), entry("b", ["a"]), ev("invalidation", "a"), ev("tombstone", "a")]
    d = derive(events)
    assert d.visible_entry_ids() == ["b"]
    assert d.outcome["b"] == LIVE
    erased = derive([events[1], events[3]])
    assert snapshot(erased) == snapshot(d)
    # A tombstoned link does not carry suppression through either.
    d = derive([entry("r"), entry("m", ["r"]), entry("c", ["m"]), ev("invalidation", "r"),
                ev("tombstone", "m")])
    assert (d.outcome["r"], d.outcome["c"]) == (INVALIDATED, LIVE)


def test_tombstone_alone_does_not_retract():
    d = derive([entry("a"), entry("b", ["a"]), ev("tombstone", "a")])
    assert d.outcome["b"] == LIVE and d.visible_entry_ids() == ["b"]


def test_observation_fold_latest_status_wins():
    d = derive([
        ev("observation", "o", ts="2026-01-01T00:00:01.000Z",
           data={"tool": "Bash", "input": {"command": "ls"}, "status": "started"}),
        ev("observation", "o", ts="2026-01-01T00:00:02.000Z",
           data={"status": "error", "exitCode": 2}),
    ])
    view = d.observation_view("o")
    assert (view["status"], view["exitCode"], view["input"]) == ("error", 2, {"command": "ls"})
    assert view["ts"] == "2026-01-01T00:00:01.000Z"
    assert view["lastTs"] == "2026-01-01T00:00:02.000Z"


def test_duplicate_entry_id_earliest_wins_and_others_are_conflicts():
    late = entry("a", ts="2026-01-02T00:00:00.000Z", eid="e-late")
    early = entry("a", ts="2026-01-01T00:00:00.000Z", eid="e-early")
    same_ts = entry("a", ts="2026-01-01T00:00:00.000Z", eid="e-early2")
    for order in ([late, early, same_ts], [same_ts, late, early]):
        d = derive(order)
        assert d.entry_events["a"].event_id == "e-early"
        assert d.entry_view("a")["conflicts"] == ["e-early2", "e-late"]


def test_unknown_types_are_kept_aside():
    d = derive([ev("hologram", None, kind="x"), entry("a")])
    assert [e.type for e in d.unclassified] == ["hologram"]
    assert d.visible_entry_ids() == ["a"]


# -- property tests ---------------------------------------------------------------------

IDS = [f"n{i}" for i in range(8)]


@st.composite
def journals(draw):
    events = []
    for i, eid in enumerate(IDS):
        if draw(st.booleans()):
            deps = draw(st.lists(st.sampled_from(IDS), max_size=3, unique=True))
            events.append(entry(eid, deps, ts=f"2026-01-01T00:00:{i:02d}.000Z"))
    for target in draw(st.lists(st.sampled_from(IDS), max_size=4)):
        events.append(ev("invalidation", target))
    for target in draw(st.lists(st.sampled_from(IDS), max_size=3)):
        events.append(ev("tombstone", target))
    return events


def reference_outcomes(events):
    """A deliberately naive closure: fixpoint over 'depends on something not live'.

    Tombstoned entries take no part (they are shown nowhere, and their bytes
    may be erased), so the reference is over the others only.
    """
    tombstoned = {e.id for e in events if e.type == "tombstone"}
    entries = {e.id: e for e in events if e.type == "entry" and e.id not in tombstoned}
    invalidated = {e.id for e in events if e.type == "invalidation"} & set(entries)
    tainted = set(invalidated)
    changed = True
    while changed:
        changed = False
        for eid, e in entries.items():
            if eid not in tainted and any(d in tainted for d in e.data["dependsOn"]):
                tainted.add(eid)
                changed = True
    return {eid: INVALIDATED if eid in invalidated else SUPPRESSED if eid in tainted else LIVE
            for eid in entries}


@settings(max_examples=200, deadline=None)
@given(journals())
def test_suppression_equals_reference_closure(events):
    d = derive(events)
    tombstoned = {e.id for e in events if e.type == "tombstone"}
    assert {k: v for k, v in d.outcome.items() if k not in tombstoned} == \
        reference_outcomes(events)
    assert set(d.visible_entry_ids()) == {e.id for e in events if e.type == "entry"} - tombstoned


def snapshot(d):
    return ([d.entry_view(i) for i in d.visible_entry_ids()],
            [d.observation_view(i) for i in d.visible_observation_ids()])


@settings(max_examples=100, deadline=None)
@given(journals(), st.randoms(use_true_random=False))
def test_derivation_ignores_event_order(events, rnd):
    shuffled = list(events)
    rnd.shuffle(shuffled)
    assert snapshot(derive(shuffled)) == snapshot(derive(events))


def test_shuffle_smoke():
    events = [entry("a"), entry("b", ["a"]), ev("invalidation", "a")]
    random.Random(1).shuffle(events)
    assert derive(events).outcome["b"] == SUPPRESSED


@settings(max_examples=200, deadline=None)
@given(journals())
def test_erasing_tombstoned_content_changes_no_view(events):
    """What compaction removes and merges hold back (entries, observations and
    invalidations whose id a tombstone names) must not change any view."""
    tombstoned = {e.id for e in events if e.type == "tombstone"}
    kept = [e for e in events
            if not (e.type in ("entry", "observation", "invalidation") and e.id in tombstoned)]
    d, erased = derive(events), derive(kept)
    assert snapshot(erased) == snapshot(d)
    assert erased.outcome == {k: v for k, v in d.outcome.items() if k not in tombstoned}


def test_a_tombstones_graph_stands_in_for_its_target():
    # `tombstone` copies the target's edges and invalidation into the tombstone, so
    # the dependents derive the same with or without the target's own bytes.
    graph = {"dependsOn": [], "invalidated": True}
    t = ev("tombstone", "a", data={"reason": "leak", "purged": False, "graph": graph})
    full = [entry("a"), entry("b", ["a"]), ev("invalidation", "a"), t]
    for events in (full, [full[1], t]):
        d = derive(events)
        assert d.outcome["b"] == SUPPRESSED and d.suppressed_through["b"] == []
        assert d.visible_entry_ids() == ["b"]


def test_tombstone_records_the_graph_it_knows(cli):
    cli("record", "--kind", "finding", "--id", "a", "--claim", "premise")
    cli("record", "--kind", "finding", "--id", "b", "--claim", "built on a", "--depends-on", "a")
    cli("invalidate", "a", "--reason", "wrong")
    cli("tombstone", "a", "--reason", "names a person")
    (b,) = cli("show", "--json").json()["entries"]
    assert (b["id"], b["outcome"]) == ("b", "suppressed")
    cli("compact", "--apply")
    (b,) = cli("show", "--json").json()["entries"]
    assert (b["id"], b["outcome"]) == ("b", "suppressed")


_STEP = st.fixed_dictionaries({}, optional={
    "status": st.one_of(st.none(), st.sampled_from(["started", "ok", "error", "cancelled"])),
    "exitCode": st.one_of(st.none(), st.integers(-1, 3)),
    "output": st.one_of(st.none(), st.text(max_size=5)),
})


@settings(max_examples=200, deadline=None)
@given(st.lists(_STEP, min_size=1, max_size=5))
def test_the_view_and_the_digest_fold_an_observation_alike(steps):
    """Latest event that says anything wins, key by key, in the view and in the digest's Call
    (but `started` never replaces a finished status: the clock may step back mid-call)."""
    from agent_journal.core.recovery.calls import call_from_view, fold
    from agent_journal.core.recovery.facts import event_facts

    events = [ev("observation", "o", ts=f"2026-01-01T00:00:0{i}.000Z",
                 data={"tool": "Bash", "input": {"command": "ls"}, **step})
              for i, step in enumerate(steps)]
    view = derive(events).observation_view("o")
    for name in ("status", "exitCode", "output"):
        said = [s[name] for s in steps if s.get(name) is not None]
        expected = None
        for value in said:
            if not (name == "status" and value == "started" and expected not in (None,
                                                                                  "started")):
                expected = value
        assert view[name] == expected, name
    folded = fold("o", "tool_call", None, [(e.ts, event_facts(e.kind, e.data)) for e in events])
    from_view = call_from_view(view)
    assert (folded.status, folded.get("exit"), folded.unfinished, folded.failed) == \
        (from_view.status, from_view.get("exit"), from_view.unfinished, from_view.failed)
