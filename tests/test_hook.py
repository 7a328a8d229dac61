"""The Claude Code hook through the real console script: journals, fails open, stays lean."""

from __future__ import annotations

import io
import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from conftest import CLI, DATA, clean_env

DOCS = DATA / "claude-code" / "hooks" / "docs" / "input"
EVENTS = sorted(p.stem for p in DOCS.glob("*.json"))
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
from agent_journal.agents.session_context import USAGE_NOTE  # noqa: E402

KINDS = {"UserPromptSubmit": "prompt", "SessionStart": "session_start",
         "PreCompact": "pre_compact", "Stop": "assistant_message", "SessionEnd": "session_end",
         "PostCompact": "compact_summary", "SubagentStop": "subagent_result"}
# What the session said gets an id derived from the words (capture.claude_code.said_id).
SAID = {"UserPromptSubmit", "Stop", "PostCompact", "SubagentStop"}

assert DOCS.is_dir(), f"the repo\'s test data is missing: {DOCS}"


def docs_payload(event: str) -> dict[str, Any]:
    return json.loads((DOCS / f"{event}.json").read_text())


def hook(cli, payload: Any, *args: str, **kw: Any):
    data = payload if isinstance(payload, bytes | str) else json.dumps(payload)
    return cli("hook", "claude-code", *args, input=data, **kw)


def observations(cli, workspace: str = "ws") -> dict[str, dict[str, Any]]:
    shown = cli("show", "--json", "--observations", workspace=workspace).json()
    assert shown["unreadable"] == [] and shown["malformed"] == []
    return {o["id"]: o for o in shown["entries"] if o["type"] == "observation"}


def log_lines(root: Path) -> list[str]:
    path = root / "logs" / "hook.log"
    return path.read_text().splitlines() if path.exists() else []


def event_rows(root: Path) -> int:
    total = 0
    for seg in (root / "workspaces").rglob("*.sqlite"):
        with sqlite3.connect(seg) as conn:
            total += conn.execute("SELECT count(*) FROM events").fetchone()[0]
    return total


# -- every documented payload ------------------------------------------------------------

