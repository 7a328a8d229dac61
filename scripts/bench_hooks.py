"""Hooks on a large workspace: PostToolUse latency while `compact --apply` runs, and SessionStart.

Issue 19. A 200,000-event workspace (BENCH_SCALE shrinks it) in 10 segments of
this replica, so the hooks append to the segment compaction also changes.
Two streams of real `agent-journal hook claude-code` processes run back to
back, first with no compaction, then while a tombstone compaction (every
10th event tombstoned) and a TTL compaction (observations older than 30 days
expire) apply. Only hooks that started while `compact --apply` ran count.
Goal: hook p99 during compaction <= 3x its p99 without.

SessionStart (the digest as additional context): cold (cache/ removed) against
a whole process reading every row of every segment, goal <= 3x; warm (run
again, nothing new) against the write floor of bench_core, goal <= 5x; after a
`compact --apply` that purged one call of an older segment (the cache warm
before it), against the same scan as the cold start, goal <= 3x.
BENCH_HOOKS=compact (or start) runs one half only.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time

from bench import CLI, PY, Ctx, median
from bench_capture import payload
from bench_core import write_floor_cmd
from benchdata import build_workspace, scaled

EVENTS = 200_000
SEGMENTS = 10
STREAMS = 2
GOAL_DURING = 3.0
GOAL_WARM = 5.0
GOAL_COLD = 3.0


def p99(xs: list[float]) -> float:
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]


def _hook_cmd(root: str) -> list[str]:
    return [CLI, "hook", "claude-code", "--root", root, "--workspace", "bench"]


def _streams(root: str, stop: threading.Event, stamp: int
             ) -> tuple[list[threading.Thread], list[tuple[float, float]]]:
    """STREAMS threads, each running hooks one after another until `stop`;
    every hook's (start, seconds) lands in the shared list."""
    samples: list[tuple[float, float]] = []
    cmd = _hook_cmd(root)

    def stream(n: int) -> None:
        i = 0
        while not stop.is_set():
            data = payload(n * 1_000_000 + i, stamp)
            start = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True, input=data)
            samples.append((start, time.perf_counter() - start))
            i += 1

    threads = [threading.Thread(target=stream, args=(n,), daemon=True) for n in range(STREAMS)]
    for t in threads:
        t.start()
    return threads, samples


def _hooks_alone(root: str, seconds: float) -> list[float]:
    stop = threading.Event()
    threads, samples = _streams(root, stop, time.time_ns())
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    return [s for _, s in samples]


def _hooks_during(root: str, compact: list[str], env: dict[str, str]
                  ) -> tuple[list[float], float]:
    stop = threading.Event()
    threads, samples = _streams(root, stop, time.time_ns())
    time.sleep(0.5)  # the streams are running before compaction starts
    # The intent file appears when the read is over and the first segment is
    # about to change: hooks before it ran during the read, after it during
    # the deletes.
    intent = os.path.join(root, "workspaces", "bench", ".compact-pending.json")
    applying: list[float] = []

    def watch() -> None:
        while not stop.is_set() and not applying:
            if os.path.exists(intent):
                applying.append(time.perf_counter())
            time.sleep(0.005)

    watcher = threading.Thread(target=watch, daemon=True)
    begin = time.perf_counter()
    watcher.start()
    done = subprocess.run(compact, capture_output=True, env=env)
    end = time.perf_counter()
    stop.set()
    for t in [*threads, watcher]:
        t.join()
    if applying:
        split = applying[0]
        read = [s for start, s in samples if begin <= start < split]
        rest = [s for start, s in samples if split <= start <= end]
        for name, part in (("read", read), ("apply", rest)):
            if part:
                print(f"  {name} phase ({(split - begin if name == 'read' else end - split):.1f}"
                      f" s): p50 {median(part) * 1000:.0f} ms, p99 {p99(part) * 1000:.0f} ms, "
                      f"{len(part)} hooks", flush=True)
    if done.returncode != 0:
        print(f"  compact exit {done.returncode}: {done.stdout[-300:]!r} "
              f"{done.stderr[-300:]!r}", flush=True)
    return [s for start, s in samples if begin <= start <= end], end - begin


def _report_hooks(ctx: Ctx, label: str, during: list[float], alone_p99: float,
                  seconds: float) -> None:
    if not during:
        print(f"{label}: no hook started during the {seconds:.1f} s run", flush=True)
        return
    ctx.report(f"hook p99 during {label}", p99(during), alone_p99, goal=GOAL_DURING,
               extra=f"p50 {median(during) * 1000:.0f} ms, {len(during)} hooks, "
                     f"compact {seconds:.1f} s")


def _session_start_payload() -> bytes:
    return json.dumps({"session_id": "bench-start", "hook_event_name": "SessionStart",
                       "transcript_path": "/home/user/.claude/projects/b/bench-start.jsonl",
                       "cwd": "/home/user/bench", "source": "startup"}).encode()


def _raw_scan_cmd(ws_segments: str) -> list[str]:
    code = ("import os,sqlite3,sys\nd=sys.argv[1]\n"
            "for n in sorted(os.listdir(d)):\n"
            "  if n.endswith('.sqlite'):\n"
            "    c=sqlite3.connect('file:'+os.path.join(d,n)+'?mode=ro',uri=True)\n"
            "    for t, in c.execute(\"SELECT name FROM sqlite_master WHERE type='table'\")"
            ".fetchall():\n"
            "      for r in c.execute('SELECT * FROM \"%s\"' % t): pass\n"
            "    c.close()\n")
    return [PY, "-I", "-S", "-c", code, ws_segments]


