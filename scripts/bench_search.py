"""Search: index build, incremental update and query latency, against plain FTS5.

Scale: AGENT_JOURNAL_BENCH_SEARCH_EVENTS events (default 1,000,000); the
printed header states the scale measured. The journal is written straight
through store functions (one transaction per 20,000 events), so building it
is not what is timed. Floors, measured in the same run:

- index build: a plain FTS5 table (default options, its own content) over the
  very same document texts, filled in one transaction;
- incremental update after 1,000 new events: the full index build
  (goal: <= 5% of it);
- query p50 over 50 queries of 1-3 words (mixed rarity): the same OR query on
  the plain table, ranked by FTS5's bm25 with a snippet, top 10, on a fresh
  connection each time like a CLI run; ours is the whole `search()` call
  (freshness check, ranking, snippets) (goal: <= 2x).
"""

from __future__ import annotations

import math
import os
import random
import sqlite3
import time

from bench import Ctx, median

from agent_journal.core import ranking
from agent_journal.core.model import Event
from agent_journal.ops import search
from agent_journal.ops.context import Context
from agent_journal.storage import search_index
from agent_journal.storage.cache import remove_cache_files
from agent_journal.storage.connection import run_write
from agent_journal.storage.segment import insert_events
from agent_journal.storage.workspace import Workspace

ENV_EVENTS = "AGENT_JOURNAL_BENCH_SEARCH_EVENTS"
VOCAB = 40_000
PHRASES = 60_000
CHUNK = 20_000
START_MS = 1_735_689_600_000          # 2025-01-01
SPAN_MS = 120 * 24 * 3600 * 1000      # the journal covers four months


