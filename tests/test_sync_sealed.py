"""A push uploads a sealed own segment's file itself, held still by a read transaction,
when its bytes hold nothing but its rows (storage/sealed_hold.py); anything else is
snapshotted as before. These tests hold what that may change (which bytes travel)
and what it may not: the local segments, what a pull derives, erasure."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
from conftest import all_bytes_under
from s3_support import plain
from test_replicas import make_root, state

from agent_journal.ops import compact, remotes, sync, writes
from agent_journal.ops.context import Context
from agent_journal.storage.sealed_hold import SealedHold
from agent_journal.storage.workspace import ENV_SEGMENT_MAX_BYTES

WS = "ws"
MARKER = "SEALEDMARKER"


def ctx(root: Path) -> Context:
    return Context(str(root), WS)


def segments(root: Path) -> list[Path]:
    return sorted((root / "workspaces" / WS / "segments").glob("*.sqlite"))


def digests(paths: list[Path]) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


def objects(share: Path) -> dict[str, str]:
    """Digest of every pushed segment object, by the segment it is a copy of (its key
    is `<segment stem>.<checksum>.sqlite`)."""
    return {p.name.split(".")[0] + ".sqlite":
            hashlib.sha256(plain(p.name, p.read_bytes())).hexdigest()
            for p in share.rglob("*.sqlite*") if p.is_file()}


@pytest.fixture
def pair(tmp_path, monkeypatch):
    """A writer with six own segments (one note each) and a reader, sharing a folder."""
    monkeypatch.setenv(ENV_SEGMENT_MAX_BYTES, "1")  # every write opens a new segment
    share = tmp_path / "share"
    share.mkdir(mode=0o700)
    a, b = make_root(tmp_path, "a"), make_root(tmp_path, "b")
    for root in (a, b):
        remotes.add(ctx(root), "nas", f"file://{share}", endpoint_url=None)
    for n in range(6):
        text = f"the key is {MARKER}" if n == 1 else f"note {n}"
        writes.record(ctx(a), kind="note", entry_id=f"n{n}", fields={"text": text},
                      anchors=[], depends_on=[], subject=None)
    assert len(segments(a)) == 6
    return a, b, share


def test_sealed_segments_travel_as_they_are_and_the_newest_two_as_snapshots(pair):
    a, b, share = pair
    before = digests(segments(a))
    sync.push(ctx(a), "nas")
    pushed = objects(share)
    assert digests(segments(a)) == before
    names = sorted(before)
    assert {n for n in names if pushed[n] == before[n]} == set(names[:-2])
    assert all(pushed[n] != before[n] for n in names[-2:])
    # The links lived in the push's stage only: no object shares a file with a
    # segment, and no segment is linked from anywhere once the push is done.
    assert all(p.stat().st_nlink == 1 for p in [*share.rglob("*.sqlite"), *segments(a)])
    pulled = sync.pull(ctx(b), "nas")
    assert pulled["imported"] == 6 and state(a) == state(b)


def test_a_sealed_segment_with_tombstoned_content_travels_scrubbed_and_stays_as_it_was(pair):
    """The link is replaced by a snapshot before the scrub: the upload loses the
    content, the local segment (until compaction) keeps every byte it had."""
    a, b, share = pair
    writes.tombstone(ctx(a), "n1", "leaked")
    before = digests(segments(a))
    sync.push(ctx(a), "nas")
    assert digests(segments(a)) == before
    assert MARKER.encode() in all_bytes_under(a / "workspaces" / WS / "segments")
    assert MARKER.encode() not in all_bytes_under(share)
    sync.pull(ctx(b), "nas")
    assert MARKER.encode() not in all_bytes_under(b)
    assert state(a) == state(b)


def test_after_compaction_no_object_holds_the_erased_content(pair):
    a, _, share = pair
    sync.push(ctx(a), "nas")
    assert MARKER.encode() in all_bytes_under(share)
    writes.tombstone(ctx(a), "n1", "leaked")
    compact.compact(ctx(a), entry_ttl_days=None, observation_ttl_days=None, apply=True)
    sync.push(ctx(a), "nas")
    assert MARKER.encode() not in all_bytes_under(share)


def _free_pages(path: Path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE scratch (x BLOB)")
    conn.execute("INSERT INTO scratch VALUES (zeroblob(40000))")
    conn.execute("DROP TABLE scratch")
    assert conn.execute("PRAGMA freelist_count").fetchone()[0] > 0
    conn.close()


def _rebuild_mark(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO meta(key, value) VALUES ('rebuild', 'pending')")


@pytest.mark.parametrize("change", [_free_pages, _rebuild_mark], ids=["free-pages", "rebuild-mark"])
def test_a_sealed_segment_whose_bytes_may_hold_more_than_rows_is_snapshotted(pair, change):
    a, b, share = pair
    first = segments(a)[0]
    change(first)
    sync.push(ctx(a), "nas")
    pushed = objects(share)
    assert pushed[first.name] != digests([first])[first.name]
    assert pushed[segments(a)[1].name] == digests([segments(a)[1]])[segments(a)[1].name]
    sync.pull(ctx(b), "nas")
    assert state(a) == state(b)


def test_a_hold_keeps_writers_from_committing_until_it_is_closed(pair):
    a, _, _ = pair
    path = segments(a)[0]
    hold = SealedHold.take(str(path))
    assert hold is not None
    writer = sqlite3.connect(path, timeout=0.05, isolation_level=None)
    try:
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            writer.execute("INSERT INTO meta(key, value) VALUES ('x', 'y')")
        hold.close()
        writer.execute("INSERT INTO meta(key, value) VALUES ('x', 'y')")
    finally:
        writer.close()


def test_no_hold_on_a_file_with_a_log_to_fold_in(tmp_path):
    path = tmp_path / "w.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = wal")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("INSERT INTO meta VALUES ('k', 'v')")
    assert SealedHold.take(str(path)) is None  # committed rows still in the log
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    hold = SealedHold.take(str(path))
    assert hold is not None
    hold.close()
    conn.close()


def test_past_the_cap_on_holds_segments_are_snapshotted(pair, monkeypatch):
    from agent_journal.ops import export

    a, b, share = pair
    monkeypatch.setattr(export, "MAX_HOLDS", 2)
    before = digests(segments(a))
    sync.push(ctx(a), "nas")
    pushed = objects(share)
    assert sum(pushed[n] == before[n] for n in before) == 2
    sync.pull(ctx(b), "nas")
    assert state(a) == state(b)
