"""push: this replica's own segments into its prefix of a remote.

The plan is core/push_plan.py; this is its executor. Invariants (spec/SYNC.md,
"The order of writes"):
- Push writes only below this replica's own prefix, and in this order:
  objects (created, never replaced), then the manifest (conditionally
  replacing the one it read), then deletes of its keys the new manifest does
  not name. Killed anywhere, the remote's manifest names only objects that
  exist, and the next push completes the work.
- Push replaces only a manifest this root wrote. It refuses, before writing
  anything, a manifest naming a tombstone this root does not hold; one its
  memory (pushed.json, saved before each manifest write) does not know as its
  own; and, without that memory, one naming a snapshot this root did not
  write holding an event its own segments neither hold nor removed
  themselves (a copied root, or one restored from a backup).
- Push writes nothing to a bucket whose server does not enforce conditional
  writes (probed once per remote: sync_common.check_conditional_writes),
  unless the user opted in.
- What push uploads is `export_op.export_own` (ops/export.py): consistent SQLite
  snapshots of the own segments (or, held still, the sealed files themselves),
  scrubbed of every tombstoned subject this replica knows.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from agent_journal.core import clock, delta_plan, export_plan, merge_plan, push_plan
from agent_journal.core.delta_plan import Tip
from agent_journal.core.errors import (
    ConflictError,
    DamagedJournalError,
    JournalError,
    NotFoundError,
)
from agent_journal.core.push_plan import MANIFEST_KEY, PushMemory, Remembered, Scanned
from agent_journal.ops import sync_deltas, sync_fork
from agent_journal.ops.context import Context
from agent_journal.ops.sync_common import (
    PUSH_CACHE,
    STATE_DIR,
    Killer,
    LoadedMemory,
    Opened,
    Progress,
    check_conditional_writes,
    load_push_memory,
    new_stage,
    open_checked,
    replica_prefix,
    say,
    segment_signature,
    state_dir,
)
from agent_journal.ops.sync_manifests import check_sync_manifest
from agent_journal.storage import erasure_generation
from agent_journal.storage.files import unlink_quietly, write_file_atomic
from agent_journal.storage.locks import FileLock
from agent_journal.storage.remote import ObjectMissing, PreconditionFailed, Remote
from agent_journal.storage.replica_fork import own_replicas
from agent_journal.storage.replica_source import Unreadable
from agent_journal.storage.sealed_hold import SealedHold
from agent_journal.storage.segment_tail import (
    highest_seq,
    read_tip,
    tombstone_candidates_above,
)
from agent_journal.storage.workspace import Workspace


class AnotherRoot(Exception):
    """The own manifest in place was written by another root with this replica id."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def push(ctx: Context, name: str | None, *, progress: Progress = None,
         opened: Opened | None = None) -> dict[str, Any]:
    spec, remote = opened or open_checked(ctx, name)
    ws = ctx.open(create=False)
    if not os.path.isdir(ws.segments_dir):
        raise NotFoundError(f"workspace {ws.name} has no segments in {ws.root.path}; "
                            "nothing to push")
    check_conditional_writes(ws.path, ws.name, ws.root.replica_id, Opened(spec, remote))
    with FileLock(os.path.join(state_dir(ws.path, spec.name), "push.lock")):
        forked = None
        while True:
            stage = new_stage(ws, spec.name, "push")
            try:
                report = _Push(ws, Opened(spec, remote), stage, progress).run()
                break
            except AnotherRoot as exc:
                if forked is not None:  # a fresh id's prefix taken at once: not a copy
                    raise ConflictError(f"refusing to push to {spec.url}: replica "
                                        f"{forked['to']}'s manifest there changed under "
                                        "this push; nothing was pushed, run push again"
                                        ) from None
                forked = sync_fork.fork(ws, spec.url, exc.why)
                say(progress, f"push: {forked['reason']}")
            except sync_fork.PullFirst as exc:
                if forked is None:
                    raise
                raise sync_fork.PullFirst(exc.old, exc.count, forked) from None
            finally:
                shutil.rmtree(stage, ignore_errors=True)
    report["forked"] = forked
    if forked is not None:
        report["warnings"].insert(0, forked["reason"])
    return report


