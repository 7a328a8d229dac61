"""What a pull with nothing new costs in requests, whatever the number of replicas
(spec/SYNC.md, "What a reader may assume"): one listing of the workspace tells
which manifests changed. Counted at a proxy in front of moto's S3 server."""

from __future__ import annotations

import json

from s3_support import ON_BOTH_SERVERS, FaultProxy
from test_replicas import make_root
from test_sync import add_remote, ctx, new_bucket, note

from agent_journal.ops import sync

WS = "ws"
REPLICAS = 120


def empty_manifest(replica: str) -> bytes:
    export = {"format": 1, "workspace": WS, "sourceReplica": replica, "files": [],
              "artifacts": [], "tombstoned": []}
    return json.dumps({"syncFormat": 1, "workspace": WS, "replica": replica,
                       "pushedTs": "2026-01-01T00:00:00.000Z", "export": export,
                       "objects": {}}).encode()


@ON_BOTH_SERVERS
def test_a_pull_with_nothing_new_lists_once_whatever_the_number_of_replicas(
        tmp_path, s3, aws) -> None:
    bucket = new_bucket(s3)
    client = s3.client()
    for n in range(REPLICAS):
        replica = f"r{n:015x}"
        client.put_object(Bucket=bucket, Key=f"team/{WS}/{replica}/manifest.json",
                          Body=empty_manifest(replica))
    proxy = FaultProxy(s3.port).start()
    try:
        a, b = make_root(tmp_path, "a"), make_root(tmp_path, "b")
        for root in (a, b):
            add_remote(root, f"s3://{bucket}/team", proxy.url)
        note(a, "n1")
        sync.push(ctx(a), None)
        first = sync.pull(ctx(b), None)
        assert (first["replicas"], first["changed"], first["imported"]) == (REPLICAS + 1,
                                                                          REPLICAS + 1, 1)
        proxy.requests = 0
        again = sync.pull(ctx(b), None)
        assert (again["replicas"], again["changed"], again["fetched"]) == (REPLICAS + 1, 0, 0)
        assert proxy.requests == 1, proxy.requests  # one listing (it checks the bucket too)
        note(a, "n2")
        sync.push(ctx(a), None)
        proxy.requests = 0
        third = sync.pull(ctx(b), None)
        assert (third["changed"], third["imported"]) == (1, 1)
        assert proxy.requests == 3  # and the one manifest that changed, and its delta
        sync.pull(ctx(a), None)
        proxy.requests = 0
        synced = sync.sync(ctx(a), None)
        assert not synced["push"]["manifestWritten"]
        assert proxy.requests == 3  # the listing, the own prefix and manifest
    finally:
        proxy.stop()


THOUSAND = 1_000


def test_a_pull_with_nothing_new_among_a_thousand_replicas_makes_at_most_three_requests(
        tmp_path, s3, aws) -> None:
    """1,000 small replicas, 999 of them listing as much as a replica can (its manifest, and
    objects under both segments/ and artifacts/: here the leftovers of an interrupted
    push, which no manifest names) and one real one: a pull with nothing new makes
    its one listing, 2,999 keys and prefixes in three pages of 1,000, and nothing else.
    (The puller's memory of the 999 is written as a pull of them leaves it, to keep
    the test short: the test of 120 replicas pulls them for real.)"""
    from concurrent.futures import ThreadPoolExecutor

    bucket = new_bucket(s3)
    client = s3.client()

    def put(n: int) -> tuple[str, str]:
        replica = f"r{n:015x}"
        base = f"team/{WS}/{replica}/"
        etag = client.put_object(Bucket=bucket, Key=base + "manifest.json",
                                 Body=empty_manifest(replica))["ETag"]
        client.put_object(Bucket=bucket, Key=base + f"segments/{replica}-000001.x.sqlite",
                          Body=b"left over")
        client.put_object(Bucket=bucket, Key=base + "artifacts/sha256/00", Body=b"left over")
        return replica, etag

    with ThreadPoolExecutor(max_workers=8) as pool:
        etags = dict(pool.map(put, range(THOUSAND - 1)))  # and a: 1,000 replicas
    proxy = FaultProxy(s3.port).start()
    try:
        a, b = make_root(tmp_path, "a"), make_root(tmp_path, "b")
        for root in (a, b):
            add_remote(root, f"s3://{bucket}/team", proxy.url)
        state = b / "workspaces" / WS / "remotes" / "origin" / "state.json"
        state.parent.mkdir(parents=True, mode=0o700)
        state.write_text(json.dumps({"url": f"s3://{bucket}/team", "replicas": {
            r: {"etag": e, "merged": [], "tombstoned": []} for r, e in etags.items()}}))
        note(a, "n1")
        sync.push(ctx(a), None)
        first = sync.pull(ctx(b), None)
        assert (first["replicas"], first["imported"]) == (THOUSAND, 1)
        proxy.requests = 0
        again = sync.pull(ctx(b), None)
        assert (again["replicas"], again["changed"], again["fetched"]) == (THOUSAND, 0, 0)
        assert proxy.requests <= 3, proxy.requests
    finally:
        proxy.stop()


KEYS = ["ws/r1/manifest.json", "ws/r1/segments/a.sqlite", "ws/r1/artifacts/sha256/ab",
        "ws/abcs/manifest.json", "ws/r2/x", "ws/top", "ws/r3/deep/er/file", "other/r4/y"]


def test_a_shared_folder_lists_as_the_bucket_does(tmp_path, s3, aws) -> None:
    from agent_journal.storage.remote_file import FolderRemote
    from agent_journal.storage.remote_s3 import S3Remote

    bucket = new_bucket(s3)
    client = s3.client()
    folder = tmp_path / "share"
    for key in KEYS:
        client.put_object(Bucket=bucket, Key=f"p/{key}", Body=key.encode())
        (folder / key).parent.mkdir(parents=True, exist_ok=True)
        (folder / key).write_bytes(key.encode())
    in_bucket = S3Remote(f"s3://{bucket}/p", bucket, "p", endpoint_url=s3.url)
    in_folder = FolderRemote(f"file://{folder}", str(folder))
    for delimiter in ("s/", "/", "e"):
        got = [in_bucket.list_tops("ws/", delimiter), in_folder.list_tops("ws/", delimiter)]
        assert sorted(got[0].etags) == sorted(got[1].etags), delimiter
        assert sorted(got[0].rolled) == sorted(got[1].rolled), delimiter
    tops = in_folder.list_tops("ws/", "s/")
    assert sorted(tops.etags) == ["ws/r1/manifest.json", "ws/r2/x", "ws/r3/deep/er/file",
                                  "ws/top"]
    assert sorted(tops.rolled) == ["ws/abcs/", "ws/r1/artifacts/", "ws/r1/segments/"]
