"""Sync speed: push and pull of 100 segments x 10,000 events through a local S3 server.

The server is moto's server mode on a free 127.0.0.1 port (the one the tests
use), started and stopped here. The floor for each side is a plain transfer
of the same bytes with the same client in the same run: a `python` process
that imports boto3 and puts (or gets) the same 100 files one after another,
as push and pull do. What push adds: the export snapshot of every own
segment (SQLite VACUUM INTO, the tombstone scrub, checksums), the listing
and the manifest. What pull adds: checking each object's size and checksum
and the union merge of a million events (a segment taken whole is published
as it landed, its facts read by the fetching threads: the merge after the
transfers decides and publishes). Goal: each <= 1.5x its floor. A
second pull with nothing new must fetch nothing; its time is printed too.

Then sync_rounds.py (a part of this bench, not a bench of its own): 10 replicas x
20 rounds x 500 events, each sync's bytes (counted at a proxy) against the new
events' bytes, per round (goal <= 1.3x in every round).

AJ_BENCH_SYNC_SCALE (else BENCH_SCALE) scales the events per segment
(default 1.0; 0.1 = 100 segments of 1,000); AJ_BENCH_SYNC_ROUNDS sets the
interleaved rounds (default 2, best kept).
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid

from bench import CLI, PY, Ctx
from bench_replicas import _events, _make_root, _write_segment

WS = "bench"
REPLICA = "r5ync0000000000"
SEGMENTS = 100

AWS = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
       "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true",
       "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
       "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}

PLAIN = r"""
import os, sys, boto3
from botocore.config import Config
endpoint, bucket, prefix, folder, mode = sys.argv[1:6]
cfg = Config(retries={"mode": "standard", "total_max_attempts": 5},
             request_checksum_calculation="when_required",
             response_checksum_validation="when_required")
client = boto3.session.Session().client("s3", endpoint_url=endpoint, config=cfg)
if mode == "put":
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), "rb") as fh:
            client.put_object(Bucket=bucket, Key=prefix + name, Body=fh)
else:
    for item in client.list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]:
        body = client.get_object(Bucket=bucket, Key=item["Key"])["Body"]
        with open(os.path.join(folder, item["Key"].rsplit("/", 1)[-1]), "wb") as out:
            while chunk := body.read(1 << 20):
                out.write(chunk)
