"""A pull may publish a fetched segment itself as its import (ImportWriter.adopt) when
every row of it is taken as stored and the file holds nothing but our schema's rows;
the next `compact --apply` rebuilds such a file from its rows. These tests hold what
that may change (which files hold the rows) and what it may not (reports, rows,
derived state, erasure)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path
from unittest import mock

import pytest
from conftest import all_bytes_under
from hypothesis import HealthCheck, given, settings
from s3_support import plain
from test_replicas import build, copy_root, make_root, replica_sets, state

from agent_journal.ops import compact, export, remotes, replicas, sync, writes
from agent_journal.ops.context import Context
from agent_journal.storage.files import file_digest
from agent_journal.storage.replica_import import ImportSource

WS = "ws"
MARKER = "PURGEDMARKER"


def ctx(root: Path) -> Context:
    return Context(str(root), WS)


def note(root: Path, entry_id: str, text: str | None = None) -> None:
    writes.record(ctx(root), kind="note", entry_id=entry_id,
                  fields={"text": text or f"note {entry_id}"}, anchors=[], depends_on=[],
                  subject=None)


def shared_pair(tmp_path: Path) -> tuple[Path, Path, Path]:
    share = tmp_path / "share"
    share.mkdir(mode=0o700)
    a, b = make_root(tmp_path, "a"), make_root(tmp_path, "b")
    for root in (a, b):
        remotes.add(ctx(root), "nas", f"file://{share}", endpoint_url=None)
    return a, b, share


def spy_adoptions(monkeypatch) -> list[bool]:
    """Record, per fetched segment the merge considered whole, whether it was adopted."""
    seen: list[bool] = []
    real = ImportSource.adoptable

    def adoptable(self):
        seen.append(real(self))
        return seen[-1]

    monkeypatch.setattr(ImportSource, "adoptable", adoptable)
    return seen


def segments(root: Path) -> list[Path]:
    return sorted((root / "workspaces" / WS / "segments").glob("*.sqlite"))


def meta(path: Path) -> dict[str, str]:
    with sqlite3.connect(path) as conn:
        return dict(conn.execute("SELECT key, value FROM meta"))


def test_a_first_pull_publishes_each_fetched_segment_as_its_import(tmp_path, monkeypatch):
    a, b, _ = shared_pair(tmp_path)
    for n in range(5):
        note(a, f"n{n}")
    sync.push(ctx(a), "nas")
    adopted = spy_adoptions(monkeypatch)
    pulled = sync.pull(ctx(b), "nas")
    assert adopted == [True] and pulled["imported"] == 5
    (imp,) = segments(b)
    rid = (a / "replica-id").read_text().strip()
    (own,) = segments(a)
    assert meta(imp) == {"format": "1", "workspace": WS, "replica": rid,
                         "importedBy": (b / "replica-id").read_text().strip(),
                         "kind": "import", "rebuild": "1"}
    with sqlite3.connect(imp) as conn:
        origin = conn.execute("SELECT o.replica, o.segment, o.seq = e.seq FROM origin o "
                              "JOIN events e USING (event_id)").fetchall()
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert origin == [(rid, own.name, 1)] * 5
    assert state(a) == state(b)
    # The rebuild mark is cleared by the next compaction, with nothing else to do.
    compact.compact(ctx(b), entry_ttl_days=None, observation_ttl_days=None, apply=True)
    assert "rebuild" not in meta(segments(b)[0])
    assert state(a) == state(b)


def _tamper(share: Path, a: Path, tmp_path: Path, change) -> None:
    """Rewrite a's one pushed segment object with `change(conn)` applied, and its
    manifest to match (as a writer of the bucket could)."""
    rid = (a / "replica-id").read_text().strip()
    prefix = share / WS / rid
    manifest = json.loads((prefix / "manifest.json").read_text())
    (entry,) = manifest["export"]["files"]
    obj = prefix / manifest["objects"][entry["name"]]
    tampered = tmp_path / "tampered.sqlite"
    tampered.write_bytes(plain(obj.name, obj.read_bytes()))
    entry.pop("packed", None)  # sent as it is
    conn = sqlite3.connect(tampered, isolation_level=None)
    conn.execute("PRAGMA secure_delete = OFF")
    change(conn)
    conn.close()
    entry["bytes"], entry["checksum"] = file_digest(str(tampered))
    manifest["objects"][entry["name"]] = sync.segment_key(entry["name"], entry["checksum"])
    manifest["export"]["tombstoned"].append("doomed")
    (prefix / manifest["objects"][entry["name"]]).write_bytes(tampered.read_bytes())
    (prefix / "manifest.json").write_text(json.dumps(manifest))


def _doomed_row(size: int):
    def change(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO events(event_id, type, subject, ts, body, checksum) VALUES "
                     "('doomed-event', 'entry', 'doomed', '2026-01-01T00:00:00.000Z', ?, 'x')",
                     ((MARKER * (size // len(MARKER))).encode(),))
        conn.execute("DELETE FROM events WHERE subject = 'doomed'")
    return change


@pytest.mark.parametrize(("size", "whole"), [(200, True), (20_000, False)],
                         ids=["slack-in-a-page", "free-pages"])
def test_bytes_between_the_rows_of_a_fetched_file_are_gone_after_compact(
        tmp_path, monkeypatch, size, whole):
    """A fetched file still holding the bytes of a deleted row about a tombstoned
    subject: on free pages it is not adopted (its rows are copied, nothing else);
    in the unused space of a page no cheap test sees them, so the file is adopted
    with the rebuild mark, and `compact --apply` leaves none of those bytes."""
    a, b, share = shared_pair(tmp_path)
    for n in range(30):
        note(a, f"n{n}", f"kept {n}")
    sync.push(ctx(a), "nas")
    _tamper(share, a, tmp_path, _doomed_row(size))
    adopted = spy_adoptions(monkeypatch)
    pulled = sync.pull(ctx(b), "nas")
    assert adopted == [whole] and pulled["imported"] == 30 and not pulled["refused"]
    if not whole:
        assert MARKER.encode() not in all_bytes_under(b)
    compact.compact(ctx(b), entry_ttl_days=None, observation_ttl_days=None, apply=True)
    assert MARKER.encode() not in all_bytes_under(b)
    assert "kept 29" in state(b) and state(a) == state(b)


@pytest.mark.parametrize("change", [
    "CREATE TABLE extra (x TEXT)",
    "INSERT INTO meta(key, value) VALUES ('note', 'hello')",
    "UPDATE meta SET value = 'other' WHERE key = 'workspace'",
    "CREATE TABLE origin (event_id TEXT, replica TEXT, segment TEXT, seq INTEGER)",
    "CREATE INDEX events_ts ON events(ts)",
    "CREATE TRIGGER t AFTER INSERT ON events BEGIN SELECT 1; END",
], ids=["table", "meta-row", "workspace", "origin", "index", "trigger"])
def test_a_file_holding_more_than_our_schema_is_copied_row_by_row(tmp_path, monkeypatch,
                                                                  change):
    a, b, share = shared_pair(tmp_path)
    for n in range(3):
        note(a, f"n{n}")
    sync.push(ctx(a), "nas")
    _tamper(share, a, tmp_path, lambda conn: conn.execute(change))
    adopted = spy_adoptions(monkeypatch)
    pulled = sync.pull(ctx(b), "nas")
    assert adopted == [False] and pulled["imported"] == 3
    (imp,) = segments(b)
    assert "rebuild" not in meta(imp) and meta(imp)["workspace"] == WS
    with sqlite3.connect(imp) as conn:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert not names & {"extra", "events_ts", "t"}
    assert state(a) == state(b)


def test_a_segment_partly_held_here_is_imported_row_by_row(tmp_path, monkeypatch):
    """A grown segment whose first rows came here by another way (a folder merge) is
    not adopted: no event is stored twice, and the report says what was new."""
    a, b, _ = shared_pair(tmp_path)
    note(a, "old")
    export.export(ctx(a), str(tmp_path / "exported"))
    replicas.merge(ctx(b), str(tmp_path / "exported"))
    note(a, "new")
    sync.push(ctx(a), "nas")
    adopted = spy_adoptions(monkeypatch)
    pulled = sync.pull(ctx(b), "nas")
    assert (pulled["imported"], pulled["alreadyPresent"]) == (1, 1) and True not in adopted
    rows = []
    for path in segments(b):
        with sqlite3.connect(path) as conn:
            rows += [r[0] for r in conn.execute("SELECT event_id FROM events")]
    assert len(rows) == len(set(rows)) == 2
    assert state(a) == state(b)


def test_a_segment_holding_a_tombstoned_row_is_imported_row_by_row(tmp_path, monkeypatch):
    """A stale replica's segment with one row about content another replica erased is
    not adopted: that row's bytes never reach the reader, the rest does."""
    a, b, share = shared_pair(tmp_path)
    c = make_root(tmp_path, "c")
    remotes.add(ctx(c), "nas", f"file://{share}", endpoint_url=None)
    note(a, "secret", f"the key is {MARKER}")
    note(a, "fine")
    sync.push(ctx(a), "nas")
    sync.pull(ctx(c), "nas")
    writes.tombstone(ctx(c), "secret", "leaked")
    compact.compact(ctx(c), entry_ttl_days=None, observation_ttl_days=None, apply=True)
    sync.push(ctx(c), "nas")
    adopted = spy_adoptions(monkeypatch)
    pulled = sync.pull(ctx(b), "nas")
    assert MARKER.encode() not in all_bytes_under(b)
    assert [n["reason"] for n in pulled["notImported"]] == ["tombstoned"]
    assert pulled["imported"] == 2 and True not in adopted
    assert "note fine" in state(b) and MARKER not in state(b)


