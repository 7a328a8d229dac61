"""A per-workspace JSON memo of answers about segments, by segment name, under cache/.

Invariant: a memo is only an accelerator. It is loaded when its file reads as this
format (anything else is an empty memo), written back whole and atomically only when
it changed and only while the erasure generation has not moved since it was loaded
(storage/erasure_generation.py), and a failure to write it costs nothing but work
later. What an entry may be trusted for is the subclass's rule, never this module's.
"""

from __future__ import annotations

import json
import os
from typing import Any

from agent_journal.core.errors import StorageError
from agent_journal.storage import erasure_generation
from agent_journal.storage.cache import CACHE_DIR
from agent_journal.storage.files import make_private_dirs, write_file_atomic
from agent_journal.storage.workspace import Workspace


class SegmentMemo:
    """`entries` by segment name, loaded from <root>/cache/<area>/<ws>.json."""

    AREA = ""
    FORMAT = 1

    def __init__(self, ws: Workspace) -> None:
        self.path = os.path.join(ws.root.path, CACHE_DIR, self.AREA, ws.name + ".json")
        self.entries: dict[str, dict[str, Any]] = {}
        self.ws = ws
        self.generation = erasure_generation.noted(ws)  # before any segment is read
        try:
            with open(self.path, "rb") as fh:
                got = json.loads(fh.read())
            if isinstance(got, dict) and got.get("format") == self.FORMAT and \
                    isinstance(got.get("segments"), dict):
                self.entries = got["segments"]
        except (OSError, ValueError):
            pass  # none yet, or damaged: every segment is read
        self.changed = False

    def forget(self, name: str) -> None:
        if self.entries.pop(name, None) is not None:
            self.changed = True

    def keep_only(self, names: set[str]) -> None:
        for name in [n for n in self.entries if n not in names]:
            self.forget(name)

    def save(self) -> None:
        """Write it back when it changed; a failure only costs reads later."""
        if not self.changed:
            return
        body = json.dumps({"format": self.FORMAT, "segments": self.entries},
                          sort_keys=True).encode("utf-8")
        try:
            with erasure_generation.Storing(self.ws, self.generation) as unchanged:
                if unchanged:
                    make_private_dirs(os.path.dirname(self.path))
                    write_file_atomic(self.path, body)
        except (OSError, StorageError):  # a read-only root, a full disk
            pass
        self.changed = False
