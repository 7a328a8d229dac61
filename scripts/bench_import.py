"""`import claude-code` and `import codex` on synthetic 100,000-call sessions vs a floor.

Goals (issue 19): each import sustains >= 20,000 events/s, whole process, and is
reported against its floor, a bare `python -I -S` doing one `executemany` INSERT of
as many rows of similar size into a fresh segment with the package's schema. A
re-import of the same file (nothing new) takes <= 1.5x a plain read of it: a bare
process reading and JSON-parsing every line. BENCH_SCALE shrinks the transcript.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from bench import CLI, Ctx, median, run_measured
from benchdata import scaled

from agent_journal.storage.root import Root
from agent_journal.storage.segment import SCHEMA

CALLS = 100_000
SESSION = "0f112eb4-a676-476d-8986-d6c78693cd5b"
PROMPT_EVERY = 50  # a user prompt opens every few dozen calls, as in a real session


def _tool(i: int) -> tuple[str, dict, str]:
    """A call's tool, input and a few hundred bytes of what it returned."""
    kind = i % 3
    if kind == 0:
        return "Bash", {"command": f"pytest -q tests/test_mod{i % 97}.py",
                        "description": "run the tests"}, \
            ("collected 12 items\n" + "tests/test_mod.py ........ [100%]\n" * 8
             + f"12 passed in {i % 7}.2{i % 10}s\n")
    if kind == 1:
        path = f"/home/user/project/src/module_{i % 211}.py"
        return "Read", {"file_path": path}, "".join(
            f"{n:>6}\tdef function_{n}(value):\n" for n in range(1, 12))
    path = f"/home/user/project/src/module_{i % 211}.py"
    return "Edit", {"file_path": path, "old_string": f"return value + {i % 13}",
                    "new_string": f"return value * {i % 13}"}, \
        f"The file {path} has been updated. Here's the result of running `cat -n`:\n" \
        + "".join(f"{n:>6}\t    return value * {n}\n" for n in range(1, 6))


def write_transcript(path: str, calls: int) -> int:
    """Write a Claude Code transcript of `calls` tool calls; returns its size in bytes."""
    common = {"isSidechain": False, "userType": "external", "cwd": "/home/user/project",
              "sessionId": SESSION, "version": "2.0.65", "gitBranch": "main"}
    parent = None
    with open(path, "w", encoding="utf-8") as out:
        for i in range(calls):
            second = 1_700_000_000 + i * 3
            stamp = f"2025-12-{1 + (i // 28_800) % 28:02d}T{(second // 3600) % 24:02d}:" \
                    f"{(second // 60) % 60:02d}:{second % 60:02d}.{i % 1000:03d}Z"
            if i % PROMPT_EVERY == 0:
                uid = f"u-{i:08d}-0000-4000-8000-000000000000"
                out.write(json.dumps({**common, "parentUuid": parent, "type": "user",
                                      "message": {"role": "user", "content":
                                                  f"please fix failing test number {i}"},
                                      "uuid": uid, "timestamp": stamp}) + "\n")
                parent = uid
            tool, tool_input, output = _tool(i)
            use_id = f"toolu_bench_{i:08d}"
            aid = f"a-{i:08d}-0000-4000-8000-000000000000"
            out.write(json.dumps({**common, "parentUuid": parent, "type": "assistant",
                                  "message": {"model": "claude-opus-4-5", "id": f"msg_{i}",
                                              "type": "message", "role": "assistant",
                                              "content": [{"type": "tool_use", "id": use_id,
                                                           "name": tool,
                                                           "input": tool_input}],
                                              "stop_reason": "tool_use",
                                              "usage": {"input_tokens": 10,
                                                        "output_tokens": 320}},
                                  "requestId": f"req_{i}", "uuid": aid,
                                  "timestamp": stamp}) + "\n")
            rid = f"r-{i:08d}-0000-4000-8000-000000000000"
            out.write(json.dumps({**common, "parentUuid": aid, "type": "user",
                                  "message": {"role": "user", "content": [
                                      {"type": "tool_result", "content": output,
                                       "is_error": False, "tool_use_id": use_id}]},
                                  "uuid": rid, "timestamp": stamp,
                                  "toolUseResult": {"stdout": output, "stderr": "",
                                                    "interrupted": False}
                                  if tool == "Bash" else output}) + "\n")
            parent = rid
    return os.path.getsize(path)


