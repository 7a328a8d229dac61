"""Damage that must never read as health (issue 15).

Segments are damaged the way disks and hand edits damage them: a page
zeroed (pages 2 and 3 hold the meta table and its index, 5 and 6 the
events' indexes: no read of rows visits them), bytes flipped, a row edited
with sqlite3. Every command that rewrites or copies a journal (compact
--apply, export, merge) must see such damage before it acts and refuse
with nothing changed; coverage reports it; every read reports what it sees.
"""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path

import pytest
from conftest import all_bytes_under
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_journal.core.model import Event, new_event_id
from agent_journal.storage.root import Root

WS = "ws"
PAGE = 4096
MARKER = "CONTENT-THAT-MUST-NOT-EXIST-5c1e"


def event(type_: str, subject: str, data: dict, *, replica: str = "rx",
          kind: str | None = None) -> Event:
    return Event(event_id=new_event_id(), type=type_, kind=kind or type_, id=subject,
                 ts="2026-01-01T00:00:00.000Z", author="human", session=None,
                 replica=replica, data=data)


def note(subject: str, text: str | None = None) -> Event:
    return event("entry", subject, {"fields": {"text": text or subject}, "anchors": [],
                                    "dependsOn": [], "subject": None}, kind="note")


def tombstone(target: str) -> Event:
    return event("tombstone", target, {"reason": "must not exist", "purged": False})


def make_root(base: Path, name: str) -> Path:
    path = base / name
    path.mkdir(mode=0o700)
    return path


def put(root: Path, events: list[Event]) -> Path:
    """Append to the root's own segment; returns that segment's path."""
    Root.open(root, create=True).workspace(WS).append(events)
    return only_segment(root)


def only_segment(root: Path) -> Path:
    (seg,) = sorted((root / "workspaces" / WS / "segments").glob("*.sqlite"))
    return seg


def zero_page(seg: Path, page: int) -> None:
    with open(seg, "r+b") as fh:
        fh.seek((page - 1) * PAGE)
        fh.write(b"\0" * PAGE)


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under the root (lock files aside) and its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.name.endswith(".lock")}


def env_for(root: Path) -> dict[str, str]:
    return {"AGENT_JOURNAL_ROOT": str(root)}


# -- 1. a zeroed page no read visits ------------------------------------------------------

@pytest.mark.parametrize("page", [2, 3, 5, 6])
def test_zeroed_page_is_seen_before_anything_is_rewritten_or_copied(tmp_path, cli, root,
                                                                    page):
    seg = put(root, [note(f"n{i}", "x" * 300) for i in range(40)] + [tombstone("n1")])
    zero_page(seg, page)
    before = snapshot(root)
    rel = str(seg.relative_to(root))

    # Reads that do not check still show what they read, and exit 0.
    assert cli("show").code == 0
    # coverage checks: it names the segment and warns that it shows a floor.
    res = cli("coverage", "--json")
    assert res.code == 0
    assert [u["path"] for u in res.json()["unreadable"]] == [rel]
    assert "quick_check" in res.json()["unreadable"][0]["reason"]
    assert "floor, not a total" in res.err

    res = cli("compact", "--apply")
    assert res.code == 1 and res.err.count("\n") == 1
    assert "refusing to compact" in res.err and rel in res.err
    assert snapshot(root) == before  # no intent file, the segment untouched

    dest = tmp_path / "exp"
    res = cli("export", str(dest))
    assert res.code == 1 and "refusing to export" in res.err and rel in res.err
    assert not dest.exists()

    other = make_root(tmp_path, "other")
    put(other, [note("o1")])
    other_before = snapshot(other)
    res = cli("merge", str(root), env=env_for(other))  # from the damaged root
    assert res.code == 1 and "refusing to merge" in res.err and res.err.count("\n") == 1
    assert snapshot(other) == other_before
    res = cli("merge", str(other))  # into it
    assert res.code == 1 and "refusing to merge" in res.err and res.err.count("\n") == 1
    assert snapshot(root) == before


def test_export_with_an_unreadable_segment_refuses_and_leaves_nothing(tmp_path, cli, root):
    put(root, [note("n1"), note("n2")])
    (root / "workspaces" / WS / "segments" / "broken.sqlite").write_bytes(b"\0" * 4096)
    dest = tmp_path / "exp"
    res = cli("export", str(dest))
    assert res.code == 1 and "refusing to export" in res.err and "broken.sqlite" in res.err
    assert not dest.exists()
    dest.mkdir(mode=0o700)  # an empty folder given as DEST stays empty
    res = cli("export", str(dest))
    assert res.code == 1 and list(dest.iterdir()) == []


