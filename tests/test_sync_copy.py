"""A copied root (same replica id, same prefix) never drops what another root pushed,
and strands nothing of its own: it forks to a new replica id.

spec/SYNC.md "The order of writes" step 2 and "A root copied or restored": a push
replaces its manifest only when its memory knows it as one this root wrote (or,
without that memory, when every snapshot it names is one this root wrote or holds
only events this root's own segments hold); otherwise this root forks. Scenario
tests run against moto's S3 server on 127.0.0.1 (one on SeaweedFS too) and real
processes (exit codes, one-line errors, SIGKILL); the interleaving law runs the
library against a shared folder, where the same push code is exercised faster.
"""

from __future__ import annotations

import json
import shutil
import signal
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from s3_support import ON_BOTH_SERVERS, MotoServer, plain
from test_replicas import make_root
from test_sync import add_remote, bucket_bytes, ctx, new_bucket, note, run_cli

from agent_journal.ops import compact, remotes, sync, writes
from agent_journal.ops.show import show

WS = "ws"


def entry_ids(root: Path) -> set[str]:
    shown, _ = show(ctx(root), observations=False)
    return {e["id"] for e in shown["entries"]}


def files_under(root: Path) -> dict[str, bytes]:
    """Every file's bytes (a segment object's as its reader sees them: s3_support.plain)."""
    return {str(p.relative_to(root)): plain(p.name, p.read_bytes())
            for p in sorted(root.rglob("*")) if p.is_file()}


def fresh_pull(tmp_path: Path, url: str, endpoint: str | None) -> set[str]:
    """What a new replica sees of the remote."""
    fresh = make_root(tmp_path, f"fresh-{uuid.uuid4().hex[:6]}")
    remotes.add(ctx(fresh), "origin", url, endpoint_url=endpoint)
    sync.pull(ctx(fresh), None)
    return entry_ids(fresh) if (fresh / "workspaces").exists() else set()


def pushed_owner(tmp_path: Path, s3: MotoServer, first: str) -> tuple[Path, str, str]:
    """A root with one note, pushed once to a fresh bucket: (root, bucket, url)."""
    bucket = new_bucket(s3)
    url = f"s3://{bucket}/team"
    owner = make_root(tmp_path, "owner")
    add_remote(owner, url, s3.url)
    note(owner, first)
    sync.push(ctx(owner), None)
    return owner, bucket, url


def owner_and_copy(tmp_path: Path, s3: MotoServer) -> tuple[Path, Path, str, str]:
    """An owner that pushed once, and a copy of its root taken right after."""
    owner, bucket, url = pushed_owner(tmp_path, s3, "before-copy")
    copy = tmp_path / "copy"
    shutil.copytree(owner, copy, symlinks=True)
    return owner, copy, bucket, url


def replica_id(root: Path) -> str:
    return (root / "replica-id").read_text().strip()


def views_agree(tmp_path: Path, url: str, endpoint: str, roots: list[Path],
                expected: set[str]) -> None:
    """After a pull each, every root and a fresh replica see exactly `expected`."""
    for root in roots:
        sync.pull(ctx(root), None)
        assert entry_ids(root) == expected, root
    assert fresh_pull(tmp_path, url, endpoint) == expected


@ON_BOTH_SERVERS
def test_a_copy_that_finds_the_owner_pushed_forks_and_strands_nothing(tmp_path, s3,
                                                                      aws) -> None:
    owner, copy, bucket, url = owner_and_copy(tmp_path, s3)
    old = replica_id(owner)
    note(owner, "owner-after")
    sync.push(ctx(owner), None)
    for n in range(10):
        note(copy, f"copy-after-{n}")
    copied = {f"copy-after-{n}" for n in range(10)}

    pushed = run_cli(copy, "push", "--json")
    assert pushed.returncode == 0, pushed.stderr
    report = json.loads(pushed.stdout)
    new = replica_id(copy)
    assert new != old and replica_id(owner) == old
    assert report["forked"]["from"] == old and report["forked"]["to"] == new
    assert report["replica"] == new and "not one this root wrote" in report["forked"]["why"]
    assert "is now replica" in pushed.stderr  # the warning, one line
    keys = bucket_bytes(s3, bucket)
    assert f"team/{WS}/{new}/manifest.json" in keys
    # The owner is not refused: it goes on under its id, and sees the copy's events.
    note(owner, "owner-later")
    assert sync.push(ctx(owner), None)["forked"] is None
    note(copy, "copy-later")
    assert sync.push(ctx(copy), None)["forked"] is None
    views_agree(tmp_path, url, s3.url, [owner, copy],
                {"before-copy", "owner-after", "owner-later", "copy-later"} | copied)
    assert replica_id(owner) == old


def test_the_owner_forks_when_a_copy_pushed_first(tmp_path, s3, aws) -> None:
    # Whoever pushes second after the histories parted forks, the owner too: the
    # copy's events stay under the old id, the owner's go under its new one.
    owner, copy, _, url = owner_and_copy(tmp_path, s3)
    old = replica_id(owner)
    note(copy, "copy-after")
    assert sync.push(ctx(copy), None)["forked"] is None
    note(owner, "owner-after")
    assert sync.push(ctx(owner), None)["forked"]["from"] == old
    assert replica_id(copy) == old and replica_id(owner) != old
    views_agree(tmp_path, url, s3.url, [owner, copy],
                {"before-copy", "copy-after", "owner-after"})


