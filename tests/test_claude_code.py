"""Claude Code adapter, held to the real hook payloads and transcripts in tests/data."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_journal.capture.claude_code import (
    DEFAULT_WORKSPACE,
    OBSERVATION_KEYS,
    HookPayloadError,
    NotATranscriptError,
    hook_to_observation,
    is_file_write,
    main_input,
    parse_hook_payload,
    said_id,
    sanitise_workspace_id,
)
from agent_journal.capture.claude_code_transcript import read_transcript
from agent_journal.capture.redact import Redactor, marker

REPO = Path(__file__).resolve().parents[1]
TRANSCRIPT_KEYS = {*OBSERVATION_KEYS, "ts", "endTs"}


@pytest.fixture(scope="session")
def claude_data() -> Path:
    path = REPO / "tests" / "data" / "claude-code"
    assert path.is_dir(), f"the repo's test data is missing: {path}"
    return path


def hook_input(data: Path, event: str) -> dict[str, Any]:
    return parse_hook_payload((data / "hooks" / "docs" / "input" / f"{event}.json").read_bytes())


def replay(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as lines:
        return list(read_transcript(lines))


# ---------------------------------------------------------------- hook payloads


def test_pre_tool_use(claude_data: Path) -> None:
    payload = hook_input(claude_data, "PreToolUse")
    assert hook_to_observation(payload) == {
        "id": "toolu_01ABC123...",
        "kind": "tool_call",
        "session": "abc123",
        "tool": "Bash",
        "callId": "toolu_01ABC123...",
        "input": {
            "command": "npm test",
            "description": "Run test suite",
            "timeout": 120000,
            "run_in_background": False,
        },
        "output": None,
        "status": "started",
        "durationMs": None,
        "exitCode": None,
        "text": None,
        "data": {
            "session_id": "abc123",
            "prompt_id": "550e8400-e29b-41d4-a716-446655440000",
            "transcript_path": "/home/user/.claude/projects/.../transcript.jsonl",
            "cwd": "/home/user/my-project",
            "permission_mode": "default",
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_use_id": "toolu_01ABC123...",
        },
    }


def test_post_tool_use_keeps_the_response_structure(claude_data: Path) -> None:
    observation = hook_to_observation(hook_input(claude_data, "PostToolUse"))
    assert observation["id"] == observation["callId"] == "toolu_01ABC123..."
    assert observation["kind"] == "tool_call"
    assert observation["status"] == "ok"
    assert observation["tool"] == "Write"
    assert observation["input"] == {"file_path": "/path/to/file.txt", "content": "file content"}
    assert observation["output"] == {"filePath": "/path/to/file.txt", "success": True}
    assert observation["durationMs"] == 12
    assert observation["exitCode"] is None
    assert "tool_response" not in observation["data"]
    assert "tool_input" not in observation["data"]


def test_post_tool_use_failure(claude_data: Path) -> None:
    observation = hook_to_observation(hook_input(claude_data, "PostToolUseFailure"))
    assert observation["status"] == "error"
    assert observation["output"] == "Exit code 1\nError: Cannot find module 'express'"
    assert observation["exitCode"] == 1
    assert observation["durationMs"] == 4187
    assert observation["data"]["is_interrupt"] is False
    assert "error" not in observation["data"]


def _call(event: str, **fields: Any) -> dict[str, Any]:
    return {"session_id": "s1", "cwd": "/w", "hook_event_name": event, "tool_name": "Bash",
            "tool_use_id": "toolu_1", "tool_input": {"command": "make"}, **fields}


def test_permission_denied_ends_the_call_with_its_reason() -> None:
    """An auto-mode denial is the call's end: it never ran, and the reason is the output
    (without it the PreToolUse would stand as a call with no outcome)."""
    observation = hook_to_observation(_call("PermissionDenied", reason="destructive command"))
    assert observation["id"] == observation["callId"] == "toolu_1"
    assert (observation["kind"], observation["status"]) == ("tool_call", "error")
    assert observation["output"] == "destructive command"
    assert observation["input"] == {"command": "make"}
    assert "reason" not in observation["data"] and "tool_input" not in observation["data"]
    assert observation["data"]["hook_event_name"] == "PermissionDenied"


@pytest.mark.parametrize(("event", "fields", "status", "exit_code"), [
    # Bash cut short by Esc or by its own timeout: it did not finish.
    ("PostToolUse", {"tool_response": {"stdout": "half", "stderr": "Command timed out",
                                       "interrupted": True, "isImage": False}},
     "cancelled", None),
    ("PostToolUse", {"tool_response": {"stdout": "all", "stderr": "", "interrupted": False}},
     "ok", None),
    ("PostToolUseFailure", {"error": "Interrupted by user", "is_interrupt": True},
     "cancelled", None),
    ("PostToolUseFailure", {"error": "Exit code 2\nboom", "is_interrupt": False}, "error", 2),
    # A background shell's end, as BashOutput reports it.
    ("PostToolUse", {"tool_name": "BashOutput", "tool_input": {"bash_id": "bash_1"},
                     "tool_response": {"shellId": "bash_1", "status": "failed",
                                       "exitCode": 1, "stdout": "1 failed"}}, "error", 1),
    ("PostToolUse", {"tool_name": "BashOutput", "tool_response": {"status": "completed",
                                                                  "exitCode": 0}}, "ok", 0),
    ("PostToolUse", {"tool_name": "BashOutput", "tool_response": {"status": "running",
                                                                  "exitCode": None}},
     "ok", None),
    ("PostToolUse", {"tool_response": {"exitCode": True}}, "ok", None),
    ("PostToolUse", {"tool_response": {"exitCode": 10**40}}, "ok", None),
])
def test_how_a_call_ended_is_read_from_the_payload(
        event: str, fields: dict[str, Any], status: str, exit_code: int | None) -> None:
    observation = hook_to_observation(_call(event, **fields))
    assert (observation["status"], observation["exitCode"]) == (status, exit_code)


@pytest.mark.parametrize(
    ("event", "kind", "field"),
    [
        ("UserPromptSubmit", "prompt", "prompt"),
        ("Stop", "assistant_message", "last_assistant_message"),
        ("SubagentStop", "subagent_result", "last_assistant_message"),
        ("PostCompact", "compact_summary", "compact_summary"),
    ],
)
def test_what_the_session_said(claude_data: Path, event: str, kind: str, field: str) -> None:
    """The text is lifted into `text` (stored once) and the id derives from it, so the
    transcript's import of the same words finds the hook's capture."""
    payload = hook_input(claude_data, event)
    observation = hook_to_observation(payload)
    assert observation["kind"] == kind
    assert observation["text"] == payload[field]
    assert field not in observation["data"]
    assert observation["id"] == said_id(kind, "abc123", payload[field],
                                        payload.get("agent_id"))
    assert observation["id"] == hook_to_observation(payload)["id"]


@pytest.mark.parametrize(
    ("event", "kind", "kept"),
    [
        ("SessionStart", "session_start", "source"),
        ("PreCompact", "pre_compact", "trigger"),
        ("SessionEnd", "session_end", "reason"),
        ("SubagentStart", "hook_SubagentStart", "agent_type"),
        ("Notification", "hook_Notification", "notification_type"),
        ("PermissionRequest", "hook_PermissionRequest", "permission_suggestions"),
    ],
)
def test_session_level_events(claude_data: Path, event: str, kind: str, kept: str) -> None:
    payload = hook_input(claude_data, event)
    observation = hook_to_observation(payload)
    assert observation == {
        **dict.fromkeys(OBSERVATION_KEYS),
        "kind": kind,
        "session": "abc123",
        "data": payload,
    }
    assert kept in observation["data"]


def test_session_start_and_pre_compact_keep_their_detail(claude_data: Path) -> None:
    assert hook_to_observation(hook_input(claude_data, "SessionStart"))["data"]["source"] == (
        "startup"
    )
    assert hook_to_observation(hook_input(claude_data, "PreCompact"))["data"]["trigger"] == (
        "manual"
    )


def test_every_docs_example_parses_and_has_exactly_the_observation_keys(
    claude_data: Path,
) -> None:
    files = sorted((claude_data / "hooks" / "docs" / "input").glob("*.json"))
    assert len(files) == 13
    for path in files:
        observation = hook_to_observation(parse_hook_payload(path.read_text(encoding="utf-8")))
        assert tuple(observation) == OBSERVATION_KEYS, path.name


def test_hook_observation_is_redacted_and_input_untouched() -> None:
    token = "gh" + "p_" + "FakeExample0123456789" * 2
    aws = "AK" + "IA" + "FAKEEXAMPLE01234"
    payload = {
        "session_id": "s1",
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_use_id": "toolu_01X",
        "tool_input": {"command": f"GH_TOKEN={token[:40]} gh pr list"},
        "tool_response": {"stdout": f"key {aws}\n", "stderr": "", "interrupted": False},
    }
    before = json.dumps(payload)
    observation = hook_to_observation(payload)
    assert observation["input"] == {"command": f"GH_TOKEN={marker('github-token')} gh pr list"}
    assert observation["output"]["stdout"] == f"key {marker('aws-access-key')}\n"
    assert json.dumps(payload) == before
    prompt = {"session_id": "s1", "hook_event_name": "UserPromptSubmit", "prompt": f"use {aws}"}
    assert hook_to_observation(prompt)["text"] == f"use {marker('aws-access-key')}"


def test_hook_observation_uses_the_given_redactor() -> None:
    payload = {
        "session_id": "s1",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_use_id": "toolu_01X",
        "tool_input": {"command": "deploy --key ACME-123456"},
    }
    redactor = Redactor([("acme", r"ACME-\d{6}")])
    assert hook_to_observation(payload, redactor)["input"]["command"] == (
        f"deploy --key {marker('acme')}"
    )
    assert hook_to_observation(payload)["input"]["command"] == "deploy --key ACME-123456"


def test_tool_event_without_tool_use_id_gets_no_id() -> None:
    observation = hook_to_observation(
        {"hook_event_name": "PreToolUse", "tool_name": "Read", "tool_input": {"file_path": "/a"}}
    )
    assert observation["id"] is None and observation["callId"] is None
    assert observation["session"] is None
    assert observation["status"] == "started"


@pytest.mark.parametrize(
    ("duration", "expected"),
    [(12, 12), (12.6, 13), (0, 0), (-1, None), (True, None), ("12", None), (None, None)],
)
def test_duration_is_a_non_negative_number_or_none(duration: object, expected: int | None) -> None:
    payload = {"hook_event_name": "PostToolUse", "tool_use_id": "t", "duration_ms": duration}
    assert hook_to_observation(payload)["durationMs"] == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[]", "hook payload must be a JSON object, got array"),
        ('"PreToolUse"', "hook payload must be a JSON object, got string"),
        ("null", "hook payload must be a JSON object, got null"),
        ('{"session_id": "s"}', "hook payload has no hook_event_name"),
        ('{"hook_event_name": 3}', "hook_event_name must be an identifier"),
        ('{"hook_event_name": ""}', "hook_event_name must be an identifier"),
        ('{"hook_event_name": "Pre Tool/Use"}', "hook_event_name must be an identifier"),
        (
            '{"hook_event_name": "x", "hook_event_name": "y"}',
            'hook payload is not valid JSON: duplicate key "hook_event_name"',
        ),
        (
            '{"hook_event_name": "Stop", "n": NaN}',
            "hook payload is not valid JSON: NaN is not valid JSON",
        ),
        ("", "hook payload is not valid JSON: invalid JSON: Expecting value"),
        (b"\xff", "hook payload is not valid JSON: invalid JSON: Expecting value"),
    ],
)
def test_bad_hook_payloads_are_refused(text: str | bytes, message: str) -> None:
    with pytest.raises(HookPayloadError) as info:
        parse_hook_payload(text)
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)
    assert isinstance(info.value, ValueError)


def test_hook_to_observation_checks_its_input_too() -> None:
    with pytest.raises(HookPayloadError):
        hook_to_observation({"tool_name": "Bash"})
    with pytest.raises(HookPayloadError):
        hook_to_observation(["PreToolUse"])  # type: ignore[arg-type]


def test_lone_surrogate_in_a_payload_costs_one_character() -> None:
    text = '{"hook_event_name": "PostToolUse", "tool_response": "ok \\ud83d"}'
    payload = parse_hook_payload(text)
    assert payload["tool_response"] == "ok \ufffd"


def test_a_byte_that_is_not_utf8_costs_one_character() -> None:
    text = b'{"hook_event_name": "PostToolUse", "tool_response": {"stdout": "ok \xff\xfe!"}}'
    assert parse_hook_payload(text)["tool_response"] == {"stdout": "ok \ufffd\ufffd!"}
    assert parse_hook_payload(bytearray(text)) == parse_hook_payload(text)


# ---------------------------------------------------------------- main_input, is_file_write


@pytest.mark.parametrize(
    ("tool", "tool_input", "expected"),
    [
        ("Bash", {"command": "npm test", "description": "Run tests"}, "npm test"),
        ("Read", {"file_path": "/a/b.py", "offset": 10}, "/a/b.py"),
        ("Write", {"file_path": "/a/c.py", "content": "x"}, "/a/c.py"),
        ("Edit", {"file_path": "/a/d.py", "old_string": "a", "new_string": "b"}, "/a/d.py"),
        ("MultiEdit", {"file_path": "/a/e.py", "edits": []}, "/a/e.py"),
        ("NotebookEdit", {"notebook_path": "/n.ipynb", "new_source": "x"}, "/n.ipynb"),
        ("Grep", {"pattern": "def main", "path": "/src"}, "def main"),
        ("Glob", {"pattern": "**/*.py"}, "**/*.py"),
        ("LS", {"path": "/src"}, "/src"),
        ("WebFetch", {"url": "https://example.com", "prompt": "summarise"}, "https://example.com"),
        ("WebSearch", {"query": "sqlite wal"}, "sqlite wal"),
        ("Task", {"description": "Explore", "prompt": "long..."}, "Explore"),
        ("Agent", {"prompt": "only a prompt"}, "only a prompt"),
        ("TaskUpdate", {"taskId": "3", "status": "done"}, "3"),
        ("TaskGet", {"taskId": 7}, "7"),
        ("TodoWrite", {"todos": [{"content": "x"}]}, None),
        ("ExitPlanMode", {"plan": "x", "file_path": "/p"}, None),
        ("mcp__fs__read_file", {"path": "/etc/hosts"}, "/etc/hosts"),
        ("SomeFutureTool", {"url": "https://x"}, "https://x"),
        ("SomeFutureTool", {"other": "x"}, None),
        ("Bash", {"command": ""}, None),
        ("Bash", {"command": ["ls"]}, None),
        ("Bash", None, None),
        ("Bash", "ls", None),
        (None, {"file_path": "/f"}, "/f"),
    ],
)
def test_main_input(tool: str | None, tool_input: object, expected: str | None) -> None:
    assert main_input(tool, tool_input) == expected


def test_is_file_write() -> None:
    for tool in ("Write", "Edit", "MultiEdit", "NotebookEdit"):
        assert is_file_write(tool)
    for other in ("Read", "Bash", "Grep", "write", "", None, "mcp__fs__write_file"):
        assert not is_file_write(other)


# ---------------------------------------------------------------- transcripts

# (file, tool_use, errors, tools) as counted in tests/data/claude-code/README.md.
TRANSCRIPTS = [
    (
        "daaain-claude-code-log/9e953218-585f-4692-89df-9e0747a31c68.jsonl",
        92,
        10,
        {"Bash": 35, "Edit": 23, "Read": 21, "TodoWrite": 8, "Grep": 3, "Write": 1, "Glob": 1},
    ),
    (
        "daaain-claude-code-log/fe869ecb-c176-478f-9734-7e4b8ef12cff.jsonl",
        32,
        6,
        {"Bash": 12, "Edit": 9, "TodoWrite": 6, "Read": 2, "LS": 1, "Write": 1, "MultiEdit": 1},
    ),
    (
        "daaain-claude-code-log/ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl",
        40,
        0,
        {
            "TaskUpdate": 12, "Bash": 9, "TaskCreate": 6, "Agent": 6, "ToolSearch": 3,
            "SendMessage": 3, "TaskList": 1,
        },
    ),
    (
        "daaain-claude-code-log/ef958aa1-0e93-49f0-bb71-150f63befcd1/subagents/"
        "agent-a36efb2a1231c41e2.jsonl",
        7,
        0,
        {"Bash": 3, "Read": 3, "Edit": 1},
    ),
    (
        "daaain-claude-code-log/03eb5929-52b3-4b13-ada3-b93ae35806b8.jsonl",
        2,
        0,
        {"Bash": 1, "Read": 1},
    ),
    (
        "daaain-claude-code-log/2b4ed4c0-b905-41de-9238-273db3ec737a.jsonl",
        9,
        6,
        {"Bash": 6, "WebSearch": 1, "Glob": 1, "Read": 1},
    ),
    (
        "DRMacIver-claude-reliability/coverage-test-fix/transcript.jsonl",
        13,
        1,
        {"Bash": 5, "Read": 3, "Edit": 3, "Glob": 2},
    ),
    ("TensorTemplar-slopometry/transcript.jsonl", 191, 5, None),
]


@pytest.mark.parametrize(
    ("name", "calls", "errors", "tools"),
    TRANSCRIPTS,
    ids=[t[0].split("/")[-1] for t in TRANSCRIPTS],
)
def test_transcript_replay_matches_the_documented_counts(
    claude_data: Path, name: str, calls: int, errors: int, tools: dict[str, int] | None
) -> None:
    path = claude_data / "transcripts" / name
    observations = replay(path)
    assert len(observations) == calls
    assert Counter(o["status"] for o in observations) == Counter(
        {"ok": calls - errors, "error": errors}
    ) - Counter()
    if tools is not None:
        assert Counter(o["tool"] for o in observations) == tools
    assert len({o["id"] for o in observations}) == calls
    session_ids = {
        record["sessionId"]
        for record in map(json.loads, path.read_text(encoding="utf-8").splitlines())
        if "sessionId" in record
    }
    for observation in observations:
        assert set(observation) == TRANSCRIPT_KEYS
        assert observation["kind"] == "tool_call"
        assert observation["id"] == observation["callId"]
        assert re.fullmatch(r"toolu_[A-Za-z0-9]+", observation["id"])
        assert observation["session"] in session_ids
        assert isinstance(observation["output"], str)
        assert observation["ts"] <= observation["endTs"]


def test_replay_is_verbatim_on_real_transcripts(claude_data: Path) -> None:
    # The real files hold no secrets, so redaction must leave every input and output as is:
    # this pins the "never touch ids, hashes, paths and prose" side on 5 MB of real text.
    for path in sorted((claude_data / "transcripts").rglob("*.jsonl")):
        inputs: dict[str, Any] = {}
        outputs: dict[str, Any] = {}
        for record in map(json.loads, path.read_text(encoding="utf-8").splitlines()):
            content = (record.get("message") or {}).get("content")
            for block in content if isinstance(content, list) else []:
                if block.get("type") == "tool_use":
                    inputs[block["id"]] = block["input"]
                elif block.get("type") == "tool_result" and isinstance(block["content"], str):
                    outputs[block["tool_use_id"]] = block["content"]
        for observation in replay(path):
            assert observation["input"] == inputs[observation["id"]], path.name
            if observation["id"] in outputs:
                assert observation["output"] == outputs[observation["id"]], path.name


def test_error_results_carry_their_text(claude_data: Path) -> None:
    observations = replay(
        claude_data / "transcripts" / "daaain-claude-code-log"
        / "9e953218-585f-4692-89df-9e0747a31c68.jsonl"
    )
    failures = [o["output"] for o in observations if o["status"] == "error"]
    assert any("String to replace not found in file" in text for text in failures)
    assert any("File has not been read yet" in text for text in failures)


def test_bash_exit_code_is_read_from_the_result(claude_data: Path) -> None:
    observations = replay(
        claude_data / "transcripts" / "DRMacIver-claude-reliability"
        / "coverage-test-fix" / "transcript.jsonl"
    )
    (failure,) = [o for o in observations if o["status"] == "error"]
    assert failure["tool"] == "Bash"
    assert failure["exitCode"] == 1
    assert failure["output"].startswith("Exit code 1\nOn branch master")
    assert all(o["exitCode"] is None for o in observations if o["status"] == "ok")


def test_timestamps_come_from_the_call_and_result_records(claude_data: Path) -> None:
    path = claude_data / "transcripts" / "daaain-claude-code-log" / (
        "9e953218-585f-4692-89df-9e0747a31c68.jsonl"
    )
    started: dict[str, str] = {}
    finished: dict[str, str] = {}
    for record in map(json.loads, path.read_text(encoding="utf-8").splitlines()):
        for block in record["message"]["content"] if isinstance(
            record["message"]["content"], list
        ) else []:
            if block["type"] == "tool_use":
                started[block["id"]] = record["timestamp"]
            elif block["type"] == "tool_result":
                finished[block["tool_use_id"]] = record["timestamp"]
    for observation in replay(path):
        assert observation["ts"] == started[observation["id"]]
        assert observation["endTs"] == finished[observation["id"]]


def test_list_content_is_flattened_to_text(claude_data: Path) -> None:
    observations = replay(
        claude_data / "transcripts" / "daaain-claude-code-log"
        / "ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl"
    )
    searches = [o for o in observations if o["tool"] == "ToolSearch"]
    assert searches[0]["output"].startswith("[tool_reference: TaskCreate]\n")
    agents = [o for o in observations if o["tool"] == "Agent"]
    assert all(o["output"] and not o["output"].startswith("[") for o in agents)


def test_subagent_transcript_keeps_parent_session_and_agent(claude_data: Path) -> None:
    observations = replay(
        claude_data / "transcripts" / "daaain-claude-code-log"
        / "ef958aa1-0e93-49f0-bb71-150f63befcd1" / "subagents" / "agent-a36efb2a1231c41e2.jsonl"
    )
    assert {o["session"] for o in observations} == {"ef958aa1-0e93-49f0-bb71-150f63befcd1"}
    assert {o["data"]["agentId"] for o in observations} == {"a36efb2a1231c41e2"}
    assert all(o["data"]["isSidechain"] is True for o in observations)


def test_old_format_with_summaries(claude_data: Path) -> None:
    path = claude_data / "transcripts" / "daaain-claude-code-log" / (
        "fe869ecb-c176-478f-9734-7e4b8ef12cff.jsonl"
    )
    lines = path.read_text(encoding="utf-8").splitlines()
    assert sum('"type":"summary"' in line for line in lines) == 15
    observations = list(read_transcript(lines))
    assert {o["data"]["version"] for o in observations} == {"1.0.24"}
    # A file of summaries only is still a transcript, with nothing to replay.
    summaries = [line for line in lines if '"type":"summary"' in line]
    assert list(read_transcript(summaries)) == []


def test_bytes_lines_and_split_lines_give_the_same_replay(claude_data: Path) -> None:
    path = claude_data / "transcripts" / "DRMacIver-claude-reliability" / "coverage-test-fix" / (
        "transcript.jsonl"
    )
    as_text = replay(path)
    with path.open("rb") as raw:
        assert list(read_transcript(raw)) == as_text
    assert list(read_transcript(path.read_text(encoding="utf-8").splitlines())) == as_text


def test_repeated_history_is_replayed_once(claude_data: Path) -> None:
    path = claude_data / "transcripts" / "DRMacIver-claude-reliability" / "coverage-test-fix" / (
        "transcript.jsonl"
    )
    lines = path.read_text(encoding="utf-8").splitlines()
    assert list(read_transcript(lines + lines)) == list(read_transcript(lines))


def record(kind: str, content: object, ts: str = "2026-01-01T00:00:00.000Z") -> str:
    role = "assistant" if kind == "assistant" else "user"
    return json.dumps(
        {
            "type": kind,
            "sessionId": "sess-1",
            "timestamp": ts,
            "cwd": "/w/proj",
            "message": {"role": role, "content": content},
        }
    )


def tool_use(call_id: str, name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": tool_input}


def tool_result(call_id: str, content: object, is_error: bool = False) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content, "is_error": is_error}


def test_unfinished_calls_come_last_as_started() -> None:
    lines = [
        record("assistant", [tool_use("t1", "Bash", {"command": "sleep 1"})], "T1"),
        record("assistant", [tool_use("t2", "Read", {"file_path": "/x"})], "T2"),
        record("user", [tool_result("t2", [{"type": "text", "text": "body"}, {"type": "image"}])],
               "T3"),
    ]
    first, second = read_transcript(lines)
    assert (first["id"], first["status"], first["output"], first["ts"], first["endTs"]) == (
        "t2", "ok", "body\n[image]", "T2", "T3"
    )
    assert (second["id"], second["status"], second["output"], second["ts"], second["endTs"]) == (
        "t1", "started", None, "T1", None
    )
    assert second["data"] == {"cwd": "/w/proj"}


def test_result_without_its_call_is_still_evidence() -> None:
    (observation,) = read_transcript([record("user", [tool_result("t9", "late", True)], "T9")])
    assert observation["tool"] is None and observation["input"] is None
    assert (observation["status"], observation["output"]) == ("error", "late")
    assert observation["ts"] == observation["endTs"] == "T9"


def test_transcript_observations_are_redacted() -> None:
    key = "sk" + "-ant-" + "api03-" + "FakeExample0123456789" * 4
    lines = [
        record("assistant", [tool_use("t1", "Bash", {"command": f"export K={key}"})]),
        record("user", [tool_result("t1", f"echoed {key}")]),
    ]
    (observation,) = read_transcript(lines)
    assert observation["input"] == {"command": f"export K={marker('anthropic-key')}"}
    assert observation["output"] == f"echoed {marker('anthropic-key')}"
    (custom,) = read_transcript(
        [record("assistant", [tool_use("t1", "Bash", {"command": "ACME-123456"})])],
        redactor=Redactor([("acme", r"ACME-\d{6}")]),
    )
    assert custom["input"] == {"command": marker("acme")}


def test_cut_off_last_line_of_a_live_file_is_ignored() -> None:
    lines = [
        record("assistant", [tool_use("t1", "Bash", {"command": "ls"})]) + "\n",
        record("user", [tool_result("t1", "a\nb")]) + "\n",
        '{"type":"assistant","sessionId":"sess-1","mess',
    ]
    assert [o["id"] for o in read_transcript(lines)] == ["t1"]
    with pytest.raises(NotATranscriptError, match=r"line 3 is not JSON"):
        list(read_transcript([*lines, record("user", "more") + "\n"]))


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([], "no record carries a sessionId"),
        (["", "  "], "no record carries a sessionId"),
        (["hello world\n"], "line 1 is not JSON"),
        (["[1, 2]\n"], "line 1 is a JSON array, not an object"),
        (['{"session_id": "abc"}\n'], 'line 1 has no "type" field'),
        (['{"type": "user", "message": "hi"}\n'], "the user record on line 1 lacks sessionId"),
        (['{"type": "assistant", "sessionId": "s"}\n'], "the assistant record on line 1 lacks"),
        (['{"type": "thread.started", "thread_id": "x"}\n'], "no record carries a sessionId"),
    ],
)
def test_not_a_transcript(lines: list[str], message: str) -> None:
    with pytest.raises(NotATranscriptError) as info:
        list(read_transcript(lines))
    assert message in str(info.value)
    assert str(info.value).startswith("not a Claude Code transcript")
    assert "\n" not in str(info.value)


def test_hook_payload_and_codex_stream_are_not_transcripts(claude_data: Path) -> None:
    pretty = (claude_data / "hooks" / "docs" / "input" / "PreToolUse.json").read_text()
    with pytest.raises(NotATranscriptError, match="line 1 is not JSON"):
        list(read_transcript(pretty.splitlines(keepends=True)))
    compact = json.dumps(json.loads(pretty)) + "\n"
    with pytest.raises(NotATranscriptError, match='line 1 has no "type" field'):
        list(read_transcript([compact]))
    for stream in sorted((claude_data / "codex").rglob("*.jsonl")):
        with stream.open() as lines, pytest.raises(NotATranscriptError, match="sessionId"):
            list(read_transcript(lines))


# ---------------------------------------------------------------- workspace ids


@pytest.mark.parametrize(
    ("cwd", "expected"),
    [
        ("/home/user/my-project", "my-project"),
        ("/home/user/my-project/", "my-project"),
        ("/Users/dain/workspace/danieldemmel.me-next", "danieldemmel.me-next"),
        ("C:\\Users\\me\\proj", "proj"),
        ("relative/dir", "dir"),
        ("solo", "solo"),
        ("/srv/My Project", "My Project"),
        ("/srv/--force", "force"),
        ("/srv/ - x ", "x"),
        ("/srv/a\x00b\x1bc\x7fd\u202ee", "abcde"),
        ("/srv/.hidden", ".hidden"),
        ("/srv/café-日本", "café-日本"),
        ("/", DEFAULT_WORKSPACE),
        ("", DEFAULT_WORKSPACE),
        (None, DEFAULT_WORKSPACE),
        ("/srv/.", DEFAULT_WORKSPACE),
        ("/srv/..", DEFAULT_WORKSPACE),
        ("/srv/---", DEFAULT_WORKSPACE),
        ("/srv/\t\n", DEFAULT_WORKSPACE),
        ("/srv/x" + "y" * 300, "x" + "y" * 127),
        ("/srv/" + "日" * 128, "日" * 42),  # 128 bytes of UTF-8 (model.MAX_ID_BYTES)
        ("/srv/bad\udcffbytes", "badbytes"),
    ],
)
def test_sanitise_workspace_id(cwd: str | None, expected: str) -> None:
    assert sanitise_workspace_id(cwd) == expected


def assert_valid_id(value: str) -> None:
    assert 1 <= len(value) <= 128
    assert len(value.encode("utf-8")) <= 255
    assert value not in (".", "..")
    assert not value.startswith("-")
    assert value == value.strip()
    assert not any(ch in "/\\" or ord(ch) < 32 or 127 <= ord(ch) < 160 for ch in value)


@given(st.text(max_size=300))
def test_sanitised_ids_are_always_valid(cwd: str) -> None:
    value = sanitise_workspace_id(cwd)
    assert_valid_id(value)
    try:
        from agent_journal.core.model import validate_id
    except ImportError:
        return
    assert validate_id(value, "workspace") == value


# ---------------------------------------------------------------- import discipline


CAPTURE = REPO / "agent_journal" / "capture"


def test_capture_modules_import_only_the_standard_library_and_each_other() -> None:
    allowed = set(sys.stdlib_module_names) | {"__future__"}
    for path in sorted(CAPTURE.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module == "agent_journal.core":
                names = [f"agent_journal.core.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                # core/cjson.py: json's own C decoder; core/tools.py: the tool vocabulary;
                # leaves that import nothing.
                assert name.split(".")[0] in allowed or name.startswith(
                    "agent_journal.capture."
                ) or name in ("agent_journal.core.cjson", "agent_journal.core.tools"), \
                    f"{path.name} imports {name}"


def test_importing_capture_is_light() -> None:
    code = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "import agent_journal.capture.claude_code as cc, agent_journal.capture.redact as r\n"
        "print(r._builtin is None)\n"
        "print(' '.join(sorted(set(sys.modules) - before)))\n"
    )
    lazy, loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    ).stdout.splitlines()
    # Rules are compiled on first use, not at import.
    assert lazy == "True"
    heavy = {"typer", "click", "pydantic", "rich", "sqlite_utils", "sqlite3", "dateutil"}
    assert not heavy & {name.split(".")[0] for name in loaded.split()}


# ---------------------------------------------------------------- ids from payloads


@given(st.text(max_size=80))
def test_event_name_check_matches_its_pattern(name: str) -> None:
    from agent_journal.capture.hook_payload import _EVENT_NAME, is_event_name

    assert is_event_name(name) == bool(re.fullmatch(_EVENT_NAME, name))


@given(st.text(max_size=300))
def test_safe_id_is_always_valid_and_deterministic(raw: str) -> None:
    from agent_journal.capture.claude_code import safe_id
    from agent_journal.core.errors import UsageError
    from agent_journal.core.model import validate_id

    value = safe_id(raw)
    assert validate_id(value, "id") == value
    assert safe_id(raw) == value
    try:
        validate_id(raw, "id")
    except UsageError:
        assert value != raw and re.search(r"~[0-9a-f]{12}$", value)
    else:
        assert value == raw


def test_safe_id_keeps_distinct_raw_ids_apart() -> None:
    from agent_journal.capture.claude_code import safe_id

    raws = ["a/b", "a\\b", "a_b/", "a\nb", " a/b", "-a/b", "", ".", "..", "x" * 200, "x" * 201]
    values = [safe_id(r) for r in raws]
    assert len(set(values)) == len(values)
    assert safe_id("toolu_01ABC123...") == "toolu_01ABC123..."
    assert safe_id("a/b").startswith("a_b~")


def _call_strings() -> st.SearchStrategy[str]:
    from test_redact import NEGATIVES, SECRETS

    return st.sampled_from(SECRETS + NEGATIVES + ["ACME-123"]) | st.text(max_size=20)


_call_text = _call_strings()
_call_value = st.recursive(_call_text | st.integers() | st.none(),
                           lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(_call_text, inner, max_size=3), max_leaves=6)


@given(st.fixed_dictionaries({
    "id": _call_text, "session": _call_text | st.none(), "tool": _call_text | st.none(),
    "input": _call_value, "output": _call_text | st.none(),
    "data": st.dictionaries(_call_text, _call_value, max_size=3),
    "ts": _call_text | st.none(), "endTs": _call_text | st.none(),
    "status": st.sampled_from(["ok", "error", "started"]),
    "exitCode": st.integers() | st.none()}),
       st.sampled_from([(), [("acme", r"ACME-\d{3}")]]))
def test_a_replayed_call_is_redacted_as_a_whole_dict_would_be(
        fields: dict[str, Any], extra: list[tuple[str, str]]) -> None:
    # read_transcript redacts only a call's fields that came from the transcript: the
    # result must be what redacting the whole observation gives.
    from agent_journal.capture.claude_code_transcript import _redacted_call

    call = {"kind": "tool_call", "durationMs": None, "text": None, **fields,
            "callId": fields["id"]}
    redactor = Redactor(extra)
    assert _redacted_call(redactor.redact_value, call) == redactor.redact_value(call)
