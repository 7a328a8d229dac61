"""coverage: what a read of this workspace saw, and what it could not see.

Invariants:
- Every count is over the events actually read; `unreadable` and
  `malformed` say what was not, so a reader can tell a floor from a total.
  `unreadable` also names every segment SQLite's structural check fails on
  (storage.segment_reader.structure_damage), even when its rows were read.
- Tombstoned content never renders: tombstoned entries and observations are
  counted among the events read (a count is not content) but never listed by
  anything they wrote. Tombstones themselves are listed whole (target and
  reason are the record that a deletion was decided).
- `downgradedAnchors` is null: only a retention pass (compact) assesses it.
- An observation is counted under the kind its verified header reads
  (`codec.lazy_kind`: the kind beside the id and time decode_lazy confirms
  byte for byte), the same whether the read came from the projection or
  the segments; its body is parsed only when that kind is not a plain string.

`coverage_derived` is pure; `coverage` is the operation the CLI calls.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from agent_journal.core.anchors import PRESENT, anchor_report, cited_id
from agent_journal.core.codec import lazy_kind
from agent_journal.core.derive import Derived
from agent_journal.core.model import Event
from agent_journal.ops.context import Context
from agent_journal.storage.segment_reader import ReadResult


def _sorted_counts(counts: dict[str, int]) -> dict[str, int]:
    return {key: counts[key] for key in sorted(counts)}


def coverage_derived(events: Iterable[Event], d: Derived) -> dict[str, Any]:
    counts: dict[tuple[str, str], int] = {}
    for ev in events:
        key = (ev.type, lazy_kind(ev))
        counts[key] = counts.get(key, 0) + 1
    return coverage_counted(counts, d, d.observation_events.keys())


def coverage_counted(counts: Mapping[tuple[str, str], int], d: Derived,
                     observed: AbstractSet[str]) -> dict[str, Any]:
    """The report from events counted by (type, kind), the derivation, and
    every observation id read (`d` need hold only the observations entries
    cite: see ops/decay.py `derive_counted`)."""
    by_type: dict[str, int] = {}
    by_kind: dict[str, dict[str, int]] = {}
    total = 0
    for (type_, kind), n in counts.items():
        total += n
        by_type[type_] = by_type.get(type_, 0) + n
        kinds = by_kind.setdefault(type_, {})
        kinds[kind] = kinds.get(kind, 0) + n

    without_anchors: list[dict[str, Any]] = []
    dangling: list[dict[str, Any]] = []
    cited_by_live: set[str] = set()
    for entry_id in d.visible_entry_ids():
        ev = d.entry_events[entry_id]
        anchors = ev.data.get("anchors", ())
        live = d.is_live(entry_id)
        if not anchors:
            without_anchors.append({"id": entry_id, "kind": ev.kind, "live": live})
        for anchor in anchors:
            obs_id = cited_id(anchor)
            if obs_id is None:
                continue
            report = anchor_report(d, anchor)
            if report["status"] != PRESENT:
                dangling.append({"entry": entry_id, "live": live, **report})
            elif live:
                cited_by_live.add(obs_id)

    visible_obs = len(observed) - len(d.tombstones.keys() & observed)
    tombstones = []
    for target in sorted(d.tombstones):
        for t in d.tombstones[target]:
            tombstones.append({"eventId": t.event_id, "target": target,
                               "reason": t.data.get("reason"),
                               "purged": t.data.get("purged") is True, "ts": t.ts})
    tombstones.sort(key=lambda t: (t["ts"], t["eventId"]))
    return {
        "events": {
            "total": total,
            "byType": _sorted_counts(by_type),
            "byKind": {t: _sorted_counts(by_kind[t]) for t in sorted(by_kind)},
        },
        "entriesWithoutAnchors": without_anchors,
        "anchorsResolvingToNothing": dangling,
        "observationsCitedByLiveEntries": {
            "cited": len(cited_by_live),
            "observations": visible_obs,
            "share": round(len(cited_by_live) / visible_obs, 4) if visible_obs else None,
        },
        "tombstones": tombstones,
        "downgradedAnchors": None,
    }


def coverage(ctx: Context) -> tuple[dict[str, Any], ReadResult]:
    from agent_journal.ops.context import damage_lists
    from agent_journal.ops.counted import read_counted
    from agent_journal.ops.decay import derive_counted
    from agent_journal.storage.segment_reader import PausedGC

    with PausedGC():
        # Counted segment by segment (from the read projection where it holds):
        # no observation is kept, only its id.
        # A read that promises no writes: it uses the counts another run kept, keeps none.
        got = read_counted(ctx.open(create=False), keep=False)
        counts, observed, d = derive_counted(got)
        counted = coverage_counted(counts, d, observed)
        result = got.result
    # The strict read runs SQLite's check of every page on each segment it
    # reads, so damage no read meets (a zeroed index page) shows; a segment
    # it finds damaged has that verdict in `structure`.
    seen = {u["path"] for u in result.unreadable}
    result.unreadable.extend(u for u in got.structure if u["path"] not in seen)
    failed = {u["path"] for u in result.unreadable}
    # `segments` lists every segment found; `segmentsRead` counts those read to the
    # end (a segment that failed part-way is in `unreadable` too).
    report: dict[str, Any] = {"segments": list(result.segments),
                              "segmentsRead": sum(1 for s in result.segments if s not in failed)}
    report.update(counted)
    report.update(damage_lists(result))
    return report, result