def test_content_erased_after_an_adopting_pull_is_gone_from_the_reader(tmp_path):
    """The owner erases what a reader already pulled whole: the reader's next pull
    brings the tombstone, and its compaction leaves no byte of the content."""
    a, b, _ = shared_pair(tmp_path)
    note(a, "secret", f"the key is {MARKER}")
    note(a, "fine")
    sync.push(ctx(a), "nas")
    sync.pull(ctx(b), "nas")
    assert MARKER.encode() in all_bytes_under(b)
    writes.tombstone(ctx(a), "secret", "leaked")
    compact.compact(ctx(a), entry_ttl_days=None, observation_ttl_days=None, apply=True)
    sync.push(ctx(a), "nas")
    sync.pull(ctx(b), "nas")
    compact.compact(ctx(b), entry_ttl_days=None, observation_ttl_days=None, apply=True)
    assert MARKER.encode() not in all_bytes_under(b)
    assert "note fine" in state(b) and state(a) == state(b)


@settings(max_examples=int(os.environ.get("AJ_LAW_EXAMPLES", "12")), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(replica_sets(3))
def test_adopting_changes_which_files_hold_the_rows_never_what_a_pull_does(data):
    """The law behind adoption: a pull gives the same reports, stores the same rows
    (bytes included) and provenance, and derives the same state as the same pull
    copying every row."""
    rids, groups = data
    base = Path(tempfile.mkdtemp(prefix="aj-adopt-"))
    try:
        share = base / "share"
        share.mkdir(mode=0o700)
        roots = build(base, rids, groups)
        for root in roots:
            remotes.add(ctx(root), "nas", f"file://{share}", endpoint_url=None)
            sync.push(ctx(root), "nas")
        whole, by_rows = copy_root(roots[0], base / "whole"), copy_root(roots[0], base / "rows")
        pulled = sync.pull(ctx(whole), "nas")
        with mock.patch.object(ImportSource, "adoptable", lambda self: False):
            expected = sync.pull(ctx(by_rows), "nas")

        def comparable(report):
            for merged in report["merges"]:
                merged.pop("segmentsTouched")
                merged["source"].pop("path", None)
            return report

        def rows(root):
            """Every stored row and provenance row (a multiset), and the imports' meta."""
            out: list[tuple] = []
            kept: set[tuple] = set()
            for path in segments(root):
                with sqlite3.connect(path) as conn:
                    out += conn.execute("SELECT event_id, type, subject, ts, body, checksum "
                                        "FROM events").fetchall()
                    if path.name.startswith("import-"):
                        out += conn.execute("SELECT 'origin', * FROM origin").fetchall()
                        kept |= set(conn.execute("SELECT * FROM meta WHERE key != 'rebuild'"))
            return sorted(out), kept

        assert comparable(pulled) == comparable(expected)
        assert rows(whole) == rows(by_rows)
        assert state(whole) == state(by_rows)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_pulled_root_keeps_every_file_private(tmp_path):
    """Fetched objects are created 0600 (not by the umask), so an import published
    as it landed is as private as any segment."""
    a, b, _ = shared_pair(tmp_path)
    note(a, "n", "text")
    sync.push(ctx(a), "nas")
    old = os.umask(0o022)
    try:
        sync.pull(ctx(b), "nas")
    finally:
        os.umask(old)
    for path in [b, *b.rglob("*")]:
        mode = os.stat(path).st_mode & 0o777
        assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))


