"""derive: the graph a rewritten tombstone keeps for its erased entry."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_journal.core.derive import derive
from agent_journal.core.model import Event


def ev(n: int, type_: str, subject: str, data: dict) -> Event:
    return Event(event_id=f"e{n:04d}", type=type_, kind=type_, id=subject,
                 ts=f"2025-01-01T00:00:{n % 60:02d}.000Z", author="human", session=None,
                 replica="r1", data=data)


def entry(n: int, subject: str, depends: list[str]) -> Event:
    return ev(n, "entry", subject, {"fields": {"claim": subject}, "anchors": [],
                                    "dependsOn": depends, "subject": None})


def tomb(n: int, target: str, graph: object = None) -> Event:
    data: dict = {"reason": "r", "purged": True}
    if graph is not None:
        data["graph"] = graph
    return ev(n, "tombstone", target, data)


def test_an_erased_invalidated_entry_still_suppresses_its_dependents():
    d = derive([entry(1, "leaf", ["gone"]),
                tomb(2, "gone", {"dependsOn": [], "invalidated": True})])
    assert d.outcome["leaf"] == "suppressed" and d.suppressed_through["leaf"] == []


def test_an_erased_middle_keeps_the_path_to_a_visible_root():
    d = derive([entry(1, "root", []), ev(2, "invalidation", "root", {"reason": "r"}),
                entry(3, "leaf", ["mid"]),
                tomb(4, "mid", {"dependsOn": ["root"], "invalidated": False})])
    assert d.outcome["leaf"] == "suppressed" and d.suppressed_through["leaf"] == ["root"]


def test_a_tombstone_without_a_graph_or_with_a_bad_one_adds_nothing():
    for graph in (None, "yes", {"dependsOn": "root"}, {"invalidated": "true"}):
        d = derive([entry(1, "leaf", ["gone"]), tomb(2, "gone", graph)])
        assert d.outcome["leaf"] == "live", graph


def test_a_graph_only_adds_to_what_a_present_record_says():
    d = derive([entry(1, "leaf", ["t"]), entry(2, "t", []),
                tomb(3, "t", {"dependsOn": [], "invalidated": True})])
    assert d.outcome["leaf"] == "suppressed"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["entry", "inval", "tomb"]),
                          st.sampled_from("abcd"), st.lists(st.sampled_from("abcd"), max_size=2),
                          st.booleans()), max_size=12), st.randoms())
def test_order_of_events_never_matters(items, rnd: random.Random):
    events = []
    for n, (what, subject, deps, flag) in enumerate(items):
        if what == "entry":
            events.append(entry(n, subject, deps))
        elif what == "inval":
            events.append(ev(n, "invalidation", subject, {"reason": "r"}))
        else:
            events.append(tomb(n, subject, {"dependsOn": deps, "invalidated": flag}))
    shuffled = list(events)
    rnd.shuffle(shuffled)
    a, b = derive(events), derive(shuffled)
    assert a.outcome == b.outcome and a.suppressed_through == b.suppressed_through
