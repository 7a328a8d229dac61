"""Sync through a bucket or a shared folder (spec/SYNC.md), against a real S3 endpoint.

moto's server mode runs on a free 127.0.0.1 port for this module; a small
fault-injecting proxy on 127.0.0.1 sits in front of it where failures are
tested. Replicas are real roots; most pushes and pulls go through the library
(fast enough for a property test), and the console script is used where its
exit codes, one-line errors or a real SIGKILL matter.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import uuid
from pathlib import Path

import pytest
from conftest import CLI
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from s3_support import ON_BOTH_SERVERS, FaultProxy, MotoServer, aws_env, plain
from test_replicas import make_root, state

from agent_journal.core.errors import JournalError, RemoteError, UsageError
from agent_journal.ops import compact, remotes, sync, writes
from agent_journal.ops.context import Context

WS = "ws"
MARKER = "PURGEDMARKER"


def new_bucket(s3: MotoServer) -> str:
    name = f"b-{uuid.uuid4().hex[:12]}"
    s3.client().create_bucket(Bucket=name)
    return name


def ctx(root: Path) -> Context:
    return Context(str(root), WS)


def add_remote(root: Path, url: str, endpoint: str | None = None) -> None:
    remotes.add(ctx(root), "origin", url, endpoint_url=endpoint)


def note(root: Path, entry_id: str, text: str | None = None) -> None:
    writes.record(ctx(root), kind="note", entry_id=entry_id,
                  fields={"text": text or f"note {entry_id}"}, anchors=[], depends_on=[],
                  subject=None)


def replicas_with_remote(tmp_path: Path, s3: MotoServer, n: int, bucket: str | None = None,
                         ids: list[str] | None = None) -> tuple[list[Path], str]:
    bucket = bucket or new_bucket(s3)
    roots = []
    for i in range(n):
        root = make_root(tmp_path, f"r{i}-{uuid.uuid4().hex[:6]}", ids[i] if ids else None)
        add_remote(root, f"s3://{bucket}/team", s3.url)
        roots.append(root)
    return roots, bucket


def run_cli(root: Path, *args: str, env: dict[str, str] | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
    full = aws_env(AGENT_JOURNAL_ROOT=str(root), AGENT_JOURNAL_WORKSPACE=WS, **(env or {}))
    return subprocess.run([CLI, *args], capture_output=True, text=True, env=full,
                          timeout=timeout)


def bucket_bytes(s3: MotoServer, bucket: str) -> dict[str, bytes]:
    client = s3.client()
    out = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for item in page.get("Contents", []):
            data = client.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
            out[item["Key"]] = plain(item["Key"], data)
    return out


# -- remotes ----------------------------------------------------------------------------

def test_remote_add_list_remove_keeps_other_config(tmp_path: Path) -> None:
    root = make_root(tmp_path, "a")
    (root / "config.json").write_text(json.dumps(
        {"redact": {"patterns": [{"name": "x", "regex": "ORDER-[0-9]+"}]}}))
    remotes.add(ctx(root), "origin", "s3://my-bucket/some/prefix/", endpoint_url=None)
    remotes.add(ctx(root), "nas", "file:///mnt/share", endpoint_url=None)
    remotes.add(Context(str(root), "other"), "origin", "file:///elsewhere", endpoint_url=None)
    listed = remotes.list_remotes(ctx(root))["remotes"]
    assert listed == [{"name": "nas", "url": "file:///mnt/share"},
                      {"name": "origin", "url": "s3://my-bucket/some/prefix"}]
    config = json.loads((root / "config.json").read_text())
    assert config["redact"]["patterns"][0]["name"] == "x"
    assert not any(k for k in json.dumps(config).lower().split('"') if "secret" in k)
    remotes.remove(ctx(root), "nas")
    assert [r["name"] for r in remotes.list_remotes(ctx(root))["remotes"]] == ["origin"]
    assert remotes.list_remotes(Context(str(root), "other"))["remotes"][0]["url"] == \
        "file:///elsewhere"
    with pytest.raises(JournalError):
        remotes.remove(ctx(root), "nas")


@pytest.mark.parametrize("url", [
    "http://bucket/x", "s3://", "s3://UPPER/x", "s3://ab", "s3://bucket//x", "s3://bucket/../x",
    "s3://bucket/x?y", "file://host/path", "file:relative", "file:///a/../b", " s3://bucket",
    "bucket",
])
def test_malformed_urls_are_usage_errors_with_nothing_written(tmp_path: Path, url: str) -> None:
    root = tmp_path / "never"
    proc = run_cli(root, "remote", "add", "origin", url)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert not root.exists()


def test_bad_names_and_unknown_remotes_are_refused(tmp_path: Path) -> None:
    root = make_root(tmp_path, "a")
    before = sorted(p.name for p in root.rglob("*"))
    for args in (("remote", "add", "-x", "file:///s"), ("remote", "add", "a/b", "file:///s"),
                 ("push", "nope"), ("pull", "nope"), ("sync",), ("remote", "status", "nope"),
                 ("remote", "add", "x", "file:///s", "--endpoint-url", "http://127.0.0.1:1")):
        proc = run_cli(root, *args)
        assert proc.returncode in (1, 2), (args, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1, (args, proc.stderr)
        assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    assert sorted(p.name for p in root.rglob("*")) == before


def test_s3_without_boto3_names_the_extra(tmp_path: Path) -> None:
    root = make_root(tmp_path, "a")
    add_remote(root, "s3://some-bucket/p")
    shim = tmp_path / "noboto"
    (shim / "botocore").mkdir(parents=True)  # boto3's core, what the S3 remote imports
    (shim / "boto3.py").write_text("raise ImportError('hidden for this test')\n")
    (shim / "botocore" / "__init__.py").write_text("raise ImportError('hidden for this test')\n")
    proc = run_cli(root, "pull", env={"PYTHONPATH": str(shim)})
    assert proc.returncode == 1
    assert proc.stderr.strip() == \
        "error: s3:// remotes need boto3: pip install 'agent-journal[s3]'"
    # A shared folder needs nothing of it.
    share = tmp_path / "share"
    share.mkdir(mode=0o700)
    remotes.add(ctx(root), "nas", f"file://{share}", endpoint_url=None)
    note(root, "n")
    proc = run_cli(root, "push", "nas", "--json", env={"PYTHONPATH": str(shim)})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["uploaded"] == 1


# -- push and pull over s3 ----------------------------------------------------------------

def test_push_pull_and_a_second_pull_fetches_nothing(tmp_path: Path, s3, aws) -> None:
    (a, b), bucket = replicas_with_remote(tmp_path, s3, 2)
    note(a, "n1")
    note(b, "n2")
    first = sync.push(ctx(a), None)
    assert first["uploaded"] == 1 and first["manifestWritten"]
    again = sync.push(ctx(a), None)
    assert again["uploaded"] == 0 and not again["manifestWritten"] and not again["deleted"]
    pulled = sync.pull(ctx(b), "origin")
    assert pulled["imported"] == 1 and pulled["fetched"] == 1
    second = sync.pull(ctx(b), "origin")
    assert second["changed"] == 0 and second["fetched"] == 0 and second["merges"] == []
    sync.sync(ctx(b), None)
    sync.pull(ctx(a), None)
    assert state(a) == state(b)
    keys = bucket_bytes(s3, bucket)
    assert all(k.startswith("team/ws/") for k in keys)
    assert sum(k.endswith("/manifest.json") for k in keys) == 2


def test_push_snapshots_only_segments_that_changed(tmp_path: Path, s3, aws,
                                                   monkeypatch) -> None:
    (a, b), _ = replicas_with_remote(tmp_path, s3, 2)
    monkeypatch.setenv("AGENT_JOURNAL_SEGMENT_MAX_BYTES", "40000")
    for n in range(60):
        note(a, f"s{n}", "y" * 1500)
    first = sync.push(ctx(a), None)
    assert first["files"] >= 3 and first["snapshotted"] == first["files"]
    note(a, "one-more")
    second = sync.push(ctx(a), None)
    # The segment that grew sends its new row as a delta; nothing is replaced.
    assert (second["snapshotted"], second["deltas"], second["uploaded"]) == (0, 1, 1)
    assert second["deleted"] == []
    # A new tombstone changes what every snapshot must leave out: all are taken again.
    writes.tombstone(ctx(a), "s0", "gone")
    third = sync.push(ctx(a), None)
    assert third["snapshotted"] == third["files"]
    # Compaction rewrites segments in place: those are taken again, and hold no s0.
    compact.compact(ctx(a), entry_ttl_days=None, observation_ttl_days=None, apply=True)
    fourth = sync.push(ctx(a), None)
    assert 1 <= fourth["snapshotted"] < fourth["files"]
    sync.pull(ctx(b), None)
    assert state(a) == state(b)


@ON_BOTH_SERVERS
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), n=st.sampled_from([2, 5]))
def test_replicas_syncing_in_any_order_converge(tmp_path_factory, s3, data, n) -> None:
    _converge(tmp_path_factory, s3, data, n, max_steps=12)


@pytest.mark.soak
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), n=st.integers(2, 6))
def test_replicas_syncing_in_any_order_converge_soak(tmp_path_factory, s3, data, n) -> None:
    _converge(tmp_path_factory, s3, data, n, max_steps=40)


def _converge(tmp_path_factory, s3, data, n: int, *, max_steps: int) -> None:
    env = aws_env()
    old = {k: os.environ.get(k) for k in env if k.startswith("AWS_")}
    os.environ.update({k: v for k, v in env.items() if k.startswith("AWS_")})
    try:
        base = tmp_path_factory.mktemp("conv")
        roots, _ = replicas_with_remote(base, s3, n)
        written = 0
        steps = data.draw(st.lists(st.tuples(st.sampled_from(["write", "push", "pull", "sync",
                                                              "tombstone"]),
                                             st.integers(0, n - 1)), min_size=3,
                                   max_size=max_steps))
        for op, i in steps:
            if op == "write":
                written += 1
                note(roots[i], f"e{written}")
            elif op == "tombstone" and written:
                target = f"e{data.draw(st.integers(1, written))}"
                try:
                    writes.tombstone(ctx(roots[i]), target, "must not exist")
                except JournalError:
                    pass  # not held here (yet)
            elif op in ("push", "pull", "sync"):
                try:
                    getattr(sync, op)(ctx(roots[i]), None)
                except JournalError as exc:
                    assert "no segments" in str(exc)  # push before this replica wrote
        for _ in range(2):
            for root in roots:
                if (root / "workspaces").exists():
                    sync.sync(ctx(root), None)
                else:
                    sync.pull(ctx(root), None)
        states = {state(r) for r in roots if (r / "workspaces").exists()}
        assert len(states) <= 1
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_concurrent_pushes_never_touch_each_others_keys(tmp_path: Path, s3, aws) -> None:
    roots, bucket = replicas_with_remote(tmp_path, s3, 2)
    for i, root in enumerate(roots):
        for j in range(3):
            note(root, f"x{i}-{j}")
    procs = [subprocess.Popen([CLI, "push"], env=aws_env(AGENT_JOURNAL_ROOT=str(r),
                                                        AGENT_JOURNAL_WORKSPACE=WS),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for r in roots]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    ids = [(r / "replica-id").read_text().strip() for r in roots]
    keys = bucket_bytes(s3, bucket)
    for rid in ids:
        mine = [k for k in keys if k.startswith(f"team/ws/{rid}/")]
        assert f"team/ws/{rid}/manifest.json" in mine and len(mine) == 2
    assert len(keys) == 4
    sync.pull(ctx(roots[0]), None)
    sync.pull(ctx(roots[1]), None)
    assert state(roots[0]) == state(roots[1])


@ON_BOTH_SERVERS
def test_push_killed_at_every_step_leaves_a_remote_everyone_accepts(
        tmp_path: Path, s3, aws, monkeypatch) -> None:
    """Each round rotates a segment, so its push uploads two or three objects,
    writes the manifest and deletes the old snapshot of the last active
    segment: the kill point moves one write further every round."""
    (a, b), bucket = replicas_with_remote(tmp_path, s3, 2)
    monkeypatch.setenv("AGENT_JOURNAL_SEGMENT_MAX_BYTES", "40000")
    step = 1
    n = 0
    writes_seen = 0
    while True:
        for _ in range(12):
            n += 1
            note(a, f"k{n}", "x" * 1500)
        proc = run_cli(a, "push", "--json", env={sync.ENV_KILL_AT: str(step)})
        if proc.returncode == 0:
            pushed = json.loads(proc.stdout)
            writes_seen = pushed["uploaded"] + pushed["manifestWritten"] + len(
                pushed["deleted"])
            break  # the kill point is past the last write: every step was tried
        assert proc.returncode == -signal.SIGKILL, proc.stderr
        pulled = sync.pull(ctx(b), None)  # the interrupted remote is accepted as it is
        assert not pulled["refused"] and not pulled["missing"], pulled
        sync.push(ctx(a), None)  # and the next push completes it
        pulled = sync.pull(ctx(b), None)
        assert not pulled["refused"] and not pulled["missing"]
        assert state(a) == state(b)
        step += 1
    assert step >= 4 and writes_seen < step  # objects, manifest and deletes each interrupted
    sync.pull(ctx(b), None)
    assert state(a) == state(b)
    names = {k.rsplit("/", 1)[-1] for k in bucket_bytes(s3, bucket)}
    assert not any(x.startswith(".") for x in names)


def test_altered_or_truncated_objects_are_refused(tmp_path: Path, s3, aws) -> None:
    (a, b), bucket = replicas_with_remote(tmp_path, s3, 2)
    note(a, "good", "kept")
    sync.push(ctx(a), None)
    client = s3.client()
    rid = (a / "replica-id").read_text().strip()
    manifest = json.loads(client.get_object(
        Bucket=bucket, Key=f"team/ws/{rid}/manifest.json")["Body"].read())
    key = "team/ws/" + rid + "/" + next(iter(manifest["objects"].values()))
    body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
    for bad in (body[: len(body) // 2], body[:-1] + bytes([body[-1] ^ 1])):
        client.put_object(Bucket=bucket, Key=key, Body=bad)
        pulled = sync.pull(ctx(b), None)
        assert [r["key"] for r in pulled["refused"]] == [key.removeprefix("team/")]
        assert pulled["imported"] == 0
        assert not (b / "workspaces" / WS / "segments").exists() or not any(
            (b / "workspaces" / WS / "segments").glob("import-*"))
    proc = run_cli(b, "pull")
    assert proc.returncode == 1 and "failed verification" in proc.stderr
    client.put_object(Bucket=bucket, Key=key, Body=body)
    assert sync.pull(ctx(b), None)["imported"] == 1


def test_a_manifest_claiming_another_replica_is_refused(tmp_path: Path, s3, aws) -> None:
    (a, b), bucket = replicas_with_remote(tmp_path, s3, 2)
    note(a, "n")
    sync.push(ctx(a), None)
    client = s3.client()
    rid = (a / "replica-id").read_text().strip()
    raw = client.get_object(Bucket=bucket, Key=f"team/ws/{rid}/manifest.json")["Body"].read()
    client.put_object(Bucket=bucket, Key="team/ws/rfake00000000000/manifest.json", Body=raw)
    pulled = sync.pull(ctx(b), None)
    assert [r["replica"] for r in pulled["refused"]] == ["rfake00000000000"]
    assert pulled["imported"] == 1


# -- erasure reaching the remote ------------------------------------------------------------

@ON_BOTH_SERVERS
def test_purge_reaches_every_object_and_a_stale_replica_resurrects_nothing(
        tmp_path: Path, s3, aws) -> None:
    # A reader merges replicas in id order: the stale one comes first, before the
    # tombstone's owner.
    (a, b, stale), bucket = replicas_with_remote(
        tmp_path, s3, 3, ids=["rcccccccccccccc1", "rbbbbbbbbbbbbbb2", "raaaaaaaaaaaaaa3"])
    note(a, "secret", f"the key is {MARKER}")
    note(a, "fine", "nothing to hide")
    sync.push(ctx(a), None)
    sync.pull(ctx(b), None)
    sync.pull(ctx(stale), None)
    # The stale replica's own events about the doomed entry: content it will push
    # without ever having seen the tombstone.
    writes.invalidate(ctx(stale), "secret", f"stale says {MARKER}-2")
    note(stale, "own", "stale replica's own note")
    # b holds a's content too, as an import: a push carries only its own segments.
    note(b, "b1")
    sync.push(ctx(b), None)
    assert any(MARKER.encode() in v for v in bucket_bytes(s3, bucket).values())

    writes.tombstone(ctx(a), "secret", "leaked")
    compact.compact(ctx(a), entry_ttl_days=None, observation_ttl_days=None, apply=True)
    pushed = sync.push(ctx(a), None)
    assert pushed["deleted"]
    for key, value in bucket_bytes(s3, bucket).items():
        assert MARKER.encode() not in value, key

    # The stale replica never pulled the tombstone and pushes its own content about it.
    sync.push(ctx(stale), None)
    held = [k for k, v in bucket_bytes(s3, bucket).items() if MARKER.encode() in v]
    rs = (stale / "replica-id").read_text().strip()
    assert held and all(k.startswith(f"team/ws/{rs}/") for k in held)
    assert all(f"{MARKER}-2".encode() in bucket_bytes(s3, bucket)[k] for k in held)
    status = sync.status(ctx(a), None)
    listed = next(r for r in status["replicas"] if r["replica"] == rs)
    assert sorted("team/" + o["key"] for o in listed["objectsHoldingErased"]) == sorted(held)
    assert all(o["tombstoned"] == ["secret"] for o in listed["objectsHoldingErased"])
    # Whoever pulls next, in whatever order the replicas come, withholds it.
    fresh = make_root(tmp_path, "fresh")
    add_remote(fresh, f"s3://{bucket}/team", s3.url)
    pulled = sync.pull(ctx(fresh), None)
    assert pulled["notImported"]
    shown = state(fresh)
    assert MARKER not in shown and "stale replica's own note" in shown
    from conftest import all_bytes_under

    assert MARKER.encode() not in all_bytes_under(fresh)
    sync.pull(ctx(b), None)
    assert MARKER not in state(b)
    # Its owner syncs: the tombstone arrives, its snapshot withholds the invalidation.
    sync.sync(ctx(stale), None)
    assert MARKER not in state(stale)
    for key, value in bucket_bytes(s3, bucket).items():
        assert MARKER.encode() not in value, key


def test_status_lists_objects_pushed_before_a_tombstone(tmp_path: Path, s3, aws) -> None:
    (a, b, c), bucket = replicas_with_remote(tmp_path, s3, 3)
    note(a, "shared")
    note(c, "unrelated")
    sync.push(ctx(c), None)
    sync.push(ctx(a), None)
    sync.pull(ctx(b), None)
    writes.invalidate(ctx(b), "shared", f"wrong because {MARKER}")
    sync.push(ctx(b), None)
    sync.pull(ctx(a), None)
    writes.tombstone(ctx(a), "shared", "must not exist")
    sync.push(ctx(a), None)
    report = sync.status(ctx(a), None)
    rb = (b / "replica-id").read_text().strip()
    other = next(r for r in report["replicas"] if r["replica"] == rb)
    assert other["unseenTombstones"] == ["shared"]
    assert [o["tombstoned"] for o in other["objectsHoldingErased"]] == [["shared"]]
    # c had not seen the tombstone either, but none of its objects is about it.
    rc = (c / "replica-id").read_text().strip()
    third = next(r for r in report["replicas"] if r["replica"] == rc)
    assert third["unseenTombstones"] == ["shared"] and third["objectsHoldingErased"] == []
    assert any(rb in w for w in report["warnings"])
    assert not any(rc in w for w in report["warnings"])
    assert sync.status(ctx(a), None)["replicas"] == report["replicas"]  # from the scan memo
    assert report["versioning"] is None
    # Its owner syncs: its snapshot withholds the invalidation, the old key goes.
    sync.sync(ctx(b), None)
    report = sync.status(ctx(a), None)
    assert all(not r["objectsHoldingErased"] for r in report["replicas"])
    assert not any(w for w in report["warnings"] if "holding" in w)
    for key, value in bucket_bytes(s3, bucket).items():
        assert MARKER.encode() not in value, key


def test_status_warns_when_the_bucket_keeps_versions(tmp_path: Path, s3, aws) -> None:
    (a,), bucket = replicas_with_remote(tmp_path, s3, 1)
    s3.client().put_bucket_versioning(Bucket=bucket,
                                      VersioningConfiguration={"Status": "Enabled"})
    note(a, "n")
    sync.push(ctx(a), None)
    proc = run_cli(a, "remote", "status", "--json")
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["versioning"] == "Enabled"
    assert "versioning is Enabled" in proc.stderr


# -- failures -------------------------------------------------------------------------------

@pytest.fixture
def proxy(s3):
    p = FaultProxy(s3.port).start()
    try:
        yield p
    finally:
        p.stop()


def test_transient_failures_are_retried(tmp_path: Path, s3, proxy, aws) -> None:
    bucket = new_bucket(s3)
    a = make_root(tmp_path, "a")
    add_remote(a, f"s3://{bucket}/p", proxy.url)
    note(a, "n")
    proxy.plan = ["500", "pass", "503", "pass", "429", "pass", "drop", "pass"]
    pushed = sync.push(ctx(a), None)
    assert pushed["manifestWritten"]
    assert proxy.injected == ["500", "503", "429", "drop"]
    b = make_root(tmp_path, "b")
    add_remote(b, f"s3://{bucket}/p", proxy.url)
    proxy.plan = ["503", "pass", "drop"]
    assert sync.pull(ctx(b), None)["imported"] == 1


@pytest.mark.parametrize("fault", ["503", "drop"])
def test_persistent_failures_are_reported_in_one_line(tmp_path: Path, s3, proxy,
                                                      fault: str) -> None:
    bucket = new_bucket(s3)
    a = make_root(tmp_path, "a")
    add_remote(a, f"s3://{bucket}/p", proxy.url)
    env = aws_env(AGENT_JOURNAL_ROOT=str(a), AGENT_JOURNAL_WORKSPACE=WS,
                  AWS_MAX_ATTEMPTS="3")
    subprocess.run([CLI, "record", "--kind", "note", "--id", "n", "--text", "t"], env=env,
                   check=True, capture_output=True)
    before = sorted(str(p) for p in a.rglob("*"))
    proxy.plan = [fault] * 3
    proc = subprocess.run([CLI, "push"], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: remote s3://"), proc.stderr
    assert proxy.injected == [fault] * 3  # three attempts, then the report
    assert sorted(str(p) for p in a.rglob("*")) == before


def test_missing_bucket_and_missing_credentials(tmp_path: Path, s3) -> None:
    a = make_root(tmp_path, "a")
    remotes.add(ctx(a), "gone", "s3://no-such-bucket-here/p", endpoint_url=s3.url)
    remotes.add(ctx(a), "here", f"s3://{new_bucket(s3)}/p", endpoint_url=s3.url)
    before = sorted(str(p) for p in a.rglob("*"))
    proc = run_cli(a, "pull", "gone")
    assert proc.returncode == 1 and "does not exist" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    nocreds = {k: "" for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    env = {k: v for k, v in aws_env().items() if k not in nocreds}
    env.update(AGENT_JOURNAL_ROOT=str(a), AGENT_JOURNAL_WORKSPACE=WS)
    proc = subprocess.run([CLI, "pull", "here"], env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 1 and "no AWS credentials" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert sorted(str(p) for p in a.rglob("*")) == before


# -- the shared-folder backend ----------------------------------------------------------------

def test_a_shared_folder_works_the_same(tmp_path: Path) -> None:
    share = tmp_path / "share"
    share.mkdir(mode=0o750)
    os.chmod(share, 0o750)
    a, b = make_root(tmp_path, "a"), make_root(tmp_path, "b")
    for root in (a, b):
        add_remote(root, f"file://{share}")
    note(a, "s", MARKER)
    note(b, "t")
    sync.sync(ctx(a), None)
    sync.sync(ctx(b), None)
    sync.pull(ctx(a), None)
    assert state(a) == state(b)
    modes = {oct(p.stat().st_mode & 0o777) for p in share.rglob("*") if p.is_file()
             and p.name != ".lock"}
    assert modes == {"0o640"}
    writes.tombstone(ctx(a), "s", "gone")
    compact.compact(ctx(a), entry_ttl_days=None, observation_ttl_days=None, apply=True)
    sync.sync(ctx(a), None)
    from conftest import all_bytes_under

    assert MARKER.encode() not in all_bytes_under(share)
    assert sync.pull(ctx(b), None)["changed"] == 1
    assert sync.pull(ctx(b), None)["changed"] == 0
    proc = run_cli(b, "push", "--json")
    assert proc.returncode == 0
    missing = make_root(tmp_path, "c")
    add_remote(missing, f"file://{tmp_path}/absent")
    proc = run_cli(missing, "pull")
    assert proc.returncode == 1 and "does not exist" in proc.stderr


def test_errors_are_journal_errors() -> None:
    assert issubclass(RemoteError, JournalError)
    with pytest.raises(UsageError):
        from agent_journal.storage.remote import parse_url

        parse_url("ftp://x")


def test_a_first_push_to_another_remote_reads_no_rows_for_tombstones(tmp_path, monkeypatch):
    from agent_journal.ops import export as export_op

    shares = [tmp_path / "one", tmp_path / "two"]
    root = make_root(tmp_path, "a")
    note(root, "s", MARKER)
    note(root, "t")
    writes.tombstone(ctx(root), "s", "gone")
    for n, share in enumerate(shares):
        share.mkdir(mode=0o700)
        remotes.add(ctx(root), f"r{n}", f"file://{share}", endpoint_url=None)
    first = sync.push(ctx(root), "r0")

    def unread(*_a, **_k):
        raise AssertionError("read a segment's rows for its tombstones again")

    def none_read(ws, paths):
        if paths:
            unread()
        return []

    monkeypatch.setattr(export_op, "_candidates", unread)
    monkeypatch.setattr(export_op, "segment_tombstones", none_read)
    second = sync.push(ctx(root), "r1")
    assert (first["withheld"], first["files"], first["snapshotted"]) == \
        (second["withheld"], second["files"], second["snapshotted"]) == (1, 1, 1)
    manifests = [json.loads(next(s.rglob("manifest.json")).read_text())["export"]
                 for s in shares]
    for m in manifests:
        m.pop("createdTs")
    assert manifests[0] == manifests[1]
    from conftest import all_bytes_under

    assert MARKER.encode() not in all_bytes_under(shares[1])


@pytest.mark.parametrize("with_new_segment", [False, True])
def test_a_repeated_push_keeps_the_artifacts_of_segments_it_reuses(
        tmp_path: Path, s3, aws, monkeypatch, with_new_segment: bool) -> None:
    """Issue 31's lost artifacts: a push that reuses an unchanged segment's snapshot
    must still name (and keep in the bucket) the artifacts that segment cites."""
    from agent_journal.ops import evidence

    (a, b), _ = replicas_with_remote(tmp_path, s3, 2)
    big = {n: f"{n}:" + ("z" * 40_000) for n in range(3)}
    for n, text in big.items():
        writes.observe(ctx(a), kind="tool_call", obs_id=f"big-{n}", tool="Bash",
                       call_id=str(n), input_value={"command": f"cat f{n}"}, output=text,
                       status="ok", exit_code=0, duration_ms=1)
    sync.push(ctx(a), None)
    if with_new_segment:
        monkeypatch.setenv("AGENT_JOURNAL_SEGMENT_MAX_BYTES", "4096")
        note(a, "later")
    again = sync.push(ctx(a), None)
    assert again["deleted"] == [] or with_new_segment, again
    sync.pull(ctx(b), None)
    for n, text in big.items():
        assert evidence.get(ctx(b), f"big-{n}").raw == text.encode()


def test_a_manifest_naming_tombstones_with_no_tombstone_behind_them_withholds_nothing(
        tmp_path: Path, s3, aws) -> None:
    """Issue 31's withheld data: a manifest's `tombstoned` list is a summary of
    tombstone events; one that names an id no tombstone event stands behind (a damaged or
    hostile manifest) must not keep another replica's events out of a pull, now or after
    the manifest is repaired."""
    (a, b, c), bucket = replicas_with_remote(tmp_path, s3, 3)
    note(b, "n-b", "b's finding")
    note(a, "n-a")
    sync.push(ctx(b), None)
    sync.push(ctx(a), None)
    client = s3.client()
    rid = (a / "replica-id").read_text().strip()
    key = f"team/ws/{rid}/manifest.json"
    good = client.get_object(Bucket=bucket, Key=key)["Body"].read()
    bad = json.loads(good)
    bad["export"]["tombstoned"] = sorted(set(bad["export"]["tombstoned"]) | {"n-b"})
    client.put_object(Bucket=bucket, Key=key, Body=json.dumps(bad).encode())
    pulled = sync.pull(ctx(c), None)
    assert any("no tombstone" in w for w in pulled["warnings"]), pulled["warnings"]
    client.put_object(Bucket=bucket, Key=key, Body=good)
    sync.pull(ctx(c), None)
    sync.pull(ctx(b), None)
    sync.pull(ctx(a), None)
    assert state(c) == state(b) == state(a)
    assert "b's finding" in state(c)
