"""One source segment imported: the plan of its rows (core/merge_rows.py) carried out.

Invariant: what is written into the import is exactly the plan made from the
rows read inside the same attach (ImportWriter.source: one read transaction),
so what is written is what was checked even if the source is being written
meanwhile. Rows are copied by SQLite; only rebuilt rows are inserted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent_journal.core import merge_plan, merge_rows
from agent_journal.core.merge_plan import Planner, SlotIndex
from agent_journal.core.merge_rows import Slot, SourceSegment, Wanted
from agent_journal.ops.merge_sources import Source
from agent_journal.storage.replica_import import ImportSource


@dataclass
class MergeRun:
    """What every segment of one merge's source feeds and is decided by."""

    src: Source
    planner: Planner
    slots: SlotIndex
    watch: set[Slot]  # slots worth comparing (merge_plan.watched_slots)
    wanted: Wanted  # the artifacts the observations taken or held cite
    allow_damaged: bool
    malformed: list[dict[str, Any]]  # {segment, row, reason}, as met
    # Given a segment's event ids before it is decided, tells the planner which the
    # local segments hold (None: the planner knows every local id already).
    ask: Callable[[frozenset[str]], None] | None = None


def import_segment(seg: ImportSource, name: str, run: MergeRun) -> None:
    """Decide every row of one attached source segment, then let SQLite copy the rest.

    Rows of a verified export were checked by the exporter and sealed by the
    manifest checksums: they are decided from their columns, and only
    tombstones are read (the manifest lists artifacts); when nothing in it is
    damaged and no slot is watched, by sets (`_import_sealed`).
    """
    src = run.src
    if run.ask is not None:
        run.ask(seg.event_ids())
    own = merge_plan.own_segment(name)
    own_key = (own[0], name) if own is not None else None
    if src.sealed and not src.sealed_malformed.get(name) and own_key not in run.watch and \
            not (seg.has_origin and run.watch) and \
            _import_sealed(seg, own_key, run.planner, movable=src.movable):
        return
    sealed_bad = src.sealed_malformed.get(name, {})
    facts = SourceSegment(name, src.rel(seg.path), src.sealed, sealed_bad, own_key,
                          seg.provenance(), run.watch, run.allow_damaged)
    # A sealed row named malformed needs its bytes too: could it be a tombstone?
    rows = seg.rows(bodies="tombstones" if src.sealed and not sealed_bad else "all")
    plan = merge_rows.plan_segment(rows, facts, run.planner, run.slots, run.wanted)
    run.malformed.extend(plan.malformed)
    seg.copy(plan.skip, copied_ids=plan.copied, own=own_key)
    seg.insert(plan.rebuilt, plan.origins)
    seg.wrote_tombstones(plan.tombstones)


def _import_sealed(seg: ImportSource, own_key: Slot | None, planner: Planner, *,
                   movable: bool = False) -> bool:
    """The common case of a sealed export segment: only its tombstones and the
    rows about tombstoned ids are read row by row; every other row is decided
    with set operations over its id (read from the index alone) and copied by
    SQLite. False, with nothing decided, when a tombstone's bytes do not check
    out (the row-by-row path then reports it)."""
    tombstones = merge_rows.verified_tombstones(seg.tombstone_rows())
    if tombstones is None:
        return False
    for *_, obj in tombstones:
        planner.tombstoned.add(obj["id"])
    plan = merge_rows.plan_sealed(tombstones, set(seg.rows_about(planner.tombstoned)),
                                  seg.event_ids(), planner, own_key, seg.provenance)
    # (In the order read, which an import's name sorts quickly.)
    listed = seg.event_id_list()
    copied = [e for e in listed if e not in plan.decisions] if plan.decisions else listed
    if movable and own_key is not None and not plan.decisions and seg.adoptable():
        # Every row taken as stored, and nothing but rows in the file: publish
        # the fetched file itself rather than a copy of it.
        seg.adopt(copied, own_key, plan.tombstones)
        return True
    seg.copy(plan.decisions, copied_ids=copied, own=own_key)
    seg.insert(plan.rebuilt, plan.origins)
    seg.wrote_tombstones(plan.tombstones)
    return True