def write_codex_session(path: str, calls: int) -> int:
    """Write a Codex session (rollout) file of `calls` tool calls; returns its size in bytes.

    The same calls and outputs as write_transcript, in Codex's shapes: shell calls with an
    argv and an output JSON string carrying the exit code (Codex 0.46), apply_patch for
    edits."""
    with open(path, "w", encoding="utf-8") as out:
        out.write(json.dumps({"timestamp": "2025-12-01T00:00:00.000Z", "type": "session_meta",
                              "payload": {"id": SESSION, "cwd": "/home/user/project",
                                          "originator": "codex_cli_rs",
                                          "cli_version": "0.46.0", "source": "cli"}}) + "\n")
        for i in range(calls):
            second = 1_700_000_000 + i * 3
            stamp = f"2025-12-{1 + (i // 28_800) % 28:02d}T{(second // 3600) % 24:02d}:" \
                    f"{(second // 60) % 60:02d}:{second % 60:02d}.{i % 1000:03d}Z"
            tool, tool_input, output = _tool(i)
            call_id = f"call_bench_{i:08d}"
            if tool == "Edit":
                start = {"type": "custom_tool_call", "status": "completed", "call_id": call_id,
                         "name": "apply_patch",
                         "input": f"*** Begin Patch\n*** Update File: {tool_input['file_path']}"
                                  f"\n-{tool_input['old_string']}\n+{tool_input['new_string']}"
                                  "\n*** End Patch\n"}
                end = {"type": "custom_tool_call_output", "call_id": call_id, "output": output}
            else:
                command = tool_input["command"] if tool == "Bash" \
                    else f"cat {tool_input['file_path']}"
                start = {"type": "function_call", "name": "shell", "call_id": call_id,
                         "arguments": json.dumps({"command": ["bash", "-lc", command],
                                                  "workdir": "/home/user/project"})}
                end = {"type": "function_call_output", "call_id": call_id,
                       "output": json.dumps({"output": output, "metadata": {
                           "exit_code": 0, "duration_seconds": 0.1}})}
            for payload in (start, end):
                out.write(json.dumps({"timestamp": stamp, "type": "response_item",
                                      "payload": payload}) + "\n")
    return os.path.getsize(path)


# One bulk insert of `rows` rows of similar size, in the package's own schema (passed in
# as text: the bare interpreter has none of the package's dependencies).
FLOOR_INSERT = r"""
import os, sqlite3, sys, uuid
SCHEMA = {schema!r}
path, rows, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
conn = sqlite3.connect(path, isolation_level=None)
conn.execute("PRAGMA journal_mode=DELETE")
conn.executescript(SCHEMA)
pad = b"x" * size
data = [(str(uuid.UUID(int=i)), "observation", "obs-%d" % (i // 2),
         "2025-12-01T00:00:00.000Z", pad, "%064x" % i) for i in range(rows)]
conn.execute("BEGIN IMMEDIATE")
conn.executemany("INSERT INTO events(event_id, type, subject, ts, body, checksum) "
                 "VALUES (?, ?, ?, ?, ?, ?)", data)
conn.execute("COMMIT")
"""

FLOOR_READ = r"""
import json, sys
with open(sys.argv[1], "rb") as fh:
    for line in fh:
        json.loads(line)
"""


def _import_cmd(agent: str, root: str, workspace: str, path: str) -> list[str]:
    return [CLI, "import", agent, path, "--json", "--root", root, "--workspace", workspace]