# What the export reports of a push that snapshots nothing.
_NOTHING_EXPORTED: dict[str, Any] = {"withheld": 0, "artifactsMissing": [], "malformed": [],
                                     "artifactsByFile": {}}


class _Current(NamedTuple):
    """The own manifest as the push found it; its etag is the write's condition."""

    manifest: dict[str, Any] | None  # None: none, or one this journal cannot use
    etag: str | None
    digest: str | None  # push_plan.manifest_digest of its bytes


class _Push:
    """One push, step by step: read, refuse, snapshot and upload, publish, clean up."""

    def __init__(self, ws: Workspace, opened: Opened, stage: str, progress: Progress) -> None:
        self.ws, self.spec, self.remote = ws, opened.spec, opened.remote
        self.stage, self.progress = stage, progress
        self.me = ws.root.replica_id
        self.prefix = replica_prefix(ws.name, self.me)
        self.memory_path = os.path.join(state_dir(ws.path, self.spec.name), PUSH_CACHE)
        self.killer = Killer()
        # Where each snapshot ends in its segment: `remote status` counts the rows
        # above it, and the next push's delta starts there.
        self.tips: dict[str, Tip | None] = {}

    def run(self) -> dict[str, Any]:
        say(self.progress, "push: reading the remote")
        # Noted before anything is read: a compaction that runs during the push moves
        # it, and then no tip read by this push is trusted by the next one.
        generation = erasure_generation.noted(self.ws)
        present = set(self.remote.list_keys(self.prefix))
        # The manifest is read once, first: the push replaces exactly this one (its
        # etag is the write's condition), so another root pushing meanwhile is refused.
        current = self._read_current()
        loaded = load_push_memory(self.memory_path)
        memory = loaded.memory.about(self.spec.url)
        signatures = {os.path.basename(p): segment_signature(p)
                      for p in self.ws.segment_paths()}
        scans = _TombstoneScans(self.ws, memory.scans)
        # A segment unchanged since the last push, under the same tombstones, would
        # snapshot to the same bytes: its entry is reused, the others snapshotted again.
        reusable = push_plan.reusable(memory, signatures, self.prefix, present)
        # A segment that grew since its push sends only its new rows (a delta).
        extendable = push_plan.extendable(memory, signatures, generation, self.prefix,
                                          present, reusable)
        self._refuse_another_roots(current, memory, scans)
        self._refuse_unseen_erasure(scans)
        # An entry is reused (or extended) only under the very tombstones it was
        # scrubbed under, which takes knowing every segment's; with nothing to reuse,
        # the export reads them itself (of its snapshots, then of the other segments).
        known: set[str] = set()
        reused: dict[str, Remembered] = {}
        uploader = _Uploader(self.remote, self.prefix, self.stage, present, self.killer)
        # The deltas and what their rows cite are staged in a folder of their own.
        deltas_up = _Uploader(self.remote, self.prefix, os.path.join(self.stage, ".deltas"),
                              present, self.killer)
        extended = None
        if reusable or extendable:
            known = scans.of(self.ws.segment_paths())
            if memory.tombstones == push_plan.tombstones_digest(known):
                reused = dict(reusable)
                if extendable:
                    extended = self._extend(extendable, known, signatures, deltas_up)
                    reused.update(extended.held)
        mine = own_replicas(self.ws.root)
        own = {n for n in signatures if (found := merge_plan.own_segment(n)) is not None
               and found[0] in mine}
        unchanged = push_plan.unchanged(current.manifest, own, reused, known)
        if unchanged is None:
            exported, assembly = self._snapshot(uploader, reused, known, scans, signatures)
        else:
            exported, assembly = _NOTHING_EXPORTED, unchanged
        for a in assembly.export["artifacts"]:
            if a["path"] and os.path.exists(os.path.join(self.stage, *a["path"].split("/"))):
                say(self.progress, f"push: uploading {a['path']}")
                uploader.upload(a["path"], a["path"])
        manifest = push_plan.manifest(self.ws.name, self.me, clock.now_ts(), assembly)
        still = generation if erasure_generation.noted(self.ws) == generation else None
        written = self._publish(current, manifest, assembly, loaded, signatures, scans,
                                reused, still)
        deleted = self._delete_stale(self.remote.list_keys(self.prefix) if written else present,
                                     assembly.objects)
        return self._report(exported, assembly, (uploader, deltas_up),
                            len(reused), written, deleted, extended)

    def _extend(self, candidates: Mapping[str, Remembered], known: set[str],
                signatures: Mapping[str, push_plan.Signature | None],
                uploader: _Uploader) -> sync_deltas.Extended:
        """The deltas of the segments that grew, each uploaded with what its rows cite."""
        from agent_journal.ops import export as export_op

        stage = uploader.stage

        def ship(cited: export_plan.Cited) -> list[dict[str, Any]]:
            return export_op.ship_artifacts(self.ws, stage, cited.records, self.progress)[0]

        got = sync_deltas.extend(self.ws, stage, candidates, known, signatures, ship)
        for path, key in got.made:
            say(self.progress, f"push: uploading {path}")
            uploader.upload(path, key)
        for a in got.artifacts:
            if a["path"]:
                uploader.upload(a["path"], a["path"])
        return got

    def _read_current(self) -> _Current:
        try:
            got = self.remote.get_bytes(self.prefix + MANIFEST_KEY)
        except ObjectMissing:
            return _Current(None, None, None)
        assert got is not None
        raw, etag = got
        try:
            found: dict[str, Any] | None = check_sync_manifest(raw, workspace=self.ws.name,
                                                               replica=self.me)
        except JournalError:
            found = None  # replaced below; an unusable manifest names nothing to keep
        return _Current(found, etag, push_plan.manifest_digest(raw))

    def _refuse_another_roots(self, current: _Current, memory: PushMemory,
                              scans: _TombstoneScans) -> None:
        """AnotherRoot, nothing written, when the manifest in place was written by
        another root with this replica id (the push then forks: ops/sync_fork.py)."""
        if current.manifest is None:
            return
        if current.manifest["export"]["tombstoned"]:
            # Tombstones are never removed, so a manifest this root wrote names only
            # tombstones it still holds. One naming others was written by another root
            # with this replica id (a copy made before a purge).
            foreign = set(current.manifest["export"]["tombstoned"]) - scans.of(
                self.ws.segment_paths())
            if foreign:
                raise AnotherRoot(f"it names {len(foreign)} tombstone(s) this root does not "
                                  "hold")
        if memory.manifests:
            if current.digest not in memory.manifests and \
                    not self._written_under_another_name(current.digest):
                raise AnotherRoot("it is not one this root wrote")
            return
        # No memory of the manifests this root wrote (lost, or of an older version):
        # only this root's own history may leave the manifest. A snapshot there that
        # this root did not write, holding events its own segments lack, was pushed by
        # another root with this replica id.
        lacking = _events_not_held(self.ws, self.remote, self.prefix, current.manifest,
                                   push_plan.owned_keys(memory), self.stage)
        if lacking:
            raise AnotherRoot(f"it names {lacking} event(s) this root does not hold")

    def _refuse_unseen_erasure(self, scans: _TombstoneScans) -> None:
        """PullFirst, nothing written, when the manifest of an id this root forked from
        names a tombstone this root does not hold: the other root erased content this
        root may still hold, and would push again under its new id."""
        for old in sorted(own_replicas(self.ws.root) - {self.me}):
            try:
                got = self.remote.get_bytes(replica_prefix(self.ws.name, old) + MANIFEST_KEY)
                assert got is not None
                theirs = check_sync_manifest(got[0], workspace=self.ws.name, replica=old)
            except (ObjectMissing, JournalError):
                continue  # none there, or one readers refuse too
            unseen = set(theirs["export"]["tombstoned"]) - scans.of(self.ws.segment_paths())
            if unseen:
                raise sync_fork.PullFirst(old, len(unseen))

    def _written_under_another_name(self, digest: str | None) -> bool:
        """Whether the push memory of another remote name with this URL wrote it."""
        folder = os.path.join(self.ws.path, STATE_DIR)
        for name in sorted(os.listdir(folder)):
            if name != self.spec.name:
                other = load_push_memory(os.path.join(folder, name, PUSH_CACHE)).memory
                if other.url == self.spec.url and digest in other.manifests:
                    return True
        return False

    def _snapshot(self, uploader: _Uploader, reused: Mapping[str, Remembered],
                  known: set[str], scans: _TombstoneScans,
                  signatures: Mapping[str, push_plan.Signature | None]
                  ) -> tuple[dict[str, Any], push_plan.Assembly]:
        """Snapshot (or hold) every own segment not reused, each uploaded (one at a
        time, in order) while the next is taken and checked."""
        from concurrent.futures import Future, ThreadPoolExecutor

        from agent_journal.ops import export as export_op

        pending: list[Future[None]] = []
        in_snapshot: dict[str, set[str]] = {}
        packed: dict[str, dict[str, Any]] = {}

        def send(name: str, checksum: str, held: bool) -> None:
            # A snapshot travels compressed; a sealed file linked under its hold goes
            # as it is, streamed from the segment's own bytes.
            if held:
                uploader.upload(name, push_plan.segment_key(name, checksum))
                return
            local, packed[name] = sync_deltas.pack(os.path.join(self.stage, name))
            key = push_plan.base_key({"name": name, "checksum": checksum,
                                      "packed": packed[name]})
            uploader.upload(os.path.basename(local), key)

        with ThreadPoolExecutor(max_workers=1) as pool:
            def on_file(entry: dict[str, Any]) -> None:
                say(self.progress, f"push: uploading {entry['name']}")
                self.tips[entry["name"]] = _tip(self.ws, self.stage, entry["name"])
                pending.append(pool.submit(send, entry["name"], entry["checksum"],
                                           entry["name"] in uploader.holds))

            try:
                exported = export_op.export_own(
                    self.ws, self.stage, progress=self.progress, skip=frozenset(reused),
                    on_file=on_file, tombstones=lambda paths: known | scans.of(paths),
                    durable=False, snapshot_tombstones=in_snapshot, holds=uploader.holds)
            finally:
                try:
                    for job in pending:
                        job.result()
                finally:
                    uploader.release()
        with open(os.path.join(self.stage, merge_plan.MANIFEST_NAME), "rb") as fh:
            staged = json.loads(fh.read())
        for f in staged["files"]:
            if f["name"] in packed:
                f["packed"] = packed[f["name"]]
        scans.settle(in_snapshot, signatures)
        return exported, push_plan.assemble(staged, reused, known, exported["artifactsByFile"])

    def _publish(self, current: _Current, manifest: dict[str, Any],
                 assembly: push_plan.Assembly, loaded: LoadedMemory,
                 signatures: Mapping[str, push_plan.Signature | None],
                 scans: _TombstoneScans, reused: Mapping[str, Remembered],
                 generation: str | None) -> bool:
        """Save the memory (unless the file already says it), then write the manifest
        unless the one in place says the same. Saved first: whether or not the write
        lands (or this process dies right after it), the next push finds the manifest
        in place naming only snapshots, and being a manifest, remembered here as this
        root's own."""
        body = push_plan.encode(manifest)
        write = not push_plan.same_content(manifest, current.manifest)
        owned = push_plan.segment_keys(manifest)
        ours: set[str] = set()
        if current.manifest is not None:
            owned |= push_plan.segment_keys(current.manifest)
            ours.add(str(current.digest))
        if write:
            ours.add(push_plan.manifest_digest(body))
        saved = push_plan.next_memory(self.spec.url, assembly, signatures, reused, self.tips,
                                      generation, scans.found, owned, ours)
        raw = json.dumps(saved.as_json(), sort_keys=True).encode("utf-8")
        if raw != loaded.raw:
            write_file_atomic(self.memory_path, raw)
        self.killer.point("before-manifest")
        if not write:
            return False
        self.killer.step()
        try:
            self.remote.put_bytes(self.prefix + MANIFEST_KEY, body, if_match=current.etag)
        except PreconditionFailed:
            raise ConflictError(
                f"refusing to replace replica {self.me}'s manifest in {self.spec.url}: it "
                "changed while this push ran (another root with the same replica id, a "
                "copied root?); nothing was replaced, run push again") from None
        self.killer.point("after-manifest")
        return True

    def _delete_stale(self, listed: Iterable[str], objects: Mapping[str, str]) -> list[str]:
        deleted = []
        for key in push_plan.stale_keys(listed, self.prefix, objects):
            self.killer.step()
            self.remote.delete(key)
            deleted.append(key)
        return deleted

    def _report(self, exported: dict[str, Any], assembly: push_plan.Assembly,
                uploaders: tuple[_Uploader, ...], reused: int, written: bool,
                deleted: list[str], extended: sync_deltas.Extended | None) -> dict[str, Any]:
        warnings = []
        if extended is not None and extended.malformed:
            warnings.append(f"{extended.malformed} malformed row(s) were pushed as stored; "
                            "readers skip them")
        if exported["artifactsMissing"]:
            warnings.append(f"{len(exported['artifactsMissing'])} artifact(s) could not be "
                            "pushed (missing or not matching their checksum)")
        if exported["malformed"]:
            warnings.append(f"{len(exported['malformed'])} malformed row(s) were pushed as "
                            "stored; readers skip them")
        files = assembly.export["files"]
        return {
            "remote": self.spec.name, "url": self.spec.url, "workspace": self.ws.name,
            "replica": self.me, "files": len(files), "snapshotted": len(assembly.fresh),
            "deltas": 0 if extended is None else len(extended.made),
            "events": sum(f["events"] for f in files) + delta_plan.delta_events(assembly.deltas),
            "withheld": exported["withheld"] + (0 if extended is None else extended.withheld),
            "uploaded": sum(u.uploaded for u in uploaders),
            "uploadedBytes": sum(u.bytes for u in uploaders),
            "alreadyPresent": sum(u.already for u in uploaders) + reused,
            "manifestWritten": written,
            "deleted": deleted, "warnings": warnings,
        }


