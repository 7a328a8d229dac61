"""compact --apply on a large workspace, against VACUUM INTO of the same segments.

The workspace is written straight through the store (a million CLI calls
would take hours): 100 segments of 10,000 events, of which 10% are
observations named by a tombstone. The floor is `VACUUM INTO` of every
segment, timed in the same run on the same files; the goal is compact within
3x of it. `BENCH_COMPACT_SCALE=0.1` (or `--scale 0.1` when run on its own)
shrinks the workspace for slow machines.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from bench import CLI, Ctx

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


def vacuum_into(paths: list[Path], dest: Path) -> float:
    import sqlite3

    dest.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    for p in paths:
        conn = sqlite3.connect(p)
        conn.execute("VACUUM INTO ?", (str(dest / p.name),))
        conn.close()
    took = time.perf_counter() - start
    for p in paths:
        os.unlink(dest / p.name)
    return took


def run(ctx: Ctx, scale: float | None = None) -> None:
    if scale is None:
        scale = float(os.environ.get("BENCH_COMPACT_SCALE") or os.environ.get("BENCH_SCALE") or 1.0)
    root = ctx.path("compact") / "root"
    start = time.perf_counter()
    paths = build(root, scale)
    events = len(paths) * shape(scale)[1]
    print(f"   built {len(paths)} segments, {events} events in "
          f"{time.perf_counter() - start:.1f} s", flush=True)
    # The floor is taken before and after (on the compacted segments, a little
    # smaller) and the lower kept: on a shared machine the load moves.
    before = vacuum_into(paths, ctx.path("compact") / "vacuum")
    env = dict(os.environ, AGENT_JOURNAL_ROOT=str(root), AGENT_JOURNAL_WORKSPACE="bench")
    start = time.perf_counter()
    result = subprocess.run([CLI, "compact", "--apply"], env=env, capture_output=True)
    took = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"compact failed: {result.stderr.decode()}")
    after = vacuum_into(paths, ctx.path("compact") / "vacuum")
    floor = min(before, after)
    print(f"   VACUUM INTO before {before:.2f} s, after {after:.2f} s", flush=True)
    ctx.report(f"compact --apply, {events} events, 10% tombstoned", took, floor, goal=GOAL,
               extra="(floor: VACUUM INTO of the same segments)")


if __name__ == "__main__":
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="aj-bench-") as tmp:
        os.chmod(tmp, 0o700)
        run(Ctx(Path(tmp)), args.scale)
    sys.exit(0)
