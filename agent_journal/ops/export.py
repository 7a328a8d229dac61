"""`export`: a workspace as a verifiable folder, while writers keep appending.

Invariants:
- Export never copies a live file: every segment is snapshotted by SQLite
  (VACUUM INTO), so each copy holds exactly what was committed when it was
  taken. A push (which uploads and throws its folder away) may instead link
  a sealed own segment whose bytes hold nothing but its rows into its folder
  and upload the file itself, under a SealedHold that keeps those bytes still
  until the upload is done (storage/sealed_hold.py); one needing a row
  scrubbed or fixed is snapshotted after all, from the held bytes. Each file
  and then the manifest appear only complete (temporary name, fsync,
  rename); the manifest comes last, so a folder without one is not an
  export, and a failed export removes what it wrote.
- Export carries no content a tombstone names: those rows are scrubbed from
  the snapshots before the files are published. Tombstones travel.
- A damaged workspace (a segment SQLite cannot read or finds corrupt) is not
  exported: an incomplete backup must not look whole.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

from agent_journal.core import clock, export_plan, merge_plan, merge_rows
from agent_journal.core.errors import (
    DamagedJournalError,
    JournalError,
    NotFoundError,
)
from agent_journal.core.export_plan import Verdict
from agent_journal.core.merge_plan import (
    MANIFEST_FORMAT,
    MANIFEST_NAME,
)
from agent_journal.ops.context import Context, damage_summary
from agent_journal.ops.export_check import SnapshotUnreadable, verdicts
from agent_journal.ops.merge_sources import artifact_path_or_none
from agent_journal.ops.replicas import path_arg, say
from agent_journal.storage.files import (
    copy_file_verified,
    file_digest,
    fsync_path,
    make_private_dirs,
    remove_tree,
    rename_durable,
    write_file_atomic,
)
from agent_journal.storage.replica_fork import own_replicas
from agent_journal.storage.replica_source import (
    SegmentRows,
    Unreadable,
    scrub_rows,
    snapshot_segment,
)
from agent_journal.storage.root import refuse_inside_root
from agent_journal.storage.sealed_hold import SealedHold
from agent_journal.storage.segment_reader import PausedGC
from agent_journal.storage.verified_points import VerifiedPoints
from agent_journal.storage.workspace import Workspace

Progress = Callable[[str], None] | None


# -- export -----------------------------------------------------------------------------

def export(ctx: Context, dest: str, *, progress: Progress = None) -> dict[str, Any]:
    dest = path_arg(dest, "DEST")
    ws = ctx.open(create=False)
    refuse_inside_root(dest, ws.root.path, "export destination")
    if not os.path.isdir(ws.segments_dir):
        raise NotFoundError(f"workspace {ws.name} has no segments in {ws.root.path}")
    damaged = ws.structure_damage()
    if damaged:
        raise DamagedJournalError(_export_refusal(damaged, dest))
    created = _prepare_dest(dest)
    try:
        with PausedGC():  # millions of row tuples pass through, none in a cycle
            report = _export(ws, dest, progress)
        del report["artifactsByFile"]  # (a push's memory, not the export's report)
        return report
    except BaseException:
        # Whatever was written so far goes: a folder that is not a whole
        # export must not be left looking like one (or like a part of one).
        _clear_dest(dest, created)
        raise


def _export_refusal(unreadable: list[dict[str, str]], dest: str) -> str:
    return (f"refusing to export: {damage_summary(unreadable, [])}; nothing was written to "
            f"{dest}. An export missing a segment would be an incomplete backup that looks "
            "whole")


def export_own(ws: Workspace, dest: str, *, progress: Progress = None,
               skip: frozenset[str] = frozenset(),
               tombstones: Callable[[list[str]], set[str]] | None = None,
               on_file: Callable[[dict[str, Any]], None] | None = None,
               durable: bool = True,
               snapshot_tombstones: dict[str, set[str]] | None = None,
               holds: dict[str, SealedHold] | None = None) -> dict[str, Any]:
    """`export` of this replica's own segments only, into the empty folder `dest`
    (what a sync push uploads: every event once, under its author).

    The snapshots are scrubbed of content that any tombstone in the workspace
    names: those in the snapshots, and those in every other segment (imports
    and `skip`ped own segments included), read after the snapshots were taken,
    by `tombstones(paths)` when given. `skip` names own segments the caller
    already holds a snapshot of; `snapshot_tombstones` is filled as `_export`
    fills it. A segment that cannot be read, or
    a damaged tombstone row, refuses the export: the first could hold an own
    segment's events (a manifest without it would drop them from the remote),
    the second the tombstone that keeps some content out. `on_file` is called
    with each file's manifest entry as soon as the file is final in `dest`
    (in the order the checks end). Without `durable` (a push's staging
    folder, thrown away once uploaded) nothing is fsynced. With `holds`
    (only without `durable`), a sealed own segment may be linked rather than
    snapshotted: its SealedHold is put in `holds` by file name, and the
    caller closes it once the file is uploaded (see the module's docstring).
    """
    own, others = _own_and_others(ws)
    shipped = [p for p in own if os.path.basename(p) not in skip]
    others += [p for p in own if os.path.basename(p) in skip]

    def other_tombstones() -> set[str]:
        # Read after the own snapshots were taken, so a tombstone merged in
        # before them is seen here.
        return _tombstones_in(ws, others) if tombstones is None else tombstones(others)

    with PausedGC():
        report = _export(ws, dest, progress, segments=shipped, more_tombstones=other_tombstones,
                         on_file=on_file, durable=durable,
                         snapshot_tombstones=snapshot_tombstones,
                         holds=None if durable else holds,
                         sealed=_sealed(own, own_replicas(ws.root)))
    if report["unreadable"]:
        first = report["unreadable"][0]
        raise DamagedJournalError(f"refusing to push: {first['path']} is unreadable "
                                  f"({first['reason']}); nothing was uploaded")
    return report


def segment_tombstones(ws: Workspace, paths: list[str]) -> list[set[str]]:
    """Every subject a tombstone row of each segment names (rows found by their
    bytes, not only their type column), a thread per core sharing the segments.
    DamagedJournalError when one is unreadable."""
    return _in_threads(lambda path: _tombstones_in(ws, [path]), paths)


def _sealed(own: list[str], replicas: frozenset[str]) -> frozenset[str]:
    """Own segments no append can reach (merge_plan.sealed_own), by file name: of each
    id the root owns segments of (its own, and those it forked from)."""
    names = [os.path.basename(p) for p in own]
    return frozenset().union(*(merge_plan.sealed_own(names, r) for r in replicas))


def _own_and_others(ws: Workspace) -> tuple[list[str], list[str]]:
    """The segments this root pushes (named after its id, or an id it forked from:
    storage/replica_fork.py) and the others (imports)."""
    replicas = own_replicas(ws.root)
    own: list[str] = []
    others: list[str] = []
    for path in ws.segment_paths():
        found = merge_plan.own_segment(os.path.basename(path))
        (own if found is not None and found[0] in replicas else others).append(path)
    return own, others


def _tombstones_in(ws: Workspace, paths: list[str]) -> set[str]:
    found: set[str] = set()
    for path in paths:
        try:
            rows = SegmentRows(path, only="tombstone_candidates").rows
        except Unreadable as exc:
            raise DamagedJournalError(f"refusing to push: {ws.rel(path)} is unreadable "
                                      f"({exc}); it could hold a tombstone") from None
        found |= merge_rows.tombstone_targets(rows)
    return found


def _in_threads(work: Callable[[Any], Any], items: list[Any]) -> list[Any]:
    """`work` of every item, in order, by a thread per available core."""
    from concurrent.futures import ThreadPoolExecutor

    from agent_journal.storage.parallel import available_cores

    threads = min(available_cores(), len(items))
    if threads <= 1:
        return [work(item) for item in items]
    with ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(work, items))


def _snapshot(path: str, dest: str) -> str | None:
    """Snapshot one segment into `dest`; the reason when it is unreadable."""
    try:
        snapshot_segment(path, os.path.join(dest, f".{os.path.basename(path)}.tmp"))
    except Unreadable as exc:
        return str(exc)
    return None


# Each hold keeps a connection (a file descriptor) open until its upload ends;
# past this many, segments are snapshotted as before.
MAX_HOLDS = 256


def _hold(path: str, dest: str, holds: dict[str, SealedHold]) -> bool:
    """Link a sealed segment into `dest` under a hold instead of a snapshot, when
    its bytes allow it (SealedHold.take) and the folder is on its file system."""
    hold = SealedHold.take(path)
    if hold is None:
        return False
    name = os.path.basename(path)
    try:
        os.link(path, os.path.join(dest, f".{name}.tmp"))
    except OSError:
        hold.close()
        return False
    holds[name] = hold
    return True


def _unlink_held(tmp: str) -> None:
    """Replace a held segment's link by a snapshot of the same (held) bytes, so
    that scrubbing it changes the copy, never the segment."""
    copy = tmp + ".copy"
    try:
        snapshot_segment(tmp, copy, immutable=True)
    except Unreadable as exc:  # (its bytes were checked a moment ago)
        raise DamagedJournalError(f"cannot snapshot {tmp}: {exc}") from None
    os.replace(copy, tmp)


def _candidates(tmp: str) -> list[tuple[Any, ...]] | str:
    """The rows of a snapshot that could be tombstones; the reason when unreadable."""
    try:
        return SegmentRows(tmp, immutable=True, only="tombstone_candidates").rows
    except Unreadable as exc:
        return str(exc)


class Snapshot(NamedTuple):
    """A segment's snapshot in the destination, until it is published."""

    name: str  # the segment's file name, and the file's in the export
    tmp: str  # the snapshot, under a temporary name in the destination
    rel: str  # the segment's path as reported


def _export(ws: Workspace, dest: str, progress: Progress, *, segments: list[str] | None = None,
            more_tombstones: Callable[[], set[str]] | None = None,
            on_file: Callable[[dict[str, Any]], None] | None = None,
            durable: bool = True,
            snapshot_tombstones: dict[str, set[str]] | None = None,
            holds: dict[str, SealedHold] | None = None,
            sealed: frozenset[str] = frozenset()) -> dict[str, Any]:
    """`snapshot_tombstones`, when given, is filled with the ids the tombstones
    of each segment's snapshot name, by file name. With `holds`, the `sealed`
    segments are held and linked where they can be (export_own)."""
    replica = ws.root.replica_id
    snapshots, unreadable = _take_snapshots(
        ws, dest, ws.segment_paths() if segments is None else segments, progress, holds, sealed)
    digests: list[tuple[int, str]] = _in_threads(file_digest, [s.tmp for s in snapshots])
    points = VerifiedPoints(ws)
    in_snapshot: dict[str, set[str]] = {} if snapshot_tombstones is None else snapshot_tombstones
    unreadable += _snapshot_tombstones(points, snapshots, digests, in_snapshot)
    if unreadable:
        raise DamagedJournalError(_export_refusal(unreadable, dest))
    tombstoned: set[str] = set().union(*in_snapshot.values())
    if more_tombstones is not None:
        tombstoned |= more_tombstones()
    publish = _Publisher(dest, points, snapshots, digests, durable=durable, holds=holds,
                         on_file=on_file)
    ready = _check_and_publish(points, snapshots, digests, tombstoned, publish, dest, progress)
    points.keep_only({os.path.basename(p) for p in ws.segment_paths()})
    points.save()

    # In segment order, as a serial check would meet them.
    files = [publish.files[k] for k in range(len(snapshots))]
    cited = export_plan.cited([(s.name, ready[k]) for k, s in enumerate(snapshots)], tombstoned)
    listed, missing = ship_artifacts(ws, dest, cited.records, progress)
    manifest = {"format": MANIFEST_FORMAT, "workspace": ws.name,
                "sourceReplica": replica, "createdTs": clock.now_ts(),
                "files": files, "artifacts": listed, "tombstoned": sorted(tombstoned)}
    body = json.dumps(manifest, indent=2, sort_keys=True).encode("utf-8") + b"\n"
    write_file_atomic(os.path.join(dest, MANIFEST_NAME), body)
    return {
        "dest": dest,
        "workspace": ws.name,
        "sourceReplica": replica,
        "files": len(files),
        "events": sum(f["events"] for f in files),
        "withheld": sum(len(v.withheld) for v in ready.values()),
        "artifacts": len(listed) - len(missing),
        "artifactsMissing": missing,
        # Each file's share of the manifest's artifacts: a push that reuses a
        # file's snapshot later must still name (and keep) what it cites.
        "artifactsByFile": {name: _entries_for(refs, listed)
                            for name, refs in cited.by_file.items()},
        "unreadable": unreadable,
        "malformed": export_plan.malformed_report(
            [(s.rel, ready[k]) for k, s in enumerate(snapshots)]),
    }


def _take_snapshots(ws: Workspace, dest: str, segments: list[str], progress: Progress,
                    holds: dict[str, SealedHold] | None, sealed: frozenset[str]
                    ) -> tuple[list[Snapshot], list[dict[str, str]]]:
    """Snapshot every segment into `dest`, back to back, before the slow work on
    the copies (SQLite does this work with Python's lock released, so a thread
    per core shares it); the snapshots, and the segments that were unreadable."""
    room = threading.Semaphore(MAX_HOLDS)  # (the snapshots are taken a few at a time)

    def take(path: str) -> str | None:
        if holds is not None and os.path.basename(path) in sealed and \
                room.acquire(blocking=False):
            if _hold(path, dest, holds):
                return None
            room.release()
        return _snapshot(path, dest)

    snapshots: list[Snapshot] = []
    unreadable: list[dict[str, str]] = []
    taken = _in_threads(take, segments)
    for n, (path, failure) in enumerate(zip(segments, taken, strict=True), 1):
        say(progress, f"export: snapshot {n}/{len(segments)}")
        name = os.path.basename(path)
        if failure is not None:
            unreadable.append({"path": ws.rel(path), "reason": failure})
            continue
        snapshots.append(Snapshot(name, os.path.join(dest, f".{name}.tmp"), ws.rel(path)))
    return snapshots, unreadable


def _snapshot_tombstones(points: VerifiedPoints, snapshots: list[Snapshot],
                         digests: list[tuple[int, str]], into: dict[str, set[str]]
                         ) -> list[dict[str, str]]:
    """The ids each snapshot's tombstones name, by file name, into `into`:
    remembered for bytes checked clean before (export_check.py), read from the
    others' rows that could be tombstones. The snapshots found unreadable."""
    unknown: list[int] = []
    for k, snap in enumerate(snapshots):
        named = points.tombstones(snap.name, *digests[k])
        if named is None:
            unknown.append(k)
        else:
            into[snap.name] = named
    unreadable = []
    for k, got in zip(unknown, _in_threads(_candidates, [snapshots[k].tmp for k in unknown]),
                      strict=True):
        if isinstance(got, str):
            unreadable.append({"path": snapshots[k].rel, "reason": got})
        else:
            into[snapshots[k].name] = merge_rows.tombstone_targets(got)
    return unreadable


def _check_and_publish(points: VerifiedPoints, snapshots: list[Snapshot],
                       digests: list[tuple[int, str]], tombstoned: set[str],
                       publish: _Publisher, dest: str, progress: Progress
                       ) -> dict[int, Verdict]:
    """Every snapshot's verdict, each published as soon as it is known. Every
    row is checked once per snapshot's bytes (export_check.py): bytes checked
    before are looked up, the rest are shared with worker processes."""
    ready: dict[int, Verdict] = {}
    todo: list[int] = []  # indexes of the snapshots to check
    for k, snap in enumerate(snapshots):
        known = points.lookup(snap.name, *digests[k], snap.tmp, tombstoned)
        if known is None:
            todo.append(k)
        else:
            ready[k] = known
    try:
        for n, k in enumerate(sorted(ready), 1):
            say(progress, f"export: checked before {n}/{len(ready)}")
            publish(k, ready[k], checked_now=False)
        checking = verdicts([snapshots[k].tmp for k in todo], tombstoned)
        for n, (j, v) in enumerate(checking, 1):
            say(progress, f"export: checking {n}/{len(todo)}")
            ready[todo[j]] = v
            publish(todo[j], v, checked_now=True)
    except SnapshotUnreadable as exc:
        rel = snapshots[todo[exc.index]].rel
        raise DamagedJournalError(_export_refusal(
            [{"path": rel, "reason": exc.reason}], dest)) from None
    return ready


class _Publisher:
    """Makes a checked snapshot a final file of the export: scrubbed of the rows
    its verdict withholds (and fixed where its columns disagree), synced and
    renamed into place; its manifest entry in `files`, by snapshot index."""

    def __init__(self, dest: str, points: VerifiedPoints, snapshots: list[Snapshot],
                 digests: list[tuple[int, str]], *, durable: bool,
                 holds: dict[str, SealedHold] | None,
                 on_file: Callable[[dict[str, Any]], None] | None) -> None:
        self.dest, self.points, self.snapshots, self.digests = dest, points, snapshots, digests
        self.durable, self.holds, self.on_file = durable, holds, on_file
        self.files: dict[int, dict[str, Any]] = {}

    def __call__(self, k: int, v: Verdict, *, checked_now: bool) -> None:
        name, tmp, _ = self.snapshots[k]
        if checked_now:
            self.points.remember(name, *self.digests[k], v)
        size, digest = self.digests[k]
        if v.withheld or v.fixes:
            if self.holds is not None and name in self.holds:
                _unlink_held(tmp)
                self.holds.pop(name).close()
            scrub_rows(tmp, v.withheld, fixes=v.fixes)
            size, digest = file_digest(tmp)
        final = os.path.join(self.dest, name)
        if self.durable:
            fsync_path(tmp)
            rename_durable(tmp, final, clobber=False)
        else:
            os.link(tmp, final)  # never over an existing file, as rename_durable
            os.unlink(tmp)
        self.files[k] = export_plan.file_entry(name, size, digest, v)
        if self.on_file is not None:
            self.on_file(self.files[k])  # final: a push may upload it while the next is checked


def ship_artifacts(ws: Workspace, dest: str,
                    records: dict[str, tuple[dict[str, Any], set[str]]], progress: Progress
                    ) -> tuple[list[dict[str, Any]], list[str]]:
    """Copy each cited blob into the export, checked; the manifest's artifact
    entries, and the refs whose blob could not be shipped (listed without a
    file, so a receiver knows it is missing)."""
    listed: list[dict[str, Any]] = []
    missing: list[str] = []
    for n, (ref, (art, cited_by)) in enumerate(sorted(records.items()), 1):
        say(progress, f"export: artifact {n}/{len(records)}")
        blob = artifact_path_or_none(ws, ref)
        shipped = blob is not None and copy_file_verified(
            blob, os.path.join(dest, merge_plan.export_artifact_path(ref)),
            size=art["bytes"], checksum=art["checksum"])
        listed.append(export_plan.artifact_entry(ref, art, cited_by, shipped))
        if not shipped:
            missing.append(ref)
    return listed, missing


def _entries_for(refs: list[str], listed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    wanted = set(refs)
    return [a for a in listed if a["ref"] in wanted]


def _prepare_dest(dest: str) -> bool:
    """Check or create the destination; True when this export created it."""
    if os.path.exists(dest):
        if not os.path.isdir(dest):
            raise JournalError(f"export destination {dest} exists and is not a folder")
        if os.listdir(dest):
            raise JournalError(f"export destination {dest} is not empty")
        return False
    make_private_dirs(dest)
    return True


def _clear_dest(dest: str, created: bool) -> None:
    """Undo a failed export: the folder it created, or what it put in an empty one."""
    if created:
        remove_tree(dest)
        return
    try:
        names = os.listdir(dest)
    except OSError:
        return
    for name in names:
        remove_tree(os.path.join(dest, name))
