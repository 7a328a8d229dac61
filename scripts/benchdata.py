"""Building large workspaces fast, straight through the storage layer (not the CLI)."""

from __future__ import annotations

import os
import sqlite3

from agent_journal.core.model import Event
from agent_journal.storage.connection import connect
from agent_journal.storage.files import create_private_file, make_private_dirs
from agent_journal.storage.root import Root
from agent_journal.storage.segment import init_segment, insert_events
from agent_journal.storage.workspace import Workspace

SCALE = float(os.environ.get("BENCH_SCALE", "1"))


def scaled(n: int) -> int:
    return max(1, int(n * SCALE))


def make_event(i: int, replica: str, *, tombstone_every: int = 0) -> list[Event]:
    """Event i of a synthetic workspace: mostly observations, some entries."""
    ts = f"2026-01-{1 + (i // 100000) % 28:02d}T{(i // 3600) % 24:02d}:{(i // 60) % 60:02d}:" \
         f"{i % 60:02d}.{i % 1000:03d}Z"
    out = []
    if i % 50 == 0:
        out.append(Event(event_id=f"e-{replica}-{i}", type="entry", kind="finding",
                         id=f"f{i}", ts=ts, author="agent", session="s1", replica=replica,
                         data={"fields": {"claim": f"finding number {i} about module{i % 97}"},
                               "anchors": [f"tool_use:o{i - 1}"], "dependsOn": [],
                               "subject": f"module{i % 97}"}))
    else:
        out.append(Event(event_id=f"e-{replica}-{i}", type="observation", kind="tool_call",
                         id=f"o{i}", ts=ts, author="agent", session="s1", replica=replica,
                         data={"tool": "Bash", "callId": f"c{i}",
                               "input": {"command": f"pytest tests/test_{i % 113}.py"},
                               "output": f"{i % 7} passed", "status": "ok", "exitCode": 0,
                               "durationMs": i % 5000}))
    if tombstone_every and i % tombstone_every == 0:
        out.append(Event(event_id=f"t-{replica}-{i}", type="tombstone", kind="tombstone",
                         id=out[0].id, ts=ts, author="human", session=None, replica=replica,
                         data={"reason": "bench", "purged": False}))
    return out


def build_workspace(root: str, workspace: str, *, events: int, segments: int,
                    tombstone_every: int = 0) -> Workspace:
    """`events` events spread over `segments` segment files of one replica."""
    ws = Root.open(root, create=True).workspace(workspace)
    make_private_dirs(ws.segments_dir)
    replica = ws.root.replica_id
    per = events // segments
    i = 0
    for s in range(segments):
        path = os.path.join(ws.segments_dir, f"{replica}-{s + 1:06d}.sqlite")
        create_private_file(path)
        conn = connect(path)
        init_segment(conn, workspace=workspace, replica=replica)
        conn.execute("PRAGMA synchronous=OFF")
        conn.execute("BEGIN")
        batch = []
        for _ in range(per):
            batch.extend(make_event(i, replica, tombstone_every=tombstone_every))
            i += 1
        insert_events(conn, batch)
        conn.execute("COMMIT")
        conn.close()
    return ws


def plain_select_seconds(ws: Workspace) -> float:
    """The floor for reads: SELECT every body of every segment, nothing else."""
    import time

    start = time.perf_counter()
    for path in ws.segment_paths():
        conn = sqlite3.connect(path)
        for _row in conn.execute("SELECT seq, event_id, body, checksum FROM events"):
            pass
        conn.close()
    return time.perf_counter() - start
