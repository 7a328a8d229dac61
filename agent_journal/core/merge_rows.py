"""One source segment's rows, planned for a merge: what is copied, rebuilt or left. Pure.

Invariants:
- Every row is placed once: its event id is either copied by SQLite as
  stored (`copied`) or not (`skip`); a row rebuilt (`rebuilt`: a tombstone
  arriving as not purged, a text body or lookup columns that disagree with
  the bytes, stored as this replica would have written them) is skipped by
  the copy and inserted instead.
- What is written is what `Planner.take` imports (merge_plan.py): nothing a
  tombstone on either side names, nothing held here already, nothing a
  compaction here removed; the planner's `imported` grows by exactly the
  rows copied and rebuilt.
- A row that fails verification is never written: it is listed in
  `malformed`; with `allow_damaged`, one that could be a tombstone refuses
  the whole merge (DamagedJournalError), since it could be the tombstone
  that keeps some content out.
- Rows of a sealed export (checked by the exporter, the manifest naming its
  malformed rows) are decided from their columns; only tombstones are read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from agent_journal.core import codec
from agent_journal.core.errors import DamagedJournalError
from agent_journal.core.merge_plan import (
    DUPLICATE,
    IMPORT,
    PRESENT,
    REMOVED,
    TOMBSTONED,
    Planner,
    SlotIndex,
    arriving,
    artifact_record,
    id_in_body,
    tombstone_candidate,
)
from agent_journal.core.model import OBSERVATION, TOMBSTONE, Event

# A stored row as merge reads it: (seq, event_id, type, subject, ts, checksum, body or None).
Row = tuple[int, str, str, "str | None", str, str, Any]
Slot = tuple[str, str]  # (replica, segment file name)
# Artifact ref -> (its record, the ids of the observations citing it).
Wanted = dict[str, tuple[dict[str, Any], set[str]]]
_NOT_TAKEN = (DUPLICATE, TOMBSTONED, REMOVED)


class RebuiltRow(NamedTuple):
    """A row stored as this replica would write it (its columns agreeing with
    its bytes)."""

    event_id: str
    type: str
    subject: str | None
    ts: str
    body: bytes
    checksum: str


class Origin(NamedTuple):
    """The append slot an imported event came from: its provenance."""

    event_id: str
    replica: str
    segment: str
    seq: int


class SourceSegment(NamedTuple):
    """What the plan of one source segment knows besides its rows."""

    name: str  # its file name
    rel: str  # its path as reported
    sealed: bool  # an export's, verified against its manifest
    sealed_bad: dict[int, str]  # seq -> why, the rows the manifest names malformed
    own: Slot | None  # (replica, name) when it is a replica's own segment
    provenance: dict[str, tuple[str, str, int]]  # an import's: event id -> its slot
    watch: set[Slot]  # the slots whose events are fed to `SlotIndex`
    allow_damaged: bool


class SegmentPlan:
    """What a merge writes of one source segment (see the module's invariants)."""

    __slots__ = ("skip", "copied", "rebuilt", "origins", "tombstones", "malformed")

    def __init__(self) -> None:
        self.skip: list[str] = []
        self.copied: list[str] = []
        self.rebuilt: list[RebuiltRow] = []
        self.origins: list[Origin] = []  # of the rebuilt rows that have one
        self.tombstones: set[str] = set()  # the ids the tombstones written name
        self.malformed: list[dict[str, Any]] = []  # {segment, row, reason}


def decode_row(body: Any, checksum: str, event_id: str) -> Event:
    """codec.decode plus the one check that needs the row: its event_id column."""
    ev = codec.decode(body, checksum)
    if ev.event_id != event_id:
        raise codec.MalformedEvent("event_id column does not match body")
    return ev


def verify_row(body: Any, checksum: str, event_id: str) -> dict[str, Any]:
    """codec.verify plus the event_id column check, without building an Event."""
    obj = codec.verify(body, checksum)
    if obj["eventId"] != event_id:
        raise codec.MalformedEvent("event_id column does not match body")
    return obj


def tombstone_targets(rows: list[tuple[Any, ...]]) -> set[str]:
    """The ids the tombstones among these rows name, rows as a segment read
    gives them: (seq, event_id, type, subject, ts, body, checksum). A row that
    does not decode names nothing (its damage is reported where it is read in
    full)."""
    found: set[str] = set()
    for _seq, event_id, _t, _s, _ts, body, digest in rows:
        try:
            ev = decode_row(body, digest, event_id)
        except codec.MalformedEvent:
            continue
        if ev.type == TOMBSTONE and ev.id is not None:
            found.add(ev.id)
    return found


def watched_slots(source_own: set[Slot], source_provenance: set[Slot], local: set[Slot]
                  ) -> set[Slot]:
    """The append slots worth comparing for replica id collisions: those both
    sides can speak about, and those the source speaks about twice (its own
    segment and an import's provenance)."""
    return ((source_own | source_provenance) & local) | (source_own & source_provenance)


def plan_segment(rows: list[Row], seg: SourceSegment, planner: Planner, slots: SlotIndex,
                 wanted: Wanted) -> SegmentPlan:
    """Decide every row of one source segment, in seq order. Feeds `planner`
    (the merge's decisions), `slots` (the watched slots' events) and `wanted`
    (the artifacts the observations taken or held cite).

    Rows of a root are verified here (checksum, parse, shape); a row already
    held only needs intact bytes (it is parsed only to find an artifact).
    """
    plan = SegmentPlan()
    checksum, take, skip, copied = codec.checksum, planner.take, plan.skip, plan.copied.append
    local_ids, seen = planner.local_ids, planner.seen
    own, watch, provenance = seg.own, seg.watch, seg.provenance
    sealed, sealed_bad = seg.sealed, seg.sealed_bad
    for row in rows:
        seq, event_id, col_type, col_subject, col_ts, digest, body = row
        obj: dict[str, Any] | None = None
        type_, subject, ts = col_type, col_subject, col_ts
        try:
            if sealed:
                if seq in sealed_bad:
                    raise codec.MalformedEvent(sealed_bad[seq])
                if body is not None:
                    obj = verify_row(body, digest, event_id)
            elif (event_id in local_ids and event_id not in seen and type(body) is bytes
                    and checksum(body) == digest and id_in_body(event_id, body)):
                # Held here already: nothing will be written, so intact bytes are
                # all that matters. Parse only to find an artifact to repair.
                if b'"artifact":{' in body:
                    obj = codec.verify(body, digest)
            else:
                obj = verify_row(body, digest, event_id)
                type_, subject, ts = obj["type"], obj["id"], obj["ts"]
        except codec.MalformedEvent as exc:
            _malformed(plan, seg, row, exc)
            continue
        origin = (own[0], own[1], seq) if own is not None else provenance.get(event_id)
        if origin is not None and (origin[0], origin[1]) in watch:
            slots.add(origin[0], origin[1], origin[2], event_id, type_, subject)
        decision = take(event_id, type_, subject)
        if decision in _NOT_TAKEN:
            skip.append(event_id)
            continue
        if obj is not None and type_ == OBSERVATION:
            art = artifact_record(type_, obj["data"])
            if art is not None:
                wanted.setdefault(art["ref"], (art, set()))[1].add(subject or "")
        if decision == PRESENT:
            skip.append(event_id)
            continue
        assert decision == IMPORT
        if type_ == TOMBSTONE:
            named = obj["id"] if obj is not None else subject
            if named is not None:
                plan.tombstones.add(named)
        elif (body is None or type(body) is bytes) and col_type == type_ \
                and col_subject == subject and col_ts == ts:
            copied(event_id)  # (most rows: stored as they are)
            continue
        rebuilt = _rebuilt(row, obj, type_, subject, ts)
        if rebuilt is None:
            copied(event_id)
            continue
        skip.append(event_id)
        plan.rebuilt.append(rebuilt)
        if origin is not None:
            plan.origins.append(Origin(event_id, *origin))
    return plan


def _malformed(plan: SegmentPlan, seg: SourceSegment, row: Row,
               exc: codec.MalformedEvent) -> None:
    seq, event_id, col_type, body = row[0], row[1], row[2], row[6]
    if seg.allow_damaged and tombstone_candidate(col_type, body):
        raise DamagedJournalError(
            f"refusing to merge: the source's malformed row {seg.rel} row {seq} "
            f"({exc}) could be a tombstone; nothing was imported") from None
    plan.malformed.append({"segment": seg.rel, "row": seq, "reason": str(exc)})
    plan.skip.append(event_id)


def _rebuilt(row: Row, obj: dict[str, Any] | None, type_: str, subject: str | None,
             ts: str) -> RebuiltRow | None:
    """The row to insert in place of copying this imported one, or None when
    SQLite may copy it as stored."""
    event_id, col_type, col_subject, col_ts, digest, body = row[1:]
    if type_ == TOMBSTONE and obj is not None:
        changed = arriving(codec.from_dict(obj))
        if changed is not None:
            raw, new_digest = codec.encode(changed)
            return RebuiltRow(event_id, type_, subject, ts, raw, new_digest)
    if type(body) is not bytes and body is not None or \
            (col_type, col_subject, col_ts) != (type_, subject, ts):
        # Text body or lookup columns that disagree with the bytes: store it
        # the way this replica would have written it.
        return RebuiltRow(event_id, type_, subject, ts, codec.as_bytes(body), digest)
    return None


# -- a sealed export's segment, decided by sets ---------------------------------------------

# A verified tombstone row: (seq, event_id, type, subject, ts, its parsed body).
Tombstone = tuple[int, str, str, "str | None", str, dict[str, Any]]


class SealedPlan(NamedTuple):
    """What a merge writes of a sealed segment decided by sets (`plan_sealed`)."""

    decisions: dict[str, str]  # event id -> why it is not copied as stored
    rebuilt: list[RebuiltRow]
    origins: list[Origin]
    tombstones: set[str]  # the ids the tombstones written name


def verified_tombstones(rows: list[Row]) -> list[Tombstone] | None:
    """The tombstone rows with their parsed bodies; None when one does not check
    out (the row-by-row plan then reports it)."""
    found = []
    for seq, event_id, type_, subject, ts, digest, body in rows:
        try:
            obj = verify_row(body, digest, event_id)
        except codec.MalformedEvent:
            return None
        found.append((seq, event_id, type_, subject, ts, obj))
    return found


def plan_sealed(tombstones: list[Tombstone], about: set[tuple[int, str, str, str | None]],
                ids: frozenset[str], planner: Planner, own: Slot | None,
                provenance: Callable[[], dict[str, tuple[str, str, int]]]) -> SealedPlan:
    """The common case of a sealed export segment (nothing damaged, no slot to
    watch): its tombstones and the rows `about` tombstoned ids are taken row
    by row, every other id with set operations (`Planner.take_bulk`). The
    tombstones' targets must be in `planner.tombstoned` already. `provenance`
    gives the segment's, read only when a rebuilt tombstone needs it."""
    special = set(about)
    special.update((seq, event_id, type_, subject)
                   for seq, event_id, type_, subject, _, _ in tombstones)
    decisions = planner.take_bulk(ids, list(special))
    plan = SealedPlan(decisions, [], [], set())
    held: dict[str, tuple[str, str, int]] | None = None
    for seq, event_id, type_, subject, ts, obj in tombstones:
        if decisions.get(event_id, IMPORT) != IMPORT:
            continue
        plan.tombstones.add(obj["id"])
        changed = arriving(codec.from_dict(obj))
        if changed is None:
            continue
        raw, new_digest = codec.encode(changed)
        plan.rebuilt.append(RebuiltRow(event_id, type_, subject, ts, raw, new_digest))
        decisions[event_id] = "rebuilt"
        if own is not None:
            plan.origins.append(Origin(event_id, own[0], own[1], seq))
            continue
        if held is None:
            held = provenance()
        if event_id in held:
            plan.origins.append(Origin(event_id, *held[event_id]))
    return plan
