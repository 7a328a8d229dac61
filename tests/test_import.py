"""`import claude-code` on the real transcripts in tests/data: counts, idempotence, and
calls the live hook already captured."""

from __future__ import annotations

import json
import os
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import CLI, DATA, clean_env, run_on_a_terminal

DATA = DATA / "claude-code"
TRANSCRIPTS = DATA / "transcripts"
MAIN = TRANSCRIPTS / "daaain-claude-code-log" / "9e953218-585f-4692-89df-9e0747a31c68.jsonl"

assert TRANSCRIPTS.is_dir(), f"the repo\'s test data is missing: {TRANSCRIPTS}"

# (file, calls, errors) as counted in tests/data/claude-code/README.md.
COUNTS = [
    ("daaain-claude-code-log/9e953218-585f-4692-89df-9e0747a31c68.jsonl", 92, 10),
    ("daaain-claude-code-log/fe869ecb-c176-478f-9734-7e4b8ef12cff.jsonl", 32, 6),
    ("daaain-claude-code-log/ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl", 40, 0),
    ("daaain-claude-code-log/ef958aa1-0e93-49f0-bb71-150f63befcd1/subagents/"
     "agent-a36efb2a1231c41e2.jsonl", 7, 0),
    ("daaain-claude-code-log/03eb5929-52b3-4b13-ada3-b93ae35806b8.jsonl", 2, 0),
    ("daaain-claude-code-log/2b4ed4c0-b905-41de-9238-273db3ec737a.jsonl", 9, 6),
    ("DRMacIver-claude-reliability/coverage-test-fix/transcript.jsonl", 13, 1),
    ("TensorTemplar-slopometry/transcript.jsonl", 191, 5),
]


def import_(cli, path: Path, **kw: Any):
    return cli("import", "claude-code", str(path), "--json", **kw)


def observations(cli) -> dict[str, dict[str, Any]]:
    shown = cli("show", "--json", "--observations").json()
    assert shown["unreadable"] == [] and shown["malformed"] == []
    return {o["id"]: o for o in shown["entries"]
            if o["type"] == "observation" and o["kind"] == "tool_call"}


def rows(root: Path) -> int:
    total = 0
    for seg in (root / "workspaces").rglob("*.sqlite"):
        with sqlite3.connect(seg) as conn:
            total += conn.execute("SELECT count(*) FROM events").fetchone()[0]
    return total


