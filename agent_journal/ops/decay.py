"""decay: re-validate every live entry's anchors against the whole journal.

Invariants:
- Read-only: nothing is written, nothing is flagged in storage.
- An anchor whose cited id no longer stands is reported `unknown`, never
  intact, with why: `tombstoned` (a tombstone names it, bytes not yet
  purged), `purged` (a tombstone with purged: true names it) or `absent`
  (not in this journal: expired by a TTL, or never synced here).
- Only `tool_use:` anchors cite journal ids; `file:`, `commit:` and `url:`
  point outside the journal and are never reported here.
- Only live entries are listed: an invalidated, suppressed or tombstoned
  entry asserts nothing that could decay (and a tombstoned one must not
  render at all).

`decay_derived` is pure; `decay` is the operation the CLI calls.
"""

from __future__ import annotations

from typing import Any

from agent_journal.core.anchors import PRESENT, anchor_report, cited_id
from agent_journal.core.derive import Derived
from agent_journal.ops.context import Context
from agent_journal.storage.segment_reader import ReadResult


def decay_derived(d: Derived) -> dict[str, Any]:
    entries: list[dict[str, Any]] = []
    live_count = 0
    checked = 0
    for entry_id in d.visible_entry_ids():
        if not d.is_live(entry_id):
            continue
        live_count += 1
        ev = d.entry_events[entry_id]
        gone = []
        for anchor in ev.data.get("anchors", ()):
            if cited_id(anchor) is None:
                continue
            checked += 1
            report = anchor_report(d, anchor)
            if report["status"] != PRESENT:
                gone.append(report)
        if gone:
            entries.append({"id": entry_id, "kind": ev.kind, "ts": ev.ts, "anchors": gone})
    return {"entries": entries, "liveEntriesChecked": live_count,
            "anchorsChecked": checked}


def decay(ctx: Context) -> tuple[dict[str, Any], ReadResult]:
    from agent_journal.ops.context import damage_lists, read_workspace
    from agent_journal.storage.segment_reader import PausedGC

    with PausedGC():
        result, d = read_workspace(ctx)
        report = decay_derived(d)
    report.update(damage_lists(result))
    return report, result
