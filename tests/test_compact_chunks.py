"""compact --apply changes a segment in short transactions (issue 19): a hook
appending to that segment waits for one chunk, never for the segment's whole
work; every chunk checks growth as the whole segment did; an item goes whole.
(This is the way in place, taken by a segment a copy cannot replace,
storage/segment_copy.py: each test here makes the copy decline.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import all_bytes_under
from hypothesis import given
from hypothesis import strategies as st

from agent_journal.ops import compact, context, writes
from agent_journal.storage import erasure

SECRET = "CHUNKED-SECRET-51d2"
REAL_RUN_WRITE = erasure.run_write


def _journal(root: Path, items: int) -> context.Context:
    ctx = context.Context(str(root), "ws", session="s")
    for i in range(items):
        writes.observe(ctx, kind="tool_call", obs_id=f"o{i}", tool="Bash", call_id=f"c{i}",
                       input_value=None, output=f"{SECRET} {i}" if i % 2 == 0 else "kept",
                       status="ok", exit_code=0, duration_ms=1)
    for i in range(0, items, 2):
        writes.tombstone(ctx, f"o{i}", "must go")
    return ctx


def _counting_transactions(monkeypatch: Any, on_begin: Any) -> list[int]:
    """Wrap erasure's write transactions: `on_begin(n)` runs before the n-th begins."""
    calls: list[int] = []
    real = erasure.run_write

    def counted(conn: Any, work: Any) -> Any:
        calls.append(len(calls))
        on_begin(len(calls))
        return real(conn, work)

    monkeypatch.setattr(erasure, "run_write", counted)
    return calls


def _observe(ctx: context.Context, obs_id: str) -> None:
    writes.observe(ctx, kind="tool_call", obs_id=obs_id, tool="Bash", call_id="m",
                   input_value=None, output="arrived meanwhile", status="ok", exit_code=0,
                   duration_ms=1)


def test_a_segment_is_changed_in_short_transactions_and_appends_land_between(root, monkeypatch):
    ctx = _journal(root, 40)  # 20 deletions, 20 tombstone flips, one segment
    monkeypatch.setattr(erasure, "copy_survivors", lambda *a, **kw: None)
    monkeypatch.setattr(erasure, "CHUNK_ROWS", 5)
    ws = ctx.open(create=False)
    prepared = compact.prepare(ws, entry_ttl_days=None, observation_ttl_days=None)
    calls = _counting_transactions(
        monkeypatch, lambda n: _observe(ctx, f"meanwhile-{n}") if n in (2, 6) else None)
    outcome = compact.carry_out(prepared)
    assert len(calls) == 8  # 4 chunks of deletions, then 4 of rewrites
    assert outcome.skipped == []
    assert outcome.report["tombstoned"] == sorted(f"o{i}" for i in range(0, 40, 2))
    assert len(outcome.report["tombstonesMarkedPurged"]) == 20
    ids = {e.id for e in ws.read().events if e.type == "observation"}
    assert ids == {f"o{i}" for i in range(1, 40, 2)} | {"meanwhile-2", "meanwhile-6"}
    assert SECRET.encode() not in all_bytes_under(root)


def test_growth_the_plan_depends_on_between_chunks_skips_the_rest_and_claims_only_what_went(
        root, monkeypatch):
    ctx = _journal(root, 40)
    monkeypatch.setattr(erasure, "copy_survivors", lambda *a, **kw: None)
    monkeypatch.setattr(erasure, "CHUNK_ROWS", 5)
    ws = ctx.open(create=False)
    prepared = compact.prepare(ws, entry_ttl_days=None, observation_ttl_days=None)
    calls = _counting_transactions(
        monkeypatch,
        lambda n: writes.tombstone(ctx, "o1", "late") if n == 3 else None)
    outcome = compact.carry_out(prepared)
    assert len(calls) == 3  # the third saw the tombstone and changed nothing
    assert len(outcome.skipped) == 1
    gone = outcome.report["tombstoned"]
    assert len(gone) == 10  # the two chunks that committed, and nothing more
    assert "tombstonesMarkedPurged" not in outcome.report \
        or outcome.report["tombstonesMarkedPurged"] == []
    left = {e.id for e in ws.read().events if e.type == "observation"}
    assert not left & set(gone) and len(left) == 30
    monkeypatch.setattr(erasure, "run_write", REAL_RUN_WRITE)
    again = compact.carry_out(compact.prepare(ws, entry_ttl_days=None,
                                              observation_ttl_days=None))
    assert again.skipped == []
    assert {e.id for e in ws.read().events if e.type == "observation"} == \
        {f"o{i}" for i in range(3, 40, 2)}
    # A tombstone whose target went in a skipped run stays purged: false (the
    # next run sees only an absent target); the rest flip now.
    flags = {e.id: e.data["purged"] for e in ws.read().events if e.type == "tombstone"
             and e.id != "o1"}
    assert flags == {f"o{i}": f"o{i}" not in gone for i in range(0, 40, 2)}
    assert SECRET.encode() not in all_bytes_under(root)


