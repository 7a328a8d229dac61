"""`export --sqlite FILE`: one Datasette-ready database of a workspace, opened here with
sqlite-utils' API (and sqlite3) and queried: readable columns, every segment, nothing
tombstoned, refusals that write nothing, a file that appears whole or not at all."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
import sqlite_utils
from audit_scenario import SECRET, build_scenario, check_golden, damage, normalise

NOW = {"AGENT_JOURNAL_NOW": "2026-03-10T20:00:00Z"}


@pytest.fixture
def scenario(root: Path) -> Path:
    build_scenario(root)
    return root


def _out(tmp_path: Path) -> Path:
    folder = tmp_path / "out"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder / "journal.db"


def test_golden_report_and_rows(cli, scenario, tmp_path):
    db_path = _out(tmp_path)
    result = cli("export", "--sqlite", str(db_path), "--json", env=NOW)
    assert result.code == 0 and result.err == "", result.err
    report = result.json()
    assert report["path"] == str(db_path) and report["replaced"] is False
    check_golden("export_sqlite.json",
                 normalise(result.out.replace(str(db_path), "<db>"), scenario))
    db = sqlite_utils.Database(db_path)
    rows = {table: list(db.query(f"SELECT * FROM [{table}] ORDER BY rowid"))
            for table in ("events", "observations", "entries")}
    text = json.dumps(rows, indent=1, ensure_ascii=False, sort_keys=True) + "\n"
    check_golden("export_sqlite_rows.json", normalise(text, scenario))


def test_tables_columns_and_content(cli, scenario, tmp_path):
    db_path = _out(tmp_path)
    assert cli("export", "--sqlite", str(db_path)).code == 0
    assert os.stat(db_path).st_mode & 0o777 == 0o600
    db = sqlite_utils.Database(db_path)
    assert {"events", "observations", "entries", "meta"} <= set(db.table_names())
    assert set(db.view_names()) == {"tool_calls", "failed_calls", "prompts", "live_entries",
                                    "retracted_entries"}
    # Rowid tables in time order (Datasette lists a table in its key's order).
    assert db["events"].pks == ["rowid"]
    assert [(i.columns, i.unique) for i in db["events"].indexes if i.unique] == [
        (["event_id"], 1)]
    times = [r["ts"] for r in db.query("SELECT ts FROM events ORDER BY rowid")]
    assert times == sorted(times)
    assert {"ts", "type", "kind", "id", "session", "tool", "status", "exit_code", "failed",
            "target", "text", "subject", "input", "output", "data"} <= set(
                db["events"].columns_dict)
    # Readable: no BLOB anywhere (Datasette would show "<Binary>").
    for table in ("events", "observations", "entries", "meta"):
        for column in db[table].columns_dict:
            assert db.execute(f"SELECT count(*) FROM [{table}] WHERE typeof([{column}]) = "
                              "'blob'").fetchone()[0] == 0, (table, column)
    # Every event of the workspace but those about a tombstoned id.
    shown = {r["id"]: r for r in db["observations"].rows}
    assert set(shown) == {"obs-s1-start", "obs-read-app", "obs-test-1", "obs-edit-app",
                          "obs-grep", "obs-test-2", "obs-s2-start", "obs-write-notes",
                          "obs-deploy"}
    assert shown["obs-test-1"]["failed"] == 1 and shown["obs-test-1"]["exit_code"] == 1
    assert shown["obs-test-1"]["target"] == "pytest -q tests/test_upload.py"
    assert shown["obs-deploy"]["status"] == "started"
    assert json.loads(shown["obs-edit-app"]["input"])["file_path"] == "src/upload.py"
    entries = {r["id"]: r for r in db["entries"].rows}
    assert "f-key" not in entries
    assert (entries["f-cache"]["outcome"], entries["f-cache"]["live"]) == ("invalidated", 0)
    assert entries["f-cache"]["invalidation_reason"] == (
        "the cache was disabled in the failing run")
    assert entries["n-cache-flag"]["outcome"] == "suppressed"
    assert entries["d-backoff"]["text"] == (
        "How do we stop the race? -> retry with jittered backoff")
    assert [r["id"] for r in db["retracted_entries"].rows] == ["f-cache", "n-cache-flag"]
    assert [r["id"] for r in db["failed_calls"].rows] == ["obs-test-1"]
    kinds = {r["kind"]: r["n"] for r in db.query(
        "SELECT kind, count(*) AS n FROM events GROUP BY kind")}
    assert kinds["tombstone"] == 3 and kinds["tool_call"] == 7
    tombstones = [r["id"] for r in db.query(
        "SELECT id FROM events WHERE type = 'tombstone' ORDER BY ts")]
    assert tombstones == ["obs-env", "f-key", "obs-vendor-call"]
    # Events about a tombstoned id are absent whatever their type.
    assert db.execute("SELECT count(*) FROM events WHERE id IN ('obs-env', 'f-key') "
                      "AND type != 'tombstone'").fetchone()[0] == 0
    # Full-text search, as Datasette's search box runs it.
    assert [r["id"] for r in db["observations"].search("retry_backoff")] == ["obs-grep"]
    assert [r["id"] for r in db["entries"].search("jittered")] == ["d-backoff"]
    assert list(db["events"].search(SECRET, quote=True)) == []
    meta = {r["key"]: r["value"] for r in db["meta"].rows}
    assert meta["workspace"] == "ws" and meta["format"] == "1"
    db.close()
    # Not a byte of the tombstoned content anywhere in the file (FTS tables included).
    assert SECRET.encode() not in db_path.read_bytes()


def test_every_segment_goes_into_one_table(cli, root, tmp_path):
    """Rows of an imported replica's segment sit beside this replica's own."""
    other = tmp_path / "other" / "journal"
    other.parent.mkdir(mode=0o700)
    assert cli("record", "--kind", "note", "--id", "n-other", "--text", "from the laptop",
               env={"AGENT_JOURNAL_ROOT": str(other)}).code == 0
    assert cli("record", "--kind", "note", "--id", "n-here", "--text", "from here").code == 0
    assert cli("merge", str(other)).code == 0
    segments = list((root / "workspaces" / "ws" / "segments").glob("*.sqlite"))
    assert len(segments) == 2
    db_path = _out(tmp_path)
    assert cli("export", "--sqlite", str(db_path)).code == 0
    db = sqlite_utils.Database(db_path)
    assert sorted(r["id"] for r in db["entries"].rows) == ["n-here", "n-other"]
    assert len({r["replica"] for r in db["events"].rows}) == 2


def test_refusals_write_nothing(cli, scenario, tmp_path):
    db_path = _out(tmp_path)
    db_path.write_bytes(b"keep me")
    result = cli("export", "--sqlite", str(db_path))
    assert result.code == 1 and "--overwrite" in result.err
    assert db_path.read_bytes() == b"keep me"
    replaced = cli("export", "--sqlite", str(db_path), "--overwrite", "--json")
    assert replaced.code == 0 and replaced.json()["replaced"] is True
    assert sqlite_utils.Database(db_path)["events"].count > 0
    folder = db_path.parent
    for args, code, said in (
            (("--sqlite", str(folder)), 2, "not a regular file"),
            (("--sqlite", str(folder), "--overwrite"), 2, "not a regular file"),
            (("--sqlite", str(tmp_path / "nowhere" / "x.db")), 2, "does not exist"),
            (("--sqlite", str(scenario / "x.db")), 2, "inside the journal root"),
            (("--sqlite", str(folder / "x.db"), str(folder / "dest")), 2, "takes no DEST"),
            (("--overwrite", str(folder / "dest")), 2, "goes with --sqlite"),
            ((), 2, "missing argument DEST")):
        result = cli("export", *args)
        assert (result.code, said in result.err) == (code, True), (args, result.err)
    missing = cli("export", "--sqlite", str(folder / "y.db"), workspace="nosuch")
    assert missing.code == 1 and "no workspace" in missing.err
    assert sorted(p.name for p in folder.iterdir()) == ["journal.db"]


def test_a_damaged_workspace_is_refused(cli, scenario, tmp_path):
    damage(scenario)
    db_path = _out(tmp_path)
    result = cli("export", "--sqlite", str(db_path))
    assert result.code == 1 and "refusing to export" in result.err
    assert list(db_path.parent.iterdir()) == []


def test_a_failure_part_way_leaves_nothing(inproc, scenario, tmp_path, monkeypatch):
    from agent_journal.ops import export_sqlite

    def broken(*args: object) -> dict[str, object]:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(export_sqlite, "_entry_row", broken)
    db_path = _out(tmp_path)
    result = inproc("export", "--sqlite", str(db_path))
    assert result.code == 1 and "disk is full" in result.err and "nothing was written" in (
        result.err)
    assert list(db_path.parent.iterdir()) == []
    # Over an existing file: the old one stays as it was.
    db_path.write_bytes(b"old")
    assert inproc("export", "--sqlite", str(db_path), "--overwrite").code == 1
    assert sorted(p.name for p in db_path.parent.iterdir()) == ["journal.db"]
    assert db_path.read_bytes() == b"old"


def test_text_summary(inproc, scenario, tmp_path):
    db_path = _out(tmp_path)
    result = inproc("export", "--sqlite", str(db_path))
    assert result.code == 0
    lines = result.out.splitlines()
    assert lines[0] == f"wrote {db_path}: workspace ws as one SQLite database"
    assert lines[1] == "  22 events, 9 observations, 9 entries; 2 withheld (tombstoned)"
    assert lines[-1].startswith(f"  open it: datasette {db_path}")
