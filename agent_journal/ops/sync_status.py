"""remote status: what each replica has in a remote, and what it still holds that a
tombstone erased.

Invariants:
- Status writes nothing to the remote, and under the root only its memory of
  which objects it already checked (the pull state's `scans`) and a scan folder
  it removes before it returns.
- An object's key never changes its bytes, so an object is fetched and checked
  once per tombstone it was not yet checked for.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

from agent_journal.core import delta_plan, merge_plan, push_plan
from agent_journal.core.push_plan import PushMemory
from agent_journal.ops.context import Context
from agent_journal.ops.sync_common import (
    PUSH_CACHE,
    STATE_NAME,
    load_push_memory,
    open_checked,
    replica_prefix,
    segment_signature,
    state_dir,
)
from agent_journal.ops.sync_manifests import Refused, Seen, load_state, read_manifests
from agent_journal.storage.files import make_private_dirs, write_file_atomic
from agent_journal.storage.remote import ObjectMissing, ObjectUnusable, Remote
from agent_journal.storage.replica_fork import own_replicas
from agent_journal.storage.replica_source import Unreadable, subjects_present
from agent_journal.storage.root import Root, read_replica_id
from agent_journal.storage.segment_tail import sizes_above
from agent_journal.storage.workspace import Workspace


def status(ctx: Context, name: str | None) -> dict[str, Any]:
    spec, remote = open_checked(ctx, name)
    root = Root.open(ctx.root_arg, create=False)
    me = read_replica_id(root.path) if root.exists else None
    local_tombstoned: set[str] = set()
    ws = root.workspace(ctx.workspace_name)
    if root.exists and os.path.isdir(ws.segments_dir):
        from agent_journal.ops import replicas

        local_tombstoned = replicas.scan_local(ws).tombstoned
    refused: Refused = []
    seen = read_manifests(remote, ctx.workspace_name, None, {"replicas": {}}, refused,
                          conditional=False)
    union = set(local_tombstoned)
    for s in seen:
        union.update(s.tombstoned)
    state_path = os.path.join(state_dir(ws.path, spec.name), STATE_NAME)
    state = load_state(state_path, spec.url) if root.exists else {"replicas": {}}
    scans_before = json.dumps(state.get("scans"), sort_keys=True)
    listed = []
    warnings = []
    for s in seen:
        holding = _scan_objects(remote, ctx.workspace_name, s, union - set(s.tombstoned),
                                state, refused, root if root.exists else None)
        listed.append(_replica_line(s, me, union, holding))
        if holding:
            who = "this replica" if s.replica == me else f"replica {s.replica}"
            fix = "it pushes" if s.replica == me else "its owner runs sync"
            warnings.append(f"{who} has {len(holding)} object(s) in the remote holding "
                            f"tombstoned content until {fix}")
    if root.exists and os.path.isdir(ws.path) and \
            json.dumps(state.get("scans"), sort_keys=True) != scans_before:
        make_private_dirs(os.path.dirname(state_path))
        write_file_atomic(state_path, json.dumps(state, indent=1, sort_keys=True).encode())
    unpushed = None
    if me is not None and root.exists and os.path.isdir(ws.segments_dir):
        memory = load_push_memory(os.path.join(state_dir(ws.path, spec.name), PUSH_CACHE))
        own = next((s for s in seen if s.replica == me), None)
        unpushed = _unpushed(ws, me, own, memory.memory.about(spec.url), local_tombstoned,
                             warnings)
    versioning = remote.versioning()
    if versioning is not None:
        warnings.append(f"bucket versioning is {versioning}: deleted and replaced objects are "
                        "kept as old versions and still hold their bytes (a lifecycle rule or "
                        "an administrator must remove them)")
    if refused:
        warnings.append(f"{len(refused)} manifest(s) or object(s) failed verification")
    return {"remote": spec.name, "url": spec.url, "workspace": ctx.workspace_name,
            "self": me, "unpushed": unpushed, "replicas": listed, "tombstones": len(union),
            "versioning": versioning, "refused": refused, "warnings": warnings}


def _unpushed(ws: Workspace, me: str, own: Seen | None, memory: PushMemory,
              tombstoned: set[str], warnings: list[str]) -> dict[str, int]:
    """This root's events the remote does not hold yet: in each own segment, the rows
    above where the snapshot its manifest names ends (push_plan.remote_mark), but for
    those a tombstone here withholds (a push leaves them out). A segment unchanged
    since the push that took that snapshot is not read."""
    named = {f["name"]: f for f in own.manifest["export"]["files"]} \
        if own is not None and own.manifest is not None else {}
    segments = events = size = 0
    mine = own_replicas(ws.root)  # its id, and any it forked from (push sends them all)
    for path in ws.segment_paths():
        name = os.path.basename(path)
        found = merge_plan.own_segment(name)
        if found is None or found[0] not in mine:
            continue  # an import: its author pushes it
        mark = push_plan.remote_mark(named.get(name), memory.segments.get(name),
                                     segment_signature(path))
        if mark.done:
            continue
        try:
            sizes = sizes_above(path, mark.above, tombstoned)[mark.skip:]
        except Unreadable as exc:
            warnings.append(f"{ws.rel(path)} cannot be read ({exc}); its rows are not "
                            "counted as unpushed")
            continue
        if sizes:
            segments, events, size = segments + 1, events + len(sizes), size + sum(sizes)
    return {"segments": segments, "events": events, "bytes": size}


def _replica_line(s: Seen, me: str | None, union: set[str],
                  holding: list[dict[str, Any]]) -> dict[str, Any]:
    assert s.manifest is not None
    export = s.manifest["export"]
    return {
        "replica": s.replica, "self": s.replica == me, "pushedTs": s.manifest["pushedTs"],
        "files": len(export["files"]),
        "events": sum(f["events"] for _, f, _ in delta_plan.segment_objects(s.manifest)),
        "bytes": sum(f["bytes"] for _, f, _ in delta_plan.segment_objects(s.manifest)),
        "unseenTombstones": sorted(union - set(s.tombstoned)), "objectsHoldingErased": holding,
    }


def _scan_objects(remote: Remote, workspace: str, s: Seen, unseen: set[str],
                  state: dict[str, Any], refused: Refused,
                  root: Root | None) -> list[dict[str, Any]]:
    """The segment objects of one replica that hold rows about `unseen` tombstones.

    An object's key never changes its bytes, so what a scan found is kept per
    key (in the pull state) and an object is fetched again only for
    tombstones it was not yet checked for."""
    import tempfile

    assert s.manifest is not None
    if not unseen:
        return []
    scans = state.setdefault("scans", {})
    prefix = replica_prefix(workspace, s.replica)
    current = {prefix + k for k in s.manifest["objects"].values()}
    for key in [k for k in scans if k.startswith(prefix) and k not in current]:
        del scans[key]  # gone from the remote: nothing to remember
    holding = []
    base = os.path.join(root.path, "workspaces", workspace) if root is not None else None
    # The pid in the name lets compact --apply tell a killed scan's leftovers from a live one.
    folder = tempfile.mkdtemp(prefix=f".status-{os.getpid()}-",
                              dir=base if base and os.path.isdir(base) else None)
    try:
        for path, f, delta in delta_plan.segment_objects(s.manifest):
            key = prefix + s.manifest["objects"][path]
            memo = scans.get(key) if isinstance(scans.get(key), dict) else None
            checked = set(memo.get("checked", [])) if memo else set()
            holds = set(memo.get("holds", [])) if memo else set()
            need = unseen - checked
            if need:
                found = _scan_one(remote, s.replica, key, f, need, folder, refused, delta)
                if found is None:
                    continue
                holds |= found
                scans[key] = {"checked": sorted(checked | need), "holds": sorted(holds)}
            if found_here := sorted(holds & unseen):
                holding.append({"key": key, "tombstoned": found_here})
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return holding


def _scan_one(remote: Remote, replica: str, key: str, f: dict[str, Any], need: set[str],
              folder: str, refused: Refused, delta: bool) -> set[str] | None:
    """Which of `need` one segment object (a delta: inflated first) holds rows about;
    None when it could not be checked (gone since the manifest was read, or refused)."""
    from agent_journal.ops.sync_deltas import fetch_object

    dest = os.path.join(folder, "object")
    try:
        why = fetch_object(remote, key, f, delta, dest)[0]
    except ObjectMissing:
        return None  # replaced by a newer push since the manifest was read
    except ObjectUnusable as exc:
        refused.append({"replica": replica, "key": key, "reason": str(exc)})
        return None
    try:
        if why is not None:
            raise Unreadable(why)
        return subjects_present(dest, need, tuple(merge_plan.ERASABLE_TYPES))
    except Unreadable as exc:
        refused.append({"replica": replica, "key": key, "reason": str(exc)})
        return None
    finally:
        if os.path.exists(dest):
            os.unlink(dest)
