"""The hook, whole process: a 2 KB PostToolUse payload on stdin vs one bare SQLite insert.

Goal (issue 6): p50 <= 2.0x and p95 <= 3.0x the floor of bench_core (one SQLite insert
from `python -I -S`). Floor and hook runs alternate, so a burst of load from other work on
a shared machine lands on both sides of the ratio.
"""

from __future__ import annotations

import json
import time

from bench import CLI, Ctx, median, p95
from bench_core import write_floor_cmd

RUNS = 41


def payload(i: int, stamp: int) -> bytes:
    body = {
        "session_id": "bench-session",
        "transcript_path": "/home/user/.claude/projects/bench/bench-session.jsonl",
        "cwd": "/home/user/bench",
        "permission_mode": "default",
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "pytest -q tests/test_store.py", "description": "run tests"},
        "tool_response": {"stdout": "", "stderr": "", "interrupted": False, "isImage": False},
        "tool_use_id": f"toolu_bench_{stamp}_{i}",
        "duration_ms": 1234,
    }
    filler = 2048 - len(json.dumps(body))
    body["tool_response"]["stdout"] = ("collected 42 items ... passed\n" * 80)[:filler]
    data = json.dumps(body).encode()
    assert 2000 <= len(data) <= 2200, len(data)
    return data


def run(ctx: Ctx) -> None:
    root = str(ctx.path("capture") / "root")
    floor_cmd = write_floor_cmd(ctx)
    stamp = time.time_ns()
    cmd = [CLI, "hook", "claude-code", "--root", root, "--workspace", "bench"]
    # A warm-up run creates the root, the replica id and the segment.
    ctx.time_process(lambda _: cmd, runs=1, stdin=payload(-1, stamp))
    floors: list[float] = []
    hooks: list[float] = []
    for i in range(RUNS):
        floors.extend(ctx.time_process(lambda _: floor_cmd, runs=1))
        hooks.extend(ctx.time_process(lambda _: cmd, runs=1, stdin=payload(i, stamp)))
    floor = median(floors)
    ctx.report("hook claude-code, 2 KB PostToolUse, p50", median(hooks), floor, goal=2.0)
    ctx.report("hook claude-code, 2 KB PostToolUse, p95", p95(hooks), floor, goal=3.0)
