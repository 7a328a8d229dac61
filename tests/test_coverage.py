"""coverage: what was read, what was not, and what the journal's anchors reach."""

from __future__ import annotations

import pytest
from audit_scenario import (
    SECRET,
    at,
    build_scenario,
    check_golden,
    damage,
    entry,
    ev,
    normalise,
)

from agent_journal.core.derive import derive
from agent_journal.ops.coverage import coverage_derived


@pytest.fixture
def cli(inproc):
    """In-process: these tests need no real process."""
    return inproc



def test_counts_anchors_share_and_tombstones():
    t1 = ev("tombstone", "tombstone", "obs-3", at(6), {"reason": "leak"}, event_id="t-1")
    t2 = ev("tombstone", "tombstone", "obs-9", at(7), {"reason": "old", "purged": True},
            event_id="t-2")
    events = [
        ev("observation", "tool_call", "obs-1", at(1), {"tool": "Bash", "status": "started"}),
        ev("observation", "tool_call", "obs-1", at(2), {"status": "ok"}),
        ev("observation", "tool_call", "obs-2", at(2), {"tool": "Read"}),
        ev("observation", "tool_call", "obs-3", at(2), {"tool": "Read"}),
        ev("observation", "user_prompt", "obs-4", at(2), {}),
        entry("f-live", at(3), anchors=["tool_use:obs-1", "tool_use:obs-3", "file:x"]),
        entry("f-dead", at(4), anchors=["tool_use:obs-2", "tool_use:obs-9"]),
        entry("n-bare", at(5), kind="note", fields={"text": "t"}),
        ev("invalidation", "invalidation", "f-dead", at(5), {"reason": "wrong"}),
        t1, t2,
        ev("future", "shiny", "z", at(8), {}),
    ]
    report = coverage_derived(events, derive(events))
    assert report["events"] == {
        "total": 12,
        "byType": {"entry": 3, "future": 1, "invalidation": 1, "observation": 5,
                   "tombstone": 2},
        "byKind": {"entry": {"finding": 2, "note": 1}, "future": {"shiny": 1},
                   "invalidation": {"invalidation": 1},
                   "observation": {"tool_call": 4, "user_prompt": 1},
                   "tombstone": {"tombstone": 2}},
    }
    assert report["entriesWithoutAnchors"] == [{"id": "n-bare", "kind": "note", "live": True}]
    assert report["anchorsResolvingToNothing"] == [
        {"entry": "f-live", "live": True, "anchor": "tool_use:obs-3", "status": "unknown",
         "reason": "tombstoned"},
        {"entry": "f-dead", "live": False, "anchor": "tool_use:obs-9", "status": "unknown",
         "reason": "purged"},
    ]
    # obs-1 is cited by a live entry; obs-2 only by an invalidated one; obs-3 is hidden.
    assert report["observationsCitedByLiveEntries"] == {"cited": 1, "observations": 3,
                                                        "share": 0.3333}
    assert report["tombstones"] == [
        {"eventId": "t-1", "target": "obs-3", "reason": "leak", "purged": False, "ts": at(6)},
        {"eventId": "t-2", "target": "obs-9", "reason": "old", "purged": True, "ts": at(7)},
    ]
    assert report["downgradedAnchors"] is None


def test_empty_journal_share_is_null():
    report = coverage_derived([], derive([]))
    assert report["observationsCitedByLiveEntries"] == {"cited": 0, "observations": 0,
                                                        "share": None}


def test_golden_coverage(cli, root):
    build_scenario(root)
    result = cli("coverage", "--json")
    assert result.code == 0 and result.err == ""
    assert SECRET not in result.out
    report = result.json()
    assert [(t["target"], t["purged"]) for t in report["tombstones"]] == [
        ("obs-env", False), ("f-key", False), ("obs-vendor-call", True)]
    assert report["downgradedAnchors"] is None
    check_golden("coverage.json", normalise(result.out, root))


def test_damage_is_reported_and_warned(cli, root):
    build_scenario(root)
    damage(root)
    result = cli("coverage", "--json")
    assert result.code == 0
    report = result.json()
    assert len(report["malformed"]) == 1 and len(report["unreadable"]) == 1
    assert report["unreadable"][0]["path"].endswith("junk.sqlite")
    assert len(report["segments"]) == 2 and report["segmentsRead"] == 1
    assert "floor, not a total" in result.err


def test_order_of_events_does_not_matter():
    import random

    from audit_scenario import entry as make_entry

    rnd = random.Random(3)
    events = []
    for i in range(60):
        events.append(ev("observation", "tool_call", f"o{i % 20}", at(i), {"tool": "Bash"}))
        events.append(make_entry(f"e{i}", at(i % 7), anchors=[f"tool_use:o{rnd.randrange(30)}"]
                                 if i % 3 else []))
        if i % 9 == 0:
            events.append(ev("tombstone", "tombstone", f"o{i % 25}", at(i), {"reason": "r"},
                             event_id=f"t{i}"))
    first = coverage_derived(events, derive(events))
    for _ in range(5):
        rnd.shuffle(events)
        assert coverage_derived(events, derive(events)) == first
