"""push, pull, sync, remote status: replicas meeting in a bucket or a shared folder.

The contract is spec/SYNC.md. Push is ops/sync_push.py (its plan
core/push_plan.py), remote status ops/sync_status.py, the manifests and the
pull's memory of them ops/sync_manifests.py; pull and sync are here.
Invariants of pull:
- Pull trusts nothing it reads: manifests are checked for shape, replica and
  workspace; every object is checked for size and checksum as it lands (in a
  private staging folder), each segment is then read as a local reader reads it
  (a file it could not read, or a malformed row its manifest does not list) and
  each artifact against its reference, and one that fails is reported and left
  out.
- Merging is `replicas.merge_all` of one staged export folder per replica,
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
import shutil
from typing import TYPE_CHECKING, Any, NamedTuple

from agent_journal.core import delta_plan, merge_plan
from agent_journal.core.push_plan import segment_key
from agent_journal.ops.context import Context
from agent_journal.ops.sync_common import (
    ENV_KILL_AT,
    STATE_NAME,
    Opened,
    Progress,
    check_conditional_writes,
    new_stage,
    open_checked,
    remove_dead_stages,
    replica_prefix,
    say,
    state_dir,
)
from agent_journal.ops.sync_deltas import MISMATCH, fetch_object
from agent_journal.ops.sync_fork import PullFirst
from agent_journal.ops.sync_manifests import Refused, Seen, load_state, read_manifests
from agent_journal.ops.sync_push import push
from agent_journal.ops.sync_status import status
from agent_journal.storage.files import (
    fsync_path,
    make_private_dirs,
    open_private_new,
    unlink_quietly,
    write_file_atomic,
)
from agent_journal.storage.remote import ObjectMissing, ObjectUnusable, Remote
from agent_journal.storage.replica_source import (
    SealedFacts,
    fetched_segment_fault,
    read_sealed_facts,
)
from agent_journal.storage.root import Root, read_replica_id
from agent_journal.storage.workspace import Workspace

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

__all__ = ["ENV_KILL_AT", "pull", "push", "remove_dead_stages", "segment_key", "status",
           "sync"]

# Objects are fetched a few at a time: each transfer waits mostly on the
# service, and the checksum of one runs while others are on the wire.
FETCHERS = 4
# A fetched segment is fsynced and read (what the merge decides it by) by one
# of these, so a transfer slot is free again as soon as its bytes are checked:
# the disk and the reading then overlap the transfers still on the wire.
LANDERS = 2


def sync(ctx: Context, name: str | None, *, progress: Progress = None) -> dict[str, Any]:
    opened = open_checked(ctx, name, listing_first=True)
    _probe_before_pull(ctx, opened)
    pulled = pull(ctx, name, progress=progress, opened=opened)
    try:
        pushed = push(ctx, name, progress=progress, opened=opened)
    except PullFirst as exc:
        # This root forked (a copy: ops/sync_fork.py) and holds content the other root
        # erased: a pull of the old id's prefix brings its tombstones, then push.
        pulled = pull(ctx, name, progress=progress, opened=opened)
        pushed = push(ctx, name, progress=progress, opened=opened)
        if exc.forked is not None:
            pushed["forked"] = pushed["forked"] or exc.forked
            pushed["warnings"].insert(0, exc.forked["reason"])
    else:
        if pushed["forked"] is not None:
            # The old id's prefix is another replica's now: what that root pushed
            # comes in at once rather than at the next sync.
            pulled = pull(ctx, name, progress=progress, opened=opened)
    return {"pull": pulled, "push": pushed, "warnings": pulled["warnings"] + pushed["warnings"]}


def _probe_before_pull(ctx: Context, opened: Opened) -> None:
    """The push's check of the server, made before the pull writes anything, when
    there is a workspace to push (else the push makes it, after the pull)."""
    root = Root.open(ctx.root_arg, create=False)
    me = read_replica_id(root.path) if root.exists else None
    if me is not None:
        ws = root.workspace(ctx.workspace_name)
        if os.path.isdir(ws.segments_dir):
            check_conditional_writes(ws.path, ws.name, me, opened)


class _Pulled:
    """What one pull did, for its report."""

    def __init__(self) -> None:
        self.refused: Refused = []
        self.missing: list[dict[str, Any]] = []
        self.merged: list[dict[str, Any]] = []
        self.fetched = self.fetched_bytes = 0
        self.unbacked: set[str] = set()


def pull(ctx: Context, name: str | None, *, progress: Progress = None,
         opened: Opened | None = None) -> dict[str, Any]:
    spec, remote = opened or open_checked(ctx, name, listing_first=True)
    root = Root.open(ctx.root_arg, create=False)
    me = read_replica_id(root.path) if root.exists else None
    ws_path = os.path.join(root.path, "workspaces", ctx.workspace_name)
    state_path = os.path.join(state_dir(ws_path, spec.name), STATE_NAME)
    state = load_state(state_path, spec.url)
    out = _Pulled()
    say(progress, "pull: reading manifests")
    seen = read_manifests(remote, ctx.workspace_name, me, state, out.refused)
    changed = [s for s in seen if s.manifest is not None]
    if changed:
        ws = ctx.open(create=True)
        plans = _fetch_and_merge(ctx, ws, Opened(spec, remote), changed, state, seen, out,
                                 progress)
        _remember(state, plans, state_path)
    return {
        "remote": spec.name, "url": spec.url, "workspace": ctx.workspace_name,
        "replicas": len(seen), "changed": len(changed), "fetched": out.fetched,
        "fetchedBytes": out.fetched_bytes,
        "imported": sum(r["imported"] for r in out.merged),
        "alreadyPresent": sum(r["alreadyPresent"] for r in out.merged),
        "notImported": sorted((n for r in out.merged for n in r["notImported"]),
                              key=lambda n: n["eventId"]),
        "merges": out.merged, "refused": out.refused, "missing": out.missing,
        "warnings": _pull_warnings(out),
    }


def _fetch_and_merge(ctx: Context, ws: Workspace, opened: Opened, changed: list[Seen],
                     state: dict[str, Any], seen: list[Seen], out: _Pulled,
                     progress: Progress) -> list[_Fetching]:
    """Fetch what each changed manifest names and this root has not merged, then
    merge every replica that brought something in one pass over the local workspace
    (replicas.merge_all), under the union of every manifest's tombstones."""
    from agent_journal.ops import replicas

    union = set().union(*(s.tombstoned for s in seen))
    plans: list[_Fetching] = []
    try:
        for s in changed:
            plans.append(_Fetching(s, new_stage(ws, opened.spec.name, "pull"),
                                   state["replicas"].get(s.replica, {})))
        facts: dict[str, SealedFacts] = {}
        out.fetched, out.fetched_bytes = _Fetcher(opened.remote, ws.name, out, progress,
                                                  facts).run(plans)
        for p in plans:
            _join_deltas(p, ws.name, out, facts)
        arrived = [p for p in plans if p.files or p.artifacts]
        # A manifest's tombstone list only summarises tombstone events: an id no
        # event stands behind (here or in what arrived) withholds nothing.
        backed = _tombstones_behind(ws, arrived, union)
        out.unbacked = union - backed
        for p in arrived:
            out.unbacked |= set(p.export["tombstoned"]) - backed
            p.write_manifest(union & backed, backed)
        reports = replicas.merge_all(ctx, [p.stage for p in arrived], checked=True,
                                     progress=progress, facts=facts)
        for p, report in zip(arrived, reports, strict=True):
            report["source"] = {"replica": p.seen.replica, "kind": "remote"}
            out.merged.append(report)
    finally:
        for p in plans:
            shutil.rmtree(p.stage, ignore_errors=True)
    return plans