def test_a_stale_copy_that_pulls_before_it_pushes_never_takes_the_prefix(
        tmp_path, s3, aws) -> None:
    # `sync` pulls first: the copy's pull skips its own (the owner's) prefix, then
    # its push finds the owner's manifest and forks, and pulls that prefix at once.
    owner, copy, bucket, url = owner_and_copy(tmp_path, s3)
    old = replica_id(owner)
    note(owner, "owner-after")
    sync.push(ctx(owner), None)
    owners_manifest = bucket_bytes(s3, bucket)[f"team/{WS}/{old}/manifest.json"]
    note(copy, "copy-after")
    synced = run_cli(copy, "sync", "--json")
    assert synced.returncode == 0, synced.stderr
    assert json.loads(synced.stdout)["push"]["forked"]["from"] == old
    assert bucket_bytes(s3, bucket)[f"team/{WS}/{old}/manifest.json"] == owners_manifest
    assert entry_ids(copy) == {"before-copy", "owner-after", "copy-after"}
    note(owner, "owner-later")
    assert run_cli(owner, "sync").returncode == 0, "the owner is never refused"
    assert replica_id(owner) == old
    views_agree(tmp_path, url, s3.url, [owner, copy],
                {"before-copy", "owner-after", "copy-after", "owner-later"})


def test_a_root_restored_from_an_older_backup_forks(tmp_path, s3, aws) -> None:
    owner, backup, _, url = owner_and_copy(tmp_path, s3)
    note(owner, "after-backup")
    sync.push(ctx(owner), None)
    shutil.rmtree(owner)
    shutil.move(backup, owner)  # the disk died; last week's backup takes its place
    note(owner, "after-restore")
    pushed = run_cli(owner, "push")
    assert pushed.returncode == 0 and "restored from a backup" in pushed.stderr, pushed
    assert fresh_pull(tmp_path, url, s3.url) == {"before-copy", "after-backup",
                                                 "after-restore"}


def test_a_copy_holding_content_the_owner_erased_pulls_before_it_pushes(
        tmp_path, s3, aws) -> None:
    bucket = new_bucket(s3)
    url = f"s3://{bucket}/team"
    owner = make_root(tmp_path, "owner")
    add_remote(owner, url, s3.url)
    note(owner, "secret", "note MARKSECRET")
    note(owner, "kept")
    sync.push(ctx(owner), None)
    copy = tmp_path / "copy"
    shutil.copytree(owner, copy, symlinks=True)
    writes.tombstone(ctx(owner), "secret", "leaked")
    compact.compact(ctx(owner), entry_ttl_days=None, observation_ttl_days=None, apply=True)
    sync.push(ctx(owner), None)
    note(copy, "copy-after")
    pushed = run_cli(copy, "push")
    assert pushed.returncode == 1, pushed
    assert "pull first" in pushed.stderr and len(pushed.stderr.strip().splitlines()) == 1
    assert replica_id(copy) != replica_id(owner)  # forked, nothing pushed
    assert not any(b"MARKSECRET" in v for v in bucket_bytes(s3, bucket).values())
    # Pushing again without the pull changes nothing: the new id's push is refused too.
    again = run_cli(copy, "push")
    assert again.returncode == 1 and "pull first" in again.stderr, again
    assert "is now replica" not in again.stderr  # no second fork
    assert not any(b"MARKSECRET" in v for v in bucket_bytes(s3, bucket).values())
    synced = run_cli(copy, "sync", "--json")
    assert synced.returncode == 0, synced.stderr
    assert not any(b"MARKSECRET" in v for v in bucket_bytes(s3, bucket).values())
    views_agree(tmp_path, url, s3.url, [owner, copy], {"kept", "copy-after"})


def test_the_owner_keeps_pushing_after_compaction_and_without_its_memory(
        tmp_path, s3, aws) -> None:
    # The erasure path replaces every purged snapshot; a lost remotes/ folder (or
    # one written by an older version) costs a check of the snapshots, not a refusal.
    bucket = new_bucket(s3)
    url = f"s3://{bucket}/team"
    owner = make_root(tmp_path, "owner")
    add_remote(owner, url, s3.url)
    for n in range(3):
        note(owner, f"n{n}", f"note {n} MARK{n}")
    sync.push(ctx(owner), None)
    writes.tombstone(ctx(owner), "n0", "leaked")
    compact.compact(ctx(owner), entry_ttl_days=None, observation_ttl_days=None, apply=True)
    pushed = sync.push(ctx(owner), None)
    assert pushed["manifestWritten"] and pushed["deleted"]
    assert not any(b"MARK0" in v for v in bucket_bytes(s3, bucket).values())
    note(owner, "n3")
    state = owner / "workspaces" / WS / "remotes"
    shutil.rmtree(state)
    assert sync.push(ctx(owner), None)["manifestWritten"]
    note(owner, "n4")
    assert sync.push(ctx(owner), None)["manifestWritten"]
    assert fresh_pull(tmp_path, url, s3.url) == {"n1", "n2", "n3", "n4"}


