"""Where each segment stood, and the cut of a workspace that it defines.

Invariant: a cut names a set of stored rows by where they sit, never by what
they say, so it can be applied in SQL before any body is read. A checkpoint's
cut is exactly the rows its replica held when it recorded the positions: a
row of a segment named in `positions` is inside when its `seq` is at most the
recorded one; a row of an import segment (which a merge made, under a name no
checkpoint elsewhere can know) is judged by the append slot it came from (its
`origin` row: that replica's own segment and seq), so a checkpoint merged to
another replica cuts the same events there; rows of any other segment were
not there, and are outside. An instant's cut is every row whose `ts` is at or
before it.
"""

from __future__ import annotations

import json
import os
import sqlite3
from typing import Any

from agent_journal.storage import provenance
from agent_journal.storage.segment import never_initialised, open_segment_for_read
from agent_journal.storage.workspace import Workspace


class Cut:
    """Rows up to a checkpoint's positions, or up to an instant."""

    __slots__ = ("positions", "until_ts")

    def __init__(self, *, positions: dict[str, int] | None = None,
                 until_ts: str | None = None) -> None:
        self.positions = positions
        self.until_ts = until_ts

    def sql(self, conn: sqlite3.Connection, path: str) -> tuple[str, tuple[Any, ...]]:
        """(a WHERE condition over `events`, its parameters) for one segment."""
        if self.until_ts is not None:
            return "ts <= ?", (self.until_ts,)
        positions = self.positions or {}
        name = os.path.basename(path)
        if name in positions:
            return "seq <= ?", (positions[name],)
        if provenance.kind(conn) is not None:
            # json_extract of a name the positions do not hold is NULL, and a
            # comparison with NULL is false: such a slot is outside.
            return ("event_id IN (SELECT o.event_id FROM origin o WHERE "
                    "o.seq <= json_extract(?, '$.\"' || o.segment || '\"'))",
                    (json.dumps(positions, sort_keys=True),))
        return "0", ()


def segment_positions(ws: Workspace) -> tuple[dict[str, int], int, list[dict[str, str]]]:
    """(where each segment stands now, how many rows they hold, the segments
    that could not be read).

    Each segment file's highest seq under its own name, and for an import
    segment also the highest seq of each append slot its rows came from (a
    checkpoint merged elsewhere finds those rows by their origin). A name
    met both ways keeps the higher number.
    """
    from agent_journal.storage.connection import describe_sqlite_error

    positions: dict[str, int] = {}
    rows = 0
    unreadable: list[dict[str, str]] = []

    def note(name: str, seq: Any) -> None:
        if isinstance(seq, int) and seq > positions.get(name, 0):
            positions[name] = seq

    for path in ws.segment_paths():
        try:
            conn = open_segment_for_read(path)
        except sqlite3.Error as exc:
            unreadable.append({"path": ws.rel(path), "reason": describe_sqlite_error(exc)})
            continue
        try:
            if never_initialised(conn):
                continue
            high, count = conn.execute("SELECT max(seq), count(*) FROM events").fetchone()
            note(os.path.basename(path), high)
            rows += count
            if provenance.kind(conn) is not None:
                for segment, seq in conn.execute(
                        "SELECT segment, max(seq) FROM origin GROUP BY segment"):
                    if isinstance(segment, str):
                        note(segment, seq)
        except sqlite3.Error as exc:
            unreadable.append({"path": ws.rel(path), "reason": describe_sqlite_error(exc)})
        finally:
            conn.close()
    return dict(sorted(positions.items())), rows, unreadable
