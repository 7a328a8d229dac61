"""Merge speed: 100 source segments of 10,000 events into a workspace holding 1,000,000.

The floor is the naive union the same run can do with plain SQL: ATTACH each
source file to a copy of the local segment and INSERT OR IGNORE its rows. The
naive way checks nothing (no checksums, no malformed rows, no tombstones, no
manifest, no provenance) and writes into a live segment; `merge` does all of
that and writes new import files. Goal: merge <= 1.5x the floor.

Two sources, the same 1,000,000 rows:
- an export folder (`agent-journal export` of the source root, made before
  timing): its rows were checked by the exporter and sealed by the manifest
  checksums, so merge verifies the files and decides from lookup columns;
- the source journal root itself: nothing vouches for its rows, so merge
  parses and checks every row it imports (the price of that parse is shown).

AJ_BENCH_REPLICAS_SCALE (else BENCH_SCALE) scales both sizes (default 1.0;
0.1 = 100,000 local events and 100 segments of 1,000), for a quick look;
AJ_BENCH_REPLICAS_ROUNDS sets the interleaved rounds (default 3: naive, export, root,
naive, ...); the medians are compared, wall and CPU (user + system) side by side, with
the merge's peak RSS, so a loaded machine can neither fake nor hide a result.
"""

from __future__ import annotations

import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import time

from bench import CLI, Ctx, run_measured

WS = "bench"
LOCAL_REPLICA = "r10ca1000000000"
SOURCE_REPLICA = "r50urce00000000"
OVERLAP = 0.01  # share of each source segment the local side already holds


def _events(start: int, count: int, replica: str) -> list:
    from agent_journal.core.model import Event

    out = []
    for i in range(start, start + count):
        ts = f"2026-01-{1 + (i // 86_400_000) % 28:02d}T00:{(i // 60_000) % 60:02d}:" \
             f"{(i // 1000) % 60:02d}.{i % 1000:03d}Z"
        eid = f"{i:08x}-{(i * 7919) % 65536:04x}-4{i % 4096:03x}-8000-{(i * 104729) % 2**48:012x}"
        if i % 4 == 0:
            out.append(Event(event_id=eid, type="entry", kind="finding", id=f"f{i}", ts=ts,
                             author="agent", session="s", replica=replica, data={
                                 "fields": {"claim": f"finding number {i} about the build"},
                                 "anchors": [f"tool_use:o{i - 1}"], "dependsOn": [],
                                 "subject": None}))
        else:
            out.append(Event(event_id=eid, type="observation", kind="tool_call", id=f"o{i}",
                             ts=ts, author="agent", session="s", replica=replica, data={
                                 "tool": "Bash", "callId": f"c{i}",
                                 "input": {"command": f"pytest -q tests/test_{i % 97}.py"},
                                 "output": "." * 40 + f" {i % 50} passed", "status": "ok",
                                 "exitCode": 0, "durationMs": i % 5000}))
    return out


def _write_segment(path: str, replica: str, batches) -> None:
    from agent_journal.storage.connection import connect, run_write
    from agent_journal.storage.files import create_private_file
    from agent_journal.storage.segment import init_segment, insert_events

    create_private_file(path)
    conn = connect(path)
    try:
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("PRAGMA cache_size = -131072")
        init_segment(conn, workspace=WS, replica=replica)
        for batch in batches:
            run_write(conn, lambda c, b=batch: insert_events(c, b))
    finally:
        conn.close()


def _make_root(path: str, replica: str) -> str:
    seg_dir = os.path.join(path, "workspaces", WS, "segments")
    os.makedirs(seg_dir, mode=0o700)
    for p in (path, os.path.join(path, "workspaces"), os.path.dirname(seg_dir), seg_dir):
        os.chmod(p, 0o700)
    with open(os.path.join(path, "replica-id"), "w") as fh:
        fh.write(replica + "\n")
    return seg_dir


def build(ctx: Ctx, local_n: int, seg_n: int, per_seg: int) -> tuple[str, str, str]:
    base = str(ctx.path("replicas"))
    local = os.path.join(base, "local")
    source = os.path.join(base, "source")
    seg_dir = _make_root(local, LOCAL_REPLICA)
    local_seg = os.path.join(seg_dir, f"{LOCAL_REPLICA}-000001.sqlite")
    step = 50_000
    _write_segment(local_seg, LOCAL_REPLICA,
                   (_events(s, min(step, local_n - s), LOCAL_REPLICA)
                    for s in range(0, local_n, step)))
    src_dir = _make_root(source, SOURCE_REPLICA)
    shared = int(per_seg * OVERLAP)
    for k in range(seg_n):
        fresh = _events(local_n + k * per_seg, per_seg - shared, SOURCE_REPLICA)
        old = _events((k * shared) % max(local_n - shared, 1), shared, LOCAL_REPLICA)
        _write_segment(os.path.join(src_dir, f"{SOURCE_REPLICA}-{k + 1:06d}.sqlite"),
                       SOURCE_REPLICA, [old + fresh])
    return local, source, local_seg