def test_a_copy_without_push_memory_forks_too(tmp_path, s3, aws) -> None:
    owner, copy, _, url = owner_and_copy(tmp_path, s3)
    note(owner, "owner-after")
    sync.push(ctx(owner), None)
    shutil.rmtree(copy / "workspaces" / WS / "remotes")
    note(copy, "copy-after")
    assert "event(s) this root does not hold" in sync.push(ctx(copy), None)["forked"]["why"]
    assert fresh_pull(tmp_path, url, s3.url) == {"before-copy", "owner-after", "copy-after"}


@pytest.mark.parametrize("point", ["before-manifest", "after-manifest"])
def test_a_push_killed_around_its_manifest_write_never_locks_the_owner_out(
        tmp_path, s3, aws, point) -> None:
    owner, bucket, url = pushed_owner(tmp_path, s3, "first")
    note(owner, "second")
    killed = run_cli(owner, "push", env={sync.ENV_KILL_AT: point})
    assert killed.returncode == -signal.SIGKILL, killed
    manifests = [json.loads(v) for k, v in bucket_bytes(s3, bucket).items()
                 if k.endswith("/manifest.json")]
    assert len(manifests) == 1
    landed = manifests[0]["export"]["files"][0]["events"] + sum(
        d["events"] for chain in manifests[0].get("deltas", {}).values() for d in chain) == 2
    assert landed == (point == "after-manifest")
    note(owner, "third")
    pushed = run_cli(owner, "push", "--json")
    assert pushed.returncode == 0, pushed.stderr
    assert json.loads(pushed.stdout)["manifestWritten"]
    assert fresh_pull(tmp_path, url, s3.url) == {"first", "second", "third"}


# -- the law: interleaved pushes of an owner and its copies lose nothing acknowledged ---

STEPS = st.lists(st.tuples(st.sampled_from(["write", "push", "copy", "forget"]),
                           st.integers(0, 3)), min_size=3, max_size=14)
# The two ways a copy lost events before push checked its manifest: the copy
# pushing after the owner, and the owner pushing after the copy (memory lost too).
COPY_PUSHES_LAST = [("copy", 0), ("write", 0), ("push", 0), ("write", 1), ("push", 1)]
OWNER_PUSHES_LAST = [("copy", 0), ("write", 1), ("push", 1), ("forget", 0), ("write", 0),
                     ("push", 0)]


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@example(steps=COPY_PUSHES_LAST)
@example(steps=OWNER_PUSHES_LAST)
@given(steps=STEPS)
def test_interleaved_pushes_never_lose_an_acknowledged_event(tmp_path_factory, steps) -> None:
    _interleave(tmp_path_factory, steps)


@pytest.mark.soak
@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(steps=st.lists(st.tuples(st.sampled_from(["write", "push", "copy", "forget"]),
                                st.integers(0, 3)), min_size=3, max_size=40))
def test_interleaved_pushes_never_lose_an_acknowledged_event_soak(tmp_path_factory,
                                                                  steps) -> None:
    _interleave(tmp_path_factory, steps)


def _interleave(tmp_path_factory, steps: list[tuple[str, int]]) -> None:
    """Every root shares one replica id: root 0 wrote and pushed one event, and each
    "copy" step copies an existing root (up to four roots). A step's number picks
    one of the roots there are. An event is acknowledged once a push from a root
    holding it succeeded; a fresh pull must see every acknowledged event. "forget"
    deletes a root's push memory (its remotes/ folder)."""
    base = tmp_path_factory.mktemp("copies")
    share = base / "share"
    share.mkdir(mode=0o700)
    roots = [make_root(base, "r0")]
    remotes.add(ctx(roots[0]), "origin", f"file://{share}", endpoint_url=None)
    note(roots[0], "e0")
    sync.push(ctx(roots[0]), None)
    held: list[set[str]] = [{"e0"}]
    acknowledged = {"e0"}
    for n, (op, pick) in enumerate(steps, 1):
        i = pick % len(roots)
        root = roots[i]
        if op == "copy" and len(roots) < 4:
            roots.append(base / f"r{len(roots)}")
            shutil.copytree(root, roots[-1], symlinks=True)
            held.append(set(held[i]))
        elif op == "write":
            note(root, f"e{n}")
            held[i].add(f"e{n}")
        elif op == "forget":
            shutil.rmtree(root / "workspaces" / WS / "remotes", ignore_errors=True)
        elif op == "push":
            sync.push(ctx(root), None)  # never refused: a copy forks
            acknowledged |= held[i]
    seen = fresh_pull(base, f"file://{share}", None)
    assert sorted(acknowledged - seen) == []
    # And every event any root wrote reaches the remote once each root pushes.
    for root in roots:
        sync.push(ctx(root), None)
    assert fresh_pull(base, f"file://{share}", None) == set().union(*held)