@pytest.mark.parametrize("event", EVENTS)
def test_every_docs_payload_is_journaled_and_exits_0(cli, root, event):
    result = hook(cli, docs_payload(event))
    assert result.code == 0 and result.err == ""
    if event == "SessionStart":
        assert json.loads(result.out)["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    else:
        assert result.out == ""
    assert log_lines(root) == []
    (obs,) = observations(cli).values()
    assert obs["author"] == "agent" and obs["session"] == "abc123"
    if event in ("PreToolUse", "PostToolUse", "PostToolUseFailure"):
        assert obs["id"] == obs["callId"] == "toolu_01ABC123..."
        assert obs["kind"] == "tool_call"
        assert obs["status"] == {"PreToolUse": "started", "PostToolUse": "ok",
                                 "PostToolUseFailure": "error"}[event]
    else:
        kind = KINDS.get(event, f"hook_{event}")
        assert obs["kind"] == kind
        assert re.fullmatch(f"{kind}-[0-9a-f]{{16}}" if event in SAID else f"{kind}-{UUID}",
                            obs["id"])


def test_session_events_keep_the_whole_payload(cli, root):
    for event in ("SessionStart", "PreCompact", "Stop", "SubagentStop"):
        hook(cli, docs_payload(event))
    seg = next((root / "workspaces" / "ws" / "segments").glob("*.sqlite"))
    with sqlite3.connect(seg) as conn:
        bodies = [json.loads(b) for (b,) in conn.execute("SELECT body FROM events")]
    by_kind = {b["kind"]: b["data"]["hook"] for b in bodies}
    assert by_kind["session_start"] == docs_payload("SessionStart")
    assert by_kind["pre_compact"]["trigger"] == "manual"
    texts = {b["kind"]: b["data"]["text"] for b in bodies}
    for kind, event in (("assistant_message", "Stop"), ("subagent_result", "SubagentStop")):
        payload = docs_payload(event)
        assert texts[kind] == payload.pop("last_assistant_message")
        assert by_kind[kind] == payload  # the rest of the payload, the text stored once


def test_pre_and_post_fold_into_one_call(cli):
    assert hook(cli, docs_payload("PreToolUse")).code == 0
    post = docs_payload("PostToolUseFailure")
    assert hook(cli, post).code == 0
    (obs,) = observations(cli).values()
    assert obs["status"] == "error" and obs["exitCode"] == 1 and obs["durationMs"] == 4187
    assert obs["input"]["command"] == "npm test"
    assert obs["output"] == post["error"]
    assert len(obs["eventIds"]) == 2


def test_a_permission_denial_finishes_the_call_it_refused(cli):
    """PreToolUse, then the auto-mode classifier's PermissionDenied: one call, refused with
    its reason, not one left open with its outcome unknown."""
    pre = docs_payload("PreToolUse")
    denied = {k: pre[k] for k in ("session_id", "transcript_path", "cwd", "permission_mode",
                                  "tool_name", "tool_input", "tool_use_id")}
    denied |= {"hook_event_name": "PermissionDenied", "reason": "not allowed in auto mode"}
    assert hook(cli, pre).code == 0
    result = hook(cli, denied)
    assert (result.code, result.out, result.err) == (0, "", "")
    (obs,) = observations(cli).values()
    assert obs["status"] == "error" and obs["output"] == "not allowed in auto mode"
    assert obs["input"]["command"] == "npm test" and len(obs["eventIds"]) == 2


def test_workspace_comes_from_flag_env_or_cwd(cli, root):
    payload = docs_payload("PreToolUse")  # cwd /home/user/my-project
    assert hook(cli, payload, workspace=None).code == 0
    assert "toolu_01ABC123..." in observations(cli, "my-project")
    assert hook(cli, payload, "--workspace", "chosen", workspace=None).code == 0
    assert observations(cli, "chosen")
    assert hook(cli, payload, workspace="from-env").code == 0
    assert observations(cli, "from-env")
    assert log_lines(root) == []


def test_tool_use_id_that_is_not_an_id_is_sanitised_deterministically(cli):
    pre = docs_payload("PreToolUse") | {"tool_use_id": "toolu/../01\nX"}
    post = docs_payload("PostToolUse") | {"tool_use_id": "toolu/../01\nX"}
    other = docs_payload("PostToolUse") | {"tool_use_id": "toolu_.._01_X"}
    for payload in (pre, post, other):
        assert hook(cli, payload).code == 0
    seen = observations(cli)
    assert len(seen) == 2
    weird = next(o for i, o in seen.items() if "~" in i)
    assert weird["callId"] == "toolu/../01\nX"
    assert re.fullmatch(r"toolu_\.\._01_X~[0-9a-f]{12}", weird["id"])
    assert weird["status"] == "ok" and len(weird["eventIds"]) == 2


def test_unknown_events_are_kept_as_hook_kinds(cli):
    payload = {"session_id": "s1", "cwd": "/x/ws", "hook_event_name": "FutureThing",
               "detail": {"n": 1}}
    assert hook(cli, payload).code == 0
    (obs,) = observations(cli).values()
    assert obs["kind"] == "hook_FutureThing" and obs["session"] == "s1"


def test_a_payload_with_bytes_that_are_not_utf8_is_journaled(cli, root):
    """A raw byte in a tool's output costs one character, not the call."""
    post = json.dumps(docs_payload("PostToolUse") | {"tool_response": {"stdout": "XX"}})
    result = hook(cli, post.encode().replace(b"XX", b"ok \xff done"))
    assert (result.code, result.out, result.err) == (0, "", "")
    assert log_lines(root) == []
    (obs,) = observations(cli).values()
    assert obs["output"] == {"stdout": "ok \ufffd done"} and obs["status"] == "ok"


def test_session_id_that_is_not_an_id_is_sanitised(cli):
    payload = docs_payload("Stop") | {"session_id": "a/b"}
    assert hook(cli, payload).code == 0
    (obs,) = observations(cli).values()
    assert re.fullmatch(r"a_b~[0-9a-f]{12}", obs["session"])


# -- failing open ------------------------------------------------------------------------

BAD_PAYLOADS = {
    "malformed": b'{"hook_event_name": "PreToolUse", ',
    "empty": b"",
    "duplicate-key": b'{"hook_event_name": "Stop", "session_id": "a", "session_id": "b"}',
    "nan": b'{"hook_event_name": "Stop", "x": NaN}',
    "infinity": b'{"hook_event_name": "Stop", "x": -Infinity}',
    "overflow": b'{"hook_event_name": "Stop", "x": 1e999}',
    "array": b"[1, 2]",
    "no-event-name": b'{"session_id": "a"}',
    "bad-event-name": b'{"hook_event_name": "../../etc"}',
}


@pytest.mark.parametrize("label", sorted(BAD_PAYLOADS))
def test_bad_payloads_are_logged_not_journaled(cli, root, label):
    result = hook(cli, BAD_PAYLOADS[label])
    assert (result.code, result.out, result.err) == (0, "", "")
    (line,) = log_lines(root)
    assert "hook claude-code failed open" in line and "HookPayloadError" in line
    assert not (root / "workspaces").exists() or event_rows(root) == 0


@pytest.mark.parametrize("args, env", [
    (["--workspace", ""], {}),
    (["--workspace"], {}),
    (["--workspace", "a/b"], {}),
    (["--bogus"], {}),
    (["extra-positional"], {}),
    ([], {"AGENT_JOURNAL_WORKSPACE": ""}),
    ([], {"AGENT_JOURNAL_NOW": "not a time"}),
])
def test_usage_errors_fail_open(cli, root, args, env):
    result = hook(cli, docs_payload("PreToolUse"), *args, env=env, workspace=None)
    assert (result.code, result.out, result.err) == (0, "", "")
    (line,) = log_lines(root)
    assert "UsageError" in line
    assert not (root / "workspaces").exists()


def test_failures_never_exit_2_even_for_session_start(cli, root):
    result = hook(cli, b"{", "--workspace", "")
    assert result.code == 0 and result.out == ""


@pytest.mark.parametrize("args", [["hook"], ["hook", "claude_code"],
                                  ["hook", "no-such-agent", "-x"]])
def test_a_hook_this_version_does_not_know_fails_open(cli, root, args):
    result = cli(*args, input=(DOCS / "PreToolUse.json").read_bytes())
    assert (result.code, result.out, result.err) == (0, "", "")
    (line,) = log_lines(root)
    assert "hook failed open: UsageError" in line and "no such hook" in line


def test_log_is_private_and_found_through_root_flag(cli, tmp_path):
    other = tmp_path / "private" / "other-root"
    result = hook(cli, b"not json", "--root", str(other))
    assert result.code == 0
    log = other / "logs" / "hook.log"
    assert log.read_text().count("\n") == 1
    assert oct(log.stat().st_mode & 0o777) == "0o600"
    assert oct(log.parent.stat().st_mode & 0o777) == "0o700"


def test_unsafe_root_is_neither_used_nor_logged_into(cli, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    root = shared / "journal"
    result = hook(cli, docs_payload("PreToolUse"), "--root", str(root))
    assert result.code == 0 and result.out == ""
    assert "could not log it" in result.err
    assert not root.exists()
    # An existing, world-writable root: refused, nothing written in it.
    root.mkdir()
    os.chmod(root, 0o777)
    result = hook(cli, docs_payload("PreToolUse"), "--root", str(root))
    assert result.code == 0 and result.out == ""
    assert list(root.iterdir()) == []


def test_damaged_journal_fails_open(cli, root):
    assert hook(cli, docs_payload("PreToolUse")).code == 0
    (seg,) = (root / "workspaces" / "ws" / "segments").glob("*.sqlite")
    seg.write_bytes(b"this is not a database" * 100)
    for event in ("PostToolUse", "Stop"):
        result = hook(cli, docs_payload(event))
        assert (result.code, result.out) == (0, "")
    lines = log_lines(root)
    assert len(lines) == 2 and all("DatabaseError" in line for line in lines)
    # SessionStart still gives its context (the read reports the damage), and logs the
    # failed write.
    result = hook(cli, docs_payload("SessionStart"))
    assert result.code == 0
    context = json.loads(result.out)["hookSpecificOutput"]["additionalContext"]
    assert "floor, not a total" in context
    assert len(log_lines(root)) == 3


LOCKED = r"""
import sys
from agent_journal.agents import hook
hook.WRITE_BUDGET_S = 1.0
from agent_journal.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def test_locked_journal_spools_quickly(cli, root):
    assert hook(cli, docs_payload("PreToolUse")).code == 0
    (seg,) = (root / "workspaces" / "ws" / "segments").glob("*.sqlite")
    holder = sqlite3.connect(seg, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        env = clean_env(AGENT_JOURNAL_ROOT=str(root), AGENT_JOURNAL_WORKSPACE="ws")
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-c", LOCKED, "hook", "claude-code"],
                              input=(DOCS / "PostToolUse.json").read_bytes(), env=env,
                              capture_output=True, timeout=60)
        elapsed = time.monotonic() - started
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert (proc.returncode, proc.stdout) == (0, b"")
    # Within the hook timeout the installer gives the agent (30 s): a bound a loaded
    # machine cannot break, while a hook that waited on the lock past its 1 s budget for
    # good would. (Unloaded it takes about 2 s.)
    from agent_journal.agents import claude_code

    assert elapsed < claude_code.DEFAULT_TIMEOUT
    # Locked past its budget, the hook kept the event in the spool: nothing failed, and
    # the next hook journals it.
    assert log_lines(root) == []
    assert len(list((root / "spool" / "ws").glob("*.event"))) == 1
    assert hook(cli, docs_payload("Stop")).code == 0
    assert not list((root / "spool" / "ws").glob("*.event"))
    assert event_rows(root) == 3  # PreToolUse, the spooled PostToolUse, Stop


def test_default_patience_is_bounded():
    from agent_journal.agents import claude_code
    from agent_journal.agents import hook as hook_module

    # The last try starts before the budget ends and can wait on opening the segment, its
    # BEGIN IMMEDIATE and its COMMIT.
    last_try = hook_module.TRY_BUSY_S * 3 + 1
    assert hook_module.WRITE_BUDGET_S + last_try < claude_code.DEFAULT_TIMEOUT


def test_full_disk_keeps_the_event_in_the_spool_and_logs_it(cli, root):
    assert hook(cli, docs_payload("PreToolUse")).code == 0
    before = event_rows(root)
    # No file this process writes may pass 1000 bytes: SQLite's journal cannot take one
    # page, as on a full disk (the one log line still fits).
    env = clean_env(AGENT_JOURNAL_ROOT=str(root), AGENT_JOURNAL_WORKSPACE="ws")
    proc = subprocess.run([CLI, "hook", "claude-code"], input=(DOCS / "PostToolUse.json")
                          .read_bytes(), env=env, capture_output=True,
                          preexec_fn=_file_size_limit(1000))
    assert (proc.returncode, proc.stdout) == (0, b"")
    (line,) = log_lines(root)
    # The segment could not take it; the event's small file in the spool could.
    assert "kept in the spool" in line and "disk" in line
    assert event_rows(root) == before
    assert len(list((root / "spool" / "ws").glob("*.event"))) == 1


def _file_size_limit(limit: int):
    def apply() -> None:
        import resource
        import signal

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # write() then fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def test_bad_config_fails_open_and_still_journals(cli, root):
    root.mkdir(mode=0o700)
    (root / "config.json").write_text('{"redact": {"patterns": [{"name": "x", "regex": "("}]}}')
    result = hook(cli, docs_payload("UserPromptSubmit"))
    assert (result.code, result.out) == (0, "")
    (line,) = log_lines(root)
    assert "config.json" in line and "invalid regex" in line
    assert event_rows(root) == 1  # with the built-in rules


def test_internal_error_is_logged_with_where(cli, root, monkeypatch):
    # A payload no path expects: the tool name is a number. Whatever the hook makes of it,
    # it must exit 0 and print nothing.
    payload = docs_payload("PreToolUse") | {"tool_name": 7, "tool_input": [1, {"a": None}]}
    result = hook(cli, payload)
    assert (result.code, result.out) == (0, "")


def test_interrupt_in_process_is_swallowed(root, monkeypatch):
    from agent_journal.agents import hook as hook_module
    from agent_journal.cli import main as cli_module

    def boom(*_: Any, **__: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setenv("AGENT_JOURNAL_ROOT", str(root))
    monkeypatch.setattr(hook_module, "run", boom)
    assert cli_module.run(["hook", "claude-code", "--workspace", "ws"]) == 0
    assert "KeyboardInterrupt" in log_lines(root)[0]


# -- SessionStart ------------------------------------------------------------------------

def session_start(cli, source: str = "startup", **kw: Any) -> str:
    result = hook(cli, docs_payload("SessionStart") | {"source": source}, **kw)
    assert result.code == 0 and result.err == ""
    out = json.loads(result.out)
    assert list(out) == ["hookSpecificOutput"]
    assert set(out["hookSpecificOutput"]) == {"hookEventName", "additionalContext"}
    assert out["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert result.out.count("\n") == 1
    context = out["hookSpecificOutput"]["additionalContext"]
    assert isinstance(context, str) and len(context) <= 10_000
    return context


def test_session_start_prints_live_state_for_every_source(cli):
    cli("record", "--kind", "objective", "--id", "obj", "--text",
        "Ship the sync fix. token: ORDER-4471-ZULU")
    cli("record", "--kind", "constraint", "--id", "c1", "--text", "never force-push to main")
    cli("record", "--kind", "finding", "--id", "f-live", "--claim", "tests pass on 3.11")
    cli("record", "--kind", "finding", "--id", "f-wrong", "--claim", "the clock is skewed")
    cli("record", "--kind", "decision", "--id", "d-dep", "--question", "fix how?",
        "--chosen", "resync clocks", "--depends-on", "f-wrong")
    cli("record", "--kind", "decision", "--id", "d-ok", "--question", "which db?",
        "--chosen", "sqlite", "--anchor", "tool_use:o1")
    cli("record", "--kind", "note", "--id", "n-secret", "--text", "named a person")
    cli("record", "--kind", "finding", "--id", "f-gone", "--claim", "Jane Roe broke it")
    cli("invalidate", "f-wrong", "--reason", "it was not the clock")
    cli("tombstone", "f-gone", "--reason", "names a person")
    for source in ("startup", "resume", "clear", "compact", "fork"):
        context = session_start(cli, source)
        assert "Ship the sync fix. token: ORDER-4471-ZULU" in context
        assert "never force-push to main" in context
        assert "tests pass on 3.11" in context
        assert "which db?" in context and "tool_use:o1" in context
        assert "Jane Roe" not in context and "f-gone" not in context
        # Retracted reasoning may be shown, but only under its own heading.
        live_part, _, retracted = context.partition("## Retracted entries")
        assert "clock is skewed" not in live_part and "fix how?" not in live_part
        assert "clock is skewed" in retracted


def test_session_start_context_is_bounded(cli, root):
    from agent_journal.ops import context, writes

    ctx = context.Context(str(root), "ws")
    writes.record(ctx, kind="objective", entry_id="obj", fields={"text": "the objective"},
                   anchors=[], depends_on=[], subject=None)
    writes.record(ctx, kind="constraint", entry_id="c1", fields={"text": "a constraint"},
                   anchors=[], depends_on=[], subject=None)
    for i in range(40):
        writes.record(ctx, kind="finding", entry_id=f"f{i:02d}",
                       fields={"claim": f"claim {i} " * 60}, anchors=[], depends_on=[],
                       subject=None)
    context = session_start(cli)
    assert "the objective" in context and "a constraint" in context
    assert "claim 39" in context and "claim 0 " not in context  # newest kept
    assert "not shown" in context


def test_session_start_context_is_cut_even_for_one_huge_constraint(cli):
    cli("record", "--kind", "constraint", "--id", "c1", "--text", "c" * 30_000)
    context = session_start(cli)
    assert len(context) <= 10_000 and "[cut to fit the context limit]" in context
    assert context.endswith(USAGE_NOTE)


def test_session_start_on_an_empty_journal(cli, root):
    context = session_start(cli)
    assert "# Journal digest: workspace ws" in context
    assert len(observations(cli)) == 1  # the session start itself


def test_session_start_prefers_a_digest_module(root, monkeypatch):
    import types

    from agent_journal.agents import session_context as hook_module
    from agent_journal.storage.root import Root

    fake = types.ModuleType("agent_journal.ops.digest")
    fake.session_markdown = lambda ws, max_chars: f"# digest of {ws.name} ({max_chars})"
    monkeypatch.setitem(sys.modules, "agent_journal.ops.digest", fake)
    import agent_journal.ops

    monkeypatch.setattr(agent_journal.ops, "digest", fake, raising=False)
    ws = Root.open(str(root), create=True).workspace("ws")
    budget = 10_000 - len(hook_module.USAGE_NOTE) - 2
    assert hook_module.session_context(ws) == (f"# digest of ws ({budget})\n\n"
                                               + hook_module.USAGE_NOTE)
    fake.session_markdown = lambda ws, max_chars: "x" * 20_000
    assert len(hook_module.session_context(ws)) == 10_000
    assert hook_module.session_context(ws).endswith(hook_module.USAGE_NOTE)
    fake.session_markdown = lambda ws, max_chars: 1 / 0
    assert "could not be built" in hook_module.session_context(ws)


def test_session_start_write_failure_still_prints_context(root, monkeypatch):
    from agent_journal.agents import hook as hook_module
    from agent_journal.agents.claude_code import AGENT
    from agent_journal.storage.workspace import Writer

    def fail(self: Any, events: Any, **_: Any) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Writer, "append", fail)  # the hook's append
    stdin = io.BytesIO((DOCS / "SessionStart.json").read_bytes())
    result = hook_module.run(AGENT, stdin, root=str(root), workspace="ws")
    assert isinstance(result.failure, OSError)
    assert "additionalContext" in json.loads(result.stdout)["hookSpecificOutput"]


# -- lean and concurrent -----------------------------------------------------------------

PROBE = r"""
import sys, json
from agent_journal.cli.main import main
rc = main(sys.argv[1:])
sys.stdout.flush()
mods = sorted(m for m in sys.modules if m.split('.')[0] in
              {'typer', 'click', 'pydantic', 'rich', 'sqlite_utils'} or m == 'dateutil.parser')
sys.stderr.write('\nMODULES ' + json.dumps(mods) + '\n')
sys.exit(rc)
"""


@pytest.mark.parametrize("event", ["PreToolUse", "PostToolUse", "SessionStart", "Stop"])
def test_hook_imports_nothing_heavy(root, event):
    env = clean_env(AGENT_JOURNAL_ROOT=str(root), AGENT_JOURNAL_WORKSPACE="ws")
    proc = subprocess.run([sys.executable, "-c", PROBE, "hook", "claude-code"],
                          input=(DOCS / f"{event}.json").read_bytes(), capture_output=True,
                          env=env)
    assert proc.returncode == 0
    assert json.loads(proc.stderr.decode().split("MODULES ")[1]) == []
    assert not (root / "logs").exists()


WORKER = r"""
import io, json, sys
from agent_journal.cli.main import main
worker, count = sys.argv[1], int(sys.argv[2])
for i in range(count):
    payload = {"session_id": f"s{worker}", "cwd": "/x/ws", "hook_event_name": "PostToolUse",
               "tool_name": "Bash", "tool_input": {"command": f"echo {i}"},
               "tool_response": {"stdout": str(i) * 100, "stderr": "", "interrupted": False},
               "tool_use_id": f"toolu_{worker}_{i}"}
    sys.stdin = io.TextIOWrapper(io.BytesIO(json.dumps(payload).encode()))
    if main(["hook", "claude-code"]) != 0:
        sys.exit(3)
"""


COMPACTOR = r"""
import sys
from agent_journal.cli.main import main
stop = sys.argv[1]
import os
runs = 0
while not os.path.exists(stop) or runs == 0:
    # Something to erase every time: the live segment is copied and renamed over,
    # under the hooks' appends (storage/swap_guard.py).
    main(["record", "--kind", "note", "--id", f"doomed-{runs}", "--text", "must go"])
    main(["tombstone", f"doomed-{runs}", "--reason", "must go"])
    main(["compact", "--apply"])  # refused or done: either way it raced the hooks
    runs += 1
"""


def _hooks_racing_compaction(root: Path, workers: int, payloads: int) -> None:
    env = clean_env(AGENT_JOURNAL_ROOT=str(root), AGENT_JOURNAL_WORKSPACE="ws")
    assert subprocess.run([CLI, "record", "--kind", "note", "--id", "first", "--text", "x"],
                          env=env, capture_output=True).returncode == 0
    stop = root.parent / "stop-compacting"
    compactor = subprocess.Popen([sys.executable, "-c", COMPACTOR, str(stop)], env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(w), str(payloads)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for w in range(workers)]
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=600)
            assert (proc.returncode, out, err) == (0, b"", b"")
    finally:
        stop.touch()
        compactor.wait(timeout=600)
    # Whatever was spooled under the load is journaled by the next hook.
    last = docs_payload("Stop")
    subprocess.run([CLI, "hook", "claude-code"], env=env, input=json.dumps(last).encode(),
                   check=True)
    assert log_lines(root) == []
    ids = set(_observation_ids(root))
    assert ids >= {f"toolu_{w}_{i}" for w in range(workers) for i in range(payloads)}
    assert not list((root / "spool" / "ws").glob("*.event"))


def test_thirty_two_hook_processes_times_fifty_payloads_racing_compaction(root):
    _hooks_racing_compaction(root, 32, 50)
    for seg in (root / "workspaces").rglob("*.sqlite"):
        with sqlite3.connect(seg) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


@pytest.mark.soak
@pytest.mark.parametrize("round_", range(10))
def test_hooks_racing_compaction_ten_times(tmp_path, round_):
    base = tmp_path / "private"
    base.mkdir(mode=0o700)
    _hooks_racing_compaction(base / "journal", 32, 50)


@pytest.mark.soak
def test_sixteen_at_once_times_fifty_separate_hook_processes(root):
    env = clean_env(AGENT_JOURNAL_ROOT=str(root), AGENT_JOURNAL_WORKSPACE="ws")

    def worker(w: int) -> list[int]:
        codes = []
        for i in range(50):
            payload = docs_payload("PostToolUse") | {"tool_use_id": f"toolu_{w}_{i}"}
            proc = subprocess.run([CLI, "hook", "claude-code"], env=env, capture_output=True,
                                  input=json.dumps(payload).encode())
            codes.append(proc.returncode)
        return codes

    with ThreadPoolExecutor(16) as pool:
        assert {c for codes in pool.map(worker, range(16)) for c in codes} == {0}
    assert log_lines(root) == []
    assert len(set(_observation_ids(root))) == 800


def _observation_ids(root: Path) -> list[str]:
    out = subprocess.run([CLI, "show", "--json", "--observations"], capture_output=True, check=True,
                         env=clean_env(AGENT_JOURNAL_ROOT=str(root),
                                       AGENT_JOURNAL_WORKSPACE="ws")).stdout
    return [o["id"] for o in json.loads(out)["entries"]]


def test_session_start_prints_the_workspace_digest(cli):
    cli("record", "--kind", "objective", "--id", "obj", "--text", "token: ORDER-4471-ZULU")
    cli("observe", "--kind", "tool_call", "--id", "o1", "--tool", "Bash", "--input",
        '{"command": "make deploy"}', "--status", "started")
    context = session_start(cli)
    assert "token: ORDER-4471-ZULU" in context
    assert "make deploy" in context and "verify the workspace" in context.lower()


def test_a_failure_is_logged_under_this_hooks_root_not_an_earlier_ones(inproc, tmp_path):
    # The root a hook chose is remembered for its own failure log; a later hook in the
    # same process that fails before choosing must not log there.
    first = tmp_path / "private" / "first"
    second = tmp_path / "private" / "second"
    assert inproc("hook", "claude-code", "--root", str(first),
                  input=json.dumps(docs_payload("PreToolUse"))).code == 0
    assert inproc("hook", "claude-code", "--root", str(second), input="not json").code == 0
    assert log_lines(first) == []
    assert len(log_lines(second)) == 1


# -- the spool: nothing captured is dropped ----------------------------------------------

@contextmanager
def locked_out(inproc, root, monkeypatch):
    """A journal whose one segment another writer keeps locked past the hooks' budget
    (0.2 s here) for as long as the block runs."""
    from agent_journal.agents import hook as hook_module

    assert inproc("hook", "claude-code", input=json.dumps(docs_payload("PreToolUse"))).code == 0
    segment = next((root / "workspaces").rglob("*.sqlite"))
    monkeypatch.setattr(hook_module, "WRITE_BUDGET_S", 0.2)
    holder = sqlite3.connect(segment, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_a_hook_locked_out_spools_its_event_and_the_next_hook_journals_it(
        inproc, cli, root, monkeypatch):
    with locked_out(inproc, root, monkeypatch):
        spooled_call = docs_payload("PostToolUse") | {"tool_use_id": "toolu_spooled"}
        assert inproc("hook", "claude-code", input=json.dumps(spooled_call)).code == 0
    spooled = list((root / "spool" / "ws").iterdir())
    assert len(spooled) == 1 and spooled[0].name.endswith(".event")
    assert spooled[0].stat().st_mode & 0o777 == 0o600
    assert (root / "spool" / "ws").stat().st_mode & 0o777 == 0o700
    assert log_lines(root) == []  # spooled is not lost
    assert "toolu_spooled" not in observations(cli)
    later = docs_payload("PostToolUse") | {"tool_use_id": "toolu_later"}
    assert inproc("hook", "claude-code", input=json.dumps(later)).code == 0
    assert list((root / "spool" / "ws").iterdir()) == []
    seen = observations(cli)
    assert {"toolu_spooled", "toolu_later"} <= set(seen)


def test_a_spooled_event_whose_call_was_tombstoned_meanwhile_is_never_written(
        inproc, cli, root, monkeypatch):
    with locked_out(inproc, root, monkeypatch):
        leak = docs_payload("PostToolUse") | {"tool_use_id": "toolu_leak",
                                              "tool_response": {"stdout": "LEAKMARKER"}}
        assert inproc("hook", "claude-code", input=json.dumps(leak)).code == 0
    assert cli("tombstone", "toolu_leak", "--reason", "leaked").code == 0
    later = docs_payload("PostToolUse") | {"tool_use_id": "toolu_after"}
    assert inproc("hook", "claude-code", input=json.dumps(later)).code == 0
    assert list((root / "spool" / "ws").iterdir()) == []
    for seg in (root / "workspaces").rglob("*.sqlite"):
        assert b"LEAKMARKER" not in seg.read_bytes()


def test_session_start_past_its_budget_gives_the_newest_work_and_says_so(cli, root,
                                                                        monkeypatch):
    # Three segments: the oldest holds a tombstoned call and an objective, the newest
    # the latest calls. With no time to build the whole digest, the context is the
    # newest work's, the objective and the tombstone still apply, and it says so.
    cli("record", "--kind", "objective", "--id", "obj", "--text", "ship the parser")
    for n in range(3):
        cli("observe", "--kind", "tool_call", "--id", f"old-{n}", "--tool", "Bash",
            "--input", json.dumps({"command": f"echo OLDCALL{n}"}), "--status", "ok",
            env={"AGENT_JOURNAL_SEGMENT_MAX_BYTES": "1"})
    cli("tombstone", "old-2", "--reason", "leaked")
    cli("observe", "--kind", "tool_call", "--id", "new-1", "--tool", "Bash",
        "--input", json.dumps({"command": "echo NEWCALL"}), "--status", "ok",
        env={"AGENT_JOURNAL_SEGMENT_MAX_BYTES": "1"})
    assert len(list((root / "workspaces").rglob("*.sqlite"))) >= 4
    start = hook(cli, docs_payload("SessionStart"),
                 env={"AGENT_JOURNAL_SESSION_BUDGET_S": "0"})
    context = json.loads(start.out)["hookSpecificOutput"]["additionalContext"]
    assert context.startswith("_Built from the newest work only")
    assert "NEWCALL" in context and "ship the parser" in context
    assert "OLDCALL2" not in context
    # Its cost is bounded by rows, not segments: with room for the newest two rows only,
    # older calls are left out, and the objective and the tombstone still hold.
    from agent_journal.ops import digest
    from agent_journal.storage.root import Root

    monkeypatch.setattr(digest, "NEWEST_ROWS", 2)
    few = digest.newest_markdown(Root(str(root)).workspace("ws"), 10_000, 0)
    assert "NEWCALL" in few and "ship the parser" in few
    assert "OLDCALL0" not in few and "OLDCALL2" not in few
    whole = hook(cli, docs_payload("SessionStart"))
    assert "newest work only" not in json.loads(whole.out)["hookSpecificOutput"][
        "additionalContext"]


def test_session_start_says_when_captured_events_wait_in_the_spool(inproc, cli, root,
                                                                   monkeypatch):
    with locked_out(inproc, root, monkeypatch):
        assert inproc("hook", "claude-code",
                      input=json.dumps(docs_payload("PostToolUse"))).code == 0
        start = inproc("hook", "claude-code", input=json.dumps(docs_payload("SessionStart")))
    context = json.loads(start.out)["hookSpecificOutput"]["additionalContext"]
    assert context.startswith("_Capture: ")
