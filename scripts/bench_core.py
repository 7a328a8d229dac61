"""Core write path and show: whole-process record/observe vs one bare SQLite insert."""

from __future__ import annotations

import sqlite3
import time

from bench import CLI, PY, Ctx, median


def write_floor_cmd(ctx: Ctx) -> list[str]:
    """The floor process: one SQLite insert and commit from a bare `python -I -S`."""
    db = ctx.path("floor") / "floor.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE IF NOT EXISTS t (x)")
    conn.commit()
    conn.close()
    code = (f"import sqlite3;c=sqlite3.connect({str(db)!r});"
            "c.execute('insert into t values (1)');c.commit()")
    return [PY, "-I", "-S", "-c", code]


def write_floor(ctx: Ctx) -> float:
    cmd = write_floor_cmd(ctx)
    return median(ctx.time_process(lambda i: cmd))


def run(ctx: Ctx) -> None:
    root = str(ctx.path("core") / "root")
    floor = write_floor(ctx)
    base = [CLI]
    stamp = time.time_ns()
    rec = median(ctx.time_process(lambda i: base + [
        "record", "--root", root, "--workspace", "bench", "--kind", "finding",
        "--id", f"f{stamp}-{i}", "--claim", "bench claim"]))
    ctx.report("record (whole process)", rec, floor, goal=2.0)
    obs = median(ctx.time_process(lambda i: base + [
        "observe", "--root", root, "--workspace", "bench", "--kind", "tool_call",
        "--id", f"o{stamp}-{i}", "--tool", "Bash", "--callId", f"c{i}",
        "--input", '{"command": "ls"}']))
    ctx.report("observe (whole process)", obs, floor, goal=2.0)
    bench_show(ctx)


def bench_show(ctx: Ctx) -> None:
    import resource
    import subprocess

    from benchdata import build_workspace, plain_select_seconds, scaled

    root = str(ctx.path("core-show") / "root")
    n = scaled(1_000_000)
    ws = build_workspace(root, "big", events=n, segments=100)
    floor = min(plain_select_seconds(ws) for _ in range(3))
    times = []
    for _ in range(3):
        start = time.perf_counter()
        subprocess.run([CLI, "show", "--json", "--root", root, "--workspace", "big"], check=True,
                       stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    ctx.report(f"show over {n:,} events / 100 segments", min(times), floor, goal=4.0,
               extra=f"peak RSS {peak:.0f} MiB")
