"""The tombstone index answers what asking every segment answers (storage/tombstone_index.py),
whatever was appended, rotated, tombstoned or damaged since it last looked."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_journal.ops import writes
from agent_journal.ops.context import Context
from agent_journal.storage import verified_mark
from agent_journal.storage import workspace as workspace_module
from agent_journal.storage.workspace import _tombstone_subjects

IDS = [f"o{n}" for n in range(6)]


def _direct(ws, wanted: set[str]) -> set[str]:
    found: set[str] = set()
    for path in ws.segment_paths():
        found |= wanted & (_tombstone_subjects(path) or set())
    return found


@settings(max_examples=25, deadline=None)
@given(steps=st.lists(st.tuples(st.sampled_from(["note", "tombstone", "rotate", "ask"]),
                                st.sampled_from(IDS)), min_size=1, max_size=14),
       trusted=st.booleans(), directly=st.sampled_from([0, 4]))
def test_the_index_answers_what_every_segment_answers(tmp_path_factory, steps, trusted,
                                                       directly):
    root = tmp_path_factory.mktemp("idx") / "journal"
    ctx = Context(str(root), "ws")
    writes.record(ctx, kind="note", entry_id="first", fields={"text": "x"}, anchors=[],
                  depends_on=[], subject=None)
    with pytest.MonkeyPatch.context() as mp:
        # 0: the index always (4: up to four segments are asked directly, as by default)
        mp.setattr(workspace_module, "ASK_DIRECTLY", directly)
        if trusted:  # every signature trusted at once: the index is used as soon as kept
            mp.setattr(verified_mark, "RACY_NS", -10**18)
        for n, (op, target) in enumerate(steps):
            if op == "note":
                writes.record(ctx, kind="note", entry_id=f"n{n}", fields={"text": target},
                              anchors=[], depends_on=[], subject=None)
            elif op == "tombstone":
                writes.tombstone(ctx, target, "gone")
            elif op == "rotate":
                mp.setenv("AGENT_JOURNAL_SEGMENT_MAX_BYTES", "1")
                writes.record(ctx, kind="note", entry_id=f"r{n}", fields={"text": "r"},
                              anchors=[], depends_on=[], subject=None)
                mp.delenv("AGENT_JOURNAL_SEGMENT_MAX_BYTES")
            ws = ctx.open(create=False)
            assert ws.tombstoned_among(IDS) == _direct(ws, set(IDS))


def test_a_tombstone_written_by_hand_into_an_older_segment_is_seen(tmp_path: Path,
                                                                   monkeypatch) -> None:
    monkeypatch.setattr(verified_mark, "RACY_NS", -10**18)
    monkeypatch.setattr(workspace_module, "ASK_DIRECTLY", 0)
    root = tmp_path / "journal"
    ctx = Context(str(root), "ws")
    writes.record(ctx, kind="note", entry_id="a", fields={"text": "x"}, anchors=[],
                  depends_on=[], subject=None)
    ws = ctx.open(create=False)
    assert ws.tombstoned_among(["o1"]) == set()
    assert (root / "cache" / "tombstones" / "ws.json").exists()
    (segment,) = ws.segment_paths()
    with sqlite3.connect(segment) as conn:  # a row stored as a tombstone, however written
        conn.execute("UPDATE events SET type = 'tombstone', subject = 'o1'")
    conn.close()
    assert ws.tombstoned_among(["o1"]) == {"o1"}