def _cpu_here() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def naive(local_seg: str, source: str, work: str) -> tuple[float, float]:
    """(wall, CPU seconds) of the naive union, in this process."""
    target = os.path.join(work, "naive.sqlite")
    shutil.copyfile(local_seg, target)
    src_dir = os.path.join(source, "workspaces", WS, "segments")
    files = sorted(os.path.join(src_dir, n) for n in os.listdir(src_dir))
    start, cpu = time.perf_counter(), _cpu_here()
    conn = sqlite3.connect(target, isolation_level=None)
    for path in files:
        conn.execute("ATTACH ? AS src", (path,))
        conn.execute("BEGIN")
        conn.execute("INSERT OR IGNORE INTO main.events(event_id, type, subject, ts, body, "
                     "checksum) SELECT event_id, type, subject, ts, body, checksum "
                     "FROM src.events")
        conn.execute("COMMIT")
        conn.execute("DETACH src")
    conn.close()
    elapsed, cpu = time.perf_counter() - start, _cpu_here() - cpu
    os.unlink(target)
    return elapsed, cpu


def ours(local: str, source: str, work: str) -> tuple[float, float, int, str]:
    """(wall, CPU seconds, peak RSS in KiB, summary) of one whole `merge` process."""
    import json

    target = os.path.join(work, "target")
    shutil.copytree(local, target)
    elapsed, cpu, peak, code, out = run_measured(
        [CLI, "merge", source, "--json", "--root", target, "--workspace", WS])
    if code != 0:
        raise SystemExit(f"merge {source} failed")
    report = json.loads(out)
    summary = f"imported {report['imported']}, alreadyPresent {report['alreadyPresent']}, " \
              f"{len(report['segmentsTouched'])} import file(s)"
    shutil.rmtree(target)
    return elapsed, cpu, peak, summary


def run(ctx: Ctx) -> None:
    scale = float(os.environ.get("AJ_BENCH_REPLICAS_SCALE") or os.environ.get("BENCH_SCALE")
                  or "1.0")
    local_n, seg_n, per_seg = int(1_000_000 * scale), 100, int(10_000 * scale)
    start = time.perf_counter()
    local, source, local_seg = build(ctx, local_n, seg_n, per_seg)
    exported = os.path.join(str(ctx.path("replicas")), "export")
    subprocess.run([CLI, "export", exported, "--root", source, "--workspace", WS],
                   capture_output=True, check=True)
    print(f"   built {local_n:,} local + {seg_n} x {per_seg:,} source events and an export "
          f"in {time.perf_counter() - start:.0f} s (scale {scale})", flush=True)
    work = str(ctx.path("replicas-work"))
    rounds = int(os.environ.get("AJ_BENCH_REPLICAS_ROUNDS") or "3")
    times: dict[str, list[tuple[float, float]]] = {"naive": [], "export": [], "root": []}
    peak = {"export": 0, "root": 0}
    summary = ""
    for _ in range(rounds):
        # Interleaved so that load from other processes hits every side alike.
        times["naive"].append(naive(local_seg, source, work))
        for kind, src in (("export", exported), ("root", source)):
            wall, cpu, rss, summary = ours(local, src, work)
            times[kind].append((wall, cpu))
            peak[kind] = max(peak[kind], rss)
    floor_wall = statistics.median(w for w, _ in times["naive"])
    floor_cpu = statistics.median(c for _, c in times["naive"])
    for kind, label in (("export", "export folder"), ("root", "journal root")):
        cpu = statistics.median(c for _, c in times[kind])
        ctx.report(f"merge {seg_n}x{per_seg:,} into {local_n:,} from {label}",
                   statistics.median(w for w, _ in times[kind]), floor_wall, goal=1.5,
                   extra=f"[{summary}; {rounds} interleaved rounds] CPU {cpu / floor_cpu:.2f}x "
                         f"({cpu:.2f} s vs {floor_cpu:.2f} s), peak "
                         f"{peak[kind] / 1024:.0f} MiB")
