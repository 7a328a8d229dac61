"""A merge's read of a source segment vouches for canonical observations without
parsing them (storage/vouched_rows.py), and for nothing the exact decoder refuses.

Held to compaction's suite of observation bodies around the canonical layout: a row
handed over as `Vouched` is one `codec.decode_checked` accepts with its columns,
its data cut to the artifact that decoder reads; every other row comes back exactly
as stored.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from test_compact import (
    FAST_CASES,
    FAST_READ,
    _canonical,
    _column_cases,
    _mutations,
    _observation_obj,
    _raw_rows,
)

from agent_journal.core import codec
from agent_journal.core.merge_rows import Vouched
from agent_journal.storage.root import check_root
from agent_journal.storage.vouched_rows import source_rows


def test_only_rows_the_exact_decoder_accepts_are_vouched_for(root: Path) -> None:
    check_root(str(root), create=True)
    rows: list[tuple[Any, ...]] = []
    names = {}
    for n, (name, mutate) in enumerate(_mutations()):
        obj = _observation_obj(n)
        body = mutate(obj)
        names[obj["eventId"]] = name
        rows.append((obj["eventId"], obj["id"], obj["ts"], body, codec.checksum(body)))
    obj = _observation_obj(999)
    rows.append((obj["eventId"], obj["id"], obj["ts"], _canonical(obj), "xxh3-64:0000"))
    rows += _column_cases()
    _raw_rows(root, rows)
    conn = sqlite3.connect(root / "workspaces" / "ws" / "segments" / "imported-raw.sqlite")
    try:
        stored = conn.execute("SELECT seq, event_id, type, subject, ts, checksum, body "
                              "FROM events ORDER BY seq").fetchall()
        got = source_rows(conn, "main")
    finally:
        conn.close()
    assert [r[:6] for r in got] == [r[:6] for r in stored]
    vouched = set()
    for row, as_stored in zip(got, stored, strict=True):
        if type(row[6]) is not Vouched:
            assert row == as_stored
            continue
        vouched.add(row[1])
        seq, event_id, type_, subject, ts, digest, body = as_stored
        ev = codec.decode_checked(body, digest, event_id, type_, subject, ts)
        art = ev.data.get("artifact")
        assert row[6].data == ({} if art is None else {"artifact": art})
    if FAST_READ:
        assert {names[e] for e in vouched} == FAST_CASES
    else:
        assert not vouched
