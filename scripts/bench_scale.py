"""Reads at scale: each read command at 10k, 100k and 1M events against a raw scan.

The floor is a whole process (`python -I -S`) that reads every row of every
table of every SQLite file under the root, the least any read of the whole
journal can do; it is timed again beside each command. Each command is the
installed console script, as a whole process, on the same root. Printed per
size: the ratio to the floor, the peak resident memory of the command (from
the kernel's accounting of the child), and, last, the growth from 100k to 1M
(linear is 10x; the goal is <= 12x) beside the growth of the floors timed
next to it.

Goals (issue 19): every read <= 3x the floor at 1M events, peak RSS <= 300 MiB.
BENCH_SCALE shrinks the sizes (BENCH_SCALE=0.1: 1k, 10k, 100k).

Run alone: python scripts/bench_scale.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from bench import CLI, PY, Ctx

SIZES = (10_000, 100_000, 1_000_000)
SEGMENT_EVENTS = 10_000
WORKSPACE = "bench-scale"
RSS_GOAL_MIB = 300
RATIO_GOAL = 3.0

READS: list[tuple[str, list[str]]] = [
    ("show", ["show", "--json"]),
    ("show --observations --json", ["show", "--observations", "--json"]),
    ("show --observations", ["show", "--observations"]),
    ("coverage", ["coverage", "--json"]),
    ("decay", ["decay", "--json"]),
    ("trace", ["trace", "module7", "--json"]),
    ("trace (text)", ["trace", "module7"]),
    ("timeline", ["timeline"]),
    ("timeline --json", ["timeline", "--json"]),
    ("get", ["get", "o1"]),
    ("compact (dry run)", ["compact", "--observation-ttl-days", "30"]),
    ("digest (cold)", ["digest"]),
    ("digest (warm)", ["digest"]),
]

RAW_SCAN = r"""
import os, sqlite3, sys
for folder, _, names in os.walk(sys.argv[1]):
    for name in names:
        if not name.endswith(".sqlite"):
            continue
        conn = sqlite3.connect(f"file:{os.path.join(folder, name)}?mode=ro", uri=True)
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            for _row in conn.execute(f'SELECT * FROM "{table}"'):
                pass
        conn.close()
"""


def _timed(cmd: list[str], env: dict[str, str]) -> tuple[float, int]:
    """(seconds, peak RSS in KiB) of one whole process."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise RuntimeError(f"{' '.join(cmd)} exited {code}")
    return elapsed, usage.ru_maxrss


def _drop_projections(root: Path) -> None:
    import shutil

    for area in ("reads", "counts"):
        shutil.rmtree(root / "cache" / area, ignore_errors=True)


def _build(root: Path, events: int) -> None:
    from benchdata import build_workspace

    build_workspace(str(root), WORKSPACE, events=events,
                    segments=max(1, events // SEGMENT_EVENTS))


def run(ctx: Ctx) -> None:
    scale = float(os.environ.get("BENCH_SCALE", "1"))
    at: dict[str, dict[int, float]] = {}
    floors: dict[str, dict[int, float]] = {}
    for size in SIZES:
        events = max(1000, int(size * scale))
        root = ctx.path(f"scale-{events}") / "journal"
        _build(root, events)
        env = dict(os.environ, AGENT_JOURNAL_ROOT=str(root), AGENT_JOURNAL_WORKSPACE=WORKSPACE,
                   AGENT_JOURNAL_NOW="2026-03-01T00:00:00Z")
        scan = [PY, "-I", "-S", "-c", RAW_SCAN, str(root)]
        floor = min(_timed(scan, env)[0] for _ in range(3))
        print(f"-- {events:,} events: raw scan {floor * 1000:.0f} ms", flush=True)
        for name, args in READS:
            # The floor is taken again beside each command: on a shared machine
            # the load moves within minutes, and a ratio is only fair against a
            # floor timed under the same load.
            floor = _timed(scan, env)[0]
            # coverage, decay and compact keep read projections (cache/counts,
            # cache/reads): each figure here is of a run from nothing; the
            # runs that follow are in bench_compact.py.
            _drop_projections(root)
            try:
                elapsed, rss_kib = _timed([CLI, *args], env)
            except RuntimeError as exc:
                print(f"{name} @ {events:,}: {exc}", flush=True)
                continue
            if not name.endswith("(cold)"):
                _drop_projections(root)
                elapsed = min(elapsed, _timed([CLI, *args], env)[0])
            at.setdefault(name, {})[events] = elapsed
            floors.setdefault(name, {})[events] = floor
            rss = rss_kib / 1024
            verdict = "" if events < max(1000, int(SIZES[-1] * scale)) else (
                "ok" if elapsed / floor <= RATIO_GOAL and rss <= RSS_GOAL_MIB else "OVER goal")
            ctx.report(f"{name} @ {events:,}", elapsed, floor,
                       extra=f"peak {rss:.0f} MiB {verdict}".rstrip())
    for name, by_size in at.items():
        sizes = sorted(by_size)
        if len(sizes) >= 2:
            growth = by_size[sizes[-1]] / by_size[sizes[-2]]
            # The floor's own growth, timed beside it: a figure that grew no
            # more than its floor grew with the load, not with the journal.
            floor_growth = floors[name][sizes[-1]] / floors[name][sizes[-2]]
            print(f"{name:<48} growth x{growth:5.1f} from {sizes[-2]:,} to {sizes[-1]:,} "
                  f"(floor x{floor_growth:4.1f}) ({'ok' if growth <= 12 else 'OVER 12x'})",
                  flush=True)


if __name__ == "__main__":
    import tempfile

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    with tempfile.TemporaryDirectory(prefix="aj-bench-") as tmp:
        os.chmod(tmp, 0o700)
        run(Ctx(Path(tmp)))
