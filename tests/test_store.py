"""Storage: roots, permissions, journal mode, segments, damage."""

import os
import sqlite3

import pytest

from agent_journal.core.errors import UnsafeRootError
from agent_journal.core.model import Event
from agent_journal.storage import segment_reader
from agent_journal.storage.connection import JOURNAL_MODE, journal_mode_for
from agent_journal.storage.root import Root
from agent_journal.storage.segment_reader import json_check
from agent_journal.storage.workspace import ENV_SEGMENT_MAX_BYTES


@pytest.fixture
def cli(inproc):
    """In-process: these tests need no real process."""
    return inproc



def make_event(i, replica="r"):
    return Event(event_id=f"00000000-0000-4000-8000-{i:012d}", type="entry", kind="note",
                 id=f"n{i}", ts="2026-01-01T00:00:00.000Z", author="human", session=None,
                 replica=replica, data={"fields": {"text": f"t{i}"}, "anchors": [],
                                        "dependsOn": [], "subject": None})


@pytest.mark.parametrize("version, mode", [
    ((3, 40, 1), "delete"), ((3, 44, 5), "delete"), ((3, 44, 6), "wal"), ((3, 45, 0), "delete"),
    ((3, 50, 6), "delete"), ((3, 50, 7), "wal"), ((3, 51, 2), "delete"), ((3, 51, 3), "wal"),
    ((3, 52, 0), "wal"),
])
def test_journal_mode_follows_the_wal_reset_fix(version, mode):
    assert journal_mode_for(version) == mode


def test_segment_uses_the_chosen_mode(root):
    ws = Root.open(root, create=True).workspace("ws")
    ws.append([make_event(1)])
    (seg,) = ws.segment_paths()
    with sqlite3.connect(seg) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == JOURNAL_MODE


def test_world_writable_root_is_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    with pytest.raises(UnsafeRootError, match="group- or world-writable"):
        Root.open(shared, create=True)
    os.chmod(shared, 0o770)
    with pytest.raises(UnsafeRootError):
        Root.open(shared, create=True)


def test_creating_under_shared_folder_is_refused(tmp_path):
    shared = tmp_path / "tmpish"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    target = shared / "a" / "journal"
    with pytest.raises(UnsafeRootError, match=str(shared)):
        Root.open(target, create=True)
    assert not (shared / "a").exists()


def test_cli_refuses_unsafe_root(cli, tmp_path):
    shared = tmp_path / "open"
    shared.mkdir()
    os.chmod(shared, 0o777)
    result = cli("record", "--kind", "note", "--id", "n", "--text", "t",
                 env={"AGENT_JOURNAL_ROOT": str(shared / "j")})
    assert result.code == 1 and str(shared) in result.err
    assert list(shared.iterdir()) == []


def test_replica_id_is_made_once(root):
    a = Root.open(root, create=True).replica_id
    b = Root.open(root, create=True).replica_id
    assert a == b and (root / "replica-id").read_text().strip() == a


def test_append_is_idempotent_by_event_id(root):
    ws = Root.open(root, create=True).workspace("ws")
    assert ws.append([make_event(1), make_event(2)]) == 2
    assert ws.append([make_event(1)]) == 0
    assert len(ws.read().events) == 2


def test_segments_rotate_by_size(root, monkeypatch):
    monkeypatch.setenv(ENV_SEGMENT_MAX_BYTES, "1")
    ws = Root.open(root, create=True).workspace("ws")
    for i in range(3):
        ws.append([make_event(i)])
    names = [os.path.basename(p) for p in ws.segment_paths()]
    rid = ws.root.replica_id
    assert names == [f"{rid}-00000{i}.sqlite" for i in (1, 2, 3)]
    assert len(ws.read().events) == 3


def test_other_replicas_segments_are_never_appended(root):
    ws = Root.open(root, create=True).workspace("ws")
    ws.append([make_event(1)])
    foreign = os.path.join(ws.segments_dir, "zzzzforeign-000009.sqlite")
    os.rename(ws.segment_paths()[0], foreign)
    ws.append([make_event(2)])
    with sqlite3.connect(foreign) as conn:
        assert conn.execute("SELECT count(*) FROM events").fetchone()[0] == 1
    assert len(ws.read().events) == 2


def _damaged_workspace(root):
    ws = Root.open(root, create=True).workspace("ws")
    ws.append([make_event(i) for i in range(50)])
    return ws, ws.segment_paths()[0]


def test_non_sqlite_segment_is_unreadable(root):
    ws, seg = _damaged_workspace(root)
    with open(os.path.join(ws.segments_dir, "junk.sqlite"), "wb") as fh:
        fh.write(b"this is not a database" * 100)
    result = ws.read()
    assert [u["path"] for u in result.unreadable] == ["workspaces/ws/segments/junk.sqlite"]
    assert len(result.events) == 50


def test_truncated_segment_is_unreadable(root):
    ws, seg = _damaged_workspace(root)
    size = os.path.getsize(seg)
    with open(seg, "r+b") as fh:
        fh.truncate(size // 3)
    result = ws.read()
    assert len(result.unreadable) == 1 and result.unreadable[0]["reason"]


def test_zeroed_pages_are_unreadable(root):
    ws, seg = _damaged_workspace(root)
    with open(seg, "r+b") as fh:
        fh.seek(0)
        fh.write(b"\0" * 8192)
    assert len(ws.read().unreadable) == 1


def test_hand_edited_row_is_malformed(root):
    ws, seg = _damaged_workspace(root)
    with sqlite3.connect(seg) as conn:
        conn.execute("UPDATE events SET body = replace(body, 't7', 't8') WHERE subject = 'n7'")
    result = ws.read()
    assert result.malformed == [{"segment": ws.rel(seg), "row": 8, "reason": "checksum mismatch"}]
    assert len(result.events) == 49


def test_bit_flip_in_a_body_is_malformed(root):
    ws, seg = _damaged_workspace(root)
    data = bytearray(open(seg, "rb").read())
    at = data.find(b'"t42"')
    data[at + 2] ^= 0x01
    open(seg, "wb").write(bytes(data))
    result = ws.read()
    assert (len(result.malformed), len(result.unreadable)) == (1, 0)


def test_empty_uninitialised_segment_is_not_damage(root):
    ws, _ = _damaged_workspace(root)
    open(os.path.join(ws.segments_dir, "r-000099.sqlite"), "wb").close()
    result = ws.read()
    assert not result.damaged and len(result.events) == 50


def test_sqlite_without_json_functions_judges_no_json(monkeypatch):
    """A build without the JSON functions gets no check: every body is then
    read and judged by Python alone, never reported unreadable for it."""
    monkeypatch.setattr(segment_reader, "_JSON_CHECK", [])
    monkeypatch.setattr(segment_reader, "strict_json_check", lambda version: "no_such_json_fn(t)")
    assert json_check() is None
    monkeypatch.setattr(segment_reader, "_JSON_CHECK", [])
    monkeypatch.setattr(segment_reader, "strict_json_check", lambda version: "json_valid(t)")
    assert json_check() == "json_valid(t)"
