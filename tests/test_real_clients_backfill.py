"""Completing sessions from their transcripts (agents/claude_code.py complete_sessions), without
the real clients: a real transcript from tests/data stands in for a session whose capture
hooks were cut off. tests/test_real_clients.py shows the same with the real Claude Code."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from conftest import DATA

from agent_journal.storage import open_sessions

TRANSCRIPT = (DATA / "claude-code" / "transcripts" / "daaain-claude-code-log"
              / "2b4ed4c0-b905-41de-9238-273db3ec737a.jsonl")
SESSION = "2b4ed4c0-b905-41de-9238-273db3ec737a"
CWD = "/src/experiments/claude_p"  # the transcript's own project
CALLS = 9


def hook(cli, event: str, session: str, transcript: str) -> None:
    payload = {"session_id": session, "transcript_path": transcript, "cwd": CWD,
               "hook_event_name": event}
    if event == "SessionStart":
        payload["source"] = "startup"
    result = cli("hook", "claude-code", input=json.dumps(payload))
    assert result.code == 0 and result.err == "", result.err


def calls(cli) -> list[dict[str, Any]]:
    entries = cli("show", "--observations", "--json").json()["entries"]
    return [e for e in entries if e["kind"] == "tool_call"]


def copy(tmp_path: Path, settled: bool) -> str:
    path = tmp_path / f"{SESSION}.jsonl"
    shutil.copyfile(TRANSCRIPT, path)
    if settled:
        old = time.time() - open_sessions.STALE_SECONDS - 60
        os.utime(path, (old, old))
    return str(path)


def notes(root: Path) -> list[str]:
    return sorted(name for name, _ in open_sessions.listed(str(root), "ws"))


def test_a_session_that_never_ended_is_completed_by_the_next_start(cli, root, tmp_path):
    transcript = copy(tmp_path, settled=True)
    hook(cli, "SessionStart", SESSION, transcript)
    assert notes(root) == [SESSION] and calls(cli) == []
    # The session dies: no SessionEnd. The next session's start completes it.
    hook(cli, "SessionStart", "next-session", str(tmp_path / "next.jsonl"))
    found = calls(cli)
    assert len(found) == CALLS
    assert {c["status"] for c in found} == {"ok", "error"}
    assert all("transcript" in c for c in found)
    assert notes(root) == ["next-session"]  # its transcript is settled: forgotten


def test_a_session_still_being_written_stays_noted_and_nothing_is_written_twice(
        cli, root, tmp_path):
    transcript = copy(tmp_path, settled=False)
    hook(cli, "SessionStart", SESSION, transcript)
    hook(cli, "SessionStart", "other-1", str(tmp_path / "o1.jsonl"))
    first = calls(cli)
    assert len(first) == CALLS
    assert SESSION in notes(root)  # it may still be running: completed, not forgotten
    hook(cli, "SessionStart", "other-2", str(tmp_path / "o2.jsonl"))
    again = calls(cli)
    assert [c["eventIds"] for c in again] == [c["eventIds"] for c in first]


def test_session_end_completes_its_session_and_forgets_it(cli, root, tmp_path):
    transcript = copy(tmp_path, settled=False)
    hook(cli, "SessionStart", SESSION, transcript)
    hook(cli, "SessionEnd", SESSION, transcript)
    assert len(calls(cli)) == CALLS
    assert notes(root) == []


def test_a_missing_or_foreign_transcript_completes_nothing(cli, root, tmp_path):
    hook(cli, "SessionStart", "gone", str(tmp_path / "gone.jsonl"))
    (tmp_path / "not.jsonl").write_text("not a transcript\n")
    hook(cli, "SessionEnd", "s2", str(tmp_path / "not.jsonl"))
    hook(cli, "SessionStart", "s3", str(tmp_path / "s3.jsonl"))
    assert calls(cli) == []
    assert not (root / "logs").exists()


def test_the_notes_are_bounded(tmp_path):
    root = tmp_path / "root"
    for i in range(open_sessions.MAX_NOTES + 5):
        open_sessions.note(str(root), "ws", f"s{i:03d}", f"/t/{i}.jsonl")
    kept = sorted(name for name, _ in open_sessions.listed(str(root), "ws"))
    assert len(kept) == open_sessions.MAX_NOTES
    assert (root / open_sessions.SESSIONS_DIR).stat().st_mode & 0o777 == 0o700