def transcript_calls(path: Path) -> dict[str, dict[str, Any]]:
    """tool_use id -> {tool, input, session, ts, endTs, output, error} read independently."""
    calls: dict[str, dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        content = (record.get("message") or {}).get("content")
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "tool_use" and block["id"] not in calls:
                calls[block["id"]] = {"tool": block["name"], "input": block["input"],
                                      "session": record["sessionId"],
                                      "ts": record["timestamp"]}
            elif block.get("type") == "tool_result" and "endTs" not in calls.get(
                    block["tool_use_id"], {"endTs": 1}):
                call = calls[block["tool_use_id"]]
                call["endTs"] = record["timestamp"]
                call["error"] = block.get("is_error") is True
                call["output"] = block["content"] if isinstance(block["content"], str) else None
    return calls


def ms(ts: str) -> str:
    """A transcript timestamp as the journal writes it (UTC, milliseconds, Z)."""
    from agent_journal.core.clock import format_ts, parse_instant

    return format_ts(parse_instant(ts))


@pytest.mark.parametrize("name, calls, errors", COUNTS, ids=[c[0].split("/")[-1] for c in COUNTS])
def test_real_transcripts_import_every_call(cli, root, name, calls, errors):
    result = import_(cli, TRANSCRIPTS / name)
    assert result.code == 0 and result.err == ""
    report = result.json()
    assert report["calls"] == calls
    assert report["eventsWritten"] == 2 * calls + report["messages"]
    assert report["alreadyPresent"] == 0 and report["unfinished"] == 0
    seen = observations(cli)
    assert len(seen) == calls
    assert Counter(o["status"] for o in seen.values()) == Counter(
        {"ok": calls - errors, "error": errors}) - Counter()
    assert all(o["author"] == "agent" and len(o["eventIds"]) == 2 for o in seen.values())
    # Re-importing adds nothing.
    before = rows(root)
    again = import_(cli, TRANSCRIPTS / name).json()
    assert again["eventsWritten"] == 0
    assert again["alreadyPresent"] == 2 * calls + report["messages"]
    assert rows(root) == before


def test_ids_session_and_times_come_from_the_transcript(cli):
    assert import_(cli, MAIN).code == 0
    expected = transcript_calls(MAIN)
    seen = observations(cli)
    assert set(seen) == set(expected)
    for call_id, obs in seen.items():
        call = expected[call_id]
        assert obs["callId"] == call_id and obs["tool"] == call["tool"]
        assert obs["input"] == call["input"]
        assert obs["session"] == call["session"] == "9e953218-585f-4692-89df-9e0747a31c68"
        assert obs["ts"] == ms(call["ts"])
        end = ms(call["endTs"])
        # The end folds after the start even when both records carry the same millisecond.
        assert obs["lastTs"] == (end if end > obs["ts"] else _later(obs["ts"]))
        assert obs["status"] == ("error" if call["error"] else "ok")
        if call["output"] is not None:
            assert obs["output"] == call["output"]


def test_subagent_transcript_keeps_the_parent_session(cli):
    path = (TRANSCRIPTS / "daaain-claude-code-log" / "ef958aa1-0e93-49f0-bb71-150f63befcd1"
            / "subagents" / "agent-a36efb2a1231c41e2.jsonl")
    report = import_(cli, path).json()
    assert report["sessions"] == ["ef958aa1-0e93-49f0-bb71-150f63befcd1"]


def test_import_uses_artifacts_for_large_results(cli, root):
    path = TRANSCRIPTS / "TensorTemplar-slopometry" / "transcript.jsonl"
    report = import_(cli, path, env={"AGENT_JOURNAL_ARTIFACT_THRESHOLD": "4096"}).json()
    assert report["artifacts"] > 0
    every = [o for o in cli("show", "--observations", "--json").json()["entries"]
             if o["type"] == "observation" and o["artifact"]]
    assert len(every) == report["artifacts"]
    # What the session said is kept whole too: the compaction summary is a long text.
    [summary] = [o for o in every if o["kind"] == "compact_summary"]
    whole = cli("get", summary["id"])
    assert whole.code == 0 and len(whole.out.encode()) == summary["artifact"]["bytes"] > 4096
    assert whole.out.startswith(summary["text"])
    big = [o for o in observations(cli).values() if o["artifact"]]
    expected = transcript_calls(path)
    for obs in big[:5]:
        assert obs["artifact"]["status"] == "complete"
        result = cli("get", "--json", obs["id"])
        assert result.code == 0
        if expected[obs["id"]]["output"] is not None:
            assert result.out == expected[obs["id"]]["output"]


# -- the live hook came first ------------------------------------------------------------

def hook_payloads(path: Path, count: int, *, finish: bool = True) -> list[dict[str, Any]]:
    payloads = []
    for call_id, call in list(transcript_calls(path).items())[:count]:
        common = {"session_id": call["session"], "cwd": "/x/ws", "tool_name": call["tool"],
                  "tool_input": call["input"], "tool_use_id": call_id}
        payloads.append(common | {"hook_event_name": "PreToolUse"})
        if not finish:
            continue
        if call["error"]:
            payloads.append(common | {"hook_event_name": "PostToolUseFailure",
                                      "error": call["output"] or "failed"})
        else:
            payloads.append(common | {"hook_event_name": "PostToolUse",
                                      "tool_response": call["output"] or ""})
    return payloads


def test_calls_the_hook_captured_are_not_stored_twice(cli, root):
    # The first 13 calls include a failed one (the 13th), captured as PostToolUseFailure.
    for payload in hook_payloads(MAIN, 13):
        assert cli("hook", "claude-code", input=json.dumps(payload)).code == 0
    assert rows(root) == 26
    report = import_(cli, MAIN).json()
    assert report["alreadyPresent"] == 26
    assert report["eventsWritten"] == 2 * (92 - 13) + report["messages"]
    seen = observations(cli)
    assert len(seen) == 92
    assert all(len(o["eventIds"]) == 2 for o in seen.values())
    assert Counter(o["status"] for o in seen.values()) == Counter({"ok": 82, "error": 10})
    assert import_(cli, MAIN).json()["eventsWritten"] == 0
    assert not (root / "logs").exists()


def test_a_start_the_hook_saw_is_finished_by_the_import(cli, root):
    for payload in hook_payloads(MAIN, 5, finish=False):
        assert cli("hook", "claude-code", input=json.dumps(payload),
                   env={"AGENT_JOURNAL_NOW": "2099-01-01T00:00:00Z"}).code == 0
    report = import_(cli, MAIN).json()
    assert report["alreadyPresent"] == 5
    assert report["eventsWritten"] == 2 * 92 - 5 + report["messages"]
    seen = observations(cli)
    expected = transcript_calls(MAIN)
    for call_id in list(expected)[:5]:
        obs = seen[call_id]
        # The hook's clock was far ahead of the transcript's: the finish still folds last.
        assert obs["status"] == ("error" if expected[call_id]["error"] else "ok")
        assert obs["ts"] == "2099-01-01T00:00:00.000Z" and obs["lastTs"] > obs["ts"]
        assert len(obs["eventIds"]) == 2


def test_a_transcript_imported_while_running_is_completed_later(cli, root, tmp_path):
    lines = MAIN.read_text(encoding="utf-8").splitlines(keepends=True)
    # Cut just before the record carrying the last tool_result.
    last_result = max(i for i, line in enumerate(lines) if '"tool_result"' in line)
    partial = tmp_path / "live.jsonl"
    partial.write_text("".join(lines[:last_result]), encoding="utf-8")
    first = import_(cli, partial).json()
    assert first["unfinished"] >= 1
    started = {i for i, o in observations(cli).items() if o["status"] == "started"}
    assert started
    second = import_(cli, MAIN).json()
    assert second["eventsWritten"] == len(started) + second["messages"]
    assert all(observations(cli)[i]["status"] in ("ok", "error") for i in started)


# -- refusals ----------------------------------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda tmp: DATA / "hooks" / "docs" / "input" / "PreToolUse.json",
    lambda tmp: next((DATA / "codex").rglob("*.jsonl")),
    lambda tmp: _write(tmp / "empty.jsonl", b""),
    lambda tmp: _write(tmp / "binary.jsonl", os.urandom(256) + b"\n"),
    lambda tmp: _write(tmp / "late.jsonl", MAIN.read_bytes()[:200_000].rsplit(b"\n", 1)[0]
                       + b"\nnot json\n" + b'{"type": "user"}\n'),
])
def test_not_a_transcript_is_refused_and_nothing_written(cli, root, tmp_path, make):
    result = import_(cli, make(tmp_path))
    assert (result.code, result.out) == (1, "")
    assert "not a Claude Code transcript" in result.err and "nothing imported" in result.err
    assert not (root / "workspaces").exists() or rows(root) == 0


