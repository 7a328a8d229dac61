"""The real Codex CLI (`make clients` installs the pinned release) against the scripted
model server, with `agent-journal hooks install codex` as a user runs it (issue 28).

`codex exec` runs a project's hooks only in a trusted project (config.toml `projects`)
and, in exec mode, only with `--dangerously-bypass-hook-trust`: tests/real_clients.py
sets both. Codex's PostToolUse gives a shell command no exit code and apply_patch no
PostToolUse at all: the Stop hook reads both off the rollout (agents/codex.py), and
this shows it against the real client.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from model_server import Call, ModelServer, Script
from real_clients import WAIT_TIMEOUT, injected, needs_clients

pytestmark = needs_clients

DIGEST = "# Journal digest: workspace proj"
UNFINISHED = "## Unfinished tool calls"
PATCH = "*** Begin Patch\n*** Add File: notes.txt\n+hello\n*** End Patch\n"



def startup_context(server: ModelServer, since: int = 0) -> str:
    first = next(r for r in server.requests[since:] if r["path"].endswith("/responses"))
    text = injected(first)
    assert DIGEST in text, "no SessionStart context in the session's first request"
    return text[text.index(DIGEST):]


def complete(calls: dict[str, dict[str, Any]], ids: list[str]) -> bool:
    return all(i in calls and calls[i]["status"] not in (None, "started") for i in ids)


def test_codex_calls_failures_and_patches_are_journaled_and_the_next_start_is_told(box):
    box.install("codex")
    script = Script("alpha", [[Call("exec_command", {"cmd": "echo hi"})],
                              [Call("exec_command", {"cmd": "false"})],
                              [Call("apply_patch", raw=PATCH)],
                              "done"])
    ids = script.call_ids("call_")
    with ModelServer([script, Script("beta", ["nothing to do"])]) as server:
        box.codex(server, "alpha: write the notes")
        assert (box.project / "notes.txt").read_text() == "hello\n"
        assert DIGEST in startup_context(server)
        calls = box.wait_for_calls(lambda c: complete(c, ids))
        assert [(calls[i]["tool"], calls[i]["status"]) for i in ids] == [
            ("Bash", "ok"), ("Bash", "error"), ("apply_patch", "ok")]
        assert calls[ids[1]]["exitCode"] == 1  # from the rollout: the hook payload has none
        assert box.aj("digest").stdout.count(UNFINISHED) == 0
        seen = len(server.requests)
        box.codex(server, "beta: anything left?")
        context = startup_context(server, seen)
    assert "> alpha: write the notes" in context
    assert "## Open problems" in context and "Bash `false`" in context
    assert UNFINISHED not in context  # the patch finished, though no PostToolUse said so
    assert "`notes.txt`: created" in context
    kinds = [o["kind"] for o in box.observations()]
    assert kinds.count("session_start") == 2 and "prompt" in kinds
    assert box.hook_log() == ""


def test_codex_without_hooks_journals_nothing(box):
    """The suite's own check: what the test above sees comes from the installed hooks."""
    script = Script("alpha", [[Call("exec_command", {"cmd": "echo hi"})], "done"])
    with ModelServer([script]) as server:
        box.codex(server, "alpha: say hi")
        assert DIGEST not in injected(server.requests[0])
    assert box.observations() == []


def test_a_codex_killed_mid_call_is_warned_of_at_the_next_start(box):
    """SIGKILL Codex while a command runs: no PostToolUse, no Stop. The call it started is
    journaled (its PreToolUse ran), so is the one that finished, and the next session is
    told of the unfinished one."""
    box.install("codex")
    pidfile = box.home / "tool.pid"
    crash = Script("crash", [[Call("exec_command", {"cmd": "echo one"})],
                             [Call("exec_command",
                                   {"cmd": f"echo $$ > {pidfile}; exec sleep 600"})],
                             "never reached"])
    ids = crash.call_ids("call_")
    with ModelServer([crash, Script("after", ["ok"])]) as server:
        client = box.start_codex(server, "crash: start the long job")
        try:
            deadline = time.monotonic() + WAIT_TIMEOUT
            while not (pidfile.exists() and pidfile.read_text().strip()):
                assert client.poll() is None, "codex ended before the long call ran"
                assert time.monotonic() < deadline, "the long call never started"
                time.sleep(0.1)
            box.wait_for_calls(lambda c: all(i in c for i in ids))
        finally:
            # SIGKILL mid-call: no PostToolUse, no Stop. `codex` is a node script that runs
            # the native client: the whole process group goes, as in a crash of the terminal.
            try:
                os.killpg(client.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            client.wait(timeout=60)
            if pidfile.exists() and pidfile.read_text().strip():
                try:
                    os.kill(int(pidfile.read_text()), signal.SIGKILL)
                except ProcessLookupError:
                    pass
        seen = len(server.requests)
        box.codex(server, "after: where are we?")
        context = startup_context(server, seen)
    calls = box.calls()
    assert [(calls[i]["tool"], calls[i]["status"]) for i in ids] == [
        ("Bash", "ok"), ("Bash", "started")]  # nothing lost, the second never ended
    section = context[context.index(UNFINISHED):]
    assert ids[1] in section and "sleep 600" in section
    assert ids[0] not in section  # the call that finished is not in it
    assert box.hook_log() == ""
