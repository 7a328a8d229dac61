"""trace: matching routes, the dependency chain's order, and what never appears."""

from __future__ import annotations

import random

import pytest
from audit_scenario import at, build_scenario, check_golden, damage, entry, ev, normalise
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_journal.core.derive import derive
from agent_journal.ops.trace import trace_derived


@pytest.fixture
def cli(inproc):
    """In-process: these tests need no real process."""
    return inproc



def ids(rows):
    return [(r["id"], r["via"]) for r in rows]


# -- the retention document's example, through the real CLI ----------------------------------

def test_retention_example_anchor_still_finds_the_citing_entry(cli):
    ws = ["--workspace", "retention-demo"]
    assert cli("observe", *ws, "--kind", "tool_call", "--id", "obs-vendor-call",
               "--tool", "Bash", "--callId", "call-2").code == 0
    assert cli("record", *ws, "--kind", "finding", "--id", "f-vendor-latency",
               "--claim", "the vendor call adds 40ms p50",
               "--anchor", "tool_use:obs-vendor-call").code == 0
    assert cli("tombstone", "obs-vendor-call", "--reason",
               "the callId embeds an internal vendor account id", *ws).code == 0

    shown = cli("show", "--json", *ws, "--id", "obs-vendor-call")  # tombstoned: names nothing
    assert (shown.code, shown.out) == (1, "")
    assert shown.err == ("error: no entry or observation with id obs-vendor-call in workspace "
                         "retention-demo\n")

    result = cli("trace", "--json", "obs-vendor-call", *ws)
    assert result.code == 0 and result.err == ""
    report = result.json()
    assert [{"id": r["id"], "via": r["via"]} for r in report["matched"]] == [
        {"id": "f-vendor-latency", "via": "anchor"}]
    assert [{"id": r["id"], "via": r["via"]} for r in report["chain"]] == [
        {"id": "f-vendor-latency", "via": None}]
    assert report["chain"][0]["live"] is True
    assert report["unreadable"] == [] and report["malformed"] == []


def test_purged_and_absent_targets_still_match_via_anchor():
    events = [
        entry("f-a", at(1), anchors=["tool_use:obs-gone"]),
        ev("tombstone", "tombstone", "obs-gone", at(2), {"reason": "r", "purged": True}),
        entry("f-b", at(3), anchors=["tool_use:obs-never-here"]),
    ]
    d = derive(events)
    assert ids(trace_derived(d, "obs-gone")["matched"]) == [("f-a", "anchor")]
    assert ids(trace_derived(d, "obs-never-here")["matched"]) == [("f-b", "anchor")]


# -- matching ---------------------------------------------------------------------------------

def test_each_route_and_its_precedence():
    events = [
        entry("x", at(1)),
        entry("by-subject", at(2), about="x"),
        entry("by-anchor", at(3), anchors=["tool_use:x"]),
        entry("by-dep", at(4), depends_on=["x"]),
        entry("subject-and-anchor", at(5), about="x", anchors=["tool_use:x"]),
        entry("unrelated", at(6), anchors=["tool_use:obs-1"]),
    ]
    report = trace_derived(derive(events), "x")
    assert ids(report["matched"]) == [("x", "id"), ("by-subject", "subject"),
                                      ("by-anchor", "anchor"), ("by-dep", "dependsOn"),
                                      ("subject-and-anchor", "subject")]


def test_anchor_match_is_exact_never_a_substring():
    events = [
        entry("e1", at(1), anchors=["tool_use:obs-10"]),
        entry("e2", at(2), anchors=["commit:abc123"]),
        entry("e3", at(3), anchors=["file:docs/obs-1.md"]),
    ]
    d = derive(events)
    assert trace_derived(d, "obs-1")["matched"] == []
    assert ids(trace_derived(d, "obs-10")["matched"]) == [("e1", "anchor")]
    assert ids(trace_derived(d, "abc123")["matched"]) == [("e2", "anchor")]
    assert ids(trace_derived(d, "commit:abc123")["matched"]) == [("e2", "anchor")]


def test_tombstoned_entry_never_appears_by_any_route():
    events = [
        entry("x", at(1), about="topic"),
        entry("secret", at(2), about="topic", anchors=["tool_use:obs-1"], depends_on=["x"]),
        entry("citer", at(3), anchors=["tool_use:x"]),
        ev("tombstone", "tombstone", "x", at(4), {"reason": "leak"}),
        ev("tombstone", "tombstone", "secret", at(5), {"reason": "leak"}),
    ]
    d = derive(events)
    assert ids(trace_derived(d, "x")["matched"]) == [("citer", "anchor")]
    for target in ("topic", "obs-1", "secret"):
        assert trace_derived(d, target) == {"matched": [], "chain": []}


def test_invalidated_and_suppressed_entries_show_their_outcome():
    events = [
        entry("root", at(1)),
        entry("child", at(2), depends_on=["root"]),
        entry("grandchild", at(3), depends_on=["child"]),
        ev("invalidation", "invalidation", "root", at(4), {"reason": "wrong"}),
    ]
    chain = trace_derived(derive(events), "root")["chain"]
    assert [(r["id"], r["via"], r["live"], r["outcome"]) for r in chain] == [
        ("root", None, False, "invalidated"), ("child", None, False, "suppressed"),
        ("grandchild", "child", False, "suppressed")]


# -- the chain --------------------------------------------------------------------------------

