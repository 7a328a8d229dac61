"""Where a merge reads from: an export folder, verified whole first, or another journal root.

Invariants:
- An export is verified against its manifest (every file's size and checksum)
  before one event is read; any mismatch refuses the merge with nothing
  imported.
- Nothing in a source is followed out of it: a symbolic link among its
  segments, artifacts or manifest names is refused (files.confine_to), never
  read.
"""

from __future__ import annotations

import json
import os
from typing import Any

from agent_journal.core import merge_plan
from agent_journal.core.errors import IntegrityError, JournalError, NotFoundError
from agent_journal.core.merge_plan import MANIFEST_NAME
from agent_journal.storage.artifacts import artifact_path
from agent_journal.storage.files import confine_to, file_digest
from agent_journal.storage.replica_source import SealedFacts
from agent_journal.storage.root import Root, read_replica_id
from agent_journal.storage.workspace import Workspace


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
        # into the workspace as its import instead of copied (merge_import.py).
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
            return size_or_none(full) == size
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


def size_or_none(path: str) -> int | None:
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
