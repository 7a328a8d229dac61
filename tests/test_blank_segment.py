"""A segment whose writer died after setting its journal mode but before its schema
committed: one answer (an empty segment) from every command that meets it."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest


def _blank_segment(root: Path, name: str = "rdead0000000000-000001.sqlite") -> Path:
    seg = root / "workspaces" / "ws" / "segments" / name
    seg.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(seg)
    # What a killed writer got to do. Entering WAL writes the database header, so the
    # file is not empty on disk although it holds no table.
    assert conn.execute("PRAGMA journal_mode=wal").fetchone() == ("wal",)
    conn.close()
    assert seg.stat().st_size > 0
    seg.chmod(0o600)
    return seg


@pytest.fixture
def journal(root: Path, inproc) -> Path:
    assert inproc("record", "--kind", "note", "--id", "n1", "--text", "kept").code == 0
    _blank_segment(root)
    return root


READS = [["show", "--json"], ["show", "--json", "--observations"], ["coverage", "--json"],
         ["decay"], ["digest", "--json"],
         ["search", "kept", "--json"], ["trace", "n1"]]


@pytest.mark.parametrize("args", READS, ids=" ".join)
def test_every_read_counts_it_as_empty(journal: Path, inproc, args: list[str]) -> None:
    result = inproc(*args)
    assert result.code == 0, result.err
    assert "floor" not in result.err
    if args[0] in ("show", "coverage", "digest", "search"):
        report = json.loads(result.out)
        assert report.get("unreadable", []) == [] and report.get("malformed", []) == []


def test_compact_applies_and_export_and_merge_carry_on(journal: Path, inproc) -> None:
    applied = inproc("compact", "--apply")
    assert applied.code == 0, applied.err
    dest = journal.parent / "export"
    exported = inproc("export", str(dest))
    assert exported.code == 0, exported.err
    other = {"AGENT_JOURNAL_ROOT": str(journal.parent / "other")}
    for source in (str(journal), str(dest)):
        merged = inproc("merge", source, env=other)
        assert merged.code == 0, merged.err
    shown = json.loads(inproc("show", "--json", env=other).out)
    assert [e["id"] for e in shown["entries"]] == ["n1"]


def test_a_write_after_it_gives_it_its_schema(root: Path, inproc) -> None:
    assert inproc("record", "--kind", "note", "--id", "first", "--text", "x").code == 0
    replica = (root / "replica-id").read_text().strip()
    seg = _blank_segment(root, f"{replica}-000002.sqlite")
    assert inproc("record", "--kind", "note", "--id", "n2", "--text", "y").code == 0
    conn = sqlite3.connect(seg)
    assert conn.execute("SELECT subject FROM events").fetchall() == [("n2",)]


def test_a_file_with_tables_but_no_events_is_unreadable(root: Path, inproc) -> None:
    assert inproc("record", "--kind", "note", "--id", "n1", "--text", "kept").code == 0
    seg = _blank_segment(root)
    conn = sqlite3.connect(seg)
    conn.execute("CREATE TABLE other (x)")
    conn.close()
    report = json.loads(inproc("show", "--json").out)
    assert [u["path"].split("/")[-1] for u in report["unreadable"]] == [seg.name]
    assert inproc("compact", "--apply").code == 1
