"""Deltas (spec/SYNC.md, "Deltas"): a segment that grew since its push sends only its
new rows, as an object of their own, and a pull fetches only those; an erasure still
takes every snapshot again and deletes the chains; an old bucket (format 1) still
pulls. Through a shared folder (the push and pull code is the one S3 uses) and, for
the byte counts, moto's S3 server."""

from __future__ import annotations

import json
import sqlite3
import uuid
from pathlib import Path

import pytest
from s3_support import ON_BOTH_SERVERS, plain
from test_replicas import make_root, state
from test_sync import add_remote, bucket_bytes, ctx, note, replicas_with_remote
from test_sync_copy import entry_ids, files_under

from agent_journal.core import push_plan as pp
from agent_journal.ops import compact, remotes, sync, writes

WS = "ws"


def share_and_roots(tmp_path: Path, n: int) -> tuple[Path, list[Path]]:
    share = tmp_path / "share"
    share.mkdir(mode=0o700)
    roots = []
    for i in range(n):
        root = make_root(tmp_path, f"r{i}-{uuid.uuid4().hex[:6]}")
        add_remote(root, f"file://{share}")
        roots.append(root)
    return share, roots


def test_a_grown_segment_travels_as_its_new_rows_only(tmp_path: Path) -> None:
    share, (a, b) = share_and_roots(tmp_path, 2)
    for n in range(30):
        note(a, f"n{n}", "x" * 400)
    first = sync.push(ctx(a), None)
    assert (first["snapshotted"], first["deltas"]) == (1, 0)
    assert sync.pull(ctx(b), None)["imported"] == 30
    for round_ in range(3):
        note(a, f"more{round_}", "y" * 400)
        pushed = sync.push(ctx(a), None)
        assert (pushed["snapshotted"], pushed["deltas"], pushed["uploaded"]) == (0, 1, 1)
        assert pushed["uploadedBytes"] < 2_000  # one row, compressed; the segment is ~40 KB
        assert pushed["deleted"] == []
        pulled = sync.pull(ctx(b), None)
        assert (pulled["fetched"], pulled["imported"]) == (1, 1)
        assert pulled["fetchedBytes"] == pushed["uploadedBytes"]
    assert state(a) == state(b)
    # A replica that comes later fetches the base and every delta, and sees all of it.
    late = make_root(tmp_path, "late")
    add_remote(late, f"file://{share}")
    got = sync.pull(ctx(late), None)
    assert (got["fetched"], got["imported"]) == (4, 33)
    assert state(late) == state(a)


def test_nothing_new_sends_nothing_and_a_push_killed_before_its_manifest_is_redone(
        tmp_path: Path) -> None:
    from test_sync import run_cli

    share, (a, b) = share_and_roots(tmp_path, 2)
    note(a, "first")
    sync.push(ctx(a), None)
    again = sync.push(ctx(a), None)
    assert (again["deltas"], again["uploaded"], again["manifestWritten"]) == (0, 0, False)
    note(a, "second")
    killed = run_cli(a, "push", env={sync.ENV_KILL_AT: "before-manifest"})
    assert killed.returncode != 0
    note(a, "third")
    redone = sync.push(ctx(a), None)
    assert redone["manifestWritten"] and redone["deltas"] == 1
    sync.pull(ctx(b), None)
    assert entry_ids(b) == {"first", "second", "third"}
    # The delta the killed push uploaded (its memory saved first) is the chain's first.
    listed = {p.name for p in share.rglob("*.delta")}
    manifest = json.loads(next((share / WS).glob("*/manifest.json")).read_bytes())
    named = {k.rsplit("/", 1)[-1] for k in manifest["objects"].values() if k.endswith(".delta")}
    assert listed == named and len(named) == 2


