"""What a merge remembers of the local segments it read: the scan-points projection.

Before deciding anything a merge reads the local workspace (replicas.scan_local):
each segment's integrity check, its provenance, and every row whose bytes could
be a tombstone, which means reading every body. A sealed segment gives the same
answers every time, so a clean segment's answers are kept here and a later
merge reads only what changed since, plus the event ids (read from their
index, never remembered: they are most of what a segment holds).

Invariants:
- A projection, never a source of truth: a segment's answers are used only
  while its fingerprint (storage.cache.segment_signature: device, inode, size,
  mtime, SQLite's change counter, the WAL) is the one they were read under,
  and it has no rollback journal beside it; any other segment is read in full.
  A fingerprint taken within RACY_NS of the segment's newest mtime is not
  remembered (mtimes are only as fine as the clock tick).
- Only clean answers are kept (no damage, no malformed candidate row): damage
  is reported exactly as a direct read reports it, every time.
- It holds ids (tombstone targets, ids compaction removed) and segment names,
  no content, in <root>/cache/merge-scan/<ws>.json; `compact --apply` deletes it
  with every other projection, and a lost or damaged one costs a full read.
"""

from __future__ import annotations

import os
import time
from typing import Any

from agent_journal.storage.cache import segment_signature
from agent_journal.storage.segment_memo import SegmentMemo

AREA = "merge-scan"
FORMAT = 1
RACY_NS = 2_000_000_000


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
        sig = self.fingerprint(path)
        if not (isinstance(held, dict) and sig is not None and held.get("sig") == sig):
            return None
        try:
            return {"tombstoned": {str(t) for t in held["tombstoned"]},
                    "removed": {str(r) for r in held["removed"]},
                    "origin": {(str(r), str(s)) for r, s in held["origin"]}}
        except (KeyError, TypeError, ValueError):
            return None

    def remember(self, path: str, sig: str | None, tombstoned: set[str], removed: set[str],
                 origin: set[tuple[str, str]]) -> None:
        """Keep a clean segment's answers, read under `sig` (taken before the read)."""
        got = segment_signature(path)
        if sig is None or got is None or got[0] != sig or \
                time.time_ns() - got[1] < RACY_NS:
            return
        self.entries[os.path.basename(path)] = {
            "sig": sig, "tombstoned": sorted(tombstoned), "removed": sorted(removed),
            "origin": sorted([r, s] for r, s in origin)}
        self.changed = True