def test_what_a_pull_reads_ahead_is_what_the_merge_would_read(tmp_path, monkeypatch):
    """The facts read by the fetching threads (replica_source.read_sealed_facts) are
    used by the merge, and a pull without them gives the same report and rows."""
    from agent_journal.storage import replica_source

    a, b, _ = shared_pair(tmp_path)
    c = copy_root(b, tmp_path / "c")
    note(a, "secret", "s")
    note(a, "kept", "k")
    writes.tombstone(ctx(a), "secret", "gone")
    sync.push(ctx(a), "nas")
    read = []
    real = replica_source.read_sealed_facts

    def spying(path):
        read.append(path)
        return real(path)

    monkeypatch.setattr(sync, "read_sealed_facts", spying)
    with_facts = sync.pull(ctx(b), "nas")
    assert len(read) == 1
    monkeypatch.setattr(sync, "read_sealed_facts", lambda path: None)
    without = sync.pull(ctx(c), "nas")
    for report in (with_facts, without):
        for merged in report["merges"]:
            merged.pop("segmentsTouched")
    assert with_facts == without
    assert state(b) == state(c) == state(a)


def test_a_tombstone_the_manifest_hides_still_withholds_what_an_adopted_file_holds(
        tmp_path, monkeypatch):
    """A manifest that names a segment holding content its own later segment
    tombstones, and does not list the tombstone (made by hand): the merge meets it
    only after it adopted the segment its target is in, and drops those rows from
    the adopted file before anything is published."""
    a, b, share = shared_pair(tmp_path)
    monkeypatch.setenv("AGENT_JOURNAL_SEGMENT_MAX_BYTES", "1")  # a segment per write
    note(a, "secret", f"the key is {MARKER}")
    note(a, "fine")
    sync.push(ctx(a), "nas")
    rid = (a / "replica-id").read_text().strip()
    prefix = share / WS / rid
    before = json.loads((prefix / "manifest.json").read_text())
    first = before["export"]["files"][0]
    first_bytes = (prefix / before["objects"][first["name"]]).read_bytes()
    assert MARKER.encode() in plain(before["objects"][first["name"]], first_bytes)
    writes.tombstone(ctx(a), "secret", "leaked")
    monkeypatch.delenv("AGENT_JOURNAL_SEGMENT_MAX_BYTES")
    sync.push(ctx(a), "nas")
    manifest = json.loads((prefix / "manifest.json").read_text())
    # Put the unscrubbed first segment back and hide the tombstone.
    files = [first] + [f for f in manifest["export"]["files"] if f["name"] != first["name"]]
    manifest["export"]["files"] = files
    manifest["objects"][first["name"]] = before["objects"][first["name"]]
    (prefix / before["objects"][first["name"]]).write_bytes(first_bytes)
    manifest["export"]["tombstoned"] = []
    (prefix / "manifest.json").write_text(json.dumps(manifest))
    adopted = spy_adoptions(monkeypatch)
    pulled = sync.pull(ctx(b), "nas")
    assert True in adopted
    assert MARKER.encode() not in all_bytes_under(b / "workspaces")
    assert "note fine" in state(b) and MARKER not in state(b)
    assert [n["reason"] for n in pulled["notImported"]] == ["tombstoned"]


