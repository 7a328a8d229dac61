"""compact --apply on a large workspace, against VACUUM INTO of the same segments.

The workspace is written straight through the store (a million CLI calls
would take hours): 100 segments of 10,000 events, of which 10% are
observations named by a tombstone. The floor is `VACUUM INTO` of every
segment, timed in the same run on the same files; the goal is compact within
3x of it. Floor and command alternate on copies of the workspace (A, B, A,
B, ...: PAIRS pairs), and both the wall and the CPU ratio (of the medians)
are printed, so a loaded machine can neither fake nor hide a result.
`BENCH_COMPACT_SCALE=0.1` (or `--scale 0.1` when run on its own) shrinks the
workspace for slow machines.

Then cost that grows with what is new (issue 19): on a workspace of 100
segments (1M events at scale 1; tombstones among them), `compact` (dry run,
with and without an observation TTL), `coverage` and `decay` each run once
from nothing (the read projection under cache/ deleted: a full run), once
more with nothing new, and once after 1% new events appended to the last
segment. Printed: the full run against a raw scan of the same root (every
row of every table, `python -I -S`), and each later run as a ratio to the
full run; the goal for the run after 1% new is <= 0.2x. Last, the nightly
job: `compact --apply` with a TTL from nothing, and again after 1% new
events (goal: <= 0.2x the first).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from bench import CLI, Ctx, run_measured

SEGMENTS = 100
PER_SEGMENT = 10_000
GOAL = 3.0


def shape(scale: float) -> tuple[int, int]:
    """Scale the number of segments; below one segment, shrink the segment."""
    total = max(100, int(SEGMENTS * PER_SEGMENT * scale))
    if total >= PER_SEGMENT:
        return total // PER_SEGMENT, PER_SEGMENT
    return 1, total


def build(root: Path, scale: float) -> list[Path]:
    from agent_journal.core.model import Event, new_event_id
    from agent_journal.storage.connection import connect, run_write
    from agent_journal.storage.files import create_private_file, make_private_dirs
    from agent_journal.storage.root import check_root
    from agent_journal.storage.segment import init_segment, insert_events

    segments, per_segment = shape(scale)
    seg_dir = root / "workspaces" / "bench" / "segments"
    check_root(str(root), create=True)
    make_private_dirs(str(seg_dir))
    paths = []
    output = "drwxr-xr-x 2 user user 4096 Jan  1 00:00 some/file/name.py\n" * 3
    for s in range(segments):
        events = []
        doomed = per_segment // 10
        for i in range(per_segment - doomed):
            oid = f"o{s}-{i}"
            events.append(Event(
                event_id=new_event_id(), type="observation", kind="tool_call", id=oid,
                ts="2025-01-01T00:00:00.000Z", author="agent", session="bench",
                replica="rbench", data={"tool": "Bash", "callId": f"c{i}",
                                        "input": {"command": f"ls -la {i}"},
                                        "output": output, "status": "ok", "exitCode": 0,
                                        "durationMs": 12}))
        for i in range(doomed):
            events.append(Event(
                event_id=new_event_id(), type="tombstone", kind="tombstone", id=f"o{s}-{i}",
                ts="2025-01-02T00:00:00.000Z", author="human", session=None, replica="rbench",
                data={"reason": "bench", "purged": False}))
        path = seg_dir / f"rbench-{s + 1:06d}.sqlite"
        create_private_file(str(path))
        conn = connect(str(path))
        init_segment(conn, workspace="bench", replica="rbench")
        run_write(conn, lambda c, evs=events: insert_events(c, evs))
        conn.close()
        paths.append(path)
    return paths


INCREMENTAL_GOAL = 0.2
INCREMENTAL_READS: list[tuple[str, list[str]]] = [
    ("compact (dry run)", ["compact"]),
    ("compact --observation-ttl-days 30 (dry run)", ["compact", "--observation-ttl-days", "30"]),
    ("coverage", ["coverage", "--json"]),
    ("decay", ["decay", "--json"]),
]

NIGHTLY = ["compact", "--apply", "--observation-ttl-days", "30"]


def _timed(cmd: list[str], env: dict[str, str]) -> tuple[float, int]:
    """(seconds, peak RSS in KiB) of one whole process."""
    took, _cpu, rss = _timed_cpu(cmd, env)
    return took, rss


def _timed_cpu(cmd: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, peak RSS in KiB) of one whole process."""
    took, cpu, peak, code, _out = run_measured(cmd, env)
    if code not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed")
    return took, cpu, peak


def _append_events(root: Path, workspace: str, start: int, count: int) -> None:
    """`count` more events (some tombstones) at the end of the last segment."""
    from benchdata import make_event

    from agent_journal.storage.connection import connect, run_write
    from agent_journal.storage.root import Root
    from agent_journal.storage.segment import insert_events

    ws = Root.open(str(root), create=False).workspace(workspace)
    last = ws.segment_paths()[-1]
    events = [ev for i in range(start, start + count)
              for ev in make_event(i, "rmore", tombstone_every=97)]
    conn = connect(last)
    run_write(conn, lambda c: insert_events(c, events))
    conn.close()