def test_an_erasure_takes_the_snapshots_again_and_deletes_the_chains(tmp_path: Path) -> None:
    share, (a, b) = share_and_roots(tmp_path, 2)
    note(a, "keep")
    sync.push(ctx(a), None)
    note(a, "secret", "PURGEDMARKER in a delta")
    assert sync.push(ctx(a), None)["deltas"] == 1
    assert any(p.suffix == ".delta" for p in share.rglob("*"))
    writes.tombstone(ctx(a), "secret", "gone")
    compact.compact(ctx(a), entry_ttl_days=None, observation_ttl_days=None, apply=True)
    pushed = sync.push(ctx(a), None)
    assert pushed["snapshotted"] == pushed["files"] and pushed["deltas"] == 0
    manifest = json.loads(next((share / WS).glob("*/manifest.json")).read_bytes())
    assert "deltas" not in manifest
    assert not any(p.suffix == ".delta" for p in share.rglob("*"))
    assert not any(b"PURGEDMARKER" in data for data in files_under(share).values())
    sync.pull(ctx(b), None)
    assert entry_ids(b) == {"keep"}
    # ... and deltas start again after the new base.
    note(a, "after")
    assert sync.push(ctx(a), None)["deltas"] == 1
    sync.pull(ctx(b), None)
    assert entry_ids(b) == {"keep", "after"}


@pytest.mark.parametrize("deleted", ["one", "two"])
def test_rows_gone_below_the_tip_end_the_chain(tmp_path: Path, deleted: str) -> None:
    """Rows deleted below the tip (as a compaction's expiry deletes them, here with no
    erasure generation to tell) are caught by the tip's check: the segment is
    snapshotted whole, so the rows leave the bucket, and nothing new is lost; the
    tip's own row deleted and its seq taken again by a new row is caught too."""
    share, (a, b) = share_and_roots(tmp_path, 2)
    note(a, "one")
    sync.push(ctx(a), None)
    note(a, "two")
    assert sync.push(ctx(a), None)["deltas"] == 1
    segment = next((a / "workspaces" / WS / "segments").glob("*.sqlite"))
    conn = sqlite3.connect(segment)
    with conn:
        conn.execute("DELETE FROM events WHERE subject = ?", (deleted,))
    conn.close()
    note(a, "three")
    pushed = sync.push(ctx(a), None)
    assert (pushed["deltas"], pushed["snapshotted"]) == (0, 1)
    assert not any(p.suffix == ".delta" for p in share.rglob("*"))
    fresh = make_root(tmp_path, "fresh")
    add_remote(fresh, f"file://{share}")
    sync.pull(ctx(fresh), None)
    assert entry_ids(fresh) == {"one", "two", "three"} - {deleted}


def test_a_tampered_delta_is_refused_and_the_rest_still_merges(tmp_path: Path) -> None:
    share, (a, b) = share_and_roots(tmp_path, 2)
    note(a, "base")
    sync.push(ctx(a), None)
    note(a, "d1")
    sync.push(ctx(a), None)
    delta = next(share.rglob("*.delta"))
    delta.chmod(0o600)
    delta.write_bytes(b"\x00" * delta.stat().st_size)  # same size, other bytes
    pulled = sync.pull(ctx(b), None)
    assert [r["reason"] for r in pulled["refused"]] == [
        "size or checksum does not match its manifest"]
    assert entry_ids(b) == {"base"}


def as_format_1(share: Path, root: Path) -> None:
    """Rewrite what `root` pushed as a version before deltas wrote it: snapshots sent as
    they are, manifests of format 1, a push memory without tips or chains."""
    for path in (share / WS).glob("*/manifest.json"):
        manifest = json.loads(path.read_bytes())
        assert "deltas" not in manifest
        manifest["syncFormat"] = 1
        for f in manifest["export"]["files"]:
            packed = path.parent / manifest["objects"][f["name"]]
            f.pop("packed")
            manifest["objects"][f["name"]] = pp.segment_key(f["name"], f["checksum"])
            (path.parent / manifest["objects"][f["name"]]).write_bytes(
                plain(packed.name, packed.read_bytes()))
            packed.unlink()
        path.write_text(json.dumps(manifest))
    memory = root / "workspaces" / WS / "remotes" / "origin" / "pushed.json"
    old = json.loads(memory.read_bytes())
    old["manifests"] = [pp.manifest_digest(path.read_bytes())
                        for path in (share / WS).glob("*/manifest.json")]
    for seg in old["segments"].values():
        for key in ("tip", "generation", "deltas"):
            seg.pop(key)
        seg["entry"].pop("packed")
    memory.write_text(json.dumps(old))


