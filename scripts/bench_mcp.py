"""The MCP server: start-up to the first answer, and search through MCP against the CLI.

Scale: AGENT_JOURNAL_BENCH_MCP_EVENTS events (default 100,000 x BENCH_SCALE), written
straight through the storage layer like bench_search's journal. The client is a bare
JSON-RPC loop over the server's pipes (newline-delimited, as MCP's stdio transport is),
so no client library's cost is counted. Floors, measured in the same run:

- start-up: `agent-journal mcp` spawned, the initialize handshake, and one answered
  `search` call, against a bare `python -c pass` of the same venv (goal: <= 3x). The
  SDK's own import is timed beside it (`python -c "import mcp.server.lowlevel"`), with
  `-X importtime`'s largest packages, because it alone decides this ratio;
- search: the p50 of `tools/call search` on a running server over 30 queries, against
  the p50 of the CLI's `agent-journal search QUERY` processes for the same queries on
  the same journal (goal: <= 1.5x).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time

from bench import CLI, PY, Ctx, median
from bench_search import SPAN_MS, START_MS, Corpus, _ts, make_events, pick_queries, write

from agent_journal.ops.context import Context
from agent_journal.storage import search_index

ENV_EVENTS = "AGENT_JOURNAL_BENCH_MCP_EVENTS"
PROTOCOL = "2025-06-18"  # a handshake-era version, as Claude Code speaks today


class RawClient:
    """Just enough MCP over stdio to time a server: requests out, answers back, in order."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([CLI, "mcp"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env=env)
        self.next_id = 0

    def send(self, method: str, params: dict | None = None, *, notify: bool = False) -> None:
        message: dict = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        if not notify:
            self.next_id += 1
            message["id"] = self.next_id
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def answer(self) -> dict:
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("the server closed its output")
            message = json.loads(line)
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"server error: {message['error']}")
                return message["result"]

    def request(self, method: str, params: dict | None = None) -> dict:
        self.send(method, params)
        return self.answer()

    def handshake(self) -> None:
        self.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "0"}})
        self.send("notifications/initialized", notify=True)

    def search(self, query: str) -> str:
        result = self.request("tools/call", {"name": "search", "arguments": {"query": query}})
        assert not result.get("isError"), result
        return result["content"][0]["text"]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def first_answer_seconds(env: dict[str, str], query: str) -> float:
    start = time.perf_counter()
    client = RawClient(env)
    client.handshake()
    client.search(query)
    took = time.perf_counter() - start
    client.close()
    return took


def import_breakdown() -> str:
    """The SDK import's largest top-level packages by their own (not cumulative) time."""
    proc = subprocess.run([PY, "-X", "importtime", "-c", "import mcp.server.lowlevel"],
                          capture_output=True, text=True, check=True)
    own: dict[str, int] = {}
    for line in proc.stderr.splitlines():
        parts = line.split("|")  # "import time: SELF | CUMULATIVE | NAME"
        if len(parts) != 3 or not parts[0].startswith("import time:"):
            continue
        self_us = parts[0].split(":", 1)[1].strip()
        if self_us.isdigit():
            package = parts[2].strip().split(".")[0]
            own[package] = own.get(package, 0) + int(self_us)
    top = sorted(own.items(), key=lambda kv: -kv[1])[:6]
    return ", ".join(f"{name} {us / 1000:.0f} ms" for name, us in top)


def run(ctx: Ctx) -> None:
    total = int(os.environ.get(ENV_EVENTS)
                or 100_000 * float(os.environ.get("BENCH_SCALE") or 1))
    print(f"scale: {total:,} events", flush=True)
    root_dir = str(ctx.path("mcp") / "root")
    jctx = Context(root_dir, "bench")
    ws = jctx.open(create=True)
    write(ws, make_events(Corpus(seed=3), total, 0, ws.root.replica_id))
    search_index.refresh(ws).conn.close()  # both sides then only check freshness
    queries = pick_queries(search_index.index_path(ws), random.Random(5))[:30]
    env = dict(os.environ, AGENT_JOURNAL_ROOT=root_dir, AGENT_JOURNAL_WORKSPACE="bench",
               AGENT_JOURNAL_NOW=_ts(START_MS + SPAN_MS))

    bare = Ctx.time_process(lambda i: [PY, "-c", "pass"], runs=11)
    starts = [first_answer_seconds(env, queries[i % len(queries)]) for i in range(7)]
    ctx.report("mcp start -> first answered search", median(starts), median(bare), goal=3.0,
               extra="floor: python -c pass")
    sdk = Ctx.time_process(lambda i: [PY, "-c", "import mcp.server.lowlevel"], runs=5)
    ctx.report("  of which: import of the MCP SDK alone", median(sdk), median(bare),
               extra="floor: python -c pass")
    print(f"  (SDK import, own time by package: {import_breakdown()})", flush=True)

    cli = Ctx.time_process(lambda i: [CLI, "search", queries[i % len(queries)]],
                           runs=len(queries), env=env)
    client = RawClient(env)
    client.handshake()
    through_mcp = []
    try:
        for q in queries:
            start = time.perf_counter()
            client.search(q)
            through_mcp.append(time.perf_counter() - start)
    finally:
        client.close()
    ctx.report("mcp search p50 (30 queries, running server)", median(through_mcp),
               median(cli), goal=1.5, extra="floor: the CLI's search process")


if __name__ == "__main__":
    from bench import main

    raise SystemExit(main(["mcp", *sys.argv[1:]]))