class _Uploader:
    """Creates the objects the remote lacks, one at a time, and counts them. A sealed
    segment the export linked rather than snapshotted is held still until its upload
    is done (storage/sealed_hold.py)."""

    def __init__(self, remote: Remote, prefix: str, stage: str, present: set[str],
                 killer: Killer) -> None:
        self.remote, self.prefix, self.stage = remote, prefix, stage
        self.present, self.killer = present, killer
        self.holds: dict[str, SealedHold] = {}
        self.uploaded = self.already = self.bytes = 0

    def upload(self, path: str, key: str) -> None:
        try:
            if self.prefix + key in self.present:
                self.already += 1
                return
            self.killer.step()
            local = os.path.join(self.stage, *path.split("/"))
            if self.remote.put_file(self.prefix + key, local):
                self.uploaded += 1
                self.bytes += os.path.getsize(local)
            else:
                self.already += 1
        finally:
            if (hold := self.holds.pop(path, None)) is not None:
                hold.close()

    def release(self) -> None:
        for hold in list(self.holds.values()):
            hold.close()


class _TombstoneScans:
    """The subjects each segment's tombstone rows name, read again only from segments
    whose file changed since the push memory (or this push) read them."""

    def __init__(self, ws: Workspace, remembered: Mapping[str, Scanned]) -> None:
        self.ws = ws
        self.remembered = remembered
        self.found: dict[str, Scanned] = {}

    def of(self, paths: list[str]) -> set[str]:
        ids: set[str] = set()
        stale: list[tuple[str, push_plan.Signature | None, str]] = []
        for path in paths:
            name = os.path.basename(path)
            sig = segment_signature(path)
            held = self.found.get(name) or self.remembered.get(name)
            if held is not None and held.holds_for(sig):
                self.found[name] = held
                ids.update(held.ids)
            elif held is not None and (grown := self._grown(path, held, sig)) is not None:
                self.found[name] = grown  # a segment that changed: read above its tip
                ids.update(grown.ids)
            else:
                stale.append((name, sig, path))
        if not stale:
            return ids
        from agent_journal.ops import export as export_op

        fresh = export_op.segment_tombstones(self.ws, [path for _, _, path in stale])
        for (name, sig, _), got in zip(stale, fresh, strict=True):
            self.found[name] = Scanned(sig, tuple(sorted(got)))
            ids.update(got)
        return ids

    def _grown(self, path: str, held: Scanned, sig: push_plan.Signature | None
               ) -> Scanned | None:
        """What a changed segment's tombstones name: those remembered up to its tip
        and those of the rows above it (all its rows when no tip was kept). Tombstones
        are never removed, and seqs only grow while the row at the tip stays; None
        when it did not (the segment is read as a stale one)."""
        from agent_journal.core.merge_rows import tombstone_targets

        try:
            got = tombstone_candidates_above(path, held.tip)
        except Unreadable as exc:
            raise DamagedJournalError(f"refusing to push: {self.ws.rel(path)} is unreadable "
                                      f"({exc}); it could hold a tombstone") from None
        if got is None:
            return None
        rows, tip = got
        before = set(held.ids) if held.tip is not None else set()
        return Scanned(sig, tuple(sorted(before | tombstone_targets(rows))), tip)

    def settle(self, in_snapshot: Mapping[str, set[str]],
               signatures: Mapping[str, push_plan.Signature | None]) -> None:
        """A segment unchanged while it was snapshotted holds the tombstones its
        snapshot held."""
        for name, ids in in_snapshot.items():
            sig = signatures.get(name)
            path = os.path.join(self.ws.segments_dir, name)
            if sig is not None and segment_signature(path) == sig:
                self.found[name] = Scanned(sig, tuple(sorted(ids)))