@given(st.lists(st.integers(min_value=0, max_value=6), max_size=60),
       st.integers(min_value=1, max_value=7))
def test_chunks_keep_order_bound_their_size_and_never_split_an_item(keys, size):
    ids = [f"{k}-{n}" for n, k in enumerate(keys)]
    key_of = dict(zip(ids, keys, strict=True)).__getitem__
    old = erasure.CHUNK_ROWS
    erasure.CHUNK_ROWS = size
    try:
        chunks = erasure._chunks(ids, key_of)
    finally:
        erasure.CHUNK_ROWS = old
    assert [i for c in chunks for i in c] == ids
    assert all(chunks)
    for before, after in zip(chunks, chunks[1:], strict=False):
        assert key_of(before[-1]) != key_of(after[0])  # an item's run is never cut
    for chunk in chunks:
        # Over the bound only by the run of one item that crossed it.
        tail = [i for i in chunk if key_of(i) == key_of(chunk[-1])]
        assert len(chunk) - len(tail) < size or len(chunk) <= size


def test_the_read_lets_a_writer_commit_between_slices_and_sees_its_row(root, monkeypatch):
    """A rollback journal's shared lock keeps every writer of a segment from
    committing: the read holds it only while a slice is fetched, never while
    Python decodes rows, and a row committed meanwhile is read like the rest."""
    import sqlite3

    from agent_journal.core import codec
    from agent_journal.core.model import Event
    from agent_journal.storage import compaction_read, compaction_rows
    from agent_journal.storage.segment import insert_events

    ctx = context.Context(str(root), "ws", session="s")
    for i in range(12):  # entries: every row goes through the exact decoder
        writes.record(ctx, kind="note", entry_id=f"n{i}", fields={"text": "x"}, anchors=[],
                      depends_on=[], subject=None)
    ws = ctx.open(create=False)
    [seg] = ws.segment_paths()
    monkeypatch.setattr(compaction_rows, "READ_SLICE_ROWS", 4)
    real = codec.decode_checked
    committed: list[str] = []

    def decode_and_write(*a: Any, **kw: Any) -> Any:
        if not committed:
            conn = sqlite3.connect(seg, timeout=0, isolation_level=None)
            try:
                conn.execute("BEGIN IMMEDIATE")
                ev = Event(event_id="late-1", type="observation", kind="tool_call",
                           id="late", ts="2026-01-01T00:00:00.000Z", author="agent",
                           session="s", replica="r", data={"tool": "Bash", "status": "ok"})
                insert_events(conn, [ev])
                conn.execute("COMMIT")  # fails while the read holds its shared lock
                committed.append("late-1")
            finally:
                conn.close()
        return real(*a, **kw)

    monkeypatch.setattr(codec, "decode_checked", decode_and_write)
    read = compaction_read.read_located(ws)
    assert committed == ["late-1"]
    assert "late-1" in {ev.event_id for ev in read.events}
    high = sqlite3.connect(seg).execute("SELECT max(seq) FROM events").fetchone()[0]
    assert read.high_water[ws.rel(seg)] == high


@given(st.lists(st.tuples(st.integers(min_value=0, max_value=6),
                          st.integers(min_value=1, max_value=60)), max_size=60),
       st.integers(min_value=1, max_value=7), st.integers(min_value=0, max_value=20))
def test_chunks_in_storage_order_bound_their_seq_span_and_never_split_an_item(
        rows, size, span):
    ids = [f"{k}-{n}" for n, (k, _) in enumerate(rows)]  # rows given as (item key, place)
    key_of = {i: k for i, (k, _) in zip(ids, rows, strict=True)}.__getitem__
    seq_of = {i: place * 100 + n for n, (i, (_, place)) in enumerate(zip(ids, rows, strict=True))}
    old = erasure.CHUNK_ROWS, erasure.CHUNK_SPAN
    erasure.CHUNK_ROWS, erasure.CHUNK_SPAN = size, span * 100
    try:
        chunks = erasure._chunks(ids, key_of, seq_of)
    finally:
        erasure.CHUNK_ROWS, erasure.CHUNK_SPAN = old
    assert sorted(i for c in chunks for i in c) == sorted(ids) and all(chunks)
    runs: dict[str, list[str]] = {}  # first id -> the adjacent ids of one key (an item)
    for n, i in enumerate(ids):
        if n and key_of(ids[n - 1]) == key_of(i):
            runs[next(reversed(runs))].append(i)
        else:
            runs[i] = [i]
    firsts = []
    for chunk in chunks:
        parts, n = [], 0
        while n < len(chunk):
            run = runs[chunk[n]]  # a run is whole, inside one chunk
            assert chunk[n:n + len(run)] == run
            parts.append(run)
            n += len(run)
        firsts += [min(seq_of[i] for i in run) for run in parts]
        for j in range(1, len(parts)):  # each run joined within both bounds
            before = [i for run in parts[:j] for i in run]
            joined = [seq_of[i] for run in parts[:j + 1] for i in run]
            assert len(before) < size and max(joined) - min(joined) <= span * 100
    assert firsts == sorted(firsts)  # in storage order
