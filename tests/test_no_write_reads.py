"""Reads that promise no writes write nothing (issue 29): a dry-run `compact` (refused or
not), a refused `compact --apply`, `coverage` and `doctor` leave every file under the
root byte for byte as it was, and create none; they may read a projection another run
kept."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest
from conftest import CLI, clean_env


def snapshot(root: Path) -> dict[str, tuple[str, int]]:
    """Every path under the root: a file's digest and mode, a folder's mode."""
    found = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        mode = path.stat().st_mode & 0o7777
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
        found[rel] = (digest, mode)
    return found


def run(root: Path, *args: str) -> int:
    import subprocess

    env = clean_env(AGENT_JOURNAL_ROOT=str(root), AGENT_JOURNAL_WORKSPACE="ws")
    return subprocess.run([CLI, *args], env=env, capture_output=True, timeout=120,
                          cwd=root.parent).returncode


@pytest.fixture
def journal(root: Path) -> Path:
    assert run(root, "record", "--kind", "note", "--id", "n1", "--text", "hello") == 0
    for n in range(3):
        assert run(root, "observe", "--kind", "tool_call", "--id", f"o{n}", "--tool", "Bash",
                   "--input", json.dumps({"command": f"echo {n}"}), "--status", "ok") == 0
    assert run(root, "tombstone", "o1", "--reason", "gone") == 0
    return root


READS = [("compact",), ("compact", "--observation-ttl-days", "1"),
         ("compact", "--entry-ttl-days", "0", "--json"), ("coverage",), ("coverage", "--json"),
         ("doctor",)]


@pytest.mark.parametrize("kept", [False, True])
@pytest.mark.parametrize("args", READS)
def test_a_read_that_promises_no_writes_writes_nothing(journal: Path, args, kept) -> None:
    if kept:  # projections another run kept: the read may use them, and changes nothing
        assert run(journal, "compact", "--apply") == 0
        assert run(journal, "decay") == 0
        assert (journal / "cache" / "reads").exists() and (journal / "cache" / "counts").exists()
    before = snapshot(journal)
    run(journal, *args)
    assert snapshot(journal) == before


@pytest.mark.parametrize("args", [("compact",), ("compact", "--apply"), ("compact", "--json"),
                                  ("coverage",), ("coverage", "--json"), ("doctor",)])
def test_a_refused_or_damaged_read_writes_nothing(journal: Path, args) -> None:
    segment = next((journal / "workspaces" / "ws" / "segments").glob("*.sqlite"))
    with sqlite3.connect(segment) as conn:
        conn.execute("UPDATE events SET checksum = 'xxh3-64:0' WHERE seq = 2")
    conn.close()
    before = snapshot(journal)
    code = run(journal, *args)
    assert code == (1 if args[0] == "compact" else 0)
    assert snapshot(journal) == before
