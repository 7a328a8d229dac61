"""decay: live entries whose tool_use anchors cite ids that no longer stand."""

from __future__ import annotations

import pytest
from audit_scenario import at, build_scenario, check_golden, damage, entry, ev, normalise

from agent_journal.core.derive import derive
from agent_journal.ops.decay import decay_derived


@pytest.fixture
def cli(inproc):
    """In-process: these tests need no real process."""
    return inproc



def test_each_reason_and_only_live_entries():
    events = [
        ev("observation", "tool_call", "obs-ok", at(1), {"tool": "Bash"}),
        ev("observation", "tool_call", "obs-tomb", at(1), {"tool": "Bash"}),
        entry("f-fine", at(2), anchors=["tool_use:obs-ok", "file:a.py", "url:https://x"]),
        entry("f-mixed", at(3), anchors=["tool_use:obs-ok", "tool_use:obs-tomb",
                                         "tool_use:obs-purged", "tool_use:obs-absent"]),
        entry("f-retracted", at(4), anchors=["tool_use:obs-absent"]),
        entry("f-suppressed", at(5), anchors=["tool_use:obs-absent"],
              depends_on=["f-retracted"]),
        entry("f-hidden", at(6), anchors=["tool_use:obs-absent"]),
        ev("tombstone", "tombstone", "obs-tomb", at(7), {"reason": "r"}),
        ev("tombstone", "tombstone", "obs-purged", at(7), {"reason": "r", "purged": True}),
        ev("invalidation", "invalidation", "f-retracted", at(8), {"reason": "wrong"}),
        ev("tombstone", "tombstone", "f-hidden", at(8), {"reason": "leak"}),
    ]
    report = decay_derived(derive(events))
    assert report == {
        "entries": [{"id": "f-mixed", "kind": "finding", "ts": at(3), "anchors": [
            {"anchor": "tool_use:obs-tomb", "status": "unknown", "reason": "tombstoned"},
            {"anchor": "tool_use:obs-purged", "status": "unknown", "reason": "purged"},
            {"anchor": "tool_use:obs-absent", "status": "unknown", "reason": "absent"},
        ]}],
        "liveEntriesChecked": 2,
        "anchorsChecked": 5,
    }


def test_golden_decay(cli, root):
    build_scenario(root)
    before = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns)
                    for p in (root / "workspaces" / "ws" / "segments").iterdir())
    result = cli("decay", "--json")
    assert result.code == 0 and result.err == ""
    report = result.json()
    assert [(e["id"], [a["reason"] for a in e["anchors"]]) for e in report["entries"]] == [
        ("f-vendor", ["purged"]), ("f-remote", ["absent"])]
    check_golden("decay.json", normalise(result.out, root))
    after = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns)
                   for p in (root / "workspaces" / "ws" / "segments").iterdir())
    assert after == before  # read-only


def test_tombstoned_observation_cited_by_a_live_entry(cli):
    cli("observe", "--kind", "tool_call", "--id", "obs-1", "--tool", "Bash")
    cli("record", "--kind", "finding", "--id", "f1", "--claim", "c",
        "--anchor", "tool_use:obs-1")
    assert cli("decay", "--json").json()["entries"] == []
    cli("tombstone", "obs-1", "--reason", "leak")
    assert cli("decay", "--json").json()["entries"][0]["anchors"] == [
        {"anchor": "tool_use:obs-1", "status": "unknown", "reason": "tombstoned"}]


def test_damage_is_reported_and_warned(cli, root):
    build_scenario(root)
    damage(root)
    result = cli("decay", "--json")
    assert result.code == 0
    assert len(result.json()["malformed"]) == 1 and len(result.json()["unreadable"]) == 1
    assert "floor, not a total" in result.err


def test_order_of_events_does_not_matter():
    import random

    rnd = random.Random(5)
    events = []
    for i in range(80):
        events.append(entry(f"e{i}", at(i % 11), anchors=[f"tool_use:o{rnd.randrange(40)}"
                                                           for _ in range(i % 3)]))
        if i % 2:
            events.append(ev("observation", "tool_call", f"o{i % 40}", at(i), {"tool": "Read"}))
        if i % 7 == 0:
            events.append(ev("tombstone", "tombstone", f"o{rnd.randrange(40)}", at(i),
                             {"reason": "r", "purged": bool(i % 2)}))
    first = decay_derived(derive(events))
    assert first["entries"]
    for _ in range(5):
        rnd.shuffle(events)
        assert decay_derived(derive(events)) == first
