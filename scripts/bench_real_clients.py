"""What agent-journal's hooks add to each tool call of the real Claude Code (issue 28).

A 25-call headless session (`claude -p`, each call a Bash `echo`) against the scripted
model server of tests/model_server.py, three ways, interleaved round by round in one run
so that the machine's load falls on all of them alike:

- `none`: no hooks at all (the floor);
- `noop`: the same hook entries as ours (events, async flags) running `cat >/dev/null`,
  what any hook at all costs in the client;
- `ours`: `agent-journal hooks install claude-code` as a user gets it;
- `sync`: the same without `"async": true` (how the hooks ran before issue 28).

A call's wall time is the time between the model server receiving the request that
asked for the call and the one that carries its result (the client ran the call and
every hook it waits for in between). Goal: ours' median per-call time minus none's
<= 15 ms. The whole session's time is printed too (it adds SessionStart, the prompt,
Stop and SessionEnd hooks, once per session), and every run's calls must all be
journaled, as `ok`.

Needs the real clients (`make clients`). BENCH_REAL_ROUNDS (default 3) sets the rounds,
BENCH_REAL_CALLS (default 25) the calls per session. Run alone with
`python scripts/bench.py real_clients`, or `python scripts/bench_real_clients.py`.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from model_server import Call, ModelServer, Script  # noqa: E402
from real_clients import Sandbox, clients_missing  # noqa: E402

GOAL_MS = 15.0
MODES = ("none", "noop", "ours", "sync")


def _edit(settings_path: Path, mode: str) -> None:
    """Our installed entries with a command that only reads its payload (`noop`), or
    run in the foreground (`sync`)."""
    settings = json.loads(settings_path.read_text())
    for groups in settings["hooks"].values():
        for group in groups:
            for handler in group["hooks"]:
                if mode == "noop":
                    handler["command"] = "cat >/dev/null"
                else:
                    handler.pop("async", None)
    settings_path.write_text(json.dumps(settings, indent=2))


def session(base: Path, mode: str, calls: int) -> tuple[list[float], float, int]:
    """(per-call seconds, session seconds, calls journaled ok) of one session."""
    box = Sandbox(base)
    if mode != "none":
        box.install("claude-code")
        if mode != "ours":
            _edit(box.project / ".claude" / "settings.json", mode)
    turns: list = [[Call("Bash", {"command": f"echo {i}"})] for i in range(calls)]
    with ModelServer([Script("bench", turns + ["done"])]) as server:
        start = time.monotonic()
        box.claude(server, "bench: run the commands")
        total = time.monotonic() - start
        asked = [r["at"] for r in server.requests if (r["body"] or {}).get("tools")]
    per_call = [b - a for a, b in zip(asked, asked[1:], strict=False)][:calls]
    journaled = 0
    if mode in ("ours", "sync"):
        found = box.wait_for_calls(lambda c: len(c) >= calls and all(
            v["status"] == "ok" for v in c.values()))
        journaled = sum(v["status"] == "ok" for v in found.values())
    return per_call, total, journaled


def measure(rounds: int, calls: int, out=print) -> dict[str, float]:
    per_call: dict[str, list[float]] = {m: [] for m in MODES}
    totals: dict[str, list[float]] = {m: [] for m in MODES}
    with tempfile.TemporaryDirectory(prefix="aj-bench-real-") as tmp:
        for r in range(rounds):
            for mode in MODES:
                gaps, total, journaled = session(Path(tmp) / f"{mode}-{r}", mode, calls)
                per_call[mode] += gaps
                totals[mode].append(total)
                if mode in ("ours", "sync") and journaled != calls:
                    out(f"  round {r}: only {journaled} of {calls} calls journaled ok")
    med = {m: statistics.median(per_call[m]) * 1000 for m in MODES}
    whole = {m: statistics.median(totals[m]) for m in MODES}
    for mode in MODES:
        out(f"  {mode:<5} per call median {med[mode]:7.1f} ms   session median "
            f"{whole[mode]:6.2f} s   ({len(per_call[mode])} calls, {rounds} sessions)")
    added = med["ours"] - med["none"]
    verdict = "ok" if added <= GOAL_MS else f"OVER goal {GOAL_MS:g} ms"
    out(f"real Claude Code, added per tool call (median): ours {added:+.1f} ms, "
        f"no-op hooks {med['noop'] - med['none']:+.1f} ms, ours in the foreground "
        f"{med['sync'] - med['none']:+.1f} ms; {verdict}")
    out(f"real Claude Code, added per session: ours {whole['ours'] - whole['none']:+.2f} s, "
        f"no-op hooks {whole['noop'] - whole['none']:+.2f} s, ours in the foreground "
        f"{whole['sync'] - whole['none']:+.2f} s")
    return {"added_ms": added, "noop_added_ms": med["noop"] - med["none"], **{
        f"{m}_ms": med[m] for m in MODES}}


def run(ctx: object) -> None:
    missing = clients_missing()
    if missing:
        print(f"  skipped: {missing}")
        return
    measure(int(os.environ.get("BENCH_REAL_ROUNDS", "3")),
            int(os.environ.get("BENCH_REAL_CALLS", "25")))


if __name__ == "__main__":
    run(None)