@pytest.mark.parametrize("seed", range(8))
def test_flipped_bytes_never_end_in_an_internal_error(tmp_path, cli, root, seed):
    """20 flipped bytes anywhere: every command answers in one line or works;
    export either refuses, leaving nothing, or writes a whole export."""
    seg = put(root, [note(f"n{i}", "word " * 40) for i in range(60)] + [tombstone("n7")])
    data = bytearray(seg.read_bytes())
    rng = random.Random(seed)
    for _ in range(20):
        data[rng.randrange(len(data))] ^= 0xFF
    seg.write_bytes(bytes(data))
    for args in (("show",), ("digest",), ("search", "word"), ("coverage",), ("get", "n2"),
                 ("record", "--kind", "note", "--id", "fresh", "--text", "t"),
                 ("compact", "--apply")):
        res = cli(*args)
        assert "internal error" not in res.err and "Traceback" not in res.err, (args, res.err)
    dest = tmp_path / "exp"
    res = cli("export", str(dest), "--json")
    assert "internal error" not in res.err, res.err
    if res.code == 0:
        manifest = json.loads((dest / "manifest.json").read_text())
        assert sum(f["events"] for f in manifest["files"]) == res.json()["events"]
    else:
        assert res.code == 1 and not dest.exists()


# -- 2. damaged tombstones on either side of a merge --------------------------------------

def _damage_tombstone(seg: Path, how: str) -> None:
    with sqlite3.connect(seg) as conn:
        if how == "flipped":
            (body,) = conn.execute("SELECT body FROM events WHERE type = 'tombstone'").fetchone()
            flipped = bytearray(body)
            at = body.index(b"must")
            flipped[at:at + 4] = bytes(b ^ 0x20 for b in flipped[at:at + 4])
            conn.execute("UPDATE events SET body = ? WHERE type = 'tombstone'", (bytes(flipped),))
        elif how == "edited-body":  # checksum kept
            conn.execute("UPDATE events SET body = CAST(replace(body, 'must not exist', "
                         "'edited by hand') AS BLOB) WHERE type = 'tombstone'")
        elif how == "type-column":
            conn.execute("UPDATE events SET type = 'entry' WHERE type = 'tombstone'")
        else:
            raise AssertionError(how)


DAMAGES = ["flipped", "edited-body", "type-column"]


@pytest.mark.parametrize("how", DAMAGES)
def test_a_damaged_source_tombstone_never_lets_its_content_in(tmp_path, cli, how):
    src = make_root(tmp_path, "src")
    dst = make_root(tmp_path, "dst")
    seg = put(src, [note("secret", MARKER), note("plain"), tombstone("secret")])
    _damage_tombstone(seg, how)
    put(dst, [note("mine")])
    for extra in ((), ("--allow-damaged",)):
        res = cli("merge", str(src), *extra, env=env_for(dst))
        assert MARKER.encode() not in all_bytes_under(dst), (how, extra, res.err)
        assert "internal error" not in res.err
        if how != "type-column":
            assert res.code == 1 and "refusing to merge" in res.err
    shown = cli("show", "--json", env=env_for(dst)).json()
    assert "secret" not in [e["id"] for e in shown["entries"]]


@pytest.mark.parametrize("how", DAMAGES)
def test_a_damaged_local_tombstone_refuses_the_merge(tmp_path, cli, how):
    src = make_root(tmp_path, "src")
    dst = make_root(tmp_path, "dst")
    put(src, [note("secret", MARKER)])
    seg = put(dst, [note("mine"), tombstone("secret")])
    _damage_tombstone(seg, how)
    before = snapshot(dst)
    for extra in ((), ("--allow-damaged",)):
        res = cli("merge", str(src), *extra, env=env_for(dst))
        assert res.code == 1 and "refusing to merge: the local workspace" in res.err
        assert res.err.count("\n") == 1
        assert snapshot(dst) == before


def test_allow_damaged_imports_around_rows_that_cannot_be_tombstones(tmp_path, cli):
    src = make_root(tmp_path, "src")
    dst = make_root(tmp_path, "dst")
    seg = put(src, [note("n1"), note("n2"), note("n3")])
    with sqlite3.connect(seg) as conn:  # one note's bytes changed, still a blob
        conn.execute("UPDATE events SET body = CAST(replace(body, 'n2', 'n9') AS BLOB) "
                     "WHERE subject = 'n2'")
    res = cli("merge", str(src), env=env_for(dst))
    assert res.code == 1 and "1 malformed row(s)" in res.err and "--allow-damaged" in res.err
    assert not (dst / "workspaces" / WS / "segments").exists() or \
        not list((dst / "workspaces" / WS / "segments").glob("*.sqlite"))
    res = cli("merge", str(src), "--allow-damaged", "--json", env=env_for(dst))
    assert res.code == 0, res.err
    assert res.json()["imported"] == 2 and len(res.json()["malformed"]) == 1
    assert "were not imported" in res.err
    ids = [e["id"] for e in cli("show", "--json", env=env_for(dst)).json()["entries"]]
    assert ids == ["n1", "n3"]


def test_allow_damaged_refuses_a_malformed_row_that_could_be_a_tombstone(tmp_path, cli):
    src = make_root(tmp_path, "src")
    dst = make_root(tmp_path, "dst")
    seg = put(src, [note("n1"), note("about tombstones", "the word tombstone")])
    with sqlite3.connect(seg) as conn:
        conn.execute("UPDATE events SET checksum = 'xxh3-64:0' WHERE subject = 'about tombstones'")
    res = cli("merge", str(src), "--allow-damaged", env=env_for(dst))
    assert res.code == 1 and "could be a tombstone" in res.err
    assert not (dst / "workspaces" / WS / "segments").exists() or \
        not list((dst / "workspaces" / WS / "segments").glob("*.sqlite"))


