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

import json
import os
from collections.abc import Callable
from typing import Any

from agent_journal.core import codec, merge_plan
from agent_journal.core.errors import (
    DamagedJournalError,
    IntegrityError,
    JournalError,
    NotFoundError,
    UsageError,
)
from agent_journal.core.merge_plan import (
    DUPLICATE,
    IMPORT,
    MANIFEST_NAME,
    PRESENT,
    REMOVED,
    TOMBSTONED,
    SlotIndex,
)
from agent_journal.core.model import OBSERVATION, TOMBSTONE, Event
from agent_journal.ops.context import Context, damage_summary
from agent_journal.storage.artifacts import artifact_path, blob_matches_ref, blob_present
from agent_journal.storage.files import (
    confine_to,
    copy_file_verified,
    file_digest,
)
from agent_journal.storage.local_scans import ScanPoints
from agent_journal.storage.locks import MergeLock
from agent_journal.storage.replica_import import ImportSource, ImportWriter
from agent_journal.storage.replica_source import (
    SealedFacts,
    SegmentRows,
    Unreadable,
    event_ids,
    ids_held,
    imported_then_removed,
    origin_keys,
    read_slots,
)
from agent_journal.storage.root import Root, read_replica_id
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


# -- sources ----------------------------------------------------------------------------

class Source:
    """Where merge reads from: an export folder (verified) or another journal root."""

    def __init__(self, path: str, kind: str, replica: str | None,
                 segments: list[tuple[str, str]], *, immutable: bool,
                 artifact_files: dict[str, str], source_ws: Workspace | None,
                 sealed_malformed: dict[str, dict[int, str]] | None = None,
                 manifest: dict[str, Any] | None = None, movable: bool = False) -> None:
        self.path = path
        self.kind = kind
        self.replica = replica
        self.segments = segments  # (file name, absolute path)
        self.immutable = immutable
        self.artifact_files = artifact_files
        self.source_ws = source_ws
        # An export's rows were checked by the exporter; the manifest, verified
        # byte for byte, names the malformed ones per file.
        self.sealed = sealed_malformed is not None
        self.sealed_malformed = sealed_malformed or {}
        # The caller's private staging folder (a pull's), thrown away after the
        # merge: a segment file whose every row is taken as stored may be moved
        # into the workspace as its import instead of copied (_import_sealed).
        self.movable = movable
        # real path of a segment file -> what the caller read of it ahead
        # (storage.replica_source.read_sealed_facts), for a stage nobody writes
        self.facts: dict[str, SealedFacts] = {}
        self.tombstoned: list[str] = manifest["tombstoned"] if manifest else []
        # ref -> (artifact record, observation ids citing it), for a sealed export
        self.artifacts: dict[str, tuple[dict[str, Any], set[str]]] = {
            a["ref"]: (a, set(a["observations"])) for a in (manifest or {}).get("artifacts", [])}

    def rel(self, path: str) -> str:
        return os.path.relpath(path, self.path)

    def artifact_file(self, ref: str) -> str | None:
        if self.kind == "export":
            return self.artifact_files.get(ref)
        assert self.source_ws is not None
        return artifact_path_or_none(self.source_ws, ref)


def artifact_path_or_none(ws: Workspace, ref: str) -> str | None:
    """A ref this version cannot place has no blob it could copy."""
    try:
        return artifact_path(ws, ref)
    except JournalError:
        return None


def open_source(path: str, workspace: str, *, checked: bool = False) -> Source:
    """Recognise and, for an export, verify the whole source. Raises before any import.

    Nothing in the source is followed out of it: a symbolic link among its segments,
    artifacts or manifest names is refused (files.confine_to), never read.
    """
    confine_to(path)
    if not os.path.isdir(path):
        raise NotFoundError(f"merge source {path} is not a folder")
    if os.path.exists(os.path.join(path, MANIFEST_NAME)):
        return _open_export(path, workspace, checked)
    segments_dir = os.path.join(path, "workspaces", workspace, "segments")
    if os.path.isdir(os.path.join(path, "workspaces")):
        src_ws = Root(path).workspace(workspace)
        if not os.path.isdir(segments_dir):
            raise NotFoundError(f"merge source {path} has no workspace {workspace}")
        segs = [(os.path.basename(p), p) for p in src_ws.segment_paths()]
        return Source(path, "root", read_replica_id(path), segs, immutable=False,
                      artifact_files={}, source_ws=src_ws)
    raise NotFoundError(f"merge source {path} is neither an export folder (no {MANIFEST_NAME}) "
                        "nor a journal root (no workspaces/)")


