"""push, pull, sync, remote status: replicas meeting in a bucket or a shared folder.

The contract is spec/SYNC.md. Invariants:
- Push writes only below this replica's own prefix, and in this order:
  objects (created, never replaced), then the manifest (conditionally
  replacing the one it read), then deletes of its keys the new manifest does
  not name. Killed anywhere, the remote's manifest names only objects that
  exist, and the next push completes the work.
- Push drops from its manifest only this root's own history: it refuses,
  before writing anything, to replace a manifest naming a segment snapshot
  that this root did not write (pushed.json, saved before each manifest
  write, remembers those it did) holding an event its own segments neither
  hold nor removed themselves (a copied root, or one restored from a backup).
- What push uploads is `export_op.export_own` (ops/export.py): consistent SQLite snapshots of
  the own segments, scrubbed of every tombstoned subject this replica knows.
- Pull trusts nothing it reads: manifests are checked for shape, replica and
  workspace; every object is checked for size and checksum as it lands (in a
  private staging folder), each segment is then read as a local reader reads it
  (a file it could not read, or a malformed row its manifest does not list) and
  each artifact against its reference, and one that fails is reported and left
  out.
  Merging is `replicas.merge_all` of one staged export folder per replica,
  each with a tombstone list that is the union of every manifest's, so
  content any replica tombstoned is never written here, whichever object
  arrives first; its reports are those of one `merge` per replica in turn.
- Pull and push refuse bad input (unknown remote, bad URL, unreachable or
  missing bucket or folder, missing credentials) before anything is written
  locally.
- Nothing here prints: progress goes through the callback the caller passes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Container, Iterable
from typing import Any

from agent_journal.core import clock, merge_plan
from agent_journal.core.errors import (
    ConflictError,
    DamagedJournalError,
    JournalError,
    NotFoundError,
)
from agent_journal.ops import export as export_op
from agent_journal.ops import remotes, replicas
from agent_journal.ops.context import Context
from agent_journal.storage.files import (
    fsync_path,
    make_private_dirs,
    open_private_new,
    write_file_atomic,
)
from agent_journal.storage.locks import FileLock, process_alive
from agent_journal.storage.remote import (
    ObjectMissing,
    ObjectUnusable,
    PreconditionFailed,
    Remote,
)
from agent_journal.storage.replica_source import (
    SealedFacts,
    Unreadable,
    fetched_segment_fault,
    read_sealed_facts,
    subjects_present,
)
from agent_journal.storage.root import Root, read_replica_id
from agent_journal.storage.sealed_hold import SealedHold
from agent_journal.storage.workspace import Workspace

Progress = Callable[[str], None] | None

SYNC_FORMAT = 1
MANIFEST_KEY = "manifest.json"
STATE_DIR = "remotes"
STATE_NAME = "state.json"
PUSH_CACHE = "pushed.json"
# Tests only: SIGKILL this process just before its N-th write to the remote
# (objects, manifest, deletes counted together), to prove every point safe; or
# at a named point: "before-manifest" (push memory saved, manifest not written),
# "after-manifest" (manifest written, nothing after it done).
ENV_KILL_AT = "AGENT_JOURNAL_TEST_PUSH_KILL_AT"


def _say(progress: Progress, text: str) -> None:
    if progress is not None:
        progress(text)


def _prefix(workspace: str, replica: str) -> str:
    return f"{workspace}/{replica}/"


def segment_key(name: str, checksum: str) -> str:
    """`segments/<stem>.<16 hex>.sqlite`: the key is a function of the bytes."""
    stem = name[: -len(merge_plan.SEGMENT_SUFFIX)]
    digest = checksum.partition(":")[2]
    return f"segments/{stem}.{digest}{merge_plan.SEGMENT_SUFFIX}"


class _Killer:
    """The test hook of ENV_KILL_AT (inert unless the variable is set)."""

    def __init__(self) -> None:
        self.raw = os.environ.get(ENV_KILL_AT) or ""
        self.at = int(self.raw) if self.raw.isdigit() else 0
        self.count = 0

    def step(self) -> None:
        self.count += 1
        if self.at and self.count == self.at:
            self._die()

    def point(self, name: str) -> None:
        if self.raw == name:
            self._die()

    def _die(self) -> None:
        import signal

        os.kill(os.getpid(), signal.SIGKILL)


def _open(ctx: Context, name: str | None) -> tuple[remotes.RemoteSpec, Remote]:
    spec = remotes.resolve(ctx, name)
    remote = remotes.open_remote(spec)
    remote.check()
    return spec, remote


def _state_dir(ws: Workspace, name: str) -> str:
    return os.path.join(ws.path, STATE_DIR, name)


def _stage(ws: Workspace, name: str, what: str) -> str:
    folder = _state_dir(ws, name)
    make_private_dirs(folder)
    for entry in os.listdir(folder):
        if entry.startswith(f".{what}-"):
            pid = entry.split("-")[1]
            if pid.isdigit() and not process_alive(int(pid)):
                shutil.rmtree(os.path.join(folder, entry), ignore_errors=True)
    path = os.path.join(folder, f".{what}-{os.getpid()}-{os.urandom(4).hex()}")
    make_private_dirs(path)
    return path


def remove_dead_stages(ws: Workspace) -> list[str]:
    """Delete what killed syncs left under the workspace: push and pull stages of every
    remote (`remotes/<name>/.push-<pid>-*`, `.pull-<pid>-*`) and `remote status` scan
    folders (`.status-<pid>-*`, or the pid-less `.status-*` of older versions) whose
    process is gone. They hold segment snapshots and fetched objects, which a tombstone
    can name: compact --apply calls this so its erasure reaches them."""
    found: list[str] = []
    state = os.path.join(ws.path, STATE_DIR)
    try:
        for remote in os.listdir(state):
            folder = os.path.join(state, remote)
            if os.path.isdir(folder) and not os.path.islink(folder):
                found += [os.path.join(folder, e) for e in os.listdir(folder)
                          if e.startswith((".push-", ".pull-"))]
    except FileNotFoundError:
        pass
    try:
        found += [os.path.join(ws.path, e) for e in os.listdir(ws.path)
                  if e.startswith(".status-")]
    except FileNotFoundError:
        pass
    removed = []
    for path in found:
        pid = os.path.basename(path).split("-")[1]
        if pid.isdigit() and process_alive(int(pid)):
            continue
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


# -- manifests ----------------------------------------------------------------------------

# clock.now_ts(): what push writes as pushedTs (years before 1000 unpadded).
_PUSHED_TS = re.compile(r"[0-9]{1,4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z")


def _check_sync_manifest(raw: bytes, *, workspace: str, replica: str) -> dict[str, Any]:
    """A remote manifest, validated; raises JournalError with the reason."""
    from agent_journal.capture.strictjson import StrictJSONError, loads

    try:
        # Strict: no NaN or Infinity (which no JSON report could carry on), no duplicate
        # keys; nesting too deep for the parser is a refusal, not a crash.
        obj = loads(raw)
    except StrictJSONError as exc:
        raise JournalError(f"not JSON: {exc}") from None
    if not isinstance(obj, dict) or obj.get("syncFormat") != SYNC_FORMAT:
        raise JournalError(f"syncFormat is not {SYNC_FORMAT}")
    if not isinstance(obj.get("pushedTs"), str) or not _PUSHED_TS.fullmatch(obj["pushedTs"]):
        raise JournalError("pushedTs is not a time this journal writes")
    if obj.get("workspace") != workspace:
        raise JournalError(f"it is of workspace {obj.get('workspace')!r}")
    if obj.get("replica") != replica:
        raise JournalError(f"it says it is replica {obj.get('replica')!r}")
    try:
        export = merge_plan.check_manifest(obj.get("export"), workspace=workspace)
    except merge_plan.ManifestError as exc:
        raise JournalError(str(exc)) from None
    if export["sourceReplica"] != replica:
        raise JournalError(f"its export is of replica {export['sourceReplica']!r}")
    for f in export["files"]:
        own = merge_plan.own_segment(f["name"])
        if own is None or own[0] != replica:
            raise JournalError(f"{f['name']} is not one of replica {replica}'s own segments")
    objects = obj.get("objects")
    if not isinstance(objects, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in objects.items()):
        raise JournalError("objects must map paths to keys")
    wanted = {f["name"]: segment_key(f["name"], f["checksum"]) for f in export["files"]}
    wanted.update({a["path"]: a["path"] for a in export["artifacts"] if a["path"] is not None})
    if objects != wanted:
        raise JournalError("objects do not name exactly the export's files by their content")
    return obj


def _comparable(manifest: dict[str, Any] | None) -> Any:
    if manifest is None:
        return None
    export = dict(manifest["export"])
    export.pop("createdTs", None)
    return manifest["objects"], export


# -- push ---------------------------------------------------------------------------------

def push(ctx: Context, name: str | None, *, progress: Progress = None) -> dict[str, Any]:
    spec, remote = _open(ctx, name)
    ws = ctx.open(create=False)
    if not os.path.isdir(ws.segments_dir):
        raise NotFoundError(f"workspace {ws.name} has no segments in {ws.root.path}; "
                            "nothing to push")
    with FileLock(os.path.join(_state_dir(ws, spec.name), "push.lock")):
        stage = _stage(ws, spec.name, "push")
        try:
            return _push(ws, spec, remote, stage, progress)
        finally:
            shutil.rmtree(stage, ignore_errors=True)


def _push(ws: Workspace, spec: remotes.RemoteSpec, remote: Remote, stage: str,
          progress: Progress) -> dict[str, Any]:
    me = ws.root.replica_id
    prefix = _prefix(ws.name, me)
    _say(progress, "push: reading the remote")
    present = remote.list_keys(prefix)
    # The manifest is read once, first: the push replaces exactly this one (its
    # etag is the write's condition), so another root pushing meanwhile is refused.
    current: dict[str, Any] | None = None
    etag: str | None = None
    try:
        got = remote.get_bytes(prefix + MANIFEST_KEY)
        assert got is not None
        raw, etag = got
        try:
            current = _check_sync_manifest(raw, workspace=ws.name, replica=me)
        except JournalError:
            current = None  # replaced below; an unusable manifest names nothing to keep
    except ObjectMissing:
        pass

    # A segment unchanged since the last push, under the same tombstones, would
    # snapshot to the same bytes: its entry is reused when the remote still
    # holds its object, and only the others are snapshotted again.
    cache_path = os.path.join(_state_dir(ws, spec.name), PUSH_CACHE)
    cache = _load_push_cache(cache_path)
    if cache.get("url") != spec.url:
        # Remembered for another remote under this name: its entries are worthless
        # here, but what the local segments' tombstones name is the same.
        cache = {"tombstonesBySegment": cache.get("tombstonesBySegment", {})}
    signatures = {os.path.basename(p): _signature(p) for p in ws.segment_paths()}
    # Tombstones per segment, read again only from segments that changed.
    scanned = cache.get("tombstonesBySegment")
    scanned = scanned if isinstance(scanned, dict) else {}
    by_segment: dict[str, dict[str, Any]] = {}

    def scan_changed(paths: list[str]) -> set[str]:
        found: set[str] = set()
        stale: list[tuple[str, list[int] | None, str]] = []
        for path in paths:
            name = os.path.basename(path)
            sig = _signature(path)
            held = by_segment.get(name) or scanned.get(name)
            if isinstance(held, dict) and sig is not None and held.get("sig") == sig \
                    and isinstance(held.get("ids"), list):
                by_segment[name] = held
                found.update(held["ids"])
            else:
                stale.append((name, sig, path))
        fresh = export_op.segment_tombstones(ws, [path for _, _, path in stale])
        for (name, sig, _), ids in zip(stale, fresh, strict=True):
            by_segment[name] = {"sig": sig, "ids": sorted(ids)}
            found.update(ids)
        return found

    reusable: dict[str, dict[str, Any]] = {}
    reusable_artifacts: dict[str, list[dict[str, Any]]] = {}
    for name, held in cache.get("segments", {}).items():
        entry = held.get("entry") if isinstance(held, dict) else None
        cited = _cited_artifacts(held, prefix, present)
        sig = signatures.get(name)
        if (isinstance(entry, dict) and sig is not None and held.get("sig") == sig
                and cited is not None
                and isinstance(entry.get("checksum"), str) and entry.get("name") == name
                and prefix + segment_key(name, entry["checksum"]) in present):
            reusable[name] = entry
            reusable_artifacts[name] = cited
    if current is not None and current["export"]["tombstoned"]:
        # Tombstones are never removed, so a manifest this root wrote names only
        # tombstones it still holds. One naming others was written by another root
        # with this replica id (a copy made before a purge): replacing it would
        # publish again what that root erased, and drop what it wrote since.
        foreign = set(current["export"]["tombstoned"]) - scan_changed(ws.segment_paths())
        if foreign:
            raise ConflictError(
                f"refusing to push to {spec.url}: replica {me}'s manifest there names "
                f"{len(foreign)} tombstone(s) this root does not hold, so another root with "
                "this replica id (a copy of this root?) pushed it; pushing from here would "
                "publish again what that root erased. Nothing was pushed")
    if current is not None:
        # Only this root's own history may leave its manifest: a snapshot there
        # that this root did not write, holding events its own segments lack,
        # was pushed by another root with this replica id.
        lacking = _events_not_held(ws, remote, prefix, current, _owned_keys(cache), stage)
        if lacking:
            raise ConflictError(
                f"refusing to push to {spec.url}: replica {me}'s manifest there names "
                f"{lacking} event(s) this root does not hold, so another root with this "
                "replica id pushed them (a copy of this root, or this root restored from a "
                "backup older than its last push) and pushing from here would drop them. "
                "Nothing was pushed. Keep pushing from the root that wrote them; to go on "
                "from this one, make a new root, `merge` this root into it and `pull` there "
                "(spec/SYNC.md, \"A root copied or restored\")")
    # An entry is reused only under the very tombstones it was scrubbed under,
    # which takes knowing every segment's; with nothing to reuse, the export
    # reads them itself (of its snapshots, then of the other segments).
    known: set[str] = set()
    reused: dict[str, dict[str, Any]] = {}
    if reusable:
        known = scan_changed(ws.segment_paths())
        if cache.get("tombstones") == _tombstones_digest(known):
            reused = reusable
    killer = _Killer()
    counts = {"uploaded": 0, "already": 0, "bytes": 0}

    # Sealed segments the export linked rather than snapshotted, each held still
    # until its upload is done (storage/sealed_hold.py).
    holds: dict[str, SealedHold] = {}

    def upload(path: str, key: str) -> None:
        try:
            if prefix + key in present:
                counts["already"] += 1
                return
            killer.step()
            local = os.path.join(stage, *path.split("/"))
            if remote.put_file(prefix + key, local):
                counts["uploaded"] += 1
                counts["bytes"] += os.path.getsize(local)
            else:
                counts["already"] += 1
        finally:
            if (hold := holds.pop(path, None)) is not None:
                hold.close()

    # Each snapshot is uploaded (one at a time, in order) while the next is
    # taken and checked: the transfer hides behind the local work.
    from concurrent.futures import ThreadPoolExecutor

    pending = []
    in_snapshot: dict[str, set[str]] = {}
    with ThreadPoolExecutor(max_workers=1) as pool:
        def on_file(entry: dict[str, Any]) -> None:
            _say(progress, f"push: uploading {entry['name']}")
            pending.append(pool.submit(upload, entry["name"],
                                       segment_key(entry["name"], entry["checksum"])))

        try:
            exported = export_op.export_own(ws, stage, progress=progress,
                                           skip=frozenset(reused), on_file=on_file,
                                           tombstones=lambda paths: known | scan_changed(paths),
                                           durable=False, snapshot_tombstones=in_snapshot,
                                           holds=holds)
        finally:
            try:
                for job in pending:
                    job.result()
            finally:
                for hold in list(holds.values()):
                    hold.close()
    with open(os.path.join(stage, merge_plan.MANIFEST_NAME), "rb") as fh:
        export = json.loads(fh.read())
    export["files"] = sorted(export["files"] + list(reused.values()), key=lambda f: f["name"])
    export["tombstoned"] = sorted(set(export["tombstoned"]) | known)
    if reused and set(export["tombstoned"]) != known:
        reused_kept: set[str] = set()  # a tombstone came meanwhile: snapshot them again next time
    else:
        reused_kept = set(reused)
    # A segment unchanged while it was snapshotted holds the tombstones its snapshot held.
    for name, ids in in_snapshot.items():
        sig = signatures.get(name)
        if sig is not None and _signature(os.path.join(ws.segments_dir, name)) == sig:
            by_segment[name] = {"sig": sig, "ids": sorted(ids)}
    # A reused snapshot's artifacts are named again (its rows still cite them),
    # or the manifest would drop them and the clean-up below delete them.
    artifacts_by_file: dict[str, list[dict[str, Any]]] = dict(exported["artifactsByFile"])
    artifacts_by_file.update({name: reusable_artifacts[name] for name in reused})
    export["artifacts"] = _union_artifacts(export["artifacts"], artifacts_by_file.values())
    objects = {f["name"]: segment_key(f["name"], f["checksum"]) for f in export["files"]}
    objects.update({a["path"]: a["path"] for a in export["artifacts"] if a["path"]})
    for a in export["artifacts"]:
        if a["path"] and os.path.exists(os.path.join(stage, *a["path"].split("/"))):
            _say(progress, f"push: uploading {a['path']}")
            upload(a["path"], a["path"])
    uploaded, already, uploaded_bytes = counts["uploaded"], counts["already"], counts["bytes"]
    already += len(reused)

    manifest = {"syncFormat": SYNC_FORMAT, "workspace": ws.name, "replica": me,
                "pushedTs": clock.now_ts(), "export": export, "objects": objects}

    # Saved before the manifest is written: whether or not the write lands (or
    # this process dies right after it), the next push finds the manifest in
    # place naming only snapshots remembered here as this root's own.
    fresh = {f["name"] for f in export["files"]} - set(reused)
    owned = _segment_keys(manifest) | (_segment_keys(current) if current is not None else set())
    cache = {"url": spec.url, "tombstones": _tombstones_digest(set(export["tombstoned"])),
             "tombstonesBySegment": by_segment, "owned": sorted(owned), "segments": {
        f["name"]: {"sig": signatures.get(f["name"]), "entry": f,
                    "artifacts": artifacts_by_file.get(f["name"], [])}
        for f in export["files"] if f["name"] in reused_kept or f["name"] in fresh}}
    write_file_atomic(cache_path, json.dumps(cache, sort_keys=True).encode("utf-8"))
    killer.point("before-manifest")

    written = False
    if _comparable(manifest) != _comparable(current):
        killer.step()
        body = json.dumps(manifest, indent=2, sort_keys=True).encode("utf-8") + b"\n"
        try:
            remote.put_bytes(prefix + MANIFEST_KEY, body, if_match=etag)
        except PreconditionFailed:
            raise ConflictError(
                f"refusing to replace replica {me}'s manifest in {spec.url}: it changed while "
                "this push ran (another root with the same replica id, a copied root?); "
                "nothing was replaced, run push again") from None
        written = True
        killer.point("after-manifest")

    keep = {prefix + MANIFEST_KEY} | {prefix + k for k in objects.values()}
    deleted = []
    for key in sorted(set(remote.list_keys(prefix)) - keep):
        if key.rsplit("/", 1)[-1] == ".lock":
            continue
        killer.step()
        remote.delete(key)
        deleted.append(key)

    warnings = []
    if exported["artifactsMissing"]:
        warnings.append(f"{len(exported['artifactsMissing'])} artifact(s) could not be pushed "
                        "(missing or not matching their checksum)")
    if exported["malformed"]:
        warnings.append(f"{len(exported['malformed'])} malformed row(s) were pushed as stored; "
                        "readers skip them")
    return {
        "remote": spec.name, "url": spec.url, "workspace": ws.name, "replica": me,
        "files": len(export["files"]), "snapshotted": len(fresh),
        "events": sum(f["events"] for f in export["files"]),
        "withheld": exported["withheld"], "uploaded": uploaded, "uploadedBytes": uploaded_bytes,
        "alreadyPresent": already, "manifestWritten": written, "deleted": deleted,
        "warnings": warnings,
    }


def _cited_artifacts(held: Any, prefix: str, present: Container[str]
                     ) -> list[dict[str, Any]] | None:
    """The artifact entries a remembered snapshot cites, when every one the bucket
    should hold is there; None when the memory lacks them (written by a version
    that did not keep them) or one is gone: the segment is snapshotted again."""
    cited = held.get("artifacts") if isinstance(held, dict) else None
    if not isinstance(cited, list) or not all(
            isinstance(a, dict) and isinstance(a.get("ref"), str)
            and isinstance(a.get("observations"), list) for a in cited):
        return None
    if any(a.get("path") and prefix + a["path"] not in present for a in cited):
        return None
    return cited


def _union_artifacts(listed: list[dict[str, Any]],
                     more: Iterable[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One manifest entry per artifact, citing every observation any file cites it by."""
    by_ref: dict[str, dict[str, Any]] = {a["ref"]: dict(a) for a in listed}
    for entries in more:
        for a in entries:
            got = by_ref.get(a["ref"])
            if got is None:
                by_ref[a["ref"]] = dict(a)
            else:
                got["observations"] = sorted(set(got["observations"]) | set(a["observations"]))
    return [by_ref[ref] for ref in sorted(by_ref)]