def incremental(ctx: Ctx, scale: float) -> None:
    import shutil

    from bench import PY
    from bench_scale import RAW_SCAN
    from benchdata import build_workspace

    events = max(1000, int(SEGMENTS * PER_SEGMENT * scale))
    root = ctx.path("incremental") / "journal"
    build_workspace(str(root), "inc", events=events, segments=SEGMENTS, tombstone_every=101)
    time.sleep(2.1)  # past the clock tick of the last write: the fingerprints can vouch
    env = dict(os.environ, AGENT_JOURNAL_ROOT=str(root), AGENT_JOURNAL_WORKSPACE="inc",
               AGENT_JOURNAL_NOW="2026-03-01T00:00:00Z")
    projection = root / "cache"  # every projection: each command starts from nothing
    floor = min(_timed([PY, "-I", "-S", "-c", RAW_SCAN, str(root)], env)[0] for _ in range(3))
    print(f"-- incremental, {events:,} events in {SEGMENTS} segments: raw scan "
          f"{floor * 1000:.0f} ms", flush=True)
    added = events
    for name, args in INCREMENTAL_READS:
        shutil.rmtree(projection, ignore_errors=True)
        full, rss = _timed([CLI, *args], env)
        ctx.report(f"{name}, full run", full, floor, extra=f"peak {rss / 1024:.0f} MiB")
        time.sleep(2.1)
        again = min(_timed([CLI, *args], env)[0] for _ in range(2))
        ctx.report(f"{name}, again, nothing new", again, full,
                   extra="(floor: the full run)")
        _append_events(root, "inc", added, events // 100)
        added += events // 100
        time.sleep(2.1)
        grown, rss = _timed([CLI, *args], env)
        ctx.report(f"{name}, after 1% new events", grown, full, goal=INCREMENTAL_GOAL,
                   extra=f"(floor: the full run) peak {rss / 1024:.0f} MiB")
    # The nightly job: a first `compact --apply` with a TTL from nothing (the
    # backlog: every tombstone, every observation past the TTL), then, after
    # 1% new events, the next night's run.
    shutil.rmtree(projection, ignore_errors=True)
    full, rss = _timed([CLI, *NIGHTLY], env)
    ctx.report(f"{' '.join(NIGHTLY)}, first run", full, floor,
               extra=f"peak {rss / 1024:.0f} MiB")
    _append_events(root, "inc", added, events // 100)
    time.sleep(2.1)
    nightly, rss = _timed([CLI, *NIGHTLY], env)
    ctx.report(f"{' '.join(NIGHTLY)}, after 1% new events", nightly, full,
               goal=INCREMENTAL_GOAL, extra=f"(floor: the first run) peak {rss / 1024:.0f} MiB")


def _cpu_here() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def vacuum_into(paths: list[Path], dest: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of `VACUUM INTO` of every segment."""
    import sqlite3

    dest.mkdir(parents=True, exist_ok=True)
    start, cpu = time.perf_counter(), _cpu_here()
    for p in paths:
        conn = sqlite3.connect(p)
        conn.execute("VACUUM INTO ?", (str(dest / p.name),))
        conn.close()
    took, cpu = time.perf_counter() - start, _cpu_here() - cpu
    for p in paths:
        os.unlink(dest / p.name)
    return took, cpu


PAIRS = 3


def run(ctx: Ctx, scale: float | None = None) -> None:
    import shutil
    import statistics

    if scale is None:
        scale = float(os.environ.get("BENCH_COMPACT_SCALE") or os.environ.get("BENCH_SCALE") or 1.0)
    base = ctx.path("compact")
    root = base / "root"
    start = time.perf_counter()
    paths = build(root, scale)
    events = len(paths) * shape(scale)[1]
    print(f"   built {len(paths)} segments, {events} events in "
          f"{time.perf_counter() - start:.1f} s", flush=True)
    # One copy of the workspace per pair: the floor (A) and the command (B) on
    # the same files, alternating.
    roots = [root] + [base / f"root-{k}" for k in range(1, PAIRS)]
    for copy in roots[1:]:
        shutil.copytree(root, copy, symlinks=True)
    floors: list[tuple[float, float]] = []
    runs: list[tuple[float, float]] = []
    peak = 0
    for copy in roots:
        copy_paths = [copy / p.relative_to(root) for p in paths]
        floors.append(vacuum_into(copy_paths, base / "vacuum"))
        env = dict(os.environ, AGENT_JOURNAL_ROOT=str(copy), AGENT_JOURNAL_WORKSPACE="bench")
        took, cpu, rss = _timed_cpu([CLI, "compact", "--apply"], env)
        runs.append((took, cpu))
        peak = max(peak, rss)
        print(f"   pair: VACUUM INTO {floors[-1][0]:.2f} s ({floors[-1][1]:.2f} s CPU), "
              f"compact --apply {took:.2f} s ({cpu:.2f} s CPU)", flush=True)
    wall = statistics.median(t for t, _ in runs)
    floor = statistics.median(t for t, _ in floors)
    cpu = statistics.median(c for _, c in runs)
    cpu_floor = statistics.median(c for _, c in floors)
    ctx.report(f"compact --apply, {events} events, 10% tombstoned", wall, floor, goal=GOAL,
               extra=f"(floor: VACUUM INTO of the same segments; {PAIRS} pairs) CPU "
                     f"{cpu / cpu_floor:.2f}x ({cpu:.2f} s vs {cpu_floor:.2f} s), "
                     f"peak {peak / 1024:.0f} MiB")
    for copy in roots[1:]:
        shutil.rmtree(copy, ignore_errors=True)
    incremental(ctx, scale)


if __name__ == "__main__":
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--only-incremental", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="aj-bench-") as tmp:
        os.chmod(tmp, 0o700)
        if args.only_incremental:
            incremental(Ctx(Path(tmp)), args.scale)
        else:
            run(Ctx(Path(tmp)), args.scale)
    sys.exit(0)