def _open_export(path: str, workspace: str, checked: bool = False) -> Source:
    """With `checked`, the caller has just checked every file's checksum in a
    private folder (a pull's staging folder, as each object landed): only
    their sizes are compared again, and the folder's files are the merge's
    to move (Source.movable)."""
    try:
        with open(os.path.join(path, MANIFEST_NAME), "rb") as fh:
            obj = json.loads(fh.read())
        manifest = merge_plan.check_manifest(obj, workspace=workspace)
    except (OSError, ValueError) as exc:
        raise IntegrityError(f"refusing to merge {path}: {exc}") from None
    except RecursionError:
        raise IntegrityError(f"refusing to merge {path}: its manifest nests too deeply"
                             ) from None
    mismatched: list[str] = []
    segs: list[tuple[str, str]] = []
    def matches(full: str, size: int, checksum: str) -> bool:
        if checked:
            return _size_or_none(full) == size
        return _digest_or_none(full) == (size, checksum)

    for f in manifest["files"]:
        full = os.path.join(path, f["name"])
        if not matches(full, f["bytes"], f["checksum"]):
            mismatched.append(f["name"])
        segs.append((f["name"], full))
    artifact_files: dict[str, str] = {}
    for a in manifest["artifacts"]:
        if a["path"] is None:
            continue  # the exporter could not ship it either
        full = os.path.join(path, a["path"])
        if not matches(full, a["bytes"], a["checksum"]):
            mismatched.append(a["path"])
        artifact_files[a["ref"]] = full
    if mismatched:
        shown = ", ".join(mismatched[:5]) + (" ..." if len(mismatched) > 5 else "")
        raise IntegrityError(
            f"refusing to merge {path}: {len(mismatched)} file(s) do not match the manifest "
            f"({shown}); nothing was imported")
    sealed = {f["name"]: {int(m["row"]): str(m["reason"]) for m in f["malformed"]}
              for f in manifest["files"]}
    return Source(path, "export", manifest["sourceReplica"], segs, immutable=True,
                  artifact_files=artifact_files, source_ws=None, sealed_malformed=sealed,
                  manifest=manifest, movable=checked)


def _size_or_none(path: str) -> int | None:
    if os.path.islink(path) or not os.path.isfile(path):
        return None
    return os.path.getsize(path)


def _digest_or_none(path: str) -> tuple[int, str] | None:
    if os.path.islink(path) or not os.path.isfile(path):
        return None
    try:
        return file_digest(path)
    except OSError:
        return None


# -- the local side -----------------------------------------------------------------------

class Local:
    """What a merge must know about the local workspace before deciding anything."""

    def __init__(self) -> None:
        self.ids: set[str] = set()
        # False: `ids` was not read; a merge asks the segments about its source's ids
        self.ids_read = True
        self.tombstoned: set[str] = set()
        self.slot_keys: set[tuple[str, str]] = set()
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
        held = points.lookup(path) if points is not None else None
        if held is not None:
            local.slot_keys |= held["origin"]
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


def probe_ids(ws: Workspace, sources: list[Source]) -> bool:
    """Whether a merge of `sources` asks the local segments about the sources' ids
    (`held_here`) rather than reading every local id into one set: when the
    sources are smaller than the workspace (file sizes standing in for row
    counts). Asking scans or probes each local segment's index but keeps only
    the ids it was asked about; reading keeps every local id. Only the cost
    depends on it: `held_here` gives what the reading would have."""
    local = sum(_size_or_none(p) or 0 for p in ws.segment_paths())
    source = sum(_size_or_none(full) or 0 for src in sources for _, full in src.segments)
    return source < local