def _ts(ms: int) -> str:
    t = time.gmtime(ms // 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", t) + f".{ms % 1000:03d}Z"


class Corpus:
    """Zipf-distributed words, grouped into reusable phrases for speed."""

    def __init__(self, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        rng = self.rng
        letters = "abcdefghijklmnopqrstuvwxyz"
        self.words = ["".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) + str(i % 10)
                      for i in range(VOCAB)]
        cum, total = [], 0.0
        for rank in range(VOCAB):
            total += 1.0 / (rank + 1)
            cum.append(total)
        self.phrases = [" ".join(rng.choices(self.words, cum_weights=cum, k=6))
                        for _ in range(PHRASES)]

    def text(self, n: int) -> str:
        rng = self.rng
        return ". ".join(self.phrases[rng.randrange(PHRASES)] for _ in range(n))


def make_events(corpus: Corpus, count: int, start: int, replica: str) -> list[Event]:
    rng = corpus.rng
    events: list[Event] = []
    for k in range(start, start + count):
        ts = _ts(START_MS + (k * SPAN_MS) // max(count + start, 1))
        roll = rng.random()
        eid = f"{k:08x}-0000-4000-8000-{rng.getrandbits(48):012x}"
        if roll < 0.94:
            data = {"tool": rng.choice(("Bash", "Read", "Edit", "Grep", "Write")),
                    "callId": f"call-{k}", "input": {"command": corpus.text(1)},
                    "output": corpus.text(4), "status": "ok", "exitCode": 0,
                    "durationMs": rng.randrange(5000)}
            events.append(Event(event_id=eid, type="observation", kind="tool_call",
                                id=f"o{k}", ts=ts, author="agent", session="s",
                                replica=replica, data=data))
        elif roll < 0.99:
            deps = [f"e{rng.randrange(max(k, 1))}"] if rng.random() < 0.2 else []
            data = {"fields": {"claim": corpus.text(2)}, "anchors": [f"tool_use:o{k - 1}"],
                    "dependsOn": deps, "subject": corpus.text(1)[:30]}
            events.append(Event(event_id=eid, type="entry", kind="finding", id=f"e{k}",
                                ts=ts, author="agent", session="s", replica=replica,
                                data=data))
        elif roll < 0.995:
            events.append(Event(event_id=eid, type="invalidation", kind="invalidation",
                                id=f"e{rng.randrange(max(k, 1))}", ts=ts, author="human",
                                session=None, replica=replica, data={"reason": "wrong"}))
        else:
            events.append(Event(event_id=eid, type="tombstone", kind="tombstone",
                                id=f"o{rng.randrange(max(k, 1))}", ts=ts, author="human",
                                session=None, replica=replica,
                                data={"reason": "leak", "purged": False}))
    return events


def write(ws: Workspace, events: list[Event]) -> None:
    for i in range(0, len(events), CHUNK):
        conn = ws.open_for_append()
        try:
            chunk = events[i:i + CHUNK]
            run_write(conn, lambda c, chunk=chunk: insert_events(c, chunk))
        finally:
            conn.close()


def plain_table(index_file: str, path: str) -> float:
    """Fill a plain FTS5 table with the index's own document texts; returns seconds."""
    src = sqlite3.connect(index_file)
    texts = src.execute("SELECT id, text FROM texts ORDER BY id").fetchall()
    src.close()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=OFF")
    conn.execute("PRAGMA synchronous=OFF")
    conn.execute("CREATE VIRTUAL TABLE plain USING fts5(text)")
    start = time.perf_counter()
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO plain(rowid, text) VALUES (?, ?)", texts)
    conn.execute("COMMIT")
    took = time.perf_counter() - start
    conn.close()
    return took


def pick_queries(index_file: str, rng: random.Random) -> list[str]:
    conn = sqlite3.connect(index_file)
    conn.execute("CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, wordindex, row)")
    ranked = [r[0] for r in conn.execute("SELECT term FROM temp.vocab ORDER BY doc DESC")
              if not r[0].isdigit()]
    conn.close()
    queries = []
    for _ in range(50):
        n = rng.choice((1, 2, 2, 3))
        # log-uniform over frequency rank: as many rare as common words
        picks = [ranked[min(len(ranked) - 1, int(math.exp(rng.uniform(0, math.log(len(ranked))))))]
                 for _ in range(n)]
        queries.append(" ".join(picks))
    return queries


def run(ctx: Ctx) -> None:
    total = int(os.environ.get(ENV_EVENTS) or 1_000_000 * float(os.environ.get("BENCH_SCALE") or 1))
    print(f"scale: {total:,} events (+1,000 for the incremental update)", flush=True)
    base = ctx.path("search")
    root_dir = str(base / "root")
    jctx = Context(root_dir, "bench")
    ws = jctx.open(create=True)
    corpus = Corpus()
    start = time.perf_counter()
    write(ws, make_events(corpus, total, 0, ws.root.replica_id))
    print(f"  (journal written in {time.perf_counter() - start:.1f} s, "
          f"{len(ws.segment_paths())} segment(s))", flush=True)

    index_file = search_index.index_path(ws)
    remove_cache_files(index_file)
    start = time.perf_counter()
    search_index.refresh(ws).conn.close()
    build = time.perf_counter() - start
    plain_path = str(base / "plain.sqlite")
    plain_build = plain_table(index_file, plain_path)
    ctx.report("search index build (from segments)", build, plain_build,
               extra="floor: plain FTS5 fill of the same texts")

    write(ws, make_events(corpus, 1000, total, ws.root.replica_id))
    start = time.perf_counter()
    search_index.refresh(ws).conn.close()
    incremental = time.perf_counter() - start
    ctx.report("search incremental update (1,000 events)", incremental, build, goal=0.05,
               extra="floor: full index build")

    queries = pick_queries(index_file, random.Random(11))
    os.environ["AGENT_JOURNAL_NOW"] = _ts(START_MS + SPAN_MS)
    ours, floor = [], []
    for q in queries:
        t0 = time.perf_counter()
        search.search(jctx, q)
        ours.append(time.perf_counter() - t0)
        match = " OR ".join(f'"{w}"' for w in ranking.words(q))
        t0 = time.perf_counter()
        conn = sqlite3.connect(plain_path)
        conn.execute("SELECT rowid, snippet(plain, 0, '«', '»', '…', 16) FROM plain "
                     "WHERE plain MATCH ? ORDER BY rank LIMIT 10", (match,)).fetchall()
        conn.close()
        floor.append(time.perf_counter() - t0)
    os.environ.pop("AGENT_JOURNAL_NOW", None)
    ctx.report("search query p50 (50 queries)", median(ours), median(floor), goal=2.0,
               extra="floor: plain FTS5 bm25 + snippet")
    worst = max(range(len(queries)), key=lambda i: ours[i] / floor[i])
    print(f"  (worst single query ratio {ours[worst] / floor[worst]:.2f}x: {queries[worst]!r}; "
          f"max ours {max(ours) * 1000:.0f} ms, max floor {max(floor) * 1000:.0f} ms)",
          flush=True)