def _remember(state: dict[str, Any], plans: list[_Fetching], path: str) -> None:
    for p in plans:
        entry = state["replicas"].setdefault(p.seen.replica, {})
        # Remember only keys the current manifest still names: the memory stays bounded.
        entry["merged"] = sorted((p.had | p.done) & set(p.objects.values()))
        entry["tombstoned"] = p.seen.tombstoned
        if p.complete:
            entry["etag"] = p.seen.etag
        else:
            entry.pop("etag", None)  # try again next time
    make_private_dirs(os.path.dirname(path))
    write_file_atomic(path, json.dumps(state, indent=1, sort_keys=True).encode())


def _pull_warnings(out: _Pulled) -> list[str]:
    warnings = []
    if out.unbacked:
        warnings.append(f"{len(out.unbacked)} tombstone(s) a manifest names have no tombstone "
                        "event behind them here or in what arrived; they withheld nothing")
    if out.refused:
        warnings.append(f"{len(out.refused)} remote object(s) or manifest(s) failed "
                        "verification and were not imported")
    if out.missing:
        warnings.append(f"{len(out.missing)} object(s) named by a manifest were gone (replaced "
                        "by a newer push?); the next pull tries again")
    for report in out.merged:
        if report["replicaIdCollisions"]:
            warnings.append("replica id shared by two roots (a copied journal root?): "
                            + ", ".join(report["replicaIdCollisions"]) + "; every event was "
                            "kept")
    return warnings


