"""What a merge remembers of the local segments it read: the scan-points projection.

Before deciding anything a merge reads the local workspace (replicas.scan_local):
each segment's integrity check, its provenance, and every row whose bytes could
be a tombstone, which means reading every body. A sealed segment gives the same
answers every time, so a clean segment's answers are kept here and a later
merge reads only what changed since, plus the event ids (read from their
index, or asked of it, never remembered: they are most of what a segment holds).

Invariants:
- A projection, never a source of truth: a segment's answers are used only
  while its fingerprint (storage.cache.segment_signature: device, inode, size,
  mtime, SQLite's change counter, the WAL) is the one they were read under,
  and it has no rollback journal beside it; any other segment is read in full.
  A fingerprint that does not vouch for its file alone (verified_mark.vouches: taken
  within RACY_NS of its newest mtime) is not remembered.
- Only clean answers are kept (no damage, no malformed candidate row): damage
  is reported exactly as a direct read reports it, every time.
- An import a merge has just published (storage/replica_import.py) is kept
  without being read: its tombstones are the ones that merge wrote into it,
  its provenance pairs are read from its `origin` table while it is built,
  and it names nothing as removed (its provenance rows describe only rows
  it holds). Its fingerprint does not vouch for it yet (taken just after its last write), so
  until a later look finds it older than that, the entry also holds the
  file's size and xxh3-64 checksum, and is used only for exactly those bytes.
- It holds ids (tombstone targets, ids compaction removed) and segment names,
  no content, in <root>/cache/merge-scan/<ws>.json; `compact --apply` deletes it
  with every other projection, and a lost or damaged one costs a full read.
"""

from __future__ import annotations

import os
import time
from typing import Any

from agent_journal.storage.cache import segment_signature
from agent_journal.storage.files import file_digest
from agent_journal.storage.segment_memo import SegmentMemo
from agent_journal.storage.verified_mark import vouches

AREA = "merge-scan"
FORMAT = 1


class ScanPoints(SegmentMemo):
    """Clean scan answers by segment name and fingerprint."""

    AREA = AREA
    FORMAT = FORMAT

    @staticmethod
    def fingerprint(path: str) -> str | None:
        if os.path.exists(path + "-journal"):
            return None  # a hot journal changes what SQLite reads
        got = segment_signature(path)
        return None if got is None else got[0]

    def lookup(self, path: str) -> dict[str, Any] | None:
        """{tombstoned, removed, origin} of a segment read before under the same
        fingerprint; None when it must be read."""
        held = self.entries.get(os.path.basename(path))
        got = None if os.path.exists(path + "-journal") else segment_signature(path)
        if not (isinstance(held, dict) and got is not None and held.get("sig") == got[0]):
            return None
        if "checksum" in held and not self._same_bytes(path, held, got):
            return None
        try:
            return {"tombstoned": {str(t) for t in held["tombstoned"]},
                    "removed": {str(r) for r in held["removed"]},
                    "origin": {(str(r), str(s)) for r, s in held["origin"]}}
        except (KeyError, TypeError, ValueError):
            return None

    def _same_bytes(self, path: str, held: dict[str, Any], got: tuple[str, int]) -> bool:
        """For an entry kept with its file's digest: the file holds exactly those
        bytes. Once its fingerprint is old enough to vouch for it alone, the
        digest is dropped (any write from now on moves the mtime)."""
        looked_ns = time.time_ns()
        try:
            if file_digest(path) != (held.get("bytes"), held.get("checksum")):
                return False
        except OSError:
            return False
        if segment_signature(path) != got:
            return False  # written while it was read
        if vouches(got, looked_ns):
            del held["bytes"], held["checksum"]
            self.changed = True
        return True

    def remember_published(self, path: str, tombstoned: set[str],
                           origin: set[tuple[str, str]], *,
                           digest: tuple[str, tuple[int, str]] | None = None) -> None:
        """Keep the answers of an import this process just published (see the
        module's docstring) without reading its rows. `digest`: (fingerprint,
        (bytes, checksum)) the publisher read, used while the fingerprint holds."""
        got = segment_signature(path)
        if got is None or os.path.exists(path + "-journal"):
            return
        entry: dict[str, Any] = {
            "sig": got[0], "tombstoned": sorted(tombstoned), "removed": [],
            "origin": sorted([r, s] for r, s in origin)}
        if not vouches(got, time.time_ns()):
            if digest is not None and digest[0] == got[0]:
                entry["bytes"], entry["checksum"] = digest[1]
            else:
                try:
                    entry["bytes"], entry["checksum"] = file_digest(path)
                except OSError:
                    return
                if segment_signature(path) != got:
                    return
        self.entries[os.path.basename(path)] = entry
        self.changed = True

    def remember(self, path: str, sig: str | None, tombstoned: set[str], removed: set[str],
                 origin: set[tuple[str, str]]) -> None:
        """Keep a clean segment's answers, read under `sig` (taken before the read)."""
        got = segment_signature(path)
        if sig is None or got is None or got[0] != sig or not vouches(got, time.time_ns()):
            return
        self.entries[os.path.basename(path)] = {
            "sig": sig, "tombstoned": sorted(tombstoned), "removed": sorted(removed),
            "origin": sorted([r, s] for r, s in origin)}
        self.changed = True
