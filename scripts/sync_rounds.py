"""Sync rounds: what each sync moves against what is new (issue 31, "ship what is new").

10 replicas of one workspace meet in a bucket of moto's S3 server, through a
counting proxy (tests/s3_support.FaultProxy: the bytes of every request's and
answer's body, both ways). In each of 20 rounds every replica writes 500 new
events, then syncs (pull, then push), one replica after another. For each sync
the bytes moved are compared with the new events' bytes: the canonical bytes
(codec) of the events that sync brought in (the other replicas' events written
since this replica's last sync) and sent out (its own 500). Goal: <= 1.3x in
every round. Printed per round: the worst and the median sync's ratio, and the
bytes moved against the new bytes.

The events are observations of tool calls with a command and some output (about
1 KB each, seeded): words of a small vocabulary mixed with paths, line numbers
and hex digests, so that compression finds about what it finds in a real
journal (a few times smaller), not a repeated string. Each round's wall and CPU
time (this process: the syncs run in it) are printed too: they should not grow
with the rounds.
AJ_BENCH_SYNC_REPLICAS / _ROUNDS_N / _EVENTS change the shape (10 / 20 / 500).
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time
import uuid

from bench import Ctx

WS = "bench"
GOAL = 1.3
WORDS = ("build test failed passed error warning module import function class value "
         "request response server client cache index segment replica manifest bucket "
         "object delta push pull merge tombstone observation entry finding note").split()


def _events(rng: random.Random, replica: str, start: int, count: int) -> list:
    from agent_journal.core.model import Event

    out = []
    for i in range(start, start + count):
        words = " ".join(_token(rng) for _ in range(rng.randint(60, 120)))
        out.append(Event(
            event_id=f"{uuid.UUID(int=rng.getrandbits(128))}", type="observation",
            kind="tool_call", id=f"{replica}-o{i}", ts=f"2026-01-01T00:00:{i % 60:02d}.000Z",
            author="agent", session="s", replica=replica,
            data={"tool": "Bash", "callId": f"c{i}", "input": {"command": f"pytest -q t{i}"},
                  "output": words, "status": "ok", "exitCode": 0,
                  "durationMs": rng.randint(1, 5000)}))
    return out


def _token(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.6:
        return rng.choice(WORDS)
    if roll < 0.8:
        return f"src/{rng.choice(WORDS)}/{rng.choice(WORDS)}.py:{rng.randint(1, 2000)}"
    return f"{rng.getrandbits(40):010x}"


def _size(events: list) -> int:
    from agent_journal.core import codec

    return sum(len(codec.encode(e)[0]) for e in events)


def run(ctx: Ctx) -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "tests"))
    from s3_support import FaultProxy, MotoServer, aws_env

    from agent_journal.ops import remotes, sync
    from agent_journal.ops.context import Context

    n = int(os.environ.get("AJ_BENCH_SYNC_REPLICAS") or "10")
    rounds = int(os.environ.get("AJ_BENCH_SYNC_ROUNDS_N") or "20")
    per = int(os.environ.get("AJ_BENCH_SYNC_EVENTS") or "500")
    os.environ.update({k: v for k, v in aws_env().items() if k.startswith("AWS_")})
    server = MotoServer().start()
    proxy = FaultProxy(server.port).start()
    rng = random.Random(31)
    try:
        bucket = f"bench-{uuid.uuid4().hex[:8]}"
        server.client().create_bucket(Bucket=bucket)
        base = ctx.path("sync-rounds")
        roots = []
        for i in range(n):
            path = str(base / f"r{i}")
            roots.append(Context(path, WS))
            remotes.add(roots[-1], "b", f"s3://{bucket}/team", endpoint_url=proxy.url)
        # written[i]: the canonical bytes replica i wrote in each round, in order;
        # seen[i][j]: how many of replica j's rounds replica i had pulled.
        written: list[list[int]] = [[] for _ in range(n)]
        seen = [[0] * n for _ in range(n)]
        worst_all = 0.0
        start = time.perf_counter()
        for r in range(rounds):
            ratios, moved_round, new_round = [], 0, 0
            wall, cpu = time.perf_counter(), time.process_time()
            for i, c in enumerate(roots):
                events = _events(rng, f"r{i}", r * per, per)
                ws = c.open(create=True)
                ws.append(events)
                written[i].append(_size(events))
                new = written[i][-1] + sum(sum(written[j][seen[i][j]:])
                                           for j in range(n) if j != i)
                before = proxy.moved
                sync.sync(c, None)
                moved = proxy.moved - before
                for j in range(n):
                    seen[i][j] = len(written[j])
                ratios.append(moved / new)
                moved_round += moved
                new_round += new
            worst_all = max(worst_all, max(ratios))
            verdict = "ok" if max(ratios) <= GOAL else f"OVER goal {GOAL}x"
            print(f"   round {r + 1:2d}: worst sync {max(ratios):5.2f}x, median "
                  f"{statistics.median(ratios):5.2f}x  ({moved_round / 1e6:7.2f} MB moved for "
                  f"{new_round / 1e6:7.2f} MB new) {verdict}; "
                  f"{time.perf_counter() - wall:5.1f} s wall, "
                  f"{time.process_time() - cpu:5.1f} s CPU", flush=True)
        print(f"   {n} replicas x {rounds} rounds x {per} events in "
              f"{time.perf_counter() - start:.0f} s; {proxy.requests} requests", flush=True)
        line = (f"{'bytes moved per sync / new events bytes':<48} {worst_all:6.2f}x  (worst "
                f"sync of {n * rounds}) " + ("ok" if worst_all <= GOAL else
                                               f"OVER goal {GOAL}x"))
        print(line, flush=True)
        ctx.rows.append(("sync rounds", line))
    finally:
        proxy.stop()
        server.stop()


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