class _Wanted(NamedTuple):
    """One object a pull fetches: where it goes in the stage, what it must be."""

    path: str  # export-relative: a segment file name, artifacts/<algo>/<digest>, a delta's
    entry: dict[str, Any]  # its manifest entry
    segment: bool
    delta: str | None = None  # a delta: the segment it extends


class _Fetching:
    """What one pull fetches of one replica's manifest, and what arrived intact."""

    def __init__(self, seen: Seen, stage: str, remembered: dict[str, Any]) -> None:
        assert seen.manifest is not None
        self.seen = seen
        self.stage = stage
        self.export = seen.manifest["export"]
        self.objects: dict[str, str] = seen.manifest["objects"]
        self.had = set(remembered.get("merged", []))
        self.wanted = [_Wanted(f["name"], f, True)
                       for f in self.export["files"] if self.objects[f["name"]] not in self.had]
        self.wanted += [_Wanted(a["path"], a, False)
                        for a in self.export["artifacts"]
                        if a["path"] is not None and self.objects[a["path"]] not in self.had]
        self.wanted += [_Wanted(delta_plan.delta_path(name, d["from"], d["to"]), d, False,
                                name)
                        for name, chain in sorted(seen.manifest.get("deltas", {}).items())
                        for d in delta_plan.wanted(chain, name, self.had)]
        self.files: list[dict[str, Any]] = []
        self.artifacts: list[dict[str, Any]] = []
        self.deltas: dict[str, list[dict[str, Any]]] = {}  # segment -> deltas that arrived
        self.done: set[str] = set()  # the keys whatever this pull merges came from
        self.complete = True

    def dest(self, path: str) -> str:
        return os.path.join(self.stage, *path.split("/"))

    def write_manifest(self, union: set[str], backed: set[str]) -> None:
        staged = dict(self.export, files=self.files, artifacts=self.artifacts,
                      tombstoned=sorted(union | (set(self.export["tombstoned"]) & backed)))
        # Written once into this pull's fresh private stage, read by this process
        # alone: nothing to make durable (a crash leaves a stage the next pull or
        # compaction removes), so no fsync waits behind the fetched bytes.
        with open_private_new(os.path.join(self.stage, merge_plan.MANIFEST_NAME)) as out:
            out.write(json.dumps(staged, sort_keys=True).encode("utf-8"))


def _join_deltas(p: _Fetching, workspace: str, out: _Pulled,
                 facts: dict[str, SealedFacts]) -> None:
    """Join each segment's deltas that arrived to the staged file of that segment (its
    base, when it arrived too), which the merge then reads as any fetched segment."""
    from agent_journal.ops.sync_deltas import join

    for name, arrived in sorted(p.deltas.items()):
        base = next((f for f in p.files if f["name"] == name), None)
        got = join(p.stage, name, p.seen.replica, base, arrived)
        p.done.update(p.objects[delta_plan.delta_path(name, d["from"], d["to"])]
                      for d in got.applied)
        for d, why in got.failed:
            key = p.objects[delta_plan.delta_path(name, d["from"], d["to"])]
            out.refused.append({"replica": p.seen.replica,
                                "key": replica_prefix(workspace, p.seen.replica) + key,
                                "reason": why})
            p.complete = False
        if got.entry is None:
            continue
        p.files = sorted([f for f in p.files if f["name"] != name] + [got.entry],
                         key=lambda f: f["name"])
        dest = p.dest(name)
        fsync_path(dest)
        facts.pop(os.path.realpath(dest), None)
        ahead = read_sealed_facts(dest)
        if ahead is not None:
            facts[os.path.realpath(dest)] = ahead


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


# What became of one fetched object.
_OK, _MISSING, _UNUSABLE, _REFUSED = "ok", "missing", "unusable", "refused"


