"""The sweep of projections: every file under <root>/cache that holds a workspace's
content goes when compaction erases (part of erasure, storage/erasure.py).

Invariants:
- Projections under <root>/cache are disposable: every file a workspace's
  projections leave there, under any name, is deleted with them, and so are
  those of a workspace whose folder is gone (renamed, removed by hand). The
  one exception is the digest's cache after a compaction that names the
  segments it changed: only their rows leave it, and it is written afresh
  (digest_cache.keep_unchanged); the search index, whose documents fold
  events of every segment together, is deleted.
- The erasure generation moves on before anything is swept, so no reader that
  read before the deletions stores what it read once the sweep is done
  (erasure_generation.py). Lock folders (`locks/`) stay.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from agent_journal.storage.cache import CACHE_SIDECARS
from agent_journal.storage.segment import SEGMENT_SUFFIX
from agent_journal.storage.workspace import Workspace


def projection_of(name: str, workspace: str) -> bool:
    """Whether a file name under <root>/cache/<kind>/ is one of `workspace`'s
    projections or anything they leave behind.

    A projection is `<ws>.sqlite`; beside it SQLite's `-journal`/`-wal`/`-shm`,
    a build's `<ws>.sqlite.tmp` (and its sidecars), an atomic write's
    `.<ws>.sqlite.<pid>.<random>.tmp`, or any other suffix a later version or
    a killed process leaves. So every name that starts with the workspace's
    projection name is its own, whatever follows, as is `<ws>.<ext>` for a
    projection kept under another extension. Another workspace's files
    start with another name: `a.b.sqlite` is workspace `a.b`'s, not `a`'s.
    (Only a workspace literally named `a.sqlite...` could share the prefix;
    clearing its cache too costs it a rebuild, never a byte of content.)
    """
    stem = workspace + SEGMENT_SUFFIX
    for candidate in (name, name[1:] if name.startswith(".") else None):
        if candidate is None:
            continue
        if candidate == workspace or candidate.startswith(stem):
            return True
        # `<ws>.<ext>` of any other single extension (a projection of another kind)
        if candidate.startswith(workspace + ".") and "." not in candidate[len(workspace) + 1:]:
            return True
    return False


def clear_workspace_cache(ws: Workspace, changed: Iterable[str] | None = None) -> list[str]:
    """Delete every disposable projection of the workspace under <root>/cache.

    Projections are named after the workspace (`cache/<kind>/<ws>.sqlite`,
    see `projection_of` for everything counted with them); readers rebuild
    them from the segments, so removing them loses nothing. Lock files live a
    folder deeper (`cache/<kind>/locks/`) and are left alone.

    `changed`, the segments (relative to the root) a compaction deleted rows from
    or rewrote, keeps the digest's cache of every other segment: only the changed
    segments' rows leave it, and it is written afresh (digest_cache.keep_unchanged),
    so the next digest reads those segments alone. Without it, or when the cache
    cannot be trimmed, it goes with the rest.
    """

    from agent_journal.storage.erasure_generation import bump

    # First the generation moves on, so no reader that read before the deletions
    # stores what it read once the sweep below is done (erasure_generation).
    bump(ws)
    kept: set[str] = set()
    if changed is not None:
        from agent_journal.storage import digest_cache

        if digest_cache.keep_unchanged(ws, {os.path.basename(seg) for seg in changed}):
            # The file and the sidecars of a digest that began since: it read the
            # segments as compacted.
            kept.add(digest_cache.path_of(ws))
            kept.update(digest_cache.path_of(ws) + s for s in CACHE_SIDECARS)
    cache = os.path.join(ws.root.path, "cache")
    removed: list[str] = []
    if not os.path.isdir(cache):
        return removed
    folders = [cache] + [os.path.join(cache, n) for n in sorted(os.listdir(cache))
                         if os.path.isdir(os.path.join(cache, n))]
    for folder in folders:
        for name in sorted(os.listdir(folder)):
            path = os.path.join(folder, name)
            # A workspace named like an area (`digest`) or like the lock folder
            # (`locks`) names no projection of its own there: those folders hold
            # every workspace's projections, and the locks other processes hold.
            if folder == cache and os.path.isdir(path) or name == "locks":
                continue
            if path not in kept and projection_of(name, ws.name) and _remove(path):
                removed.append(ws.rel(path))
    return removed


def clear_orphan_caches(root_path: str) -> list[str]:
    """Delete the projections under <root>/cache/<kind>/ of every workspace that has no
    folder under <root>/workspaces any more (renamed or removed by hand): they hold that
    workspace's content, and no compaction would ever clear them under their old name.
    A workspace created meanwhile pays a rebuild, never a byte. Lock folders stay."""

    cache = os.path.join(root_path, "cache")
    workspaces = os.path.join(root_path, "workspaces")
    try:
        kinds = sorted(n for n in os.listdir(cache) if os.path.isdir(os.path.join(cache, n)))
        alive = [n for n in os.listdir(workspaces)
                 if os.path.isdir(os.path.join(workspaces, n))]
    except FileNotFoundError:
        return []
    removed: list[str] = []
    for kind in kinds:
        folder = os.path.join(cache, kind)
        for name in sorted(os.listdir(folder)):
            if name == "locks" or any(projection_of(name, ws) for ws in alive):
                continue
            path = os.path.join(folder, name)
            if _remove(path):
                removed.append(path)
    return removed


def _remove(path: str) -> bool:
    """Delete a file or a folder with what is in it (a link is removed, never
    followed); False when it was already gone."""
    import shutil

    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
        return True
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True