"""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "AGENT_JOURNAL_"))
           and k.lower() not in ("http_proxy", "https_proxy", "all_proxy")}
    env.update(AWS, **extra)
    return env


def _server() -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([PY, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env())
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            conn.request("GET", "/")
            conn.getresponse().read()
            conn.close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("moto server did not start")


def _bucket(endpoint: str) -> str:
    import boto3

    name = f"bench-{uuid.uuid4().hex[:8]}"
    env = _env()
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                 aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                 aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"]).create_bucket(Bucket=name)
    return name


def _timed(cmd: list[str], env: dict[str, str]) -> tuple[float, bytes]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, env=env)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[:3]} failed: {proc.stderr.decode()[-500:]}")
    return elapsed, proc.stdout


def run(ctx: Ctx) -> None:
    scale = float(os.environ.get("AJ_BENCH_SYNC_SCALE") or os.environ.get("BENCH_SCALE")
                  or "1.0")
    per_seg = max(1, int(10_000 * scale))
    rounds = int(os.environ.get("AJ_BENCH_SYNC_ROUNDS") or "2")
    base = str(ctx.path("sync"))
    source = os.path.join(base, "source")
    start = time.perf_counter()
    seg_dir = _make_root(source, REPLICA)
    for k in range(SEGMENTS):
        _write_segment(os.path.join(seg_dir, f"{REPLICA}-{k + 1:06d}.sqlite"), REPLICA,
                       [_events(k * per_seg, per_seg, REPLICA)])
    total = sum(os.path.getsize(os.path.join(seg_dir, n)) for n in os.listdir(seg_dir))
    print(f"   built {SEGMENTS} x {per_seg:,} events ({total / 1e6:.0f} MB) in "
          f"{time.perf_counter() - start:.0f} s (scale {scale})", flush=True)
    server, endpoint = _server()
    try:
        best = {k: float("inf") for k in ("put", "push", "get", "pull", "again")}
        ratios: dict[str, list[float]] = {"push": [], "pull": []}
        fetched_again = -1
        snapshotted = -1
        for n in range(rounds):
            bucket = _bucket(endpoint)
            url = f"s3://{bucket}/journals"
            root_env = _env(AGENT_JOURNAL_WORKSPACE=WS)
            subprocess.run([CLI, "remote", "add", "b", url, "--endpoint-url", endpoint,
                            "--root", source], check=True, capture_output=True, env=root_env)
            # Interleaved, floor first, so load from other processes hits both alike.
            put, _ = _timed([PY, "-c", PLAIN, endpoint, bucket, f"plain{n}/", seg_dir, "put"],
                            root_env)
            push, _ = _timed([CLI, "push", "b", "--json", "--root", source], root_env)
            target = os.path.join(base, f"target{n}")
            plain_dir = os.path.join(base, f"plain{n}")
            os.makedirs(plain_dir, mode=0o700)
            get, _ = _timed([PY, "-c", PLAIN, endpoint, bucket, f"plain{n}/", plain_dir,
                             "get"], root_env)
            subprocess.run([CLI, "remote", "add", "b", url, "--endpoint-url", endpoint,
                            "--root", target], check=True, capture_output=True, env=root_env)
            pull, _ = _timed([CLI, "pull", "b", "--json", "--root", target], root_env)
            again, out = _timed([CLI, "pull", "b", "--json", "--root", target], root_env)
            fetched_again = json.loads(out)["fetched"]
            # One more segment: push and pull only what is new.
            added = os.path.join(seg_dir, f"{REPLICA}-{SEGMENTS + 1 + n:06d}.sqlite")
            _write_segment(added, REPLICA, [_events((SEGMENTS + 1 + n) * per_seg, per_seg,
                                                    REPLICA)])
            one_dir = os.path.join(base, f"one{n}")
            os.makedirs(one_dir, mode=0o700)
            shutil.copyfile(added, os.path.join(one_dir, os.path.basename(added)))
            put1, _ = _timed([PY, "-c", PLAIN, endpoint, bucket, f"one{n}/", one_dir, "put"],
                             root_env)
            push1, out = _timed([CLI, "push", "b", "--json", "--root", source], root_env)
            snapshotted = json.loads(out)["snapshotted"]
            get1, _ = _timed([PY, "-c", PLAIN, endpoint, bucket, f"one{n}/", one_dir, "get"],
                             root_env)
            pull1, _ = _timed([CLI, "pull", "b", "--json", "--root", target], root_env)
            shutil.rmtree(one_dir)
            for key, value in (("put1", put1), ("push1", push1), ("get1", get1),
                               ("pull1", pull1)):
                best[key] = min(best.get(key, float("inf")), value)
            for key, value in (("put", put), ("push", push), ("get", get), ("pull", pull),
                               ("again", again)):
                best[key] = min(best[key], value)
            ratios["push"].append(push / put)
            ratios["pull"].append(pull / get)
            subprocess.run([CLI, "remote", "remove", "b", "--root", source], check=True,
                           capture_output=True, env=root_env)
            shutil.rmtree(target)
            shutil.rmtree(plain_dir)
        label = f"{SEGMENTS}x{per_seg:,}"
        ctx.report(f"push {label} to a local S3 server", best["push"], best["put"], goal=1.5,
                   extra="[floor: plain put_object of the same files; per-round "
                         + ", ".join(f"{r:.2f}" for r in ratios["push"]) + "]")
        ctx.report(f"pull {label} from a local S3 server", best["pull"], best["get"], goal=1.5,
                   extra="[floor: plain get_object of the same files; per-round "
                         + ", ".join(f"{r:.2f}" for r in ratios["pull"]) + "]")
        ctx.report(f"push of 1 new segment after {label}", best["push1"], best["put1"],
                   extra=f"[{snapshotted} segment(s) snapshotted; floor: put_object of it]")
        ctx.report(f"pull of 1 new segment after {label}", best["pull1"], best["get1"],
                   extra="[floor: get_object of it]")
        print(f"   a second pull with nothing new: {best['again'] * 1000:.0f} ms, fetched "
              f"{fetched_again} object(s)", flush=True)
    finally:
        server.terminate()
        server.wait(timeout=10)
    # And what each sync moves against what is new, round after round.
    import sync_rounds

    print("   10 replicas x 20 rounds x 500 events, each sync's bytes against the new "
          "events' bytes:", flush=True)
    sync_rounds.run(ctx)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench import main

    raise SystemExit(main(["sync"]))
