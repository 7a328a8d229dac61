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

from typing import TYPE_CHECKING, Any

from agent_journal.core.anchors import PRESENT, anchor_report, cited_id
from agent_journal.core.derive import Derived
from agent_journal.ops.context import Context
from agent_journal.storage.segment_reader import ReadResult

if TYPE_CHECKING:
    from agent_journal.ops.counted import Counted


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


def derive_counted(got: Counted) -> tuple[dict[tuple[str, str], int], set[str], Derived]:
    """(events by (type, kind), every observation id, the derivation) of a
    counted read (ops.counted.read_counted).

    Observations take no part in liveness or outcomes, so the derivation is
    of every other event; of the observations it knows only that the ids
    entries cite are present (`anchors.id_standing` asks nothing more). The
    events of damaged segments, read loosely, are counted here by
    `codec.lazy_kind`, as the counting read counts the others.
    """
    from agent_journal.core.codec import lazy_kind
    from agent_journal.core.derive import derive
    from agent_journal.core.model import OBSERVATION

    counts = dict(got.counts)
    observed = got.observed
    others = got.result.events
    for ev in got.loose:
        key = (ev.type, lazy_kind(ev))
        counts[key] = counts.get(key, 0) + 1
        if ev.type == OBSERVATION:
            observed.add(ev.id)
        else:
            others.append(ev)
    d = derive(others)
    for ev in d.entry_events.values():
        anchors = ev.data.get("anchors", ())
        for anchor in anchors if isinstance(anchors, list) else ():
            obs_id = cited_id(anchor) if isinstance(anchor, str) else None
            if obs_id is not None and obs_id in observed:
                d.observation_events.setdefault(obs_id, [])
    return counts, observed, d


def decay(ctx: Context) -> tuple[dict[str, Any], ReadResult]:
    from agent_journal.ops.context import damage_lists
    from agent_journal.ops.counted import read_counted
    from agent_journal.storage.segment_reader import PausedGC

    with PausedGC():
        # Read segment by segment (from the read projection where it holds),
        # keeping of the observations only their ids.
        got = read_counted(ctx.open(create=False))
        _counts, _observed, d = derive_counted(got)
        report = decay_derived(d)
    result = got.result
    report.update(damage_lists(result))
    return report, result
