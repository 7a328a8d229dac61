"""Erasure by copy (storage/segment_copy.py): a segment loses its rows by a copy of
the rows that stay, renamed over it, the live one too (its appends meanwhile go into
the copy); whatever the copy cannot do safely leaves the old file and goes in place."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import all_bytes_under, clean_env

from agent_journal.core import codec, errors
from agent_journal.core.model import Event
from agent_journal.ops import compact, context, show, writes
from agent_journal.storage import connection, erasure, segment_copy, swap_guard
from agent_journal.storage import workspace as workspace_module
from agent_journal.storage.workspace import ENV_SEGMENT_MAX_BYTES

SECRET = "COPIED-AWAY-SECRET-9c41"
KEPT = "KEPT-ROW-MARKER-52aa"


def _ctx(root: Path) -> context.Context:
    return context.Context(str(root), "ws", session="s")


def _event(n: int, replica: str, *, doomed: bool) -> Event:
    text = f"{SECRET}-{n:03d}" if doomed else f"{KEPT}-{n:03d}"
    return Event(event_id=f"00000000-0000-4000-8000-{n:012d}", type="observation",
                 kind="tool_call", id=f"o{n}", ts="2025-01-01T00:00:00.000Z", author="agent",
                 session="s", replica=replica,
                 data={"tool": "Bash", "callId": f"c{n}", "input": None,
                       "output": (text + " line\n") * (1 + n % 5), "status": "ok",
                       "exitCode": 0, "durationMs": 1, "artifact": None})


def _tombstone(n: int, replica: str) -> Event:
    return Event(event_id=f"00000000-0000-4000-9000-{n:012d}", type="tombstone",
                 kind="tombstone", id=f"o{n}", ts="2025-01-02T00:00:00.000Z", author="human",
                 session=None, replica=replica, data={"reason": "must go", "purged": False})


def _journal(root: Path, monkeypatch: Any) -> list[Path]:
    """Four own segments: the first two sealed, holding observations (every third
    tombstoned, its tombstone beside it in the first, elsewhere in the second's
    case), the last two live."""
    monkeypatch.setenv(ENV_SEGMENT_MAX_BYTES, "1")  # every append starts a segment
    ws = _ctx(root).open(create=True)
    replica = ws.root.replica_id
    first = [_event(n, replica, doomed=n % 3 == 0) for n in range(60)]
    first += [_tombstone(n, replica) for n in range(0, 60, 3)]
    ws.append(first)
    ws.append([_event(n, replica, doomed=n % 3 == 0) for n in range(60, 90)])
    ws.append([_tombstone(n, replica) for n in range(60, 90, 3)])
    ws.append([_event(n, replica, doomed=False) for n in range(90, 95)])
    segments = sorted(Path(ws.segments_dir).glob("*.sqlite"))
    assert len(segments) == 4
    return segments


def _rows(path: Path) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT seq, event_id, type, subject, ts, body, checksum "
                            "FROM events ORDER BY seq").fetchall()
    finally:
        conn.close()


def _file_facts(path: Path) -> dict[str, Any]:
    conn = sqlite3.connect(path)
    try:
        return {
            "schema": conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master "
                                   "ORDER BY name").fetchall(),
            "header": [conn.execute(f"PRAGMA {p}").fetchone()[0] for p in
                       ("user_version", "application_id", "page_size", "encoding",
                        "auto_vacuum")],
            "meta": conn.execute("SELECT key, value FROM meta ORDER BY key").fetchall(),
        }
    finally:
        conn.close()


def _purged(body: bytes, digest: str) -> tuple[bytes, str]:
    ev = codec.decode(body, digest)
    return codec.encode(ev.purged())


def test_a_sealed_segment_is_replaced_by_a_copy_of_its_surviving_rows(root, monkeypatch):
    segments = _journal(root, monkeypatch)
    before = {p: (p.stat().st_ino, _rows(p), _file_facts(p)) for p in segments}
    outcome = compact.compact(_ctx(root), entry_ttl_days=None, observation_ttl_days=None,
                              apply=True)
    assert sorted(outcome.report["tombstoned"]) == sorted(f"o{n}" for n in range(0, 90, 3))
    assert len(outcome.report["tombstonesMarkedPurged"]) == 30 and outcome.warnings == []
    first, second, tombs, live = segments
    # The sealed segments rows went from were copied (a new file), the others not.
    assert first.stat().st_ino != before[first][0]
    assert second.stat().st_ino != before[second][0]
    assert tombs.stat().st_ino == before[tombs][0] and live.stat().st_ino == before[live][0]
    for seg in (first, second):
        doomed = {f"o{n}" for n in range(0, 90, 3)}
        expected = []
        for seq, event_id, type_, subject, ts, body, digest in before[seg][1]:
            if type_ == "observation" and subject in doomed:
                continue
            if type_ == "tombstone":
                body, digest = _purged(body, digest)
            expected.append((seq, event_id, type_, subject, ts, body, digest))
        assert _rows(seg) == expected  # same seq, same order, same bytes
        facts, old = _file_facts(seg), before[seg][2]
        assert facts["header"] == old["header"] and facts["meta"] == old["meta"]
        # The schema is the old one, with the `removed` table an own segment keeps.
        assert [row for row in facts["schema"] if row[2] != "removed"] == old["schema"]
        conn = sqlite3.connect(seg)
        removed = {r[0] for r in conn.execute("SELECT event_id FROM removed")}
        assert removed == {e for _, e, t, s, *_ in before[seg][1]
                           if t == "observation" and s in doomed}
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert conn.execute("PRAGMA freelist_count").fetchone() == (0,)
        conn.close()
    everything = all_bytes_under(root)
    assert SECRET.encode() not in everything and KEPT.encode() in everything
    left = [p.name for p in Path(first.parent).iterdir()
            if p.name.startswith(segment_copy.COPY_PREFIX) or p.name.endswith("-journal")]
    assert left == []
    again = compact.compact(_ctx(root), entry_ttl_days=None, observation_ttl_days=None,
                            apply=True)
    assert again.report["tombstoned"] == [] and again.report["tombstonesMarkedPurged"] == []


def test_the_copy_and_the_change_in_place_leave_the_same_journal(root, tmp_path, monkeypatch):
    _journal(root, monkeypatch)
    other = tmp_path / "in-place"
    import shutil

    shutil.copytree(root, other, symlinks=True)
    copied = compact.compact(_ctx(root), entry_ttl_days=None, observation_ttl_days=None,
                             apply=True)
    with monkeypatch.context() as m:
        m.setattr(erasure, "copy_survivors", lambda *a, **kw: None)  # every one in place
        in_place = compact.compact(_ctx(other), entry_ttl_days=None,
                                   observation_ttl_days=None, apply=True)
    assert copied.report == in_place.report

    def rows(where: Path) -> list[list[tuple[Any, ...]]]:
        return [_rows(p) for p in sorted((where / "workspaces" / "ws" / "segments")
                                         .glob("*.sqlite"))]

    assert rows(root) == rows(other)
    assert show.show(_ctx(root), observations=True)[0] == \
        show.show(_ctx(other), observations=True)[0]


def _live_journal(root: Path, monkeypatch: Any) -> Path:
    """One segment, the live one every append goes to: ten observations, the first
    five tombstoned."""
    monkeypatch.setenv(ENV_SEGMENT_MAX_BYTES, str(1 << 30))
    ws = _ctx(root).open(create=True)
    replica = ws.root.replica_id
    ws.append([_event(n, replica, doomed=n < 5) for n in range(10)])
    ws.append([_tombstone(n, replica) for n in range(5)])
    [segment] = Path(ws.segments_dir).glob("*.sqlite")
    return segment


def _not_marked(path: Path) -> bool:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT value FROM meta WHERE key = 'rebuild'").fetchall() == []
    finally:
        conn.close()


def test_the_live_segment_is_copied_too(root, monkeypatch):
    segment = _live_journal(root, monkeypatch)
    inode = segment.stat().st_ino
    outcome = compact.compact(_ctx(root), entry_ttl_days=None, observation_ttl_days=None,
                              apply=True)
    assert len(outcome.report["tombstonesMarkedPurged"]) == 5
    assert segment.stat().st_ino != inode and _not_marked(segment)  # copied, not in place
    assert SECRET.encode() not in all_bytes_under(root)
    assert KEPT.encode() in segment.read_bytes()


def test_rows_appended_to_a_live_segment_after_the_copy_go_into_it(root, monkeypatch):
    # A writer that commits between the copy and the rename: its row is copied under the
    # old file's exclusive lock before the rename, never lost, never a reason to fall
    # back to deleting in place.
    segment = _live_journal(root, monkeypatch)
    replica = _ctx(root).open(create=False).root.replica_id
    real_finish = segment_copy._finish
    appended: list[str] = []

    def finish_then_append(*a: Any, **kw: Any) -> Any:
        done = real_finish(*a, **kw)
        if not appended:
            ev = _event(700, replica, doomed=False)
            body, digest = codec.encode(ev)
            conn = sqlite3.connect(segment, isolation_level=None)
            conn.execute("INSERT INTO events(event_id, type, subject, ts, body, checksum) "
                         "VALUES (?, ?, ?, ?, ?, ?)", (ev.event_id, ev.type, ev.id, ev.ts,
                                                      body, digest))
            conn.close()
            appended.append(ev.event_id)
        return done

    monkeypatch.setattr(segment_copy, "_finish", finish_then_append)
    inode = segment.stat().st_ino
    outcome = compact.compact(_ctx(root), entry_ttl_days=None, observation_ttl_days=None,
                              apply=True)
    assert appended and outcome.skipped == []
    assert segment.stat().st_ino != inode and _not_marked(segment)  # the copy replaced it
    assert appended[0] in {r[1] for r in _rows(segment)}
    assert SECRET.encode() not in all_bytes_under(root)


def test_a_tombstone_appended_after_the_copy_leaves_the_segment_as_it_was(root, monkeypatch):
    segment = _live_journal(root, monkeypatch)
    replica = _ctx(root).open(create=False).root.replica_id
    real_finish = segment_copy._finish

    def finish_then_tombstone(*a: Any, **kw: Any) -> Any:
        done = real_finish(*a, **kw)
        ev = _tombstone(7, replica)
        body, digest = codec.encode(ev)
        conn = sqlite3.connect(segment, isolation_level=None)
        conn.execute("INSERT OR IGNORE INTO events(event_id, type, subject, ts, body, "
                     "checksum) VALUES (?, ?, ?, ?, ?, ?)",
                     (ev.event_id, ev.type, ev.id, ev.ts, body, digest))
        conn.close()
        return done

    monkeypatch.setattr(segment_copy, "_finish", finish_then_tombstone)
    before = _rows(segment)
    outcome = compact.compact(_ctx(root), entry_ttl_days=None, observation_ttl_days=None,
                              apply=True)
    assert outcome.skipped == [os.path.relpath(segment, root)]
    assert [r for r in _rows(segment) if r[1] != _tombstone(7, replica).event_id] == before
    assert [p for p in segment.parent.iterdir()
            if p.name.startswith(segment_copy.COPY_PREFIX)] == []


def test_a_writer_whose_segment_was_replaced_while_it_waited_appends_to_the_new_file(
        root, monkeypatch):
    segment = _live_journal(root, monkeypatch)
    ws = _ctx(root).open(create=False)
    writer = ws.writer()
    assert writer.tombstoned_among(["o9"]) == set()  # its connection is on the old file
    compact.compact(_ctx(root), entry_ttl_days=None, observation_ttl_days=None, apply=True)
    # The writer checks the file's identity before it appends; here the rename comes
    # after that check, while it waits for the lock: SQLite refuses the write.
    real_inode = workspace_module._inode
    held = [writer.inode]
    monkeypatch.setattr(workspace_module, "_inode",
                        lambda path: held.pop() if held else real_inode(path))
    assert writer.append([_event(50, ws.root.replica_id, doomed=False)]) == 1
    writer.close()
    assert "o50" in {r[3] for r in _rows(segment)}


def test_a_copy_is_not_renamed_over_a_segment_while_a_writer_is_in_a_statement(
        root, monkeypatch):
    # A writer holds the swap guard from its check of the file it holds to its
    # statement's end; a copy renamed over the segment meanwhile would leave it
    # on a file SQLite finds the new file's journal beside. The compaction gives
    # up the copy after a bounded wait and changes the segment in place.
    segment = _live_journal(root, monkeypatch)
    monkeypatch.setattr(swap_guard, "COMPACTION_WAIT_S", 0.05)
    inode = segment.stat().st_ino
    with swap_guard.writer_guard(str(segment.parent)):
        outcome = compact.compact(_ctx(root), entry_ttl_days=None,
                                  observation_ttl_days=None, apply=True)
    assert len(outcome.report["tombstonesMarkedPurged"]) == 5
    assert segment.stat().st_ino == inode  # in place, never renamed over
    assert SECRET.encode() not in all_bytes_under(root)


def test_a_writer_waits_while_a_copy_is_being_renamed_over_its_segment(root, monkeypatch):
    segment = _live_journal(root, monkeypatch)
    ws = _ctx(root).open(create=False)
    monkeypatch.setattr(connection, "BUSY_TIMEOUT_S", 0.05)
    before = _rows(segment)
    with swap_guard.swap_guard(str(segment.parent)), ws.writer() as writer:
        with pytest.raises(errors.BusyError):
            writer.append([_event(51, ws.root.replica_id, doomed=False)])
        with pytest.raises(errors.BusyError):
            writer.tombstoned_among(["o9"])
    assert _rows(segment) == before
    assert ws.append([_event(51, ws.root.replica_id, doomed=False)]) == 1


WRITER = r"""
import sys
from agent_journal.ops import context, writes
root, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
ctx = context.Context(root, "ws", session=name)
for i in range(count):
    writes.observe(ctx, kind="tool_call", obs_id=f"{name}-{i}", tool="Bash", call_id=str(i),
                   input_value=None, output="x" * 2000, status="ok", exit_code=0,
                   duration_ms=1)