class _Fetcher:
    """Fetches every wanted object of every plan, FETCHERS at a time, each checked for
    size and checksum as it lands; the LANDERS make a checked segment durable and read
    what the merge decides it by into `facts` (by real path). Outcomes are recorded in
    the plans' order, whatever order the transfers end in."""

    def __init__(self, remote: Remote, workspace: str, out: _Pulled, progress: Progress,
                 facts: dict[str, SealedFacts]) -> None:
        self.remote, self.workspace, self.out = remote, workspace, out
        self.progress, self.facts = progress, facts
        # Why an object that arrived whole must still not be merged (dest -> one line).
        self.faults: dict[str, str] = {}
        self.landed: list[Future[None]] = []
        self.landers: ThreadPoolExecutor | None = None

    def run(self, plans: list[_Fetching]) -> tuple[int, int]:
        """(objects fetched, bytes)."""
        from concurrent.futures import ThreadPoolExecutor

        jobs = [(p, w) for p in plans for w in p.wanted]
        if not jobs:
            return 0, 0
        with ThreadPoolExecutor(max_workers=LANDERS) as self.landers, \
                ThreadPoolExecutor(max_workers=FETCHERS) as pool:
            futures = [pool.submit(self._fetch, p, w) for p, w in jobs]
            try:
                for n, future in enumerate(futures, 1):
                    future.result()
                    say(self.progress, f"pull: fetched {n}/{len(futures)}")
                for done in self.landed:
                    done.result()
            finally:
                for pending in futures:
                    pending.cancel()
                for waiting in self.landed:
                    waiting.cancel()
        return self._record(jobs, [future.result() for future in futures])

    def _fetch(self, p: _Fetching, w: _Wanted) -> tuple[str, int]:
        key = replica_prefix(self.workspace, p.seen.replica) + p.objects[w.path]
        dest = p.dest(w.path)
        make_private_dirs(os.path.dirname(dest))
        try:
            if w.segment or w.delta is not None:
                why, moved = fetch_object(self.remote, key, w.entry, w.delta is not None, dest)
            else:
                got = self.remote.download(key, dest)
                why = None if got == (w.entry["bytes"], w.entry["checksum"]) else MISMATCH
                moved = got[0]
        except ObjectMissing:
            return _MISSING, 0
        except ObjectUnusable as exc:
            self.faults[dest] = str(exc)
            return _UNUSABLE, 0
        if why == MISMATCH:
            unlink_quietly(dest)
            return _REFUSED, moved
        if why is not None:
            self.faults[dest] = why
            return _OK, moved
        if w.segment:
            assert self.landers is not None
            listed = {m["row"] for m in w.entry["malformed"]}
            self.landed.append(self.landers.submit(self._land, dest, listed))
        elif w.delta is None and (fault := _artifact_fault(dest, w.entry["ref"])) is not None:
            self.faults[dest] = fault
        return _OK, moved

    def _land(self, dest: str, listed: set[int]) -> None:
        # The merge may publish this very file as an import (ImportWriter.adopt):
        # its bytes go to the disk here, and what the merge reads of it before
        # deciding is read here too, while other objects are on the wire.
        fsync_path(dest)
        why = fetched_segment_fault(dest, listed)
        if why is not None:
            self.faults[dest] = why
            return
        ahead = read_sealed_facts(dest)
        if ahead is not None:
            self.facts[os.path.realpath(dest)] = ahead

    def _record(self, jobs: list[tuple[_Fetching, _Wanted]],
                results: list[tuple[str, int]]) -> tuple[int, int]:
        count = total = 0
        for (p, w), (outcome, got) in zip(jobs, results, strict=True):
            key = replica_prefix(self.workspace, p.seen.replica) + p.objects[w.path]
            if outcome == _MISSING:
                self.out.missing.append({"replica": p.seen.replica, "key": key})
                p.complete = False
                continue
            if outcome != _UNUSABLE:
                count += 1
                total += got
            if outcome == _REFUSED:
                self.out.refused.append({"replica": p.seen.replica, "key": key,
                                         "reason": MISMATCH})
                p.complete = False
                continue
            dest = p.dest(w.path)
            if dest in self.faults:
                self.out.refused.append({"replica": p.seen.replica, "key": key,
                                         "reason": self.faults[dest]})
                p.complete = False
                if outcome != _UNUSABLE:
                    unlink_quietly(dest)
                continue
            if w.delta is not None:
                p.deltas.setdefault(w.delta, []).append(w.entry)
                continue
            (p.files if w.segment else p.artifacts).append(w.entry)
            p.done.add(p.objects[w.path])
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
