"""`stats` through the projection engine: what it gives equals a fold of every row read
now, after appends, after a row changed under it, and after tombstones (laws); a run
that keeps nothing writes nothing."""

from __future__ import annotations

import json
import sqlite3

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_journal.core.stats import StatsFold, combine
from agent_journal.storage.projection import fold_segment, project
from agent_journal.storage.root import Root


def observe(cli, call_id: str, tool: str, command: str, status: str, *, env=None):
    result = cli("observe", "--kind", "tool_call", "--id", call_id, "--tool", tool,
                 "--input", json.dumps({"command": command}), "--status", status,
                 env=env or {})
    assert result.code == 0, result.err


def direct(ws) -> dict:
    """What folding every row of every segment now gives, with nothing kept."""
    reader = StatsFold()
    return combine([fold_segment(path, ws.rel(path), reader).state
                    for path in ws.segment_paths()])


def test_stats_counts_calls_failures_and_sessions_and_leaves_out_tombstoned(cli, root):
    observe(cli, "a", "Bash", "cd src && go test ./...", "error")
    observe(cli, "b", "Bash", "go test ./pkg/", "ok")
    observe(cli, "c", "Read", "x", "ok")
    observe(cli, "d", "Bash", "rm -rf secret", "error")
    assert cli("tombstone", "d", "--reason", "leaked").code == 0
    out = cli("stats", "--json")
    report = json.loads(out.out)
    assert report["calls"] == 3
    assert {t["tool"]: (t["calls"], t["failed"]) for t in report["tools"]} == {
        "Bash": (2, 1), "Read": (1, 0)}
    assert report["commands"][0] == {"command": "go test", "runs": 2, "failed": 1}
    assert all(c["command"] != "rm" for c in report["commands"])
    text = cli("stats").out
    assert "Bash: 2 (1 failed)" in text and "go test: 1 of 2 run(s)" in text


def test_a_kept_projection_reads_only_new_rows_and_gives_what_a_direct_fold_gives(cli, root):
    for n in range(6):
        observe(cli, f"c{n}", "Bash", f"make t{n % 2}", "error" if n % 3 == 0 else "ok",
                env={"AGENT_JOURNAL_SEGMENT_MAX_BYTES": "1"} if n == 3 else None)
    ws = Root(str(root)).workspace("ws")
    first = combine([p.state for p in project(ws, StatsFold())])
    assert first == direct(ws) and (root / "cache" / "stats").is_dir()
    observe(cli, "late", "Bash", "make t0", "ok")
    assert combine([p.state for p in project(ws, StatsFold())]) == direct(ws)
    # A row rewritten under the kept mark: that segment is folded again from its start.
    segment = sorted(ws.segment_paths())[0]
    conn = sqlite3.connect(segment)
    conn.execute("DELETE FROM events WHERE seq = (SELECT min(seq) FROM events)")
    conn.commit()
    conn.close()
    assert combine([p.state for p in project(ws, StatsFold())]) == direct(ws)


def test_a_read_that_keeps_nothing_writes_nothing(cli, root):
    observe(cli, "a", "Bash", "ls", "ok")
    ws = Root(str(root)).workspace("ws")
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    project(ws, StatsFold(), keep=False)
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before


CALLS = st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d"]),
                           st.sampled_from(["Bash", "Read"]),
                           st.sampled_from(["ok", "error", "started"]),
                           st.booleans()), min_size=1, max_size=8)


@settings(max_examples=10, deadline=None)
@given(st.lists(CALLS, min_size=1, max_size=3))
def test_the_projection_after_any_appends_is_the_direct_fold(tmp_path_factory, batches):
    import subprocess

    from conftest import (
        CLI,
        clean_env,  # the suite's own environment, without ours
    )

    root = tmp_path_factory.mktemp("p") / "root"
    env = clean_env(AGENT_JOURNAL_ROOT=str(root), AGENT_JOURNAL_WORKSPACE="ws")
    ws = None
    for batch in batches:
        for call_id, tool, status, roll in batch:
            extra = {"AGENT_JOURNAL_SEGMENT_MAX_BYTES": "1"} if roll else {}
            subprocess.run([CLI, "observe", "--kind", "tool_call", "--id", call_id, "--tool",
                            tool, "--input", json.dumps({"command": f"x {call_id}"}),
                            "--status", status], env={**env, **extra}, check=True,
                           capture_output=True)
        ws = Root(str(root)).workspace("ws")
        assert combine([p.state for p in project(ws, StatsFold())]) == direct(ws)