def run(ctx: Ctx) -> None:
    calls = scaled(CALLS)
    here = ctx.path("import")
    _run_one(ctx, "claude-code", here, lambda path: write_transcript(path, calls))
    here = ctx.path("import-codex")
    _run_one(ctx, "codex", here, lambda path: write_codex_session(path, calls))


def _timed(ctx: Ctx, make_cmd: Callable[[int], list[str]], runs: int
           ) -> tuple[float, float, int]:
    """The median wall time, the median CPU time (user + system) and the highest peak
    RSS (KiB) of `runs` runs, each a whole process (bench.run_measured).

    On a machine shared with other work, the wall time of a CPU-bound process grows with
    the load and its CPU time much less, so both are shown."""
    walls, cpus, peak = [], [], 0
    for i in range(runs):
        wall, cpu, rss, code, _out = run_measured(make_cmd(i))
        if code != 0:
            raise SystemExit(f"{' '.join(make_cmd(i))} failed")
        walls.append(wall)
        cpus.append(cpu)
        peak = max(peak, rss)
    return median(walls), median(cpus), peak


def _run_one(ctx: Ctx, agent: str, here: Path, write: Callable[[str], int]) -> None:
    transcript = str(here / "transcript.jsonl")
    size = write(transcript)
    root = str(here / "root")
    Root.open(root, create=True)

    counter = iter(range(1_000_000))
    written = 0

    def fresh_import(_i: int) -> list[str]:
        return _import_cmd(agent, root, f"w{next(counter)}", transcript)

    # A fresh workspace each run, so each run writes every event.
    first = subprocess.run(fresh_import(0), check=True, capture_output=True, text=True)
    written = json.loads(first.stdout)["eventsWritten"]
    runs = 3
    # The floor's body size: the mean stored row of the imported workspace.
    seg_dir = os.path.join(root, "workspaces", "w0", "segments")
    seg_bytes = sum(os.path.getsize(os.path.join(seg_dir, n)) for n in os.listdir(seg_dir))
    row_size = max(64, seg_bytes // max(1, written) - 150)
    floor_script = FLOOR_INSERT.format(schema=SCHEMA)
    # Floor (A) and import (B) alternate, pair by pair.
    pairs = [(_timed(ctx, lambda i, k=k: [sys.executable, "-I", "-S", "-c", floor_script,
                                          str(here / f"floor-{k}.sqlite"), str(written),
                                          str(row_size)], 1),
              _timed(ctx, fresh_import, 1)) for k in range(runs)]
    t_floor, cpu_floor = median([a[0] for a, _ in pairs]), median([a[1] for a, _ in pairs])
    t_import, cpu_import = median([b[0] for _, b in pairs]), median([b[1] for _, b in pairs])
    rss_import = max(b[2] for _, b in pairs)
    ctx.report(f"import {agent} ({written} events)", t_import, t_floor,
               extra=f"{written / t_import:,.0f} events/s (goal >= 20,000); "
                     f"floor {written / t_floor:,.0f} rows/s; by CPU time "
                     f"{cpu_import / cpu_floor:.2f}x, {written / cpu_import:,.0f} events per "
                     f"CPU-second (goal >= 50,000); peak {rss_import / 1024:.0f} MiB "
                     "(goal <= 300)")

    # Re-import into a workspace that holds it all already: nothing new to write.
    again = subprocess.run(_import_cmd(agent, root, "w0", transcript), check=True,
                           capture_output=True, text=True)
    assert json.loads(again.stdout)["eventsWritten"] == 0, again.stdout
    t_again = median(ctx.time_process(lambda i: _import_cmd(agent, root, "w0", transcript),
                                      runs=runs))
    t_read = median(ctx.time_process(
        lambda i: [sys.executable, "-I", "-S", "-c", FLOOR_READ, transcript], runs=runs))
    ctx.report(f"re-import {agent}, nothing new ({size >> 20} MiB file)", t_again, t_read,
               goal=1.5)