def _segment_keys(manifest: dict[str, Any]) -> set[str]:
    return {manifest["objects"][f["name"]] for f in manifest["export"]["files"]}


def _owned_keys(cache: dict[str, Any]) -> set[str]:
    """The segment snapshots this root wrote to the remote, as far as its push memory
    (`pushed.json`, already checked to be about this remote's URL) remembers: the
    `owned` list, and the entries of the last push (all a version before `owned` kept)."""
    owned = {k for k in cache.get("owned") or () if isinstance(k, str)}
    for name, held in (cache.get("segments") or {}).items():
        entry = held.get("entry") if isinstance(held, dict) else None
        if isinstance(entry, dict) and isinstance(entry.get("checksum"), str) \
                and merge_plan.own_segment(name) is not None:
            owned.add(segment_key(name, entry["checksum"]))
    return owned


def _events_not_held(ws: Workspace, remote: Remote, prefix: str, manifest: dict[str, Any],
                     owned: set[str], stage: str) -> int:
    """How many events the manifest's segment snapshots hold that this root's own
    segments neither hold nor removed themselves (compaction), counting only the
    snapshots this root does not remember writing (none, usually: then nothing is
    fetched). A snapshot gone from the remote, or failing its size and checksum,
    holds nothing a reader would import, so it is not counted."""
    from agent_journal.storage.replica_source import event_ids, ids_held, imported_then_removed

    ids: set[str] = set()
    for f in manifest["export"]["files"]:
        key = manifest["objects"][f["name"]]
        if key in owned:
            continue
        dest = os.path.join(stage, f".held-{f['name']}")
        try:
            got = remote.download(prefix + key, dest)
        except ObjectMissing:
            continue
        try:
            if got == (f["bytes"], f["checksum"]):
                ids.update(event_ids(dest))
        except Unreadable:
            pass  # readers refuse it as well
        finally:
            os.unlink(dest)
    if not ids:
        return 0
    me = ws.root.replica_id
    for path in ws.segment_paths():
        own = merge_plan.own_segment(os.path.basename(path))
        if own is None or own[0] != me:
            continue  # an import is never pushed: what it holds would leave the remote
        try:
            ids -= ids_held(path, ids) | imported_then_removed(path)
        except Unreadable as exc:
            raise DamagedJournalError(f"refusing to push: {ws.rel(path)} is unreadable "
                                      f"({exc}); nothing was pushed") from None
        if not ids:
            break
    return len(ids)