def test_a_bucket_of_format_1_still_pulls_and_is_extended(tmp_path: Path) -> None:
    """A manifest an older version wrote (format 1, a push memory without tips) pulls
    as before; the first push of this version snapshots once, then sends deltas."""
    share, (a, b) = share_and_roots(tmp_path, 2)
    note(a, "old")
    sync.push(ctx(a), None)
    as_format_1(share, a)
    assert sync.pull(ctx(b), None)["imported"] == 1
    note(a, "new")
    first = sync.push(ctx(a), None)
    assert (first["snapshotted"], first["deltas"]) == (1, 0)
    note(a, "newer")
    assert sync.push(ctx(a), None)["deltas"] == 1
    sync.pull(ctx(b), None)
    assert entry_ids(b) == {"old", "new", "newer"}


@ON_BOTH_SERVERS
def test_bytes_through_s3_are_those_of_the_new_rows(tmp_path: Path, s3, aws) -> None:
    (a, b), bucket = replicas_with_remote(tmp_path, s3, 2)
    for n in range(200):
        note(a, f"n{n}", f"finding {n} " + "z" * 300)
    sync.push(ctx(a), None)
    sync.pull(ctx(b), None)
    before = bucket_bytes(s3, bucket)
    for n in range(5):
        note(a, f"new{n}", f"later finding {n} " + "q" * 300)
    pushed = sync.push(ctx(a), None)
    added = [k for k in bucket_bytes(s3, bucket) if k not in before]
    assert len(added) == 1 and added[0].endswith(".delta")
    size = s3.client().head_object(Bucket=bucket, Key=added[0])["ContentLength"]
    pulled = sync.pull(ctx(b), None)
    assert pulled["fetchedBytes"] == pushed["uploadedBytes"] == size
    # Five rows of ~330 bytes, compressed.
    assert size < 5 * 330
    assert pulled["imported"] == 5
    assert state(a) == state(b)
    remotes.remove(ctx(a), "origin")


def test_a_pull_killed_while_it_fetches_deltas_loses_nothing(tmp_path: Path) -> None:
    """A pull SIGKILLed once its staging folder is there (fetching, joining or merging
    deltas): the next pull brings every event, and the killed one's stage is gone."""
    import os
    import signal
    import subprocess
    import time

    from conftest import CLI
    from s3_support import aws_env

    share, (a, b) = share_and_roots(tmp_path, 2)
    note(a, "base", "b" * 300)
    sync.push(ctx(a), None)
    sync.pull(ctx(b), None)
    for k in range(3):  # three deltas of a segment b holds the base of
        for n in range(40):
            note(a, f"d{k}-{n}", "d" * 300)
        assert sync.push(ctx(a), None)["deltas"] == 1
    remotes_dir = b / "workspaces" / WS / "remotes" / "origin"
    env = aws_env(AGENT_JOURNAL_ROOT=str(b), AGENT_JOURNAL_WORKSPACE=WS)
    proc = subprocess.Popen([CLI, "pull"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        if any(p.name.startswith(".pull-") for p in remotes_dir.glob(".pull-*")):
            os.kill(proc.pid, signal.SIGKILL)
            break
    killed = proc.wait(timeout=60) == -signal.SIGKILL
    again = sync.pull(ctx(b), None)
    assert killed or again["fetched"] == 0  # (a pull quicker than the poll: nothing left)
    assert not again["refused"] and not again["missing"]
    assert state(a) == state(b)
    assert not list(remotes_dir.glob(".pull-*"))


def test_an_object_that_inflates_past_its_bound_is_refused(tmp_path: Path) -> None:
    """A delta inflates to at most MAX_INFLATED, a packed snapshot to the bytes its
    entry names: a small object that would inflate to more (a zip bomb) is cut off."""
    import zlib

    from agent_journal.ops.sync_deltas import inflate

    bomb = tmp_path / "bomb"
    bomb.write_bytes(zlib.compress(b"\0" * 5_000_000, 9))
    assert bomb.stat().st_size < 10_000
    assert inflate(str(bomb), str(tmp_path / "out1"), 1_000_000) == \
        "it inflates past 1000000 bytes"
    assert inflate(str(bomb), str(tmp_path / "out2"), 5_000_000) is None
    torn = tmp_path / "torn"
    torn.write_bytes(bomb.read_bytes()[:-4])
    assert inflate(str(torn), str(tmp_path / "out3")) == "it is not one whole zlib stream"