def test_chain_is_breadth_first_in_ts_id_order_with_first_parent_as_via():
    # Entries depending on the target itself match (via dependsOn), so the walk
    # starts one level below them.
    events = [
        entry("m", at(1)),
        entry("late-child", at(9), depends_on=["m"]),
        entry("early-child", at(2), depends_on=["m"]),
        entry("grand", at(3), depends_on=["late-child", "early-child"]),
        entry("great", at(4), depends_on=["grand"]),
        entry("loop-a", at(5), depends_on=["great", "loop-b"]),
        entry("loop-b", at(6), depends_on=["loop-a"]),
    ]
    chain = trace_derived(derive(events), "m")["chain"]
    assert [(r["id"], r["via"], r["depth"]) for r in chain] == [
        ("m", None, 0), ("early-child", None, 0), ("late-child", None, 0),
        ("grand", "early-child", 1),
        ("great", "grand", 2),
        ("loop-a", "great", 3),
        ("loop-b", "loop-a", 4),
    ]


def test_matched_entries_lead_the_chain_once_each():
    events = [
        entry("a", at(1), about="s"),
        entry("b", at(2), about="s", depends_on=["a"]),
        entry("c", at(3), depends_on=["b"]),
    ]
    chain = trace_derived(derive(events), "s")["chain"]
    assert [(r["id"], r["via"]) for r in chain] == [("a", None), ("b", None), ("c", "b")]


def test_chain_does_not_walk_through_a_tombstoned_entry():
    events = [
        entry("m", at(1)),
        entry("hidden", at(2), depends_on=["m"]),
        entry("beyond", at(3), depends_on=["hidden"]),
        ev("tombstone", "tombstone", "hidden", at(4), {"reason": "leak"}),
    ]
    assert ids(trace_derived(derive(events), "m")["chain"]) == [("m", None)]


# -- laws -------------------------------------------------------------------------------------

POOL = [f"e{i}" for i in range(8)]


@st.composite
def journals(draw):
    events = []
    for eid in POOL:
        if draw(st.booleans()):
            events.append(entry(
                eid, at(draw(st.integers(0, 5))),
                anchors=[f"tool_use:{a}" for a in draw(st.lists(st.sampled_from(POOL),
                                                                 max_size=2))],
                depends_on=draw(st.lists(st.sampled_from(POOL), max_size=3)),
                about=draw(st.sampled_from([None, "s1", "s2"]))))
    for target in draw(st.lists(st.sampled_from(POOL), max_size=3)):
        events.append(ev("tombstone", "tombstone", target, at(7), {"reason": "r"}))
    for target in draw(st.lists(st.sampled_from(POOL), max_size=2)):
        events.append(ev("invalidation", "invalidation", target, at(8), {"reason": "r"}))
    return events


@settings(max_examples=150, deadline=None)
@given(journals(), st.sampled_from(POOL + ["s1", "s2"]), st.randoms(use_true_random=False))
def test_trace_laws(events, target, rnd):
    d = derive(events)
    report = trace_derived(d, target)
    shuffled = list(events)
    rnd.shuffle(shuffled)
    assert trace_derived(derive(shuffled), target) == report
    chain_ids = [r["id"] for r in report["chain"]]
    assert len(chain_ids) == len(set(chain_ids))
    assert [r["id"] for r in report["matched"]] == chain_ids[:len(report["matched"])]
    for row in report["matched"] + report["chain"]:
        assert not d.is_tombstoned(row["id"])
    for row in report["chain"][len(report["matched"]):]:
        assert row["via"] in d.entry_events[row["id"]].data["dependsOn"]
        assert row["via"] in chain_ids[:chain_ids.index(row["id"])]


def test_random_shuffles_agree_on_a_big_journal():
    rnd = random.Random(7)
    events = [entry(f"n{i}", at(i % 50), depends_on=[f"n{rnd.randrange(i)}"] if i else [])
              for i in range(300)]
    first = trace_derived(derive(events), "n0")
    rnd.shuffle(events)
    assert trace_derived(derive(events), "n0") == first
    assert len(first["chain"]) == 300


# -- the command ------------------------------------------------------------------------------

def test_golden_trace_of_a_subject(cli, root):
    build_scenario(root)
    result = cli("trace", "--json", "test_upload")
    assert result.code == 0 and result.err == ""
    check_golden("trace_test_upload.json", normalise(result.out, root))


def test_golden_trace_of_a_tombstoned_observation(cli, root):
    build_scenario(root)
    result = cli("trace", "--json", "obs-env")
    # f-key cited obs-env, but f-key is tombstoned itself: nothing may surface, and a
    # tombstoned id names nothing.
    assert (result.code, result.out) == (1, "")
    assert result.err == ("error: no entry or observation with id obs-env in workspace ws, "
                          "and no entry cites it\n")
    check_golden("trace_obs-vendor-call.json", normalise(
        cli("trace", "--json", "obs-vendor-call").out, root))


def test_damage_is_reported_and_warned(cli, root):
    build_scenario(root)
    damage(root)
    result = cli("trace", "--json", "f-flaky")
    assert result.code == 0
    report = result.json()
    assert len(report["malformed"]) == 1 and len(report["unreadable"]) == 1
    assert "floor, not a total" in result.err


def test_usage_errors(cli):
    assert cli("trace", "--json").code == 2
    bad = cli("trace", "--json", "a/b")
    assert bad.code == 2 and "path separators" in bad.err
    assert cli("trace", "--json", "x", "--bogus").code == 2


def test_a_missing_workspace_is_an_error_not_an_empty_answer(cli):
    cli("record", "--kind", "note", "--id", "n", "--text", "t")
    result = cli("trace", "anything", "--workspace", "nothing-here")
    assert result.code == 1 and "no workspace 'nothing-here'" in result.err