def _later(ts: str) -> str:
    from agent_journal.agents.claude_code_import import _later as later

    return later(ts)


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_missing_file_is_a_usage_error(cli, root, tmp_path):
    result = import_(cli, tmp_path / "nope.jsonl")
    assert result.code == 2 and "cannot read transcript" in result.err
    assert not root.exists()


def test_progress_is_shown_only_on_a_terminal(cli, root):
    assert import_(cli, MAIN).err == ""  # piped: silent
    env = clean_env(AGENT_JOURNAL_ROOT=str(root), AGENT_JOURNAL_WORKSPACE="tty")
    proc, seen = run_on_a_terminal([CLI, "import", "claude-code", str(MAIN), "--json"], env,
                                   120)
    assert proc.returncode == 0
    report = json.loads(proc.stdout)
    written = report["eventsWritten"]
    assert written == 184 + report["messages"]
    assert f"writing events: {written}/{written}".encode() in seen


def test_what_the_hook_heard_is_not_stored_twice(cli, root):
    """A prompt and a final message captured live are recognised by the import (same
    words, same id), and a second import adds nothing."""
    path = TRANSCRIPTS / "DRMacIver-claude-reliability" / "coverage-test-fix" / "transcript.jsonl"
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    session = next(r["sessionId"] for r in records if r.get("sessionId"))
    prompt = next(r["message"]["content"] for r in records if r.get("type") == "user"
                  and isinstance(r["message"]["content"], str) and not r.get("isMeta"))
    last = [b["text"] for r in records if r.get("type") == "assistant"
            for b in r["message"]["content"] if b.get("type") == "text"][-1]
    for payload in ({"hook_event_name": "UserPromptSubmit", "prompt": prompt},
                    {"hook_event_name": "Stop", "last_assistant_message": last}):
        assert cli("hook", "claude-code", input=json.dumps(
            {"session_id": session, "cwd": "/x/ws", **payload})).code == 0
    report = import_(cli, path).json()
    assert report["alreadyPresent"] == 2
    said = [o for o in cli("show", "--observations", "--json").json()["entries"]
            if o["type"] == "observation" and o["kind"] != "tool_call"]
    assert [o["text"] for o in said if o["kind"] == "prompt"] == [prompt]
    assert sum(o["text"] == last for o in said) == 1
    assert all(len(o["eventIds"]) == 1 for o in said)
    again = import_(cli, path).json()
    assert again["eventsWritten"] == 0 and again["messages"] == 0