def _events_not_held(ws: Workspace, remote: Remote, prefix: str, manifest: dict[str, Any],
                     owned: set[str], stage: str) -> int:
    """How many events the manifest's segment snapshots hold that this root's own
    segments neither hold nor removed themselves (compaction), counting only the
    snapshots this root does not remember writing (none, usually: then nothing is
    fetched). A snapshot gone from the remote, or failing its size and checksum,
    holds nothing a reader would import, so it is not counted."""
    from agent_journal.storage.replica_source import event_ids, ids_held, imported_then_removed

    ids: set[str] = set()
    for n, (path, f, delta) in enumerate(delta_plan.segment_objects(manifest)):
        key = manifest["objects"][path]
        if key in owned:
            continue
        dest = os.path.join(stage, f".held-{n}")
        try:
            if sync_deltas.fetch_object(remote, prefix + key, f, delta, dest)[0] is None:
                ids.update(event_ids(dest))
        except (ObjectMissing, Unreadable):
            pass  # gone, or readers refuse it as well
        finally:
            unlink_quietly(dest)
    mine = own_replicas(ws.root)
    for path in ws.segment_paths() if ids else ():
        own = merge_plan.own_segment(os.path.basename(path))
        if own is None or own[0] not in mine:
            continue  # an import is never pushed: what it holds would leave the remote
        try:
            ids -= ids_held(path, ids) | imported_then_removed(path)
        except Unreadable as exc:
            raise DamagedJournalError(f"refusing to push: {ws.rel(path)} is unreadable "
                                      f"({exc}); nothing was pushed") from None
        if not ids:
            break
    return len(ids)


def _tip(ws: Workspace, stage: str, name: str) -> Tip | None:
    """Where a snapshot just staged ends in its live segment: its highest seq, the id
    there and the rows up to it (None when either cannot be read)."""
    try:
        return read_tip(os.path.join(ws.segments_dir, name),
                        highest_seq(os.path.join(stage, name)))
    except Unreadable:
        return None  # the export refuses it, or reports its damage
