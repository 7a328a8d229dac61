"""make bench: agent-journal's speed as ratios against floors measured in the same run.

These machines are shared and noisy, so no figure here is an absolute time
promise: each benchmark times the real command and a floor (a bare
`python -I -S` doing the same SQLite work, or a plain SQL statement over the
same rows) back to back, and prints the ratio. Benchmarks live in
scripts/bench_*.py, each exposing `run(ctx)`; this driver runs them all, or
the ones named on the command line (`python scripts/bench.py core compact`,
or `make bench BENCH="core compact"`). BENCH_SCALE=0.1 shrinks every
million-event workspace tenfold, for a quick look on a busy machine.
"""

from __future__ import annotations

import importlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
VENV_BIN = Path(sys.executable).parent
CLI = str(VENV_BIN / "agent-journal")
PY = sys.executable


class Ctx:
    """Shared helpers: a private scratch folder, timers, and the result table."""

    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        self.rows: list[tuple[str, str]] = []
        sys.path.insert(0, str(HERE.parent))

    def path(self, name: str) -> Path:
        p = self.scratch / name
        p.mkdir(parents=True, exist_ok=True, mode=0o700)
        return p

    @staticmethod
    def time_process(make_cmd, runs: int = 21, env: dict[str, str] | None = None,
                     stdin: bytes | None = None) -> list[float]:
        times = []
        full_env = dict(os.environ, **(env or {}))
        for i in range(runs):
            cmd = make_cmd(i)
            start = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True, env=full_env, input=stdin)
            times.append(time.perf_counter() - start)
        return times

    @staticmethod
    def time_call(fn, runs: int = 1) -> list[float]:
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return times

    def report(self, name: str, value: float, floor: float, goal: float | None = None,
               extra: str = "") -> None:
        ratio = value / floor if floor else float("inf")
        verdict = "" if goal is None else (" ok" if ratio <= goal else f" OVER goal {goal}x")
        line = (f"{name:<48} {ratio:6.2f}x  ({value * 1000:9.1f} ms vs floor "
                f"{floor * 1000:9.1f} ms){verdict}{(' ' + extra) if extra else ''}")
        print(line, flush=True)
        self.rows.append((name, line))


# Runs a command and writes its wall seconds, CPU seconds, peak RSS (KiB) and exit code
# to the file named first. A child's ru_maxrss counts the image it was forked from, so
# a command spawned straight from a bench that has grown (it built a million events)
# would report the bench's own size: this small reaper forks it instead.
REAPER = r"""
import os, sys, time
out, cmd = sys.argv[1], sys.argv[2:]
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.execvp(cmd[0], cmd)
_, status, u = os.wait4(pid, 0)
with open(out, "w") as fh:
    fh.write(f"{time.perf_counter() - start} {u.ru_utime + u.ru_stime} {u.ru_maxrss} "
             f"{os.waitstatus_to_exitcode(status)}")
"""


def run_measured(cmd: list[str], env: dict[str, str] | None = None
                 ) -> tuple[float, float, int, int, bytes]:
    """(wall seconds, CPU seconds, peak RSS in KiB, exit code, stdout) of one whole
    process, its peak its own (see REAPER)."""
    with tempfile.NamedTemporaryFile("r", suffix=".measured") as fh:
        proc = subprocess.run([PY, "-I", "-S", "-c", REAPER, fh.name, *cmd], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=False)
        wall, cpu, rss, code = fh.read().split()
    return float(wall), float(cpu), int(rss), int(code), proc.stdout


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def p95(xs: list[float]) -> float:
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


def main(argv: list[str]) -> int:
    # This machine sets PYTHONDONTWRITEBYTECODE: without fresh .pyc files every
    # measured process would compile the package from source first.
    import compileall

    compileall.compile_dir(str(HERE.parent / "agent_journal"), quiet=1)
    names = argv or sorted(p.stem.removeprefix("bench_") for p in HERE.glob("bench_*.py"))
    with tempfile.TemporaryDirectory(prefix="aj-bench-") as tmp:
        os.chmod(tmp, 0o700)
        ctx = Ctx(Path(tmp))
        sys.path.insert(0, str(HERE))
        for name in names:
            module = importlib.import_module(f"bench_{name}")
            print(f"== {name}", flush=True)
            module.run(ctx)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
