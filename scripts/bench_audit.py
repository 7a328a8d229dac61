"""Audit reads (digest, trace) over a large workspace vs a plain SELECT of the same rows.

The workspace is built through the store's own functions (segment creation,
schema, canonical encoding), 100 segments x 10,000 events = 1,000,000 events
at scale 1. Set BENCH_AUDIT_SCALE (e.g. 0.1) to shrink the segment count when
a full run is too slow for the machine; the printed lines name the scale.

Both sides are whole processes: the floor is `python -I -S` running
`SELECT seq, event_id, body, checksum FROM events` over every segment and
fetching every row; the commands are the installed console script.
Goal: <= 4x. The digest is reported twice: warm (its cache holds every row,
the steady state of a journal read at every session start) against the goal,
and its first run (which reads every body and fills the cache) without one.

Run alone: python scripts/bench_audit.py [--scale 0.1]
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

from bench import CLI, PY, Ctx, median

EVENTS_PER_SEGMENT = 10_000
SEGMENTS_AT_SCALE_1 = 100
RUNS = 3
WORKSPACE = "bench-audit"


def _events_for_segment(n: int, replica: str) -> list:
    """One session's worth: tool calls (started + finished), entries citing them,
    a few retractions and tombstones. Exactly EVENTS_PER_SEGMENT events."""
    from agent_journal.core.model import Event, new_event_id

    session = f"s{n:03d}"
    out: list[Event] = []
    second = 0

    def ts() -> str:
        nonlocal second
        second += 1
        day, rest = divmod(n, 28)
        return (f"2026-{1 + day:02d}-{1 + rest:02d}T{second // 3600:02d}:"
                f"{second // 60 % 60:02d}:{second % 60:02d}.000Z")

    def add(type_: str, kind: str, subject: str, data: dict, author: str = "agent") -> None:
        out.append(Event(event_id=new_event_id(), type=type_, kind=kind, id=subject, ts=ts(),
                         author=author, session=session if author == "agent" else None,
                         replica=replica, data=data))

    call = 0
    last_entry: str | None = None
    while len(out) < EVENTS_PER_SEGMENT - 3:
        call += 1
        obs = f"obs-{n:03d}-{call:05d}"
        if call % 3 == 0:
            tool, tool_input = "Bash", {"command": f"pytest -q tests/test_mod{call % 97}.py -x"}
        elif call % 3 == 1:
            tool, tool_input = "Read", {"file_path": f"src/pkg/mod{call % 211}.py"}
        else:
            tool, tool_input = "Edit", {"file_path": f"src/pkg/mod{call % 211}.py",
                                        "old_string": "return a", "new_string": "return b"}
        add("observation", "tool_call", obs, {
            "tool": tool, "callId": f"toolu_{n:03d}{call:06d}", "input": tool_input,
            "output": None, "status": "started", "exitCode": None, "durationMs": None})
        failed = call % 17 == 0
        add("observation", "tool_call", obs, {
            "tool": tool, "callId": f"toolu_{n:03d}{call:06d}", "input": tool_input,
            "output": "collected 12 items\n" + ("1 failed" if failed else "12 passed"),
            "status": "error" if failed else "ok", "exitCode": 1 if failed else 0,
            "durationMs": 40 + call % 900})
        if call % 60 == 0:
            entry_id = f"f-{n:03d}-{call:05d}"
            add("entry", "finding", entry_id, {
                "fields": {"claim": f"module {call % 211} regresses when the cache is cold"},
                "anchors": [f"tool_use:{obs}", f"file:src/pkg/mod{call % 211}.py"],
                "dependsOn": [last_entry] if last_entry and call % 120 == 0 else [],
                "subject": f"mod{call % 211}"})
            last_entry = entry_id
        if call % 1200 == 0:
            add("invalidation", "invalidation", last_entry or obs,
                {"reason": "the run used a stale build"}, author="human")
        if call % 1500 == 0:
            add("tombstone", "tombstone", obs, {"reason": "output held a token",
                                                "purged": False}, author="human")
    while len(out) < EVENTS_PER_SEGMENT:
        add("observation", "session_start", f"obs-{n:03d}-start-{len(out)}",
            {"tool": None, "input": {"source": "resume"}, "status": "ok"})
    return out


def build_workspace(root: str, segments: int) -> None:
    from agent_journal.storage.connection import connect, run_write
    from agent_journal.storage.files import create_private_file, make_private_dirs
    from agent_journal.storage.root import Root
    from agent_journal.storage.segment import SEGMENT_SUFFIX, init_segment, insert_events

    ws = Root.open(root, create=True).workspace(WORKSPACE)
    make_private_dirs(ws.segments_dir)
    replica = ws.root.replica_id
    for n in range(segments):
        path = os.path.join(ws.segments_dir, f"{replica}-{n + 1:06d}{SEGMENT_SUFFIX}")
        create_private_file(path)
        conn = connect(path)
        try:
            init_segment(conn, workspace=WORKSPACE, replica=replica)
            events = _events_for_segment(n, replica)
            run_write(conn, lambda c, events=events: insert_events(c, events))
        finally:
            conn.close()


FLOOR = """
import os, sqlite3, sys
folder = sys.argv[1]
n = 0
for name in sorted(os.listdir(folder)):
    if name.endswith('.sqlite'):
        c = sqlite3.connect('file:' + os.path.join(folder, name) + '?mode=ro', uri=True)
        n += len(c.execute('SELECT seq, event_id, body, checksum FROM events ORDER BY seq')
                 .fetchall())
        c.close()