"""


def test_writers_never_fail_while_the_live_segment_is_copied_over_again_and_again(
        root, monkeypatch):
    # SQLite locks a file but finds its journal by name: a writer left on a replaced
    # file took a writer's journal of the new file for a crashed one, played it back
    # and deleted it, and that writer's commit failed (disk I/O error).
    segment = _live_journal(root, monkeypatch)
    ctx = _ctx(root)
    env = clean_env(AGENT_JOURNAL_WORKSPACE="ws")
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(root), f"w{n}", "150"],
                                env=env, stderr=subprocess.PIPE) for n in range(4)]
    rounds = 0
    try:
        while any(w.poll() is None for w in writers) or rounds < 3:
            writes.observe(ctx, kind="tool_call", obs_id=f"doomed-{rounds}", tool="Bash",
                           call_id="d", input_value=None, output=SECRET, status="ok",
                           exit_code=0, duration_ms=1)
            writes.tombstone(ctx, f"doomed-{rounds}", "must go")
            compact.compact(ctx, entry_ttl_days=None, observation_ttl_days=None, apply=True)
            rounds += 1
    finally:
        errs = [w.communicate(timeout=120)[1].decode() for w in writers]
    assert [w.returncode for w in writers] == [0] * 4, errs
    subjects = {r[3] for r in _rows(segment)}
    assert all(f"w{n}-{i}" in subjects for n in range(4) for i in range(150))


def test_a_writer_still_holding_a_replaced_segment_is_refused_never_lost(root, monkeypatch):
    segments = _journal(root, monkeypatch)
    stale = sqlite3.connect(segments[0], isolation_level=None)
    assert stale.execute("SELECT count(*) FROM events").fetchone()[0] == 80
    compact.compact(_ctx(root), entry_ttl_days=None, observation_ttl_days=None, apply=True)
    # SQLite sees the file it holds is no longer the one under its name, and refuses
    # the write (SQLITE_READONLY_DBMOVED) rather than commit it to an unlinked file.
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        stale.execute("BEGIN IMMEDIATE")
        stale.execute("INSERT INTO meta(key, value) VALUES ('lost?', 'x')")
        stale.execute("COMMIT")
    stale.close()


def test_a_segment_linked_under_another_name_is_changed_in_place(root, monkeypatch):
    # A push links a sealed segment into its stage and uploads the file itself
    # (ops/export.py): a copy renamed over the segment would leave the old bytes
    # under the stage's name. In place, both names see the rows go.
    segments = _journal(root, monkeypatch)
    stage = root / "workspaces" / "ws" / "remotes" / "r" / ".push-1-x"
    stage.mkdir(parents=True, mode=0o700)
    os.link(segments[0], stage / "linked.tmp")
    inodes = [p.stat().st_ino for p in segments[:2]]
    outcome = compact.compact(_ctx(root), entry_ttl_days=None, observation_ttl_days=None,
                              apply=True)
    assert len(outcome.report["tombstonesMarkedPurged"]) == 30
    assert segments[0].stat().st_ino == inodes[0]  # in place
    assert segments[1].stat().st_ino != inodes[1]  # copied
    assert SECRET.encode() not in all_bytes_under(root)


def test_rows_appended_to_a_sealed_segment_after_the_read_are_copied_or_skip_it(
        root, monkeypatch):
    segments = _journal(root, monkeypatch)
    ws = _ctx(root).open(create=False)
    replica = ws.root.replica_id

    def append(path: Path, events: list[Event]) -> None:
        conn = sqlite3.connect(path, isolation_level=None)
        for ev in events:
            body, digest = codec.encode(ev)
            conn.execute("INSERT INTO events(event_id, type, subject, ts, body, checksum) "
                         "VALUES (?, ?, ?, ?, ?, ?)", (ev.event_id, ev.type, ev.id, ev.ts,
                                                      body, digest))
        conn.close()

    prepared = compact.prepare(ws, entry_ttl_days=None, observation_ttl_days=None)
    # A plain observation the plan does not depend on: copied with the rest.
    append(segments[0], [_event(500, replica, doomed=False)])
    # A tombstone: the plan may depend on it, so the second segment is left alone.
    append(segments[1], [_tombstone(61, replica)])
    outcome = compact.carry_out(prepared)
    assert outcome.skipped == [ws.rel(str(segments[1]))]
    assert "o500" in {r[3] for r in _rows(segments[0])}
    assert f"{SECRET}-000".encode() not in segments[0].read_bytes()
    assert f"{SECRET}-060".encode() in segments[1].read_bytes()  # skipped: next run
    again = compact.compact(_ctx(root), entry_ttl_days=None, observation_ttl_days=None,
                            apply=True)
    assert again.skipped == [] and SECRET.encode() not in all_bytes_under(root)


def test_a_copy_a_killed_run_left_is_deleted_by_the_next(root, monkeypatch):
    segments = _journal(root, monkeypatch)
    leftover = segments[0].parent / f"{segment_copy.COPY_PREFIX}{segments[0].name}.4242.tmp"
    leftover.write_bytes(segments[0].read_bytes())  # the rows a killed copy had
    compact.compact(_ctx(root), entry_ttl_days=None, observation_ttl_days=None, apply=True)
    assert not leftover.exists()
    assert SECRET.encode() not in all_bytes_under(root)


def test_a_copy_that_cannot_be_made_leaves_the_segment_to_be_changed_in_place(
        root, monkeypatch):
    segments = _journal(root, monkeypatch)
    inode = segments[0].stat().st_ino

    def full(*a: Any, **kw: Any) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(segment_copy, "_finish", full)
    outcome = compact.compact(_ctx(root), entry_ttl_days=None, observation_ttl_days=None,
                              apply=True)
    assert len(outcome.report["tombstonesMarkedPurged"]) == 30 and outcome.warnings == []
    assert segments[0].stat().st_ino == inode  # changed in place, then rebuilt
    assert SECRET.encode() not in all_bytes_under(root)
    assert [p for p in segments[0].parent.iterdir()
            if p.name.startswith(segment_copy.COPY_PREFIX)] == []
