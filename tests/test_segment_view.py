"""A segment read by people with sqlite-utils (and so Datasette): events through the
`events_json` view, bodies shown as the JSON they are."""

from __future__ import annotations

import json
from pathlib import Path

import sqlite_utils

from agent_journal.core import codec


def test_sqlite_utils_reads_an_event_through_the_view(root: Path, inproc) -> None:
    assert inproc("record", "--kind", "decision", "--id", "d1", "--question", "which db?",
                  "--chosen", "SQLite").code == 0
    [seg] = (root / "workspaces" / "ws" / "segments").glob("*.sqlite")
    db = sqlite_utils.Database(str(seg))
    assert "events_json" in db.view_names()
    [row] = list(db["events_json"].rows)
    body = json.loads(row["body"])
    assert (row["subject"], row["type"]) == ("d1", "entry")
    assert body["data"]["fields"] == {"question": "which db?", "chosen": "SQLite"}
    # The view shows exactly the stored bytes: their checksum is the row's.
    assert codec.checksum(row["body"].encode()) == row["checksum"]
    # The table itself keeps bodies as bytes, which is what these tools cannot show.
    [stored] = list(db["events"].rows)
    assert isinstance(stored["body"], bytes)
