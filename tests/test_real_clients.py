"""The real Claude Code (`make clients` installs the pinned release) against the scripted
model server, with `agent-journal hooks install claude-code` as a user runs it (issue 28).

Each scenario has its own HOME and git repository. What the model was given is read from
the request bodies the server received; what was journaled, through this checkout's CLI.
A client release that changes how hooks are called, what they are given or where their
context lands fails here.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from typing import Any

from model_server import Call, ModelServer, Script
from real_clients import WAIT_TIMEOUT, Sandbox, agent_requests, injected, kill, needs_clients

from agent_journal.agents import claude_code

pytestmark = needs_clients

CONTEXT = "SessionStart hook additional context:"
UNFINISHED = "## Unfinished tool calls"




def startup_context(server: ModelServer, since: int = 0) -> str:
    """The SessionStart context the first model request of a session carried."""
    first = agent_requests(server, since)[0]
    text = injected(first)
    assert CONTEXT in text, "no SessionStart context in the session's first request"
    return text[text.index(CONTEXT):]


def work(box: Sandbox, marker: str) -> Script:
    notes = str(box.project / "notes.txt")
    return Script(marker, [
        [Call("Bash", {"command": "echo hi", "description": "say hi"})],
        [Call("Bash", {"command": "false", "description": "fail"})],
        [Call("Write", {"file_path": notes, "content": "hello\n"})],
        [Call("Read", {"file_path": notes})],
        "done"])


def complete(calls: dict[str, dict[str, Any]], ids: list[str]) -> bool:
    return all(i in calls and calls[i]["status"] not in (None, "started") for i in ids)


def test_every_call_is_journaled_with_its_status_and_the_next_start_is_told(box):
    box.install("claude-code")
    settings = json.loads((box.project / ".claude" / "settings.json").read_text())
    # The per-call capture runs in the background; SessionStart (whose output is the
    # context) stays synchronous.
    for event, groups in settings["hooks"].items():
        (handler,) = groups[0]["hooks"]
        assert handler.get("async", False) == (event in claude_code.BACKGROUND)
    script = work(box, "alpha")
    ids = script.call_ids()
    with ModelServer([script, Script("beta", ["nothing to do"])]) as server:
        result = box.claude(server, "alpha: write the notes")
        assert result["result"] == "done" and not result["is_error"]
        assert (box.project / "notes.txt").read_text() == "hello\n"
        # Even the first session is told the journal's state (an empty one).
        assert "# Journal digest: workspace proj" in startup_context(server)
        calls = box.wait_for_calls(lambda c: complete(c, ids))
        assert [(calls[i]["tool"], calls[i]["status"], calls[i]["exitCode"]) for i in ids] == [
            ("Bash", "ok", None), ("Bash", "error", 1), ("Write", "ok", None),
            ("Read", "ok", None)]
        assert calls[ids[0]]["input"]["command"] == "echo hi"
        # Journaled live by the background hooks (not only completed at the session's end
        # from the transcript, which would leave no hook payload).
        assert all((calls[i].get("hook") or {}).get("hook_event_name") for i in ids)
        kinds = [o["kind"] for o in box.observations()]
        for kind in ("session_start", "prompt", "assistant_message", "session_end"):
            assert kind in kinds, kinds
        # The next session starts knowing what the last one did and what failed.
        seen = len(server.requests)
        box.claude(server, "beta: anything left?")
        context = startup_context(server, seen)
    assert "> alpha: write the notes" in context
    assert "Bash `false`" in context and "## Open problems" in context
    assert UNFINISHED not in context
    assert box.hook_log() == ""


def test_a_crash_mid_call_is_warned_of_at_the_next_start(box):
    box.install("claude-code")
    pidfile = box.home / "tool.pid"
    crash = Script("crash", [[Call("Bash", {"command": "echo one"})],
                             [Call("Bash", {"command": f"echo $$ > {pidfile}; exec sleep 600"})],
                             "never reached"])
    with ModelServer([crash, Script("after", ["ok"])]) as server:
        client = box.start_claude(server, "crash: start the long job")
        try:
            deadline = time.monotonic() + WAIT_TIMEOUT
            while not (pidfile.exists() and pidfile.read_text().strip()):
                assert client.poll() is None, "the client ended before the long call ran"
                assert time.monotonic() < deadline, "the long call never started"
                time.sleep(0.1)
        finally:
            kill(client)  # SIGKILL mid-call: no PostToolUse, no Stop, no SessionEnd
            if pidfile.exists() and pidfile.read_text().strip():
                os.kill(int(pidfile.read_text()), signal.SIGKILL)
        seen = len(server.requests)
        box.claude(server, "after: where are we?")
        context = startup_context(server, seen)
    long_call = crash.call_ids()[1]
    section = context[context.index(UNFINISHED):]
    assert long_call in section and "exec sleep 600" in section
    assert crash.call_ids()[0] not in section  # the call that finished is not in it
    calls = box.calls()
    assert calls[long_call]["status"] == "started"


def _without(box: Sandbox, *events: str) -> None:
    """Our hooks for `events` removed from the project settings, as if each one of them had
    been cut off before it journaled anything."""
    path = box.project / ".claude" / "settings.json"
    settings = json.loads(path.read_text())
    for event in events:
        del settings["hooks"][event]
    path.write_text(json.dumps(settings, indent=2))


def test_calls_whose_ending_hooks_were_cut_off_are_completed_at_session_end(box):
    box.install("claude-code")
    _without(box, "PostToolUse", "PostToolUseFailure")
    script = work(box, "gamma")
    ids = script.call_ids()
    with ModelServer([script]) as server:
        box.claude(server, "gamma: write the notes")
    # SessionEnd read the ends off the transcript (the hooks journaled only the starts).
    calls = box.wait_for_calls(lambda c: complete(c, ids))
    assert [(calls[i]["tool"], calls[i]["status"]) for i in ids] == [
        ("Bash", "ok"), ("Bash", "error"), ("Write", "ok"), ("Read", "ok")]
    assert all("transcript" in calls[i] for i in ids)  # completed from the transcript
    assert "Exit code 1" in json.dumps(calls[ids[1]]["output"])
    assert box.aj("digest").stdout.count(UNFINISHED) == 0


def test_a_session_whose_end_was_cut_off_is_completed_by_the_next_start(box):
    box.install("claude-code")
    _without(box, "PostToolUse", "PostToolUseFailure", "SessionEnd")
    script = work(box, "delta")
    ids = script.call_ids()
    with ModelServer([script, Script("epsilon", ["ok"])]) as server:
        box.claude(server, "delta: write the notes")
        # The hole: every call started, none ended (their PreToolUse hooks run in the
        # background, so wait for them).
        calls = box.wait_for_calls(lambda c: all(i in c for i in ids))
        assert [calls[i]["status"] for i in ids] == ["started"] * len(ids)
        seen = len(server.requests)
        box.claude(server, "epsilon: carry on")
        context = startup_context(server, seen)
    # The next SessionStart completed the earlier session before building its context.
    assert UNFINISHED not in context
    assert "Bash `false`" in context and "## Open problems" in context
    calls = box.calls()
    assert [calls[i]["status"] for i in ids] == ["ok", "error", "ok", "ok"]


def test_a_resumed_session_is_given_the_digest_and_a_compaction_is_journaled(box):
    box.install("claude-code")
    script = Script("alpha", [[Call("Bash", {"command": "echo hi"})], "done"])
    with ModelServer([script, Script("zeta", ["more done"])]) as server:
        session = box.claude(server, "alpha: say hi")["session_id"]
        seen = len(server.requests)
        resumed = box.claude(server, "zeta: and then?", "--resume", session)
        assert resumed["session_id"] == session
        context = startup_context(server, seen)
        assert "> alpha: say hi" in context and "Bash `echo hi` -> ok" in context
        compacted = box.claude(server, "/compact", "--resume", session)
        assert not compacted["is_error"]
    starts = [(o["hook"] or {}).get("source") for o in box.observations()
              if o["kind"] == "session_start"]
    assert starts == ["startup", "resume", "resume", "compact"]
    kinds = [o["kind"] for o in box.observations()]
    assert "pre_compact" in kinds and "compact_summary" in kinds
    assert box.hook_log() == ""


def test_the_plugin_route_captures_in_the_background_and_gives_the_digest(box):
    """`claude plugin marketplace add` this repository, `claude plugin install` its plugin:
    the plugin's hooks (the installer's, tests/test_agents.py) run in the real client."""
    from real_clients import CLAUDE, REPO

    script = Script("alpha", [[Call("Bash", {"command": "false"})], "done"])
    with ModelServer([script]) as server:
        env = box.claude_env(server)
        for args in (["plugin", "marketplace", "add", str(REPO)],
                     ["plugin", "install", "agent-journal@agent-journal"]):
            proc = subprocess.run([str(CLAUDE), *args], cwd=box.project, env=env,
                                  capture_output=True, text=True, timeout=120,
                                  stdin=subprocess.DEVNULL)
            assert proc.returncode == 0, proc.stdout + proc.stderr
        box.claude(server, "alpha: try it")
        assert "# Journal digest: workspace proj" in startup_context(server)
    # The plugin writes no project file: the workspace is the folder's name.
    box.workspace = "proj"
    (call,) = script.call_ids()
    calls = box.wait_for_calls(lambda c: complete(c, [call]))
    assert (calls[call]["tool"], calls[call]["status"], calls[call]["exitCode"]) == (
        "Bash", "error", 1)
    assert box.hook_log() == ""


def test_a_secret_in_a_call_never_reaches_the_journal_on_disk(box):
    box.install("claude-code")
    secret = "ghp_" + "Zq7" * 12  # a GitHub token's shape
    notes = str(box.project / "token.txt")
    script = Script("alpha", [
        [Call("Bash", {"command": f"echo {secret}"})],
        [Call("Write", {"file_path": notes, "content": f"token={secret}\n"})],
        [Call("Bash", {"command": f"false {secret}"})],
        "done"])
    ids = script.call_ids()
    with ModelServer([script, Script("beta", ["ok"])]) as server:
        box.claude(server, f"alpha: keep {secret} safe")
        box.wait_for_calls(lambda c: complete(c, ids))
        seen = len(server.requests)
        box.claude(server, "beta: again")  # a second start: notes, completion, digest
        context = startup_context(server, seen)
    assert secret not in context
    root = box.home / ".local" / "share" / "agent-journal"
    files = [p for p in root.rglob("*") if p.is_file()]
    assert any(p.suffix == ".sqlite" for p in files)
    leaked = [str(p) for p in files if secret.encode() in p.read_bytes()]
    assert leaked == []