def run(ctx: Ctx) -> None:
    parts = os.environ.get("BENCH_HOOKS", "compact,start").split(",")
    if "compact" in parts:
        _during_compaction(ctx)
    if "start" in parts:
        _session_start(ctx)


def _during_compaction(ctx: Ctx) -> None:
    events = scaled(EVENTS)
    base = ctx.path("hooks")
    env = dict(os.environ, AGENT_JOURNAL_NOW="2026-12-01T00:00:00Z")

    # A tombstone every 10th event: the baseline, then a tombstone compaction.
    root_t = str(base / "tomb")
    build_workspace(root_t, "bench", events=events, segments=SEGMENTS, tombstone_every=10)
    subprocess.run(_hook_cmd(root_t), check=True, capture_output=True, input=payload(-1, 0))
    alone = _hooks_alone(root_t, 8.0)
    alone_p99 = p99(alone)
    print(f"hooks alone: p50 {median(alone) * 1000:.0f} ms, p99 {alone_p99 * 1000:.0f} ms, "
          f"{len(alone)} hooks", flush=True)
    compact = [CLI, "compact", "--root", root_t, "--workspace", "bench", "--apply"]
    during, seconds = _hooks_during(root_t, compact, env)
    _report_hooks(ctx, "tombstone compact --apply", during, alone_p99, seconds)

    # Every observation is older than 30 days at AGENT_JOURNAL_NOW.
    root_ttl = str(base / "ttl")
    build_workspace(root_ttl, "bench", events=events, segments=SEGMENTS)
    subprocess.run(_hook_cmd(root_ttl), check=True, capture_output=True, input=payload(-2, 0))
    compact = [CLI, "compact", "--root", root_ttl, "--workspace", "bench",
               "--observation-ttl-days", "30", "--apply"]
    during, seconds = _hooks_during(root_ttl, compact, env)
    _report_hooks(ctx, "TTL compact --apply", during, alone_p99, seconds)


def _wait_for_warm_up(root: str, timeout: float = 600.0) -> None:
    """Until no detached digest holds the workspace's warm lock (ops/digest_warm.py):
    the next start is then warm, as a session started minutes later finds it."""
    import fcntl

    path = os.path.join(root, "cache", "digest", "locks", "bench.warm.lock")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            return  # no detached digest was started: the start finished within budget
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError:
            time.sleep(0.1)
        finally:
            os.close(fd)


def _session_start(ctx: Ctx) -> None:
    root_s = str(ctx.path("hooks") / "start")
    events = scaled(EVENTS)
    ws = build_workspace(root_s, "bench", events=events, segments=SEGMENTS)
    start_cmd = _hook_cmd(root_s)
    scan = _raw_scan_cmd(ws.segments_dir)
    floor_cmd = write_floor_cmd(ctx)
    cold: list[float] = []
    warm: list[float] = []
    scans: list[float] = []
    floors: list[float] = []
    for _ in range(3):
        shutil.rmtree(os.path.join(root_s, "cache"), ignore_errors=True)
        scans.extend(ctx.time_process(lambda _: scan, runs=1))
        cold.extend(ctx.time_process(lambda _: start_cmd, runs=1,
                                     stdin=_session_start_payload()))
        _wait_for_warm_up(root_s)  # a cold start past its budget finishes detached
        for _ in range(3):
            floors.extend(ctx.time_process(lambda _: floor_cmd, runs=1))
            warm.extend(ctx.time_process(lambda _: start_cmd, runs=1,
                                         stdin=_session_start_payload()))
    ctx.report("SessionStart hook, cold", median(cold), median(scans), goal=GOAL_COLD)
    ctx.report("SessionStart hook, warm", median(warm), median(floors), goal=GOAL_WARM)

    # A scheduled `compact --apply` that purged one call of an older segment (its
    # tombstone, in the live segment, is rewritten too), after sessions kept the cache
    # warm: the next session start, against the same scan floor as the cold one.
    compact_cmd = [CLI, "compact", "--root", root_s, "--workspace", "bench", "--apply"]
    after: list[float] = []
    after_scans: list[float] = []
    compacted: list[float] = []
    per = events // SEGMENTS
    for n in range(3):
        target = f"o{2 * per + 1 + n}"  # the third segment's (no id is an entry's)
        subprocess.run([CLI, "tombstone", target, "--reason", "bench", "--root", root_s,
                        "--workspace", "bench"], check=True, capture_output=True)
        subprocess.run(start_cmd, check=True, capture_output=True,
                       input=_session_start_payload())
        compacted.extend(ctx.time_process(lambda _: compact_cmd, runs=1))
        after_scans.extend(ctx.time_process(lambda _: scan, runs=1))
        after.extend(ctx.time_process(lambda _: start_cmd, runs=1,
                                      stdin=_session_start_payload()))
    _wait_for_warm_up(root_s)  # (a detached digest must not outlive the scratch folder)
    ctx.report("SessionStart after a compaction that purged one segment", median(after),
               median(after_scans), goal=GOAL_COLD,
               extra=f"compact --apply {median(compacted) * 1000:.0f} ms")


if __name__ == "__main__":
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory(prefix="aj-bench-") as tmp:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        run(Ctx(Path(tmp)))
