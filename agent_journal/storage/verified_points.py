"""Verified points: what an earlier check of a snapshot found, remembered per its bytes.

Invariant: a remembered verdict is used only for a snapshot whose segment name, size
and checksum are exactly those of a snapshot checked clean before (every row
well-formed, its columns agreeing with its bytes); its withheld rows are found again
through the subject column against the current tombstones, never taken from memory.
The ids a remembered snapshot's tombstones name are kept with it, so a later export
of the same bytes learns its tombstones without reading a row. Damaged snapshots are
never remembered; a file that does not read right is not used;
the file is stored only while the erasure generation has not moved since it was read
(storage/erasure_generation.py), and compaction deletes it with every projection.
"""

from __future__ import annotations

from typing import Any

from agent_journal.core import merge_plan
from agent_journal.core.export_plan import Verdict
from agent_journal.storage.replica_source import Unreadable, rows_about
from agent_journal.storage.segment_memo import SegmentMemo

PROJECTION_AREA = "verified"
PROJECTION_FORMAT = 2  # 2: a verdict keeps the ids its snapshot's tombstones name
ERASABLE = tuple(sorted(merge_plan.ERASABLE_TYPES))


class VerifiedPoints(SegmentMemo):
    """Clean verdicts of earlier checks, by segment name and snapshot bytes."""

    AREA = PROJECTION_AREA
    FORMAT = PROJECTION_FORMAT

    def _held(self, name: str, size: int, checksum: str) -> dict[str, Any] | None:
        held = self.entries.get(name)
        if not (isinstance(held, dict) and held.get("bytes") == size
                and held.get("checksum") == checksum and isinstance(held.get("rows"), int)
                and isinstance(held.get("artifacts"), list)
                and isinstance(held.get("tombstones"), list)):
            return None
        return held

    def tombstones(self, name: str, size: int, checksum: str) -> set[str] | None:
        """The ids the tombstones of a snapshot with exactly these bytes name, when
        it was checked clean before (so its rows need not be read to find them)."""
        held = self._held(name, size, checksum)
        if held is None or not all(isinstance(t, str) for t in held["tombstones"]):
            return None
        return set(held["tombstones"])

    def lookup(self, name: str, size: int, checksum: str, path: str,
               tombstoned: set[str]) -> Verdict | None:
        """The verdict of a snapshot with exactly these bytes checked before, its
        withheld rows found through the (checked) subject column; else None."""
        held = self._held(name, size, checksum)
        if held is None:
            return None
        try:
            artifacts = [(str(r), int(b), str(c), None if s is None else str(s))
                         for r, b, c, s in held["artifacts"]]
            tombstones = [str(t) for t in held["tombstones"]]
            withheld = rows_about(path, tombstoned, ERASABLE)
        except (TypeError, ValueError, Unreadable):
            return None  # a projection that does not read right is not used
        return Verdict(held["rows"], held.get("owner"), withheld, [], [], artifacts,
                       tombstones, True)

    def remember(self, name: str, size: int, checksum: str, v: Verdict) -> None:
        if not v.clean:
            self.forget(name)
            return
        entry = {"bytes": size, "checksum": checksum, "rows": v.rows, "owner": v.owner,
                 "artifacts": [list(a) for a in v.artifacts],
                 "tombstones": list(v.tombstones)}
        if self.entries.get(name) != entry:
            self.entries[name] = entry
            self.changed = True
