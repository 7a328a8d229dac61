"""Anchor standing: evidence that is gone never reads as present."""

from __future__ import annotations

from audit_scenario import at, ev

from agent_journal.core.anchors import anchor_report, cited_id, standing
from agent_journal.core.derive import derive


def test_only_tool_use_anchors_cite_journal_ids():
    assert cited_id("tool_use:obs-1") == "obs-1"
    assert cited_id("file:src/a.py") is None
    assert cited_id("commit:abc") is None
    assert cited_id("url:https://example.com/x") is None
    assert cited_id("tool_use:") is None


def test_each_standing():
    d = derive([
        ev("observation", "tool_call", "obs-here", at(1), {"tool": "Bash"}),
        ev("observation", "tool_call", "obs-tomb", at(2), {"tool": "Bash"}),
        ev("tombstone", "tombstone", "obs-tomb", at(3), {"reason": "r"}),
        ev("tombstone", "tombstone", "obs-purged", at(4), {"reason": "r", "purged": True}),
        # a later unpurged tombstone (say, merged from another replica) does not
        # un-purge anything
        ev("tombstone", "tombstone", "obs-purged", at(5), {"reason": "r"}),
    ])
    assert standing(d, "tool_use:obs-here") == ("present", None)
    assert standing(d, "tool_use:obs-tomb") == ("unknown", "tombstoned")
    assert standing(d, "tool_use:obs-purged") == ("unknown", "purged")
    assert standing(d, "tool_use:obs-elsewhere") == ("unknown", "absent")
    assert standing(d, "file:README.md") == ("external", None)
    assert anchor_report(d, "tool_use:obs-tomb") == {
        "anchor": "tool_use:obs-tomb", "status": "unknown", "reason": "tombstoned"}


def test_an_entry_id_is_not_an_observation():
    d = derive([ev("entry", "finding", "f1", at(1),
                   {"fields": {"claim": "c"}, "anchors": [], "dependsOn": [], "subject": None})])
    assert standing(d, "tool_use:f1") == ("unknown", "absent")