def test_allow_damaged_from_an_export_names_the_sealed_rows(tmp_path, cli):
    src = make_root(tmp_path, "src")
    dst = make_root(tmp_path, "dst")
    seg = put(src, [note("n1"), note("n2")])
    with sqlite3.connect(seg) as conn:
        conn.execute("UPDATE events SET checksum = 'xxh3-64:0' WHERE subject = 'n2'")
    exp = tmp_path / "exp"
    res = cli("export", str(exp), env=env_for(src))
    assert res.code == 0 and "floor, not a total" in res.err
    res = cli("merge", str(exp), env=env_for(dst))
    assert res.code == 1 and "1 malformed row(s)" in res.err
    res = cli("merge", str(exp), "--allow-damaged", "--json", env=env_for(dst))
    assert res.code == 0 and res.json()["imported"] == 1


# -- 4. a damaged local side: unreadable rows, zeroed index pages -------------------------

def test_merge_into_a_segment_with_an_unreadable_event_id_refuses(tmp_path, cli):
    src = make_root(tmp_path, "src")
    dst = make_root(tmp_path, "dst")
    put(src, [note("theirs")])
    seg = put(dst, [note("n1"), note("n2")])
    with sqlite3.connect(seg) as conn:
        conn.execute("UPDATE events SET event_id = CAST(x'66ff6f' AS TEXT) WHERE subject = 'n2'")
    before = snapshot(dst)
    res = cli("merge", str(src), env=env_for(dst))
    assert res.code == 1 and "refusing to merge: the local workspace" in res.err
    assert snapshot(dst) == before


@pytest.mark.parametrize("page", [5, 6])
def test_zeroed_index_pages_refuse_cleanly(tmp_path, cli, root, page):
    seg = put(root, [note(f"n{i}") for i in range(30)] + [tombstone("n3")])
    zero_page(seg, page)
    before = snapshot(root)
    src = make_root(tmp_path, "src")
    put(src, [note("theirs")])
    for args in (("compact", "--apply"), ("merge", str(src)),
                 ("record", "--kind", "note", "--id", "fresh", "--text", "t")):
        res = cli(*args)
        assert res.code == 1, (args, res.err)
        assert res.err.startswith("error: ") and res.err.count("\n") == 1, (args, res.err)
        assert "internal error" not in res.err
        assert snapshot(root) == before, args


# -- 5. every read says when it shows a floor ---------------------------------------------

def test_get_warns_on_a_damaged_journal(cli, root):
    seg = put(root, [note("n1"), note("n2")])
    with sqlite3.connect(seg) as conn:
        conn.execute("UPDATE events SET checksum = 'xxh3-64:0' WHERE subject = 'n2'")
    res = cli("get", "n1", "--json")
    assert res.code == 0 and json.loads(res.out)["id"] == "n1"
    assert "floor, not a total" in res.err


def test_search_reports_damage_done_after_it_indexed(cli, root):
    seg = put(root, [note("n1", "alpha words"), note("n2", "alpha more")])
    assert cli("search", "alpha", "--json").json()["malformed"] == []
    with sqlite3.connect(seg) as conn:
        conn.execute("UPDATE events SET checksum = 'xxh3-64:0' WHERE subject = 'n2'")
    shown = cli("show", "--json").json()
    res = cli("search", "alpha", "--json")
    assert res.code == 0
    assert res.json()["malformed"] == shown["malformed"] != []
    assert [h["id"] for h in res.json()["hits"]] == ["n1"]
    assert "floor, not a total" in res.err
    assert "floor, not a total" in cli("search", "alpha").err


PIECES = [b"tombstone", b"TombStone", b"tombston", b"\\u0074", b"\\U", b"\\", b"u", b"\x00",
          b"entry", b"{", b"x", b"\xc3", b"\x80", b"\xff", "é".encode(), b"\x01"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(
    st.sampled_from(["entry", "tombstone", "observation", "Tombstone"]),
    st.one_of(st.binary(max_size=40), st.lists(st.sampled_from(PIECES), max_size=6).map(b"".join),
              st.text(max_size=12))), max_size=40))
def test_the_tombstone_candidate_rule_is_one_rule(rows):
    """SQLite's filter (storage) picks exactly the rows the Python rule (core) names."""
    from agent_journal.core.merge_plan import tombstone_candidate
    from agent_journal.storage.replica_source import TOMBSTONE_CANDIDATES_WHERE

    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE events (seq INTEGER PRIMARY KEY, type TEXT, body BLOB)")
    conn.executemany("INSERT INTO events VALUES (?, ?, ?)",
                     [(i, t, b) for i, (t, b) in enumerate(rows)])
    picked = {r[0] for r in conn.execute("SELECT seq FROM events" + TOMBSTONE_CANDIDATES_WHERE)}
    conn.close()
    assert picked == {i for i, (t, b) in enumerate(rows) if tombstone_candidate(t, b)}