def test_a_rewound_branch_is_kept_and_marked(cli):
    path = TRANSCRIPTS / "daaain-claude-code-log" / "03eb5929-52b3-4b13-ada3-b93ae35806b8.jsonl"
    assert import_(cli, path).code == 0
    prompts = [o for o in cli("show", "--observations", "--json").json()["entries"]
               if o.get("kind") == "prompt"]
    abandoned = [o["text"] for o in prompts if o["transcript"].get("branch") == "abandoned"]
    current = [o["text"] for o in prompts if "branch" not in o["transcript"]]
    assert any(t.startswith("I very much like this idea") for t in abandoned)
    assert any(t.startswith("I actually don't like much this idea") for t in current)
    digest = cli("digest").out
    assert "## Rewound prompts" in digest
    assert digest.index("I actually don't like") < digest.index("## Rewound prompts")


@pytest.mark.parametrize("value", [
    "2025-12-01T10:00:00.123Z", "2025-02-29T10:00:00.000Z", "2024-02-29T23:59:59.999Z",
    "2025-12-01T24:00:00.000Z", "2025-12-01T23:59:60.000Z", "0999-01-01T00:00:00.000Z",
    "2025-13-01T00:00:00.000Z", "2025-12-01T10:00:00.123+02:00", "2025-12-01T10:00:00Z",
    "2025-12-01T10:00:00.123456Z", "2025-12-01 10:00:00.123Z", "not a time", "",
])
def test_transcript_time_fast_path_agrees_with_parsing(value: str) -> None:
    from agent_journal.agents.claude_code_import import _ts
    from agent_journal.core import clock
    from agent_journal.core.errors import UsageError

    try:
        expected: str | None = clock.format_ts(clock.parse_instant(value)) if value else None
    except UsageError:
        expected = None
    assert _ts(value) == expected


def test_a_bad_line_after_batches_were_written_rolls_the_whole_import_back(
        root, tmp_path, monkeypatch):
    # The import streams: batches are planned and written as the file is read, all in
    # one transaction, so a bad line near the end, after several batches went to the
    # segment, leaves no event behind.
    from agent_journal.agents import claude_code_import
    from agent_journal.core.errors import JournalError
    from agent_journal.ops.context import Context
    from agent_journal.storage import import_transaction

    monkeypatch.setattr(claude_code_import, "BATCH", 5)
    written: list[int] = []
    real_append = import_transaction.ImportTransaction.append

    def counted(self: Any, events: list[Any]) -> int:
        written.append(real_append(self, events))
        return written[-1]

    monkeypatch.setattr(import_transaction.ImportTransaction, "append", counted)
    bad = _write(tmp_path / "late.jsonl", MAIN.read_bytes().rstrip(b"\n") + b"\nnot json\n")
    ctx = Context(str(root), "late")
    ctx.open(create=True)  # a workspace that exists: its segment must stay empty
    with pytest.raises(JournalError, match="nothing imported"):
        claude_code_import.import_claude_code(ctx, str(bad))
    assert len(written) >= 10 and sum(written) > 40  # batches went to the segment...
    assert rows(root) == 0  # ...and were rolled back
    monkeypatch.setattr(import_transaction.ImportTransaction, "append", real_append)
    report = claude_code_import.import_claude_code(ctx, str(MAIN))  # the good file: whole
    assert report["eventsWritten"] == rows(root) >= sum(written)