print(n)
"""


def scale() -> float:
    return float(os.environ.get("BENCH_AUDIT_SCALE") or os.environ.get("BENCH_SCALE") or 1.0)


def run(ctx: Ctx) -> None:
    segments = max(1, round(SEGMENTS_AT_SCALE_1 * scale()))
    total = segments * EVENTS_PER_SEGMENT
    root = str(ctx.path("audit") / "root")
    start = time.perf_counter()
    build_workspace(root, segments)
    print(f"built {total:,} events in {segments} segments "
          f"({time.perf_counter() - start:.1f} s, scale {scale():g})", flush=True)
    folder = str(Path(root) / "workspaces" / WORKSPACE / "segments")
    base = ["--root", root, "--workspace", WORKSPACE]
    commands = {
        "floor": [PY, "-I", "-S", "-c", FLOOR, folder],
        "digest": [CLI, "digest", *base],
        "trace": [CLI, "trace", "--json", "mod7", *base],
    }
    cache = Path(root) / "cache" / "digest"
    # The first digest reads every row and fills the digest's cache; later
    # ones read the cache plus what the segments gained (nothing, here).
    # Both are reported: the cold figure once, before the measured rounds.
    shutil.rmtree(cache, ignore_errors=True)
    cold = ctx.time_process(lambda i: commands["digest"], runs=1)
    # Interleaved, one of each per round, so a burst of load from whatever else
    # runs on this shared machine lands on the floor and the commands alike.
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(RUNS):
        for name, cmd in commands.items():
            times[name] += ctx.time_process(lambda i, cmd=cmd: cmd, runs=1)
    floor = median(times["floor"])
    label = f"{total:,} events"
    ctx.report(f"digest, warm cache ({label})", median(times["digest"]), floor, goal=4.0)
    ctx.report(f"digest, first run: fills the cache ({label})", cold[0], floor)
    ctx.report(f"trace ({label})", median(times["trace"]), floor, goal=4.0)

if __name__ == "__main__":
    import tempfile

    args = sys.argv[1:]
    if args[:1] == ["--scale"] and len(args) == 2:
        os.environ["BENCH_AUDIT_SCALE"] = args[1]
    with tempfile.TemporaryDirectory(prefix="aj-bench-audit-") as tmp:
        os.chmod(tmp, 0o700)
        run(Ctx(Path(tmp)))
