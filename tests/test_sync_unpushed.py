"""`remote status` counts what this root wrote that the remote does not hold yet
(spec/cli-json.md, `unpushed`), through a shared folder: the rows above where each
pushed snapshot ends, less what a tombstone withholds, as text and JSON."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from test_replicas import make_root
from test_sync import add_remote, ctx, note, run_cli

from agent_journal.ops import compact, sync, writes

WS = "ws"


def shared_root(tmp_path: Path, name: str = "a") -> Path:
    share = tmp_path / "share"
    share.mkdir(mode=0o700, exist_ok=True)
    root = make_root(tmp_path, name)
    add_remote(root, f"file://{share}")
    return root


def unpushed(root: Path) -> dict[str, int]:
    got = sync.status(ctx(root), None)["unpushed"]
    assert got is not None
    return got


def own_rows(root: Path) -> list[tuple[int, int]]:
    """(seq, body size) of every row of the root's own segments, in order."""
    rid = (root / "replica-id").read_text().strip()
    rows = []
    for path in sorted((root / "workspaces" / WS / "segments").glob(f"{rid}-*.sqlite")):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        rows += conn.execute("SELECT seq, length(body) FROM events ORDER BY seq").fetchall()
        conn.close()
    return rows


def test_every_event_is_unpushed_until_a_push_takes_it(tmp_path) -> None:
    root = shared_root(tmp_path)
    for n in range(3):
        note(root, f"n{n}")
    sizes = [size for _, size in own_rows(root)]
    assert unpushed(root) == {"segments": 1, "events": 3, "bytes": sum(sizes)}
    sync.push(ctx(root), None)
    assert unpushed(root) == {"segments": 0, "events": 0, "bytes": 0}
    note(root, "n3")
    note(root, "n4")
    new = [size for _, size in own_rows(root)][3:]
    assert unpushed(root) == {"segments": 1, "events": 2, "bytes": sum(new)}
    sync.push(ctx(root), None)
    assert unpushed(root)["events"] == 0


def test_a_tombstone_counts_and_what_it_withholds_does_not(tmp_path) -> None:
    root = shared_root(tmp_path)
    note(root, "kept")
    sync.push(ctx(root), None)
    writes.tombstone(ctx(root), "kept", "leaked")
    assert unpushed(root)["events"] == 1  # the tombstone; the pushed row it names is not
    note(root, "never")
    writes.tombstone(ctx(root), "never", "leaked")
    assert unpushed(root)["events"] == 2  # two tombstones; "never" no push would send
    compact.compact(ctx(root), entry_ttl_days=None, observation_ttl_days=None, apply=True)
    assert unpushed(root)["events"] == 2
    pushed = sync.push(ctx(root), None)
    assert pushed["withheld"] == 0 and unpushed(root)["events"] == 0


def test_new_segments_count_whole_and_a_lost_memory_counts_from_the_manifest(
        tmp_path, monkeypatch) -> None:
    root = shared_root(tmp_path)
    monkeypatch.setenv("AGENT_JOURNAL_SEGMENT_MAX_BYTES", "1")  # a segment per write
    note(root, "n0")
    note(root, "n1")
    sync.push(ctx(root), None)
    note(root, "n2")
    note(root, "n3")
    assert unpushed(root) == {"segments": 2, "events": 2,
                              "bytes": sum(size for _, size in own_rows(root)[2:])}
    (root / "workspaces" / WS / "remotes" / "origin" / "pushed.json").unlink()
    assert unpushed(root)["events"] == 2
    sync.push(ctx(root), None)
    assert unpushed(root)["events"] == 0


def test_status_says_it_in_text_and_json(tmp_path) -> None:
    root = shared_root(tmp_path)
    note(root, "n0")
    proc = run_cli(root, "remote", "status", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["unpushed"]["events"] == 1 and doc["unpushed"]["segments"] == 1
    text = run_cli(root, "remote", "status").stdout
    assert (f"  not pushed yet from this root: 1 event ({doc['unpushed']['bytes']} bytes) "
            "in 1 segment\n") in text
    fresh = make_root(tmp_path, "fresh")
    add_remote(fresh, f"file://{tmp_path / 'share'}")
    assert sync.status(ctx(fresh), None)["unpushed"] is None  # nothing written here