@pytest.mark.parametrize("adopt", [True, False], ids=["adopted", "copied"])
def test_what_compaction_expires_from_a_pulled_import_is_never_imported_again(
        tmp_path, monkeypatch, adopt):
    """An adopted import's provenance is a view over its rows (storage/provenance.py),
    which forgets a row compaction removes; such a file keeps what it lost in a
    `removed` table instead, so a later merge of the same events answers as for
    an import built row by row: removed here, not imported again."""
    a, b, _ = shared_pair(tmp_path)
    monkeypatch.setenv("AGENT_JOURNAL_NOW", "2026-01-01T00:00:00Z")
    for n in range(3):
        writes.observe(ctx(a), kind="tool", obs_id=f"old-{n}", tool="Bash", call_id=None,
                       input_value={"command": f"ls {n}"}, output="x", status=None,
                       exit_code=0, duration_ms=None)
    note(a, "kept")
    sync.push(ctx(a), "nas")
    if not adopt:
        monkeypatch.setattr(ImportSource, "adoptable", lambda self: False)
    sync.pull(ctx(b), "nas")
    (imp,) = segments(b)
    with sqlite3.connect(imp) as conn:
        kind = conn.execute("SELECT type FROM sqlite_master WHERE name = 'origin'").fetchone()
    assert kind == (("view",) if adopt else ("table",))
    monkeypatch.setenv("AGENT_JOURNAL_NOW", "2026-12-01T00:00:00Z")
    expired = compact.compact(ctx(b), entry_ttl_days=None, observation_ttl_days=30,
                              apply=True)
    assert len(expired.report["expired"]) == 3
    export.export(ctx(a), str(tmp_path / "carried"))
    again = replicas.merge(ctx(b), str(tmp_path / "carried"))
    assert again["imported"] == 0 and again["alreadyPresent"] == 1
    assert sorted(n["reason"] for n in again["notImported"]) == ["removedHere"] * 3


def test_a_checkpoint_cuts_the_same_events_in_an_adopted_import(tmp_path):
    """A checkpoint names rows by their append slot; an adopted import answers for
    its slots through its `origin` view, so the reader cuts what the writer does,
    and so does a third root that merged the reader's export (the view's slots
    copied as rows)."""
    from agent_journal.ops import checkpoints
    from agent_journal.ops.show import show

    a, b, _ = shared_pair(tmp_path)
    note(a, "before")
    checkpoints.checkpoint(ctx(a), "cp", None)
    note(a, "after")
    sync.push(ctx(a), "nas")
    sync.pull(ctx(b), "nas")
    note(b, "mine")
    with sqlite3.connect(segments(b)[0]) as conn:
        assert conn.execute("SELECT type FROM sqlite_master WHERE name = 'origin'"
                            ).fetchone() == ("view",)

    def shown(root: Path) -> list[str]:
        return [e["id"] for e in show(ctx(root), as_of="cp")[0]["entries"]]

    export.export(ctx(b), str(tmp_path / "carried"))
    c = make_root(tmp_path, "c")
    replicas.merge(ctx(c), str(tmp_path / "carried"))
    assert shown(a) == shown(b) == shown(c) == ["before"]