def _signature(path: str) -> list[int] | None:
    """What changes when a segment does: the file and its WAL (inode, size, mtime)."""
    out: list[int] = []
    for p in (path, path + "-wal"):
        try:
            st = os.stat(p)
        except FileNotFoundError:
            out += [0, 0, 0]
            continue
        except OSError:
            return None
        out += [st.st_ino, st.st_size, st.st_mtime_ns]
    return out


def _tombstones_digest(ids: set[str]) -> str:
    import xxhash

    return xxhash.xxh3_64_hexdigest("\n".join(sorted(ids)).encode("utf-8"))


def _load_push_cache(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            cache = json.loads(fh.read())
    except (OSError, ValueError, RecursionError):
        return {}  # lost or damaged: every segment is snapshotted again, nothing else
    return cache if isinstance(cache, dict) and isinstance(cache.get("segments"), dict) else {}


# -- pull ---------------------------------------------------------------------------------

class _Seen:
    """One replica's manifest as this pull found it."""

    def __init__(self, replica: str, manifest: dict[str, Any] | None, etag: str | None,
                 tombstoned: list[str]) -> None:
        self.replica = replica
        self.manifest = manifest  # None: unchanged since the last pull
        self.etag = etag
        self.tombstoned = tombstoned


def _load_state(path: str, url: str) -> dict[str, Any]:
    """What earlier pulls from this remote merged; empty when it was about another URL
    (a remote removed and added again under the same name)."""
    state = _read_state(path)
    if state.get("url") != url:
        return {"url": url, "replicas": {}}
    return state


def _read_state(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            state = json.loads(fh.read())
    except FileNotFoundError:
        return {"replicas": {}}
    except (OSError, ValueError, RecursionError):
        return {"replicas": {}}  # a lost memory costs one full fetch, never data
    if not isinstance(state, dict) or not isinstance(state.get("replicas"), dict):
        return {"replicas": {}}
    return state


def _read_manifests(remote: Remote, workspace: str, me: str | None,
                    state: dict[str, Any], refused: list[dict[str, Any]],
                    *, conditional: bool = True) -> list[_Seen]:
    seen = []
    for replica in remote.list_dirs(f"{workspace}/"):
        if replica == me:
            continue
        if merge_plan.safe_replica(replica) != replica:
            refused.append({"replica": replica, "key": None,
                            "reason": "not a replica id this journal would write"})
            continue
        remembered = state["replicas"].get(replica, {}) if conditional else {}
        key = _prefix(workspace, replica) + MANIFEST_KEY
        try:
            got = remote.get_bytes(key, if_none_match=remembered.get("etag"))
        except ObjectMissing:
            continue  # a first push that has not written its manifest yet
        except ObjectUnusable as exc:
            refused.append({"replica": replica, "key": key, "reason": f"bad manifest: {exc}"})
            continue
        if got is None:
            seen.append(_Seen(replica, None, remembered.get("etag"),
                              list(remembered.get("tombstoned", []))))
            continue
        raw, etag = got
        try:
            manifest = _check_sync_manifest(raw, workspace=workspace, replica=replica)
        except JournalError as exc:
            refused.append({"replica": replica, "key": key, "reason": f"bad manifest: {exc}"})
            continue
        seen.append(_Seen(replica, manifest, etag, list(manifest["export"]["tombstoned"])))
    return seen


def pull(ctx: Context, name: str | None, *, progress: Progress = None) -> dict[str, Any]:
    spec, remote = _open(ctx, name)
    root = Root.open(ctx.root_arg, create=False)
    me = read_replica_id(root.path) if root.exists else None
    ws_path = os.path.join(root.path, "workspaces", ctx.workspace_name)
    state_path = os.path.join(ws_path, STATE_DIR, spec.name, STATE_NAME)
    state = _load_state(state_path, spec.url)
    refused: list[dict[str, Any]] = []
    missing: list[dict[str, Any]] = []
    _say(progress, "pull: reading manifests")
    seen = _read_manifests(remote, ctx.workspace_name, me, state, refused)
    union: set[str] = set()
    for s in seen:
        union.update(s.tombstoned)

    merged: list[dict[str, Any]] = []
    fetched = fetched_bytes = 0
    unbacked: set[str] = set()
    changed = [s for s in seen if s.manifest is not None]
    if changed:
        ws = ctx.open(create=True)
        plans: list[_Fetching] = []
        try:
            for s in changed:
                plans.append(_Fetching(s, _stage(ws, spec.name, "pull"),
                                       state["replicas"].get(s.replica, {})))
            facts: dict[str, SealedFacts] = {}
            fetched, fetched_bytes = _fetch_all(remote, ws.name, plans, refused, missing,
                                                progress, facts)
            # Every replica that brought something, merged in one pass over the
            # local workspace (replicas.merge_all), under the union of every
            # manifest's tombstones.
            arrived = [p for p in plans if p.files or p.artifacts]
            # A manifest's tombstone list only summarises tombstone events: an id no
            # event stands behind (here or in what arrived) withholds nothing.
            backed = _tombstones_behind(ws, arrived, union)
            unbacked = union - backed
            for p in arrived:
                unbacked |= set(p.export["tombstoned"]) - backed
                p.write_manifest(union & backed, backed)
            reports = replicas.merge_all(ctx, [p.stage for p in arrived], checked=True,
                                         progress=progress, facts=facts)
            for p, report in zip(arrived, reports, strict=True):
                report["source"] = {"replica": p.seen.replica, "kind": "remote"}
                merged.append(report)
        finally:
            for p in plans:
                shutil.rmtree(p.stage, ignore_errors=True)
        for p in plans:
            entry = state["replicas"].setdefault(p.seen.replica, {})
            # Remember only keys the current manifest still names: the memory stays bounded.
            entry["merged"] = sorted((p.had | p.done()) & set(p.objects.values()))
            entry["tombstoned"] = p.seen.tombstoned
            if p.complete:
                entry["etag"] = p.seen.etag
            else:
                entry.pop("etag", None)  # try again next time
        make_private_dirs(os.path.dirname(state_path))
        write_file_atomic(state_path, json.dumps(state, indent=1, sort_keys=True).encode())

    warnings = []
    if unbacked:
        warnings.append(f"{len(unbacked)} tombstone(s) a manifest names have no tombstone "
                        "event behind them here or in what arrived; they withheld nothing")
    if refused:
        warnings.append(f"{len(refused)} remote object(s) or manifest(s) failed verification "
                        "and were not imported")
    if missing:
        warnings.append(f"{len(missing)} object(s) named by a manifest were gone (replaced by "
                        "a newer push?); the next pull tries again")
    for report in merged:
        if report["replicaIdCollisions"]:
            warnings.append("replica id shared by two roots (a copied journal root?): "
                            + ", ".join(report["replicaIdCollisions"]) + "; every event was "
                            "kept")
    return {
        "remote": spec.name, "url": spec.url, "workspace": ctx.workspace_name,
        "replicas": len(seen), "changed": len(changed), "fetched": fetched,
        "fetchedBytes": fetched_bytes,
        "imported": sum(r["imported"] for r in merged),
        "alreadyPresent": sum(r["alreadyPresent"] for r in merged),
        "notImported": sorted((n for r in merged for n in r["notImported"]),
                              key=lambda n: n["eventId"]),
        "merges": merged, "refused": refused, "missing": missing, "warnings": warnings,
    }


# Objects are fetched a few at a time: each transfer waits mostly on the
# service, and the checksum of one runs while others are on the wire.
FETCHERS = 4
# A fetched segment is fsynced and read (what the merge decides it by) by one
# of these, so a transfer slot is free again as soon as its bytes are checked:
# the disk and the reading then overlap the transfers still on the wire.
LANDERS = 2


class _Fetching:
    """What one pull fetches of one replica's manifest, and what arrived intact."""

    def __init__(self, seen: _Seen, stage: str, remembered: dict[str, Any]) -> None:
        assert seen.manifest is not None
        self.seen = seen
        self.stage = stage
        self.export = seen.manifest["export"]
        self.objects: dict[str, str] = seen.manifest["objects"]
        self.had = set(remembered.get("merged", []))
        # (path in the stage, size, checksum, manifest entry, is a segment)
        self.wanted = [(f["name"], f["bytes"], f["checksum"], f, True)
                       for f in self.export["files"] if self.objects[f["name"]] not in self.had]
        self.wanted += [(a["path"], a["bytes"], a["checksum"], a, False)
                        for a in self.export["artifacts"]
                        if a["path"] is not None and self.objects[a["path"]] not in self.had]
        self.files: list[dict[str, Any]] = []
        self.artifacts: list[dict[str, Any]] = []
        self.complete = True

    def done(self) -> set[str]:
        return {self.objects[f["name"]] for f in self.files} | \
            {self.objects[a["path"]] for a in self.artifacts}

    def write_manifest(self, union: set[str], backed: set[str]) -> None:
        staged = dict(self.export, files=self.files, artifacts=self.artifacts,
                      tombstoned=sorted(union | (set(self.export["tombstoned"]) & backed)))
        # Written once into this pull's fresh private stage, read by this process
        # alone: nothing to make durable (a crash leaves a stage the next pull or
        # compaction removes), so no fsync waits behind the fetched bytes.
        with open_private_new(os.path.join(self.stage, merge_plan.MANIFEST_NAME)) as out:
            out.write(json.dumps(staged, sort_keys=True).encode("utf-8"))


def _tombstones_behind(ws: Workspace, arrived: list[_Fetching], union: set[str]) -> set[str]:
    """Of the tombstones the manifests name, those a tombstone event stands behind: in a
    local segment, or in a segment that arrived."""
    from agent_journal.core.model import TOMBSTONE
    from agent_journal.storage.replica_source import Unreadable, subjects_present

    claimed = set(union).union(*(p.export["tombstoned"] for p in arrived))
    if not claimed:
        return set()
    backed = ws.tombstoned_among(claimed)
    for p in arrived:
        for f in p.files:
            if claimed <= backed:
                return backed
            try:
                backed |= subjects_present(os.path.join(p.stage, f["name"]), claimed - backed,
                                           (TOMBSTONE,))
            except Unreadable:
                continue  # the merge reports it
    return backed


def _fetch_all(remote: Remote, workspace: str, plans: list[_Fetching],
               refused: list[dict[str, Any]], missing: list[dict[str, Any]],
               progress: Progress, facts: dict[str, SealedFacts]) -> tuple[int, int]:
    """Fetch every wanted object of every plan, FETCHERS at a time, each checked for
    size and checksum as it lands, and what the merge reads of each segment read
    into `facts` (by real path) by the LANDERS once it is checked. Outcomes are
    recorded in the plans' order, whatever order the transfers end in. Returns
    (objects fetched, bytes)."""
    from concurrent.futures import Future, ThreadPoolExecutor

    jobs = [(p, item) for p in plans for item in p.wanted]
    if not jobs:
        return 0, 0
    entry_of = {(id(p), path): entry for p, (path, _, _, entry, _) in jobs}
    # Why an object that arrived whole must still not be merged (dest -> one line).
    faults: dict[str, str] = {}

    def fetch(p: _Fetching, path: str, size: int, checksum: str,
              is_segment: bool) -> tuple[str, int]:
        key = _prefix(workspace, p.seen.replica) + p.objects[path]
        dest = os.path.join(p.stage, *path.split("/"))
        make_private_dirs(os.path.dirname(dest))
        try:
            got = remote.download(key, dest)
        except ObjectMissing:
            return "missing", 0
        except ObjectUnusable as exc:
            faults[dest] = str(exc)
            return "unusable", 0
        if got != (size, checksum):
            os.unlink(dest)
            return "refused", got[0]
        if is_segment:
            listed = {m["row"] for m in entry_of[(id(p), path)]["malformed"]}
            landed.append(landers.submit(land, dest, listed))
        elif (why := _artifact_fault(dest, entry_of[(id(p), path)]["ref"])) is not None:
            faults[dest] = why
        return "ok", size

    def land(dest: str, listed: set[int]) -> None:
        # The merge may publish this very file as an import (ImportWriter.adopt):
        # its bytes go to the disk here, and what the merge reads of it before
        # deciding is read here too, while other objects are on the wire.
        fsync_path(dest)
        why = fetched_segment_fault(dest, listed)
        if why is not None:
            faults[dest] = why
            return
        ahead = read_sealed_facts(dest)
        if ahead is not None:
            facts[os.path.realpath(dest)] = ahead

    landed: list[Future[None]] = []
    with ThreadPoolExecutor(max_workers=LANDERS) as landers, \
            ThreadPoolExecutor(max_workers=FETCHERS) as pool:
        futures = [pool.submit(fetch, p, path, size, checksum, segment)
                   for p, (path, size, checksum, _, segment) in jobs]
        try:
            for n, future in enumerate(futures, 1):
                future.result()
                _say(progress, f"pull: fetched {n}/{len(futures)}")
            for done in landed:
                done.result()
        finally:
            for pending in futures:
                pending.cancel()
            for waiting in landed:
                waiting.cancel()
    count = total = 0
    for (p, (path, _, _, entry, segment)), future in zip(jobs, futures, strict=True):
        outcome, got = future.result()
        key = _prefix(workspace, p.seen.replica) + p.objects[path]
        if outcome == "missing":
            missing.append({"replica": p.seen.replica, "key": key})
            p.complete = False
            continue
        if outcome != "unusable":
            count += 1
            total += got
        if outcome == "refused":
            refused.append({"replica": p.seen.replica, "key": key,
                            "reason": "size or checksum does not match its manifest"})
            p.complete = False
            continue
        dest = os.path.join(p.stage, *path.split("/"))
        if dest in faults:
            refused.append({"replica": p.seen.replica, "key": key, "reason": faults[dest]})
            p.complete = False
            if outcome != "unusable":
                os.unlink(dest)
            continue
        (p.files if segment else p.artifacts).append(entry)
    return count, total


def _artifact_fault(path: str, ref: str) -> str | None:
    """Why a fetched artifact must not be merged, or None: a blob's reference is the
    digest of its bytes (storage/artifacts.py), which its size and checksum in a
    manifest written by anyone do not prove. A reference this version cannot place is
    left to the merge (it reports the blob missing)."""
    from agent_journal.storage.artifacts import ARTIFACT_ALGO, blob_matches_ref

    if not ref.startswith(ARTIFACT_ALGO + ":") or blob_matches_ref(path, ref):
        return None
    return "its bytes are not the ones its artifact reference names"


# -- sync, status -------------------------------------------------------------------------

def sync(ctx: Context, name: str | None, *, progress: Progress = None) -> dict[str, Any]:
    pulled = pull(ctx, name, progress=progress)
    pushed = push(ctx, name, progress=progress)
    return {"pull": pulled, "push": pushed, "warnings": pulled["warnings"] + pushed["warnings"]}


def status(ctx: Context, name: str | None) -> dict[str, Any]:
    spec, remote = _open(ctx, name)
    root = Root.open(ctx.root_arg, create=False)
    me = read_replica_id(root.path) if root.exists else None
    local_tombstoned: set[str] = set()
    ws = root.workspace(ctx.workspace_name)
    if root.exists and os.path.isdir(ws.segments_dir):
        local_tombstoned = replicas.scan_local(ws).tombstoned
    refused: list[dict[str, Any]] = []
    seen = _read_manifests(remote, ctx.workspace_name, None, {"replicas": {}}, refused,
                           conditional=False)
    union = set(local_tombstoned)
    for s in seen:
        union.update(s.tombstoned)
    state_path = os.path.join(ws.path, STATE_DIR, spec.name, STATE_NAME)
    state = _load_state(state_path, spec.url) if root.exists else {"replicas": {}}
    scans_before = json.dumps(state.get("scans"), sort_keys=True)
    listed = []
    warnings = []
    for s in seen:
        assert s.manifest is not None
        export = s.manifest["export"]
        unseen = set(union) - set(s.tombstoned)
        holding: list[dict[str, Any]] = []
        if unseen:
            holding = _scan_objects(remote, ctx.workspace_name, s, unseen, state, refused,
                                    root if root.exists else None)
        listed.append({
            "replica": s.replica, "self": s.replica == me, "pushedTs": s.manifest["pushedTs"],
            "files": len(export["files"]), "events": sum(f["events"] for f in export["files"]),
            "bytes": sum(f["bytes"] for f in export["files"]),
            "unseenTombstones": sorted(unseen), "objectsHoldingErased": holding,
        })
        if holding:
            who = "this replica" if s.replica == me else f"replica {s.replica}"
            fix = "it pushes" if s.replica == me else "its owner runs sync"
            warnings.append(f"{who} has {len(holding)} object(s) in the remote holding "
                            f"tombstoned content until {fix}")
    if root.exists and os.path.isdir(ws.path) and \
            json.dumps(state.get("scans"), sort_keys=True) != scans_before:
        make_private_dirs(os.path.dirname(state_path))
        write_file_atomic(state_path, json.dumps(state, indent=1, sort_keys=True).encode())
    versioning = remote.versioning()
    if versioning is not None:
        warnings.append(f"bucket versioning is {versioning}: deleted and replaced objects are "
                        "kept as old versions and still hold their bytes (a lifecycle rule or "
                        "an administrator must remove them)")
    if refused:
        warnings.append(f"{len(refused)} manifest(s) or object(s) failed verification")
    return {"remote": spec.name, "url": spec.url, "workspace": ctx.workspace_name,
            "self": me, "replicas": listed, "tombstones": len(union),
            "versioning": versioning, "refused": refused, "warnings": warnings}


def _scan_objects(remote: Remote, workspace: str, s: _Seen, unseen: set[str],
                  state: dict[str, Any], refused: list[dict[str, Any]],
                  root: Root | None) -> list[dict[str, Any]]:
    """The segment objects of one replica that hold rows about `unseen` tombstones.

    An object's key never changes its bytes, so what a scan found is kept per
    key (in the pull state) and an object is fetched again only for
    tombstones it was not yet checked for."""
    import tempfile

    assert s.manifest is not None
    scans = state.setdefault("scans", {})
    prefix = _prefix(workspace, s.replica)
    current = {prefix + k for k in s.manifest["objects"].values()}
    for key in [k for k in scans if k.startswith(prefix) and k not in current]:
        del scans[key]  # gone from the remote: nothing to remember
    holding = []
    base = os.path.join(root.path, "workspaces", workspace) if root is not None else None
    # The pid in the name lets compact --apply tell a killed scan's leftovers from a live one.
    folder = tempfile.mkdtemp(prefix=f".status-{os.getpid()}-",
                              dir=base if base and os.path.isdir(base) else None)
    try:
        for f in s.manifest["export"]["files"]:
            key = prefix + s.manifest["objects"][f["name"]]
            memo = scans.get(key) if isinstance(scans.get(key), dict) else None
            checked = set(memo.get("checked", [])) if memo else set()
            holds = set(memo.get("holds", [])) if memo else set()
            need = unseen - checked
            if need:
                dest = os.path.join(folder, f["name"])
                try:
                    got = remote.download(key, dest)
                except ObjectMissing:
                    continue  # replaced by a newer push since the manifest was read
                except ObjectUnusable as exc:
                    refused.append({"replica": s.replica, "key": key, "reason": str(exc)})
                    continue
                if got != (f["bytes"], f["checksum"]):
                    refused.append({"replica": s.replica, "key": key,
                                    "reason": "size or checksum does not match its manifest"})
                    os.unlink(dest)
                    continue
                try:
                    holds |= subjects_present(dest, need, tuple(merge_plan.ERASABLE_TYPES))
                except Unreadable as exc:
                    refused.append({"replica": s.replica, "key": key, "reason": str(exc)})
                    continue
                finally:
                    if os.path.exists(dest):
                        os.unlink(dest)
                scans[key] = {"checked": sorted(checked | need), "holds": sorted(holds)}
            found = sorted(holds & unseen)
            if found:
                holding.append({"key": key, "tombstoned": found})
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return holding
