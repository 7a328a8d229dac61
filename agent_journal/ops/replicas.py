"""Replicas: merge another replica (a journal root or an export, ops/export.py) into one.

Invariants:
- Merge verifies a whole export against its manifest before it reads one
  event; any mismatch refuses the merge with nothing imported.
- Merge refuses to write into a damaged local workspace: an unreadable
  segment or a damaged tombstone row there could be the tombstone that keeps
  some content out.
- A source tombstone is honoured even when a quick pre-scan missed it: rows
  already written about its target are dropped before anything is published.
- Merge only ever creates new import segments (ImportWriter); it never
  writes to an existing segment, its own or another replica's.
- Every distinct, well-formed source event is counted exactly once in the
  report: imported + alreadyPresent + len(notImported).
- Nothing here prints: progress goes through the callback the caller passes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, NamedTuple

from agent_journal.core import codec, merge_plan, merge_rows
from agent_journal.core.errors import DamagedJournalError, UsageError
from agent_journal.core.merge_plan import Planner, SlotIndex
from agent_journal.core.merge_rows import Slot
from agent_journal.core.model import TOMBSTONE
from agent_journal.ops.context import Context, damage_summary
from agent_journal.ops.merge_import import MergeRun, import_segment
from agent_journal.ops.merge_sources import (
    Source,
    artifact_path_or_none,
    open_source,
    size_or_none,
)
from agent_journal.storage.artifacts import blob_matches_ref, blob_present
from agent_journal.storage.files import copy_file_verified
from agent_journal.storage.local_scans import ScanPoints
from agent_journal.storage.locks import MergeLock
from agent_journal.storage.replica_import import ImportWriter
from agent_journal.storage.replica_source import (
    HeldProbe,
    SealedFacts,
    SegmentRows,
    Unreadable,
    event_ids,
    ids_held,
    imported_then_removed,
    origin_keys,
    read_slots,
)
from agent_journal.storage.segment_reader import PausedGC, structure_damage
from agent_journal.storage.workspace import SEGMENT_MAX_BYTES, Workspace

Progress = Callable[[str], None] | None

ENV_IMPORT_MAX_BYTES = "AGENT_JOURNAL_SEGMENT_MAX_BYTES"


def say(progress: Progress, text: str) -> None:
    if progress is not None:
        progress(text)


def path_arg(value: str | None, what: str) -> str:
    if value is None or value.strip() == "":
        raise UsageError(f"{what} must not be empty")
    return os.path.abspath(os.path.expanduser(value))


# -- the local side -----------------------------------------------------------------------

class Local:
    """What a merge must know about the local workspace before deciding anything."""

    def __init__(self) -> None:
        self.ids: set[str] = set()
        # False: `ids` was not read; a merge asks the segments about its source's ids
        self.ids_read = True
        self.tombstoned: set[str] = set()
        self.slot_keys: set[tuple[str, str]] = set()
        # By segment file name, the slots it can speak about (its own, or those its
        # provenance names): a merge reads the slots of only those segments whose keys
        # it watches (`_local_slots`), not of every import the history holds.
        self.slots_of: dict[str, set[tuple[str, str]]] = {}
        # ids the provenance of local imports names that no local segment holds:
        # imported once, then removed by a compaction here (see merge_plan.REMOVED)
        self.removed: set[str] = set()
        self.unreadable: list[dict[str, str]] = []
        self.malformed: list[dict[str, Any]] = []


def scan_local(ws: Workspace, *, paths: list[str] | None = None, into: Local | None = None,
               points: ScanPoints | None = None, read_ids: bool = True) -> Local:
    """Event ids, tombstones and slot keys of the local workspace; damage counted.

    A fold over segments: `paths` and `into` add some segments (an import a
    merge just published) to an earlier scan, with the result a scan of all
    of them gives.

    Ids come from the event_id column, without reading bodies: a merge only
    needs to know what is held. Every row that could be a tombstone
    (merge_plan.tombstone_candidate) is verified in full, because tombstones
    decide what a merge may write; a damaged one, or a segment SQLite cannot
    read or finds corrupt (which could hold one), is damage. A row that
    cannot be a tombstone changes nothing a merge decides and is not read.
    With `points` (storage/local_scans.py), a segment read before under the same
    fingerprint has only its ids read again. Without `read_ids`, no id is read
    (`held_here` asks for the ones a merge needs) and `removed` still holds ids
    another segment may hold.
    """
    local = Local() if into is None else into
    local.ids_read = local.ids_read and read_ids
    ids = local.ids
    for path in ws.segment_paths() if paths is None else paths:
        name = os.path.basename(path)
        own = merge_plan.own_segment(name)
        if own is not None:
            local.slot_keys.add((own[0], name))
            local.slots_of[name] = {(own[0], name)}
        held = points.lookup(path) if points is not None else None
        if held is not None:
            local.slot_keys |= held["origin"]
            local.slots_of.setdefault(name, set()).update(held["origin"])
            try:
                if read_ids:
                    ids.update(event_ids(path))
            except Unreadable as exc:
                local.unreadable.append({"path": ws.rel(path), "reason": str(exc)})
                continue
            local.removed |= held["removed"]
            local.tombstoned |= held["tombstoned"]
            continue
        sig = points.fingerprint(path) if points is not None else None
        origin = origin_keys(path)
        local.slot_keys |= origin
        local.slots_of.setdefault(name, set()).update(origin)
        damage = structure_damage(path)
        if damage is not None:
            local.unreadable.append({"path": ws.rel(path), "reason": damage})
            continue
        try:
            if read_ids:
                ids.update(event_ids(path))
            removed = imported_then_removed(path)
            candidates = SegmentRows(path, only="tombstone_candidates").rows
        except Unreadable as exc:
            local.unreadable.append({"path": ws.rel(path), "reason": str(exc)})
            continue
        local.removed |= removed
        tombstoned: set[str] = set()
        clean = True
        for seq, event_id, type_, subject, ts, body, digest in candidates:
            try:
                # Strict, as every read judges a row: a tombstone whose type
                # column was edited is damage here, not an entry.
                ev = codec.decode_checked(body, digest, event_id, type_, subject, ts)
            except codec.MalformedEvent as exc:
                local.malformed.append({"segment": ws.rel(path), "row": seq,
                                        "reason": str(exc)})
                clean = False
                continue
            if ev.type == TOMBSTONE and ev.id is not None:
                tombstoned.add(ev.id)
        local.tombstoned |= tombstoned
        if points is not None and clean:
            points.remember(path, sig, tombstoned, removed, origin)
    if local.ids_read:
        local.removed -= ids
    return local


# A workspace this large has its ids asked about, never all read into memory: a
# million ids take over 100 MiB, asking costs a few percent more CPU than reading.
READ_IDS_MAX_BYTES = 64 << 20


def probe_ids(ws: Workspace, sources: list[Source]) -> bool:
    """Whether a merge of `sources` asks the local segments about each source
    segment's ids as it reads it (`held_here`) rather than reading every local id
    into one set: when the sources are smaller than the workspace (file sizes
    standing in for row counts), or the workspace is too large for its ids to be
    held (READ_IDS_MAX_BYTES). Asking scans or probes each local segment's index
    but keeps only the ids held; reading keeps every local id. Only the cost
    depends on it: `held_here` gives what the reading would have."""
    local = sum(size_or_none(p) or 0 for p in ws.segment_paths())
    source = sum(size_or_none(full) or 0 for src in sources for _, full in src.segments)
    return source < local or local > READ_IDS_MAX_BYTES


def held_here(ws: Workspace, wanted: set[str], probe: HeldProbe | None = None) -> set[str]:
    """The ids among `wanted` some local segment holds (asked through `probe`'s open
    segments when given)."""
    found: set[str] = set()
    for path in ws.segment_paths() if wanted else ():
        try:
            found |= ids_held(path, wanted) if probe is None else probe.held(path, wanted)
        except Unreadable as exc:
            raise DamagedJournalError(
                f"refusing to merge: the local segment {ws.rel(path)} became unreadable "
                f"({exc}); nothing was imported") from None
    return found


# -- merge ------------------------------------------------------------------------------

def merge(ctx: Context, source: str, *, allow_damaged: bool = False,
          progress: Progress = None) -> dict[str, Any]:
    """Union `source` into the workspace. Any damage on either side refuses
    with nothing imported; `allow_damaged` lets a source's malformed rows be
    skipped (and reported) when none of them could be a tombstone."""
    path = path_arg(source, "SOURCE")
    # An export is verified whole here, before anything (even the root) is created.
    src = open_source(path, ctx.workspace_name)
    ws = ctx.open(create=True)
    me = ws.root.replica_id
    say(progress, "merge: reading the local workspace")
    with MergeLock(ws), PausedGC():
        local, points = _scan_remembering(ws, [src])
        report = _merge_locked(ws, src, me, progress, allow_damaged, local, points)
        points.save()
        return report


def _scan_remembering(ws: Workspace, srcs: list[Source]) -> tuple[Local, ScanPoints]:
    """scan_local of the whole workspace through its scan-points projection, for
    a merge of `srcs`, and the projection (each merge adds the imports it
    publishes; save it after). The local ids are left unread for a merge of a
    few events into a large workspace: it asks about each source segment's own
    as it reads it (`_asker`)."""
    points = ScanPoints(ws)
    read_ids = not probe_ids(ws, srcs)
    local = scan_local(ws, points=points, read_ids=read_ids)
    points.keep_only({os.path.basename(p) for p in ws.segment_paths()})
    points.save()
    return local, points


def merge_all(ctx: Context, sources: list[str], *, checked: bool = False,
              progress: Progress = None,
              facts: dict[str, SealedFacts] | None = None) -> list[dict[str, Any]]:
    """`merge` of several sources, one after another, in one pass over the local
    workspace: its state is read once, and each source's published imports are
    folded into it (scan_local of just those files) for the next source.

    The reports are the ones `merge` of each source in turn gives (a law the
    tests hold): what a later merge would read of the local workspace is what
    it held before plus what the earlier merges published. Every source is
    verified before anything is written (export folders whose files the
    caller has just checked, with `checked`: see open_source); a refusal
    stops at that source, with the earlier ones merged, as separate merges
    would.
    """
    srcs = [open_source(path_arg(p, "SOURCE"), ctx.workspace_name, checked=checked)
            for p in sources]
    ahead = facts if checked and facts else {}
    for src in srcs if ahead else ():
        src.facts = {full: ahead[key] for _, full in src.segments
                     if (key := os.path.realpath(full)) in ahead}
    if not srcs:
        return []
    ws = ctx.open(create=True)
    me = ws.root.replica_id
    reports = []
    say(progress, "merge: reading the local workspace")
    with MergeLock(ws), PausedGC():
        local, points = _scan_remembering(ws, srcs)
        try:
            for n, src in enumerate(srcs, 1):
                report = _merge_locked(ws, src, me, progress, False, local, points)
                reports.append(report)
                if n < len(srcs):  # (after the last one, nothing reads it)
                    scan_local(ws, paths=[os.path.join(ws.root.path, rel)
                                          for rel in report["segmentsTouched"]], into=local,
                               points=points, read_ids=local.ids_read)
        finally:
            points.save()
    return reports


def _source_refusal(malformed: list[dict[str, Any]]) -> str:
    return (f"refusing to merge: the source has {damage_summary([], malformed)}; nothing was "
            "imported. --allow-damaged imports the rest when none of them could be a "
            "tombstone")


class SourceScan(NamedTuple):
    """Pass 1 over a source: what a merge must know of it before it decides a row."""

    readable: list[tuple[str, str]]  # (file name, path) of each segment to import
    tombstoned: set[str]  # the ids its tombstones name (pass 2 still catches any missed)
    own_keys: set[Slot]  # the slots of the replicas' own segments among its files
    provenance_keys: set[Slot]  # the slots its imports' provenance names
    unreadable: list[dict[str, str]]


def _merge_locked(ws: Workspace, src: Source, me: str, progress: Progress,
                  allow_damaged: bool, local: Local, points: ScanPoints) -> dict[str, Any]:
    """One merge; `local` is scan_local of the workspace as it is now. The
    imports it publishes are added to `points` from what it wrote into them."""
    scan = _scan_source(src, progress)
    _refuse_damage(src, scan, local, allow_damaged)
    # One set, which the planner and the slots share: a tombstone met late
    # counts for both.
    tombstoned = scan.tombstoned | local.tombstoned
    known_before = set(tombstoned)
    watch = merge_rows.watched_slots(scan.own_keys, scan.provenance_keys, local.slot_keys)
    slots = _local_slots(ws, me, tombstoned, watch, local.slots_of)
    planner = Planner(local.ids, tombstoned, local.removed) if local.ids_read \
        else Planner(set(), tombstoned, set())
    probe = HeldProbe()
    run = MergeRun(src, planner, slots, watch, dict(src.artifacts), allow_damaged, [],
                   None if local.ids_read else _asker(ws, local, planner, probe))
    writer = ImportWriter(ws, merge_plan.safe_replica(src.replica),
                          max_bytes=int(os.environ.get(ENV_IMPORT_MAX_BYTES) or SEGMENT_MAX_BYTES),
                          name_for=merge_plan.import_segment_name)
    try:
        touched = _write_imports(writer, run, scan.readable, known_before, progress)
    finally:
        probe.close()
    for path in touched:
        points.remember_published(path, *writer.published[path],
                                  digest=writer.digests.get(path))
    copied, already, missing = _merge_artifacts(ws, src, run.wanted, tombstoned)
    return {
        "source": {"path": src.path, "kind": src.kind, "replica": src.replica},
        "workspace": ws.name,
        **run.planner.report(),
        "segmentsTouched": [ws.rel(p) for p in touched],
        "replicaIdCollisions": sorted(slots.collisions),
        "artifacts": {"copied": copied, "alreadyPresent": already, "missing": missing},
        "unreadable": scan.unreadable,
        "malformed": run.malformed,
    }


def _scan_source(src: Source, progress: Progress) -> SourceScan:
    """Its tombstones (found by the type column, which is quick), the slots it
    speaks about, and which of its segments can be read. A sealed export's
    bytes are the exporter's, checked against the manifest (a fresh VACUUM
    INTO copy of segments the exporter checked itself), and it lists its
    tombstones."""
    scan = SourceScan([], set(src.tombstoned), set(), set(), [])
    for n, (name, full) in enumerate(src.segments, 1):
        say(progress, f"merge: scanning source {n}/{len(src.segments)}")
        own = merge_plan.own_segment(name)
        if own is not None:
            scan.own_keys.add((own[0], name))
        if src.sealed:
            scan.readable.append((name, full))
            scan.provenance_keys.update(origin_keys(full))
            continue
        damage = structure_damage(full)
        if damage is not None:
            scan.unreadable.append({"path": src.rel(full), "reason": damage})
            continue
        try:
            seg = SegmentRows(full, immutable=src.immutable, only="tombstone_rows",
                              provenance_keys=True)
        except Unreadable as exc:
            scan.unreadable.append({"path": src.rel(full), "reason": str(exc)})
            continue
        scan.readable.append((name, full))
        scan.provenance_keys.update(seg.provenance_keys)
        scan.tombstoned.update(merge_rows.tombstone_targets(seg.rows))
    return scan


def _refuse_damage(src: Source, scan: SourceScan, local: Local, allow_damaged: bool) -> None:
    if scan.unreadable:
        # Even with --allow-damaged: no row of a segment that could not be read
        # can be shown not to be a tombstone.
        raise DamagedJournalError(
            f"refusing to merge: the source has {damage_summary(scan.unreadable, [])}; "
            "nothing was imported. What they hide could be the tombstone that keeps some "
            "of the source's content out")
    sealed_bad = [{"segment": name, "row": row, "reason": why}
                  for name, rows in sorted(src.sealed_malformed.items())
                  for row, why in sorted(rows.items())]
    if sealed_bad and not allow_damaged:
        raise DamagedJournalError(_source_refusal(sealed_bad))
    if local.unreadable or local.malformed:
        raise DamagedJournalError(
            f"refusing to merge: the local workspace has "
            f"{damage_summary(local.unreadable, local.malformed)}; nothing was imported. "
            "What they hide could be the tombstone that keeps some of the source out")


def _local_slots(ws: Workspace, me: str, tombstoned: set[str], watch: set[Slot],
                 slots_of: dict[str, set[Slot]]) -> SlotIndex:
    """The local events of the watched slots, read from only the segments that can
    speak about one (by `slots_of`, what scan_local found; a segment it did not see is
    read)."""
    slots = SlotIndex(me, tombstoned)
    for path in ws.segment_paths() if watch else ():
        name = os.path.basename(path)
        known = slots_of.get(name)
        if known is not None and known.isdisjoint(watch):
            continue  # none of its slots is watched: it would add nothing
        own = merge_plan.own_segment(name)
        key = (own[0], name) if own is not None else None
        for slot in read_slots(path, own=key, keys=watch):
            slots.add(*slot)
    return slots


def _asker(ws: Workspace, local: Local, planner: Planner, probe: HeldProbe
           ) -> Callable[[frozenset[str]], None]:
    """What a merge that did not read the local ids asks as it comes to each source
    segment, inside the read of it (so what a source being written gains meanwhile
    is asked too): which of the segment's ids some local segment holds
    (`held_here`), and which a compaction here removed, into the planner. Only
    the ids held are kept, never every local or every source id."""
    held, removed = planner.local_ids, planner.removed_here
    assert isinstance(held, set) and isinstance(removed, set)

    def ask(ids: frozenset[str]) -> None:
        held.update(held_here(ws, set(ids), probe))
        gone = local.removed & ids
        if gone:
            removed.update(gone - held_here(ws, gone, probe))

    return ask


def _write_imports(writer: ImportWriter, run: MergeRun, readable: list[tuple[str, str]],
                   known_before: set[str], progress: Progress) -> list[str]:
    """Import every readable segment and publish the imports; their final paths.
    Nothing is published when anything refuses."""
    src = run.src
    try:
        for n, (name, full) in enumerate(readable, 1):
            say(progress, f"merge: importing {n}/{len(readable)}")
            try:
                with writer.source(full, immutable=src.immutable,
                                   facts=src.facts.get(full)) as attached:
                    import_segment(attached, name, run)
            except Unreadable as exc:
                raise DamagedJournalError(
                    f"refusing to merge: the source segment {src.rel(full)} became unreadable "
                    f"({exc}); nothing was imported") from None
        if run.malformed and not run.allow_damaged:
            raise DamagedJournalError(_source_refusal(run.malformed))
        late = run.planner.tombstoned - known_before
        if late:
            # Tombstones the pre-scan did not see: hold back what was already
            # written about their targets before anything is published.
            run.planner.retract(writer.drop(late, tuple(merge_plan.ERASABLE_TYPES)))
        say(progress, "merge: publishing import segments")
        return writer.finish()
    except BaseException:
        writer.abort()
        raise


def _merge_artifacts(ws: Workspace, src: Source,
                     wanted: dict[str, tuple[dict[str, Any], set[str]]],
                     tombstoned: set[str]) -> tuple[int, int, list[str]]:
    """Bring over the blobs that merged (or already held) observations cite.

    A blob is only wanted for an observation that is not tombstoned, checked
    again here because a live source can show a tombstone late in the merge.
    """
    copied = already = 0
    missing: list[str] = []
    for ref, (art, subjects) in sorted(wanted.items()):
        if all(s in tombstoned for s in subjects):
            continue
        dest = artifact_path_or_none(ws, ref)
        if dest is None:
            missing.append(ref)
            continue
        # The import citing it is published already: a compaction running now
        # either sees it or has unlinked the blob before this look (blob_present).
        if blob_present(dest):
            already += 1
            continue
        origin = src.artifact_file(ref)
        # The blob's name is the digest of its bytes: an export's manifest (anyone's
        # writing) vouches only for their size and checksum.
        if origin is not None and blob_matches_ref(origin, ref) and copy_file_verified(
                origin, dest, size=art["bytes"], checksum=art["checksum"]):
            copied += 1
        else:
            missing.append(ref)
    return copied, already, missing
