"""Codex's long-running commands (capture/codex_exec.py) and a monorepo runner's per-package
summaries (checks.parse_run, and what a large output keeps of its middle)."""

from __future__ import annotations

import json

from conftest import DATA

from agent_journal.capture.codex import read_codex_session
from agent_journal.core.recovery.checks import parse_run
from agent_journal.core.recovery.facts import event_facts
from agent_journal.core.recovery.run_output import summary_context

AGENTV = DATA / "claude-code" / "codex" / "EntityProcess-agentv" / "a6" / "0726a7452e" / "0" / \
    "full.jsonl"


def _record(ts: int, payload: dict) -> str:
    return json.dumps({"timestamp": f"2026-06-18T08:{ts:02d}:00.000Z", "type": "response_item",
                       "payload": payload})


def _exec(ts: int, call_id: str, cmd: str, output: str) -> list[str]:
    return [_record(ts, {"type": "function_call", "name": "exec_command", "call_id": call_id,
                         "arguments": json.dumps({"cmd": cmd})}),
            _record(ts, {"type": "function_call_output", "call_id": call_id,
                         "output": output})]


def _poll(ts: int, call_id: str, session: int, output: str, chars: str = "") -> list[str]:
    return [_record(ts, {"type": "function_call", "name": "write_stdin", "call_id": call_id,
                         "arguments": json.dumps({"session_id": session, "chars": chars})}),
            _record(ts, {"type": "function_call_output", "call_id": call_id,
                         "output": output})]


def _chunk(state: str, body: str) -> str:
    return f"Chunk ID: ab12\nWall time: 30.0 seconds\n{state}\nOriginal token count: 9\n" \
           f"Output:\n{body}"


def _calls(lines: list[str]) -> list[dict]:
    meta = json.dumps({"timestamp": "2026-06-18T08:00:00.000Z", "type": "session_meta",
                       "payload": {"id": "s1", "cwd": "/w"}})
    return [o for o in read_codex_session([meta, *lines]) if o["kind"] == "tool_call"]


def test_a_command_that_outlives_its_call_is_one_call_told_whole():
    running = "Process running with session ID 77"
    lines = [*_exec(1, "c1", "bun run test", _chunk(running, "pkg test: (pass) a\n")),
             *_poll(2, "p1", 77, _chunk(running, "pkg test: (pass) b\n")),
             *_poll(3, "p2", 77, _chunk("Process exited with code 1", " 1 pass\n 1 fail\n"
                                        "Ran 2 tests across 1 file. [1s]\n"))]
    [call] = _calls(lines)
    assert (call["id"], call["status"], call["exitCode"]) == ("c1", "error", 1)
    assert call["input"]["command"] == "bun run test"
    assert "(pass) a" in call["output"] and "(pass) b" in call["output"]
    assert "Ran 2 tests" in call["output"] and "Chunk ID" not in call["output"]
    assert call["endTs"].startswith("2026-06-18T08:03")
    # Still running when the file ends: started; typing into it is a call of its own.
    [call] = _calls(lines[:4])
    assert call["status"] == "started"
    typed = _calls([*lines[:2], *_poll(2, "p1", 77, _chunk(running, "?"), chars="y\n")])
    assert [c["tool"] for c in typed] == ["write_stdin", "Bash"]


def test_the_real_rollouts_full_suite_reports_every_package():
    calls = [c for c in read_codex_session(AGENTV.read_text(encoding="utf-8").splitlines())
             if c["kind"] == "tool_call"]
    assert not [c for c in calls if c["tool"] == "write_stdin"]  # every poll folded in
    suites = [c for c in calls if c["tool"] == "Bash" and c["input"]["command"] == "bun run test"]
    assert suites and all(c["status"] == "ok" and c["exitCode"] == 0 for c in suites)
    run = parse_run(suites[-1]["output"])
    assert run.ok and "agentv: 609 pass, 0 fail" in run.summary
    assert "@agentv/dashboard: 93 pass, 0 fail" in run.summary and run.passed == 2694


def test_a_failing_package_fails_the_run_and_a_path_is_no_package():
    out = ("@a/core test:  3 pass\n@a/core test:  0 fail\n@a/core test: Ran 3 tests across 1 "
           "file. [1s]\napp test:  1 pass\napp test:  2 fail\napp test: Ran 3 tests across 1 "
           "file. [1s]\n")
    run = parse_run(out)
    assert not run.ok and run.summary == "@a/core: 3 pass, 0 fail; app: 1 pass, 2 fail"
    tsc = "src/a.ts:1:2: error TS2304: Cannot find name 'x'.\nsrc/b.ts:3:4: error TS2304: y\n"
    assert parse_run(tsc) is None or "src/a.ts:" not in parse_run(tsc).summary


def test_a_large_outputs_middle_keeps_the_summaries_the_digest_reads():
    middle = "".join(f"agentv test: (pass) case {i}\n" for i in range(3000)) + \
        "agentv test:  609 pass\nagentv test:  0 fail\nagentv test: Ran 609 tests across 60 " \
        "files. [3s]\n" + "".join(f"@a/ui test: (pass) case {i}\n" for i in range(3000))
    kept = summary_context(middle)
    assert kept.splitlines()[-1].startswith("agentv test: Ran 609") and len(kept) < 400
    tail = "@a/ui test:  93 pass\n@a/ui test:  0 fail\n@a/ui test: Ran 93 tests across 18 files."
    data = {"tool": "Bash", "input": {"command": "bun run test"}, "status": "ok",
            "output": "@a/ui test: (pass) head\n" * 50,
            "artifact": {"ref": "x", "bytes": 300000, "tail": tail, "middle": kept}}
    facts = event_facts("tool_call", data)
    assert "agentv: 609 pass" in facts["check"]["summary"]


def test_an_expect_failure_says_what_it_wanted_and_what_it_got():
    bun = ("(fail) grade > no trace [12ms]\nerror: expect(received).toBe(expected)\n\n"
           'Expected: "No trace available for evaluation"\nReceived: "Trajectory mismatch"\n\n'
           "      at /w/a.test.ts:10:5\n 1 pass\n 1 fail\nRan 2 tests across 1 file. [1.00s]\n")
    assert parse_run(bun).first_failure == (
        'error: expect(received).toBe(expected) (Expected: "No trace available for '
        'evaluation"; Received: "Trajectory mismatch")')
    jest = ("  ● sum › adds\n\n    expect(received).toBe(expected) // Object.is equality\n\n"
            "    Expected: 5\n    Received: 4\n\nTests:       1 failed, 3 passed, 4 total\n")
    assert parse_run(jest).first_failure.endswith("(Expected: 5; Received: 4)")
