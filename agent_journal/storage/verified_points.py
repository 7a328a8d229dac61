"""Verified points: what an earlier check of a snapshot found, remembered per its bytes.

Invariant: a remembered verdict is used only for a snapshot whose segment name, size
and checksum are exactly those of a snapshot checked clean before (every row
well-formed, its columns agreeing with its bytes); its withheld rows are found again
through the subject column against the current tombstones, never taken from memory.
Damaged snapshots are never remembered; a file that does not read right is not used;
the file is stored only while the erasure generation has not moved since it was read
(storage/erasure_generation.py), and compaction deletes it with every projection.
"""

from __future__ import annotations

import json
import os
from typing import Any

from agent_journal.core import merge_plan
from agent_journal.storage import erasure_generation
from agent_journal.storage.cache import CACHE_DIR
from agent_journal.storage.files import make_private_dirs, write_file_atomic
from agent_journal.storage.replica_source import Unreadable, rows_about
from agent_journal.storage.workspace import Workspace

PROJECTION_AREA = "verified"
PROJECTION_FORMAT = 1
ERASABLE = tuple(sorted(merge_plan.ERASABLE_TYPES))

Verdict = dict[str, Any]


class VerifiedPoints:
    """Clean verdicts of earlier checks, by segment name and snapshot bytes."""

    def __init__(self, ws: Workspace) -> None:
        self.path = os.path.join(ws.root.path, CACHE_DIR, PROJECTION_AREA, ws.name + ".json")
        self.entries: dict[str, dict[str, Any]] = {}
        self.ws = ws
        self.generation = erasure_generation.noted(ws)  # before any segment is read
        try:
            with open(self.path, "rb") as fh:
                got = json.loads(fh.read())
            if isinstance(got, dict) and got.get("format") == PROJECTION_FORMAT and \
                    isinstance(got.get("segments"), dict):
                self.entries = got["segments"]
        except (OSError, ValueError):
            pass  # none yet, or damaged: every snapshot is checked
        self.changed = False

    def lookup(self, name: str, size: int, checksum: str, path: str,
               tombstoned: set[str]) -> Verdict | None:
        """The verdict of a snapshot with exactly these bytes checked before, its
        withheld rows found through the (checked) subject column; else None."""
        held = self.entries.get(name)
        if not (isinstance(held, dict) and held.get("bytes") == size
                and held.get("checksum") == checksum and isinstance(held.get("rows"), int)
                and isinstance(held.get("artifacts"), list)):
            return None
        try:
            artifacts = [(str(r), int(b), str(c), None if s is None else str(s))
                         for r, b, c, s in held["artifacts"]]
            withheld = rows_about(path, tombstoned, ERASABLE)
        except (TypeError, ValueError, Unreadable):
            return None  # a projection that does not read right is not used
        return {"rows": held["rows"], "owner": held.get("owner"), "withheld": withheld,
                "fixes": [], "malformed": [], "artifacts": artifacts, "clean": True}

    def remember(self, name: str, size: int, checksum: str, v: Verdict) -> None:
        if not v["clean"]:
            self.forget(name)
            return
        entry = {"bytes": size, "checksum": checksum, "rows": v["rows"], "owner": v["owner"],
                 "artifacts": [list(a) for a in v["artifacts"]]}
        if self.entries.get(name) != entry:
            self.entries[name] = entry
            self.changed = True

    def forget(self, name: str) -> None:
        if self.entries.pop(name, None) is not None:
            self.changed = True

    def keep_only(self, names: set[str]) -> None:
        for name in [n for n in self.entries if n not in names]:
            self.forget(name)

    def save(self) -> None:
        """Write it back when it changed; a failure only costs checks later."""
        if not self.changed:
            return
        body = json.dumps({"format": PROJECTION_FORMAT, "segments": self.entries},
                          sort_keys=True).encode("utf-8")
        try:
            with erasure_generation.Storing(self.ws, self.generation) as unchanged:
                if unchanged:
                    make_private_dirs(os.path.dirname(self.path))
                    write_file_atomic(self.path, body)
        except OSError:
            pass