def held_here(ws: Workspace, wanted: set[str]) -> set[str]:
    """The ids among `wanted` some local segment holds."""
    found: set[str] = set()
    for path in ws.segment_paths() if wanted else ():
        try:
            found |= ids_held(path, wanted)
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
    few immutable events (export folders, which cannot gain rows meanwhile)
    into a large workspace: it asks about its own."""
    points = ScanPoints(ws)
    read_ids = not (all(src.immutable for src in srcs) and probe_ids(ws, srcs))
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


def _merge_locked(ws: Workspace, src: Source, me: str, progress: Progress,
                  allow_damaged: bool, local: Local, points: ScanPoints) -> dict[str, Any]:
    """One merge; `local` is scan_local of the workspace as it is now. The
    imports it publishes are added to `points` from what it wrote into them."""
    unreadable: list[dict[str, str]] = []
    malformed: list[dict[str, Any]] = []

    # Pass 1 over the source: its tombstones (found by the type column, which is
    # quick; pass 2 still catches any it missed) and the slots it speaks about.
    tombstoned: set[str] = set()
    src_keys: set[tuple[str, str]] = set()
    src_own_keys: set[tuple[str, str]] = set()
    src_prov_keys: set[tuple[str, str]] = set()
    readable: list[tuple[str, str]] = []
    tombstoned.update(src.tombstoned)  # a sealed export lists its tombstones
    for n, (name, full) in enumerate(src.segments, 1):
        say(progress, f"merge: scanning source {n}/{len(src.segments)}")
        own = merge_plan.own_segment(name)
        if own is not None:
            src_own_keys.add((own[0], name))
        if src.sealed:
            # Its bytes are the exporter's, checked against the manifest: a
            # fresh VACUUM INTO copy of segments the exporter checked itself.
            readable.append((name, full))
            src_prov_keys |= origin_keys(full)
            continue
        damage = structure_damage(full)
        if damage is not None:
            unreadable.append({"path": src.rel(full), "reason": damage})
            continue
        try:
            seg = SegmentRows(full, immutable=src.immutable, only="tombstone_rows",
                                    provenance_keys=True)
        except Unreadable as exc:
            unreadable.append({"path": src.rel(full), "reason": str(exc)})
            continue
        readable.append((name, full))
        src_prov_keys |= seg.provenance_keys
        for _seq, event_id, _t, _s, _ts, body, digest in seg.rows:
            try:
                ev = decode_row(body, digest, event_id)
            except codec.MalformedEvent:
                continue  # reported by pass 2
            if ev.type == TOMBSTONE and ev.id is not None:
                tombstoned.add(ev.id)
    src_keys = src_own_keys | src_prov_keys

    if unreadable:
        # Even with --allow-damaged: no row of a segment that could not be read
        # can be shown not to be a tombstone.
        raise DamagedJournalError(
            f"refusing to merge: the source has {damage_summary(unreadable, [])}; nothing was "
            "imported. What they hide could be the tombstone that keeps some of the "
            "source's content out")
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
    tombstoned |= local.tombstoned
    known_before = set(tombstoned)

    # Slots worth comparing: those both sides can speak about, and those the
    # source speaks about twice (its own segment and an import's provenance).
    watch = (src_keys & local.slot_keys) | (src_own_keys & src_prov_keys)
    slots = SlotIndex(me, tombstoned)
    if watch:
        for path in ws.segment_paths():
            name = os.path.basename(path)
            own = merge_plan.own_segment(name)
            key = (own[0], name) if own is not None else None
            for slot in read_slots(path, own=key, keys=watch):
                slots.add(*slot)

    limit = int(os.environ.get(ENV_IMPORT_MAX_BYTES) or SEGMENT_MAX_BYTES)
    source_replica = merge_plan.safe_replica(src.replica)
    writer = ImportWriter(ws, source_replica, max_bytes=limit,
                                name_for=merge_plan.import_segment_name)
    local_ids, removed = local.ids, local.removed
    if not local.ids_read:
        wanted: set[str] = set()
        for _, full in readable:
            try:
                wanted.update(event_ids(full))
            except Unreadable as exc:
                raise DamagedJournalError(
                    f"refusing to merge: the source segment {src.rel(full)} became unreadable "
                    f"({exc}); nothing was imported") from None
        local_ids = held_here(ws, wanted)
        removed = (removed & wanted) - held_here(ws, removed & wanted)
    planner = merge_plan.Planner(local_ids, tombstoned, removed)
    wanted_artifacts: dict[str, tuple[dict[str, Any], set[str]]] = dict(src.artifacts)
    try:
        for n, (name, full) in enumerate(readable, 1):
            say(progress, f"merge: importing {n}/{len(readable)}")
            try:
                with writer.source(full, immutable=src.immutable,
                                   facts=src.facts.get(full)) as attached:
                    _import_segment(attached, name, src, planner, slots, watch, malformed,
                                    wanted_artifacts, allow_damaged)
            except Unreadable as exc:
                raise DamagedJournalError(
                    f"refusing to merge: the source segment {src.rel(full)} became unreadable "
                    f"({exc}); nothing was imported") from None
        if malformed and not allow_damaged:
            raise DamagedJournalError(_source_refusal(malformed))
        late = tombstoned - known_before
        if late:
            # Tombstones the pre-scan did not see: hold back what was already
            # written about their targets before anything is published.
            planner.retract(writer.drop(late, tuple(merge_plan.ERASABLE_TYPES)))
        say(progress, "merge: publishing import segments")
        touched = writer.finish()
    except BaseException:
        writer.abort()
        raise
    for path in touched:
        points.remember_published(path, *writer.published[path],
                                  digest=writer.digests.get(path))

    copied, already, missing = _merge_artifacts(ws, src, wanted_artifacts, tombstoned)
    return {
        "source": {"path": src.path, "kind": src.kind, "replica": src.replica},
        "workspace": ws.name,
        **planner.report(),
        "segmentsTouched": [ws.rel(p) for p in touched],
        "replicaIdCollisions": sorted(slots.collisions),
        "artifacts": {"copied": copied, "alreadyPresent": already, "missing": missing},
        "unreadable": unreadable,
        "malformed": malformed,
    }


def _import_segment(seg: ImportSource, name: str, src: Source,
                    planner: merge_plan.Planner, slots: SlotIndex,
                    watch: set[tuple[str, str]], malformed: list[dict[str, Any]],
                    wanted_artifacts: dict[str, tuple[dict[str, Any], set[str]]],
                    allow_damaged: bool) -> None:
    """Decide every row of one attached source segment, then let SQLite copy the rest.

    Rows of a root are verified here (checksum, parse, shape); a row already
    held only needs intact bytes. Rows of a verified export were checked by
    the exporter and sealed by the manifest checksums: they are decided from
    their columns, and only tombstones are read (the manifest lists artifacts).
    """
    own = merge_plan.own_segment(name)
    own_key = (own[0], name) if own is not None else None
    if src.sealed and not src.sealed_malformed.get(name) and own_key not in watch and not (
            seg.has_origin and watch) and _import_sealed(seg, own_key, planner,
                                                         movable=src.movable):
        return
    checksum = codec.checksum
    id_in_body = merge_plan.id_in_body
    local_ids, seen = planner.local_ids, planner.seen
    sealed_bad = src.sealed_malformed.get(name, {})
    provenance = seg.provenance()
    rel = src.rel(seg.path)
    skip: list[str] = []
    copied: list[str] = []
    rebuilt: list[tuple[str, str, str | None, str, bytes, str]] = []
    rebuilt_origins: list[tuple[str, str, str, int]] = []
    tombstones: set[str] = set()
    # A sealed row named malformed needs its bytes too: could it be a tombstone?
    rows = seg.rows(bodies="tombstones" if src.sealed and not sealed_bad else "all")
    for seq, event_id, col_type, col_subject, col_ts, digest, body in rows:
        obj: dict[str, Any] | None = None
        type_, subject, ts = col_type, col_subject, col_ts
        try:
            if src.sealed:
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
            if allow_damaged and merge_plan.tombstone_candidate(col_type, body):
                raise DamagedJournalError(
                    f"refusing to merge: the source's malformed row {rel} row {seq} "
                    f"({exc}) could be a tombstone; nothing was imported") from None
            malformed.append({"segment": rel, "row": seq, "reason": str(exc)})
            skip.append(event_id)
            continue
        origin = (own[0], name, seq) if own is not None else provenance.get(event_id)
        if origin is not None and (origin[0], origin[1]) in watch:
            slots.add(origin[0], origin[1], origin[2], event_id, type_, subject)
        decision = planner.take(event_id, type_, subject)
        if decision in (DUPLICATE, TOMBSTONED, REMOVED):
            skip.append(event_id)
            continue
        if obj is not None and type_ == OBSERVATION:
            art = merge_plan.artifact_record(type_, obj["data"])
            if art is not None:
                wanted_artifacts.setdefault(art["ref"], (art, set()))[1].add(subject or "")
        if decision == PRESENT:
            skip.append(event_id)
            continue
        assert decision == IMPORT
        if type_ == TOMBSTONE:
            named = obj["id"] if obj is not None else subject
            if named is not None:
                tombstones.add(named)
        changed = merge_plan.arriving(codec.from_dict(obj)) if type_ == TOMBSTONE and \
            obj is not None else None
        if changed is not None:
            raw, new_digest = codec.encode(changed)
            rebuilt.append((event_id, type_, subject, ts, raw, new_digest))
        elif type(body) is not bytes and body is not None or \
                (col_type, col_subject, col_ts) != (type_, subject, ts):
            # Text body or lookup columns that disagree with the bytes: store it
            # the way this replica would have written it.
            rebuilt.append((event_id, type_, subject, ts, codec.as_bytes(body), digest))
        else:
            copied.append(event_id)
            continue
        skip.append(event_id)
        if origin is not None:
            rebuilt_origins.append((event_id, origin[0], origin[1], origin[2]))
    seg.copy(skip, copied_ids=copied, own=own_key)
    seg.insert(rebuilt, rebuilt_origins)
    seg.wrote_tombstones(tombstones)


def _import_sealed(seg: ImportSource, own_key: tuple[str, str] | None,
                   planner: merge_plan.Planner, *, movable: bool = False) -> bool:
    """The common case of a sealed export segment: nothing damaged, no slot to
    watch. Only its tombstones and the rows about tombstoned ids are read
    row by row; every other row is decided with set operations over its id
    (read from the index alone) and copied by SQLite. False, with nothing
    decided, when a tombstone's bytes do not check out (the row-by-row path
    then reports it)."""
    tombstones = []
    for seq, event_id, type_, subject, ts, digest, body in seg.tombstone_rows():
        try:
            obj = verify_row(body, digest, event_id)
        except codec.MalformedEvent:
            return False
        tombstones.append((seq, event_id, type_, subject, ts, obj))
    for *_, obj in tombstones:
        planner.tombstoned.add(obj["id"])
    special = set(seg.rows_about(planner.tombstoned))
    special.update((seq, event_id, type_, subject)
                   for seq, event_id, type_, subject, _, _ in tombstones)
    ids = seg.event_ids()
    decisions = planner.take_bulk(ids, list(special))
    rebuilt = []
    origins = []
    provenance: dict[str, tuple[str, str, int]] | None = None
    written: set[str] = set()
    for seq, event_id, type_, subject, ts, obj in tombstones:
        if decisions.get(event_id, IMPORT) != IMPORT:
            continue
        written.add(obj["id"])
        changed = merge_plan.arriving(codec.from_dict(obj))
        if changed is not None:
            raw, new_digest = codec.encode(changed)
            rebuilt.append((event_id, type_, subject, ts, raw, new_digest))
            decisions[event_id] = "rebuilt"
            if own_key is not None:
                origins.append((event_id, own_key[0], own_key[1], seq))
            else:
                if provenance is None:
                    provenance = seg.provenance()
                if event_id in provenance:
                    origins.append((event_id, *provenance[event_id]))
    # (In the order read, which an import's name sorts quickly.)
    listed = seg.event_id_list()
    copied = [e for e in listed if e not in decisions] if decisions else listed
    if movable and own_key is not None and not decisions and seg.adoptable():
        # Every row taken as stored, and nothing but rows in the file: publish
        # the fetched file itself rather than a copy of it.
        seg.adopt(copied, own_key, written)
        return True
    seg.copy(decisions, copied_ids=copied, own=own_key)
    seg.insert(rebuilt, origins)
    seg.wrote_tombstones(written)
    return True


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
