"""Where agents live: the project file, install scopes, the plugin, Codex, doctor, completion.

Everything runs the real console script from a clean HOME, the way a new user would.
"""

from __future__ import annotations

import json
import os
import shlex
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import BIN, CLI, REPO, Result, clean_env
from hypothesis import given
from hypothesis import strategies as st

DATA = REPO / "tests" / "data"
CLAUDE_DOCS = DATA / "claude-code" / "hooks" / "docs" / "input"
CODEX_HOOKS = DATA / "codex" / "hooks"
CODEX_STREAMS = DATA / "claude-code" / "codex" / "agentcmd-exec-json"
ROLLOUT = next((DATA / "codex" / "sessions").glob("rollout-*.jsonl"))
PLUGIN = REPO / ".claude-plugin"

def command_line(handler: dict[str, Any]) -> str:
    """The command a hooks file's handler runs, as one shell line (exec form or not)."""
    from agent_journal.agents.hook_command import handler_words

    return shlex.join(handler_words(handler) or [])



@pytest.fixture
def home(tmp_path: Path) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    return folder


@pytest.fixture
def project(home: Path) -> Path:
    folder = home / "src" / "shop"
    (folder / "app" / "models").mkdir(parents=True)
    return folder


def env_for(home: Path, **extra: str) -> dict[str, str]:
    """A clean environment: HOME, no AGENT_JOURNAL_* and no XDG_DATA_HOME, PATH with this
    installation's script on it (as after pipx install)."""
    env = clean_env(HOME=str(home), PATH=f"{BIN}:/usr/bin:/bin", **extra)
    env.pop("XDG_DATA_HOME", None)
    env.pop("CODEX_HOME", None)
    return env


def aj(home: Path, *args: str, cwd: Path | None = None, input: bytes | None = None,
       **extra: str) -> Result:
    proc = subprocess.run([CLI, *args], cwd=cwd or home, input=input, capture_output=True,
                          env=env_for(home, **extra), timeout=120)
    return Result(proc.returncode, proc.stdout.decode(), proc.stderr.decode())


def snapshot(*folders: Path) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and ".local" not in path.parts:
                files[str(path)] = path.read_bytes()
    return files


def payload(path: Path, cwd: Path) -> bytes:
    data = json.loads(path.read_text())
    data["cwd"] = str(cwd)
    return json.dumps(data).encode()


def run_hook(command: str, data: bytes, project: Path, home: Path) -> subprocess.CompletedProcess:
    # The agents run the command through a shell, from the project, with their environment.
    return subprocess.run(["bash", "-c", command], input=data, cwd=project, capture_output=True,
                          env=env_for(home), timeout=120)


def handlers(path: Path) -> list[dict[str, Any]]:
    found = []
    for groups in json.loads(path.read_text())["hooks"].values():
        for group in groups:
            found += [h for h in group["hooks"] if " hook " in command_line(h)]
    return found


# -- done when ---------------------------------------------------------------------------

def test_every_scope_of_every_agent_from_a_clean_home(home, project):
    # What was there before: the user's own settings at two scopes, which must come back
    # byte for byte.
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(
        '{\n    "model": "opus",\n    "permissions": {"allow": ["Bash(npm test)"]}\n}\n')
    (home / ".codex").mkdir()
    (home / ".codex" / "hooks.json").write_text(json.dumps(
        {"description": "mine", "hooks": {"Stop": [{"hooks": [
            {"type": "command", "command": "notify-send done"}]}]}}, indent=4))
    before = snapshot(project, home)
    installs = [("claude-code", "project", project / ".claude" / "settings.json"),
                ("claude-code", "local", project / ".claude" / "settings.local.json"),
                ("claude-code", "user", home / ".claude" / "settings.json"),
                ("codex", "project", project / ".codex" / "hooks.json"),
                ("codex", "user", home / ".codex" / "hooks.json")]
    for agent, scope, path in installs:
        result = aj(home, "hooks", "install", agent, "--scope", scope, cwd=project)
        # (Codex's one warning: the hooks run once trusted, test_codex_install_says_...)
        codex = result.err.startswith("WARNING: Codex runs these hooks only once you trust")
        assert result.code == 0, result
        assert result.err == "" or (agent == "codex" and codex and
                                    result.err.count("\n") == 1), result
        assert path.is_file()
        # The one on PATH is this installation: the command is the bare, stable name.
        assert {command_line(h) for h in handlers(path)} == {f"agent-journal hook {agent}"}
    assert (project / ".agent-journal.toml").read_text().endswith('workspace = "shop"\n')
    assert json.loads((project / ".claude" / "settings.json").read_text())["model"] == "opus"
    assert '\n    "model"' in (project / ".claude" / "settings.json").read_text()

    # (Claude Code runs its hooks in exec form, no shell; Codex through one: run_hook runs
    # the shell line either way.)
    claude = command_line(handlers(project / ".claude" / "settings.json")[0])
    codex = handlers(project / ".codex" / "hooks.json")[0]["command"]
    sub = project / "app" / "models"
    for command, path in ((claude, CLAUDE_DOCS / "PreToolUse.json"),
                          (codex, CODEX_HOOKS / "PreToolUse.json"),
                          (codex, CODEX_HOOKS / "PostToolUse.json")):
        proc = run_hook(command, payload(path, sub), project, home)
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")
    started = run_hook(codex, payload(CODEX_HOOKS / "SessionStart.json", sub), project, home)
    context = json.loads(started.stdout)["hookSpecificOutput"]
    assert context["hookEventName"] == "SessionStart" and "workspace shop" in \
        context["additionalContext"]

    digest = aj(home, "digest", "--json", cwd=sub)
    assert digest.code == 0, digest
    report = digest.json()
    assert report["workspace"] == "shop"
    text = aj(home, "digest", cwd=sub).out
    assert "npm test" in text and "pytest -q" in text
    doctor = aj(home, "doctor", cwd=sub)
    assert doctor.code == 0, doctor.out
    assert all(line.startswith("ok ") for line in doctor.out.splitlines())
    assert sum("hooks (" in line for line in doctor.out.splitlines()) == len(installs)

    for agent, scope, _ in installs:
        result = aj(home, "hooks", "uninstall", agent, "--scope", scope, cwd=project)
        assert result.code == 0, result
    assert snapshot(project, home) == before
    assert sorted(p.name for p in project.iterdir()) == [".claude", "app"]


def test_the_project_file_is_found_from_below_and_the_flag_and_variable_still_win(
        home, project, tmp_path):
    root = tmp_path / "j"
    assert aj(home, "hooks", "install", "claude-code", "--root", str(root),
              cwd=project).code == 0
    sub = project / "app"
    assert aj(home, "record", "--kind", "note", "--id", "n1", "--text", "t", cwd=sub).code == 0
    assert [e["id"] for e in aj(home, "show", "--json", cwd=sub).json()["entries"]] == ["n1"]
    assert (root / "workspaces" / "shop").is_dir()
    # The flag and the variable win; a flag without a value is still a usage error.
    assert aj(home, "record", "--kind", "note", "--id", "n2", "--text", "t", "--workspace",
              "other", cwd=sub).code == 0
    assert aj(home, "record", "--kind", "note", "--id", "n3", "--text", "t", cwd=sub,
              AGENT_JOURNAL_WORKSPACE="third").code == 0
    assert sorted(os.listdir(root / "workspaces")) == ["other", "shop", "third"]
    for args in (["digest", "--workspace"], ["digest", "--workspace", ""],
                 ["digest", "--workspace", "--json"]):
        assert aj(home, *args, cwd=sub).code == 2
    # Outside the project nothing is guessed.
    outside = aj(home, "digest", cwd=home)
    assert outside.code == 2 and ".agent-journal.toml" in outside.err


def test_a_broken_project_file_is_named(home, project):
    (project / ".agent-journal.toml").write_text('workspace = "shop"\nworkspace = "x"\n')
    result = aj(home, "show", cwd=project / "app")
    assert result.code == 1 and str(project / ".agent-journal.toml") in result.err
    assert "line 2" in result.err and result.err.count("\n") == 1
    (project / ".agent-journal.toml").write_text('workspace = "shop"\ncolour = "red"\n')
    result = aj(home, "show", cwd=project)
    assert result.code == 1 and "unknown key(s) colour" in result.err


def test_global_options_before_the_command(home, tmp_path):
    root = tmp_path / "j"
    assert aj(home, "--root", str(root), "--workspace", "w", "record", "--kind", "note",
              "--id", "n", "--text", "t").code == 0
    shown = aj(home, f"--root={root}", "--workspace", "w", "show", "--json")
    assert shown.code == 0 and [e["id"] for e in shown.json()["entries"]] == ["n"]
    for args in (["--root"], ["--root", "--workspace", "w", "show"], ["--root=", "show"],
                 ["--root", str(root)]):
        result = aj(home, *args)
        assert result.code == 2 and result.out == "", (args, result)


# -- bad input -----------------------------------------------------------------------------

@pytest.mark.parametrize("agent, scope, rel", [
    ("claude-code", "project", ".claude/settings.json"),
    ("claude-code", "local", ".claude/settings.local.json"),
    ("codex", "project", ".codex/hooks.json"),
])
def test_a_malformed_file_is_refused_with_its_path_and_line(home, project, agent, scope, rel):
    path = project / rel
    path.parent.mkdir()
    path.write_text('{\n  "hooks": {},\n  "model": "opus",\n}\n')
    before = snapshot(project)
    for action in ("install", "uninstall"):
        result = aj(home, "hooks", action, agent, "--scope", scope, cwd=project)
        assert result.code == 1 and result.out == "" and result.err.count("\n") == 1
        assert str(path) in result.err and "line 4" in result.err
    assert snapshot(project) == before


def test_codex_refuses_top_level_keys_it_would_reject(home, project):
    path = project / ".codex" / "hooks.json"
    path.parent.mkdir()
    path.write_text('{"$schema": "x", "hooks": {}}\n')
    result = aj(home, "hooks", "install", "codex", cwd=project)
    assert result.code == 1 and "only description and hooks" in result.err
    assert path.read_text() == '{"$schema": "x", "hooks": {}}\n'


def test_codex_install_says_the_hooks_run_only_once_trusted(home, project):
    # Codex skips a new or changed hook until the user trusts it, and `codex exec` says
    # nothing about it: the install says what to do, once, when it wrote something.
    first = aj(home, "hooks", "install", "codex", cwd=project)
    assert first.code == 0 and "/hooks" in first.err and "trust this folder" in first.err
    assert "--dangerously-bypass-hook-trust" in first.err
    again = aj(home, "hooks", "install", "codex", cwd=project)
    assert again.code == 0 and "trust" not in again.err
    user = aj(home, "hooks", "install", "codex", "--scope", "user", cwd=project)
    assert "/hooks" in user.err and "trust this folder" not in user.err
    claude = aj(home, "hooks", "install", "claude-code", cwd=project)
    assert "trust" not in claude.err
    doctor = aj(home, "doctor", cwd=project).out
    [codex_line] = [line for line in doctor.splitlines() if "codex hooks (project)" in line]
    assert "trust them in /hooks" in codex_line
    assert all("/hooks" not in line for line in doctor.splitlines() if "claude-code" in line)


@pytest.mark.parametrize("link", ["file", "folder"])
def test_a_symlink_out_of_the_project_is_refused(home, project, tmp_path, link):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "settings.local.json").write_text("{}\n")
    if link == "file":
        (project / ".claude").mkdir()
        (project / ".claude" / "settings.local.json").symlink_to(
            outside / "settings.local.json")
    else:
        (project / ".claude").symlink_to(outside)
    before = snapshot(project, outside)
    result = aj(home, "hooks", "install", "claude-code", "--scope", "local", cwd=project)
    assert (result.code, result.out) == (1, "")
    assert result.err.count("\n") == 1 and "outside the project" in result.err
    assert snapshot(project, outside) == before
    assert not (project / ".agent-journal.toml").exists()


def test_a_folder_that_cannot_be_written_is_refused_before_anything_is_written(
        home, project, monkeypatch):
    # Tests run as root, where permission bits do not stop a write: the refusal is driven
    # through the access check it rests on.
    from agent_journal.agents import hook_install
    from agent_journal.agents.claude_code import AGENT
    from agent_journal.core.errors import JournalError

    real_access = os.access
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", f"{BIN}:/usr/bin:/bin")
    monkeypatch.setattr(os, "access", lambda p, mode: False if str(p) == str(project)
                        else real_access(p, mode))
    with pytest.raises(JournalError, match="is not writable; nothing was written"):
        hook_install.install(AGENT, project=str(project), scope="project", workspace=None,
                             root=None, dry_run=False)
    assert sorted(p.name for p in project.iterdir()) == ["app"]


def test_a_shared_file_is_refused_when_the_command_is_not_on_path(home, project):
    env_path = "/usr/bin:/bin"  # not on PATH: only this checkout's absolute path would do
    result = subprocess.run([CLI, "hooks", "install", "claude-code"], cwd=project,
                            capture_output=True, env=clean_env(HOME=str(home), PATH=env_path))
    assert result.returncode == 1 and result.stderr.count(b"\n") == 1
    assert b"not on PATH" in result.stderr and b"--scope local" in result.stderr
    assert sorted(p.name for p in project.iterdir()) == ["app"]
    # At the personal scope this machine's path is no-one else's problem: no warning.
    local = subprocess.run([CLI, "hooks", "install", "claude-code", "--scope", "local"],
                           cwd=project, capture_output=True,
                           env=clean_env(HOME=str(home), PATH=env_path))
    assert local.returncode == 0 and local.stderr == b""
    commands = {command_line(h) for h in handlers(project / ".claude" / "settings.local.json")}
    assert commands == {f"{shlex.quote(CLI)} hook claude-code"}


def test_doctor_recognises_every_route_and_its_fixes_work(home, project, tmp_path):
    # The plugin, enabled in the user's settings; the MCP server at project and user scope.
    (home / ".claude").mkdir()
    (home / ".claude" / "settings.json").write_text(
        '{"enabledPlugins": {"agent-journal@agent-journal": true}}\n')
    assert aj(home, "hooks", "install", "claude-code", "--mcp", cwd=project).code == 0
    assert aj(home, "hooks", "install", "claude-code", "--mcp", "--scope", "user",
              cwd=project).code == 0
    doctor = aj(home, "doctor", cwd=project)
    assert doctor.code == 0, doctor.out
    names = [line.split(":")[0].split(None, 1)[1] for line in doctor.out.splitlines()]
    for name in ("claude-code plugin (user)", "claude-code hooks (project)",
                 "claude-code hooks (user)", "MCP server (project)", "MCP server (user)"):
        assert name in names, doctor.out
    # What older installs wrote: a machine's path in the shared file, a pinned workspace at
    # user scope. Doctor reports both, and running its fix clears both.
    mcp_json = project / ".mcp.json"
    mcp_json.write_text(json.dumps({"mcpServers": {"agent-journal": {
        "type": "stdio", "command": CLI, "args": ["mcp", "--workspace", "shop"]}}}))
    claude_json = home / ".claude.json"
    config = json.loads(claude_json.read_text())
    config["mcpServers"]["agent-journal"]["args"] += ["--workspace", "shop"]
    claude_json.write_text(json.dumps(config))
    report = aj(home, "doctor", "--json", cwd=project).json()
    problems = {c["name"]: c["fix"] for c in report["checks"] if not c["ok"]}
    assert set(problems) == {"MCP server (project)", "MCP server (user)"}, report
    for fix in problems.values():
        command = fix.split("`")[1]
        proc = subprocess.run(["bash", "-c", command], cwd=project, capture_output=True,
                              env=env_for(home))
        assert proc.returncode == 0, proc
    again = aj(home, "doctor", cwd=project)
    assert all(line.startswith("ok ") for line in again.out.splitlines()), again.out
    # The plugin's hooks run agent-journal from PATH: without it there, doctor says so.
    proc = subprocess.run([CLI, "doctor", "--json"], cwd=project, capture_output=True,
                          env={**env_for(home), "PATH": "/usr/bin:/bin"})
    lost = json.loads(proc.stdout)
    plugin = next(c for c in lost["checks"] if c["name"] == "claude-code plugin (user)")
    assert not plugin["ok"] and "pipx install agent-journal" in plugin["fix"]


def test_scope_is_limited_to_each_agents_scopes(home, project):
    assert aj(home, "hooks", "install", "codex", "--scope", "local", cwd=project).code == 2
    assert aj(home, "hooks", "install", "claude-code", "--scope", "team", cwd=project).code == 2
    assert sorted(p.name for p in project.iterdir()) == ["app"]


# -- the plugin ----------------------------------------------------------------------------

def test_the_plugin_hooks_are_what_the_installer_writes():
    from agent_journal.agents import claude_code

    market = json.loads((PLUGIN / "marketplace.json").read_text())
    (entry,) = market["plugins"]
    plugin_dir = (PLUGIN.parent / entry["source"]).resolve()
    manifest = json.loads((plugin_dir / ".claude-plugin" / "plugin.json").read_text())
    import agent_journal

    assert manifest["name"] == entry["name"] == "agent-journal"
    assert manifest["version"] == agent_journal.__version__
    hooks = json.loads((plugin_dir / "hooks" / "hooks.json").read_text())["hooks"]
    command = claude_code.hook_command()
    expected = claude_code.AGENT.handlers(command)
    assert list(hooks) == list(expected)
    for event, groups in hooks.items():
        assert groups == [{"hooks": [expected[event]]}]


# -- Codex -------------------------------------------------------------------------------

@pytest.mark.parametrize("event", sorted(p.stem for p in CODEX_HOOKS.glob("*.json")))
def test_codex_hook_journals_each_documented_event(home, tmp_path, event):
    root = tmp_path / "j"
    result = aj(home, "hook", "codex", "--root", str(root), "--workspace", "w",
                input=(CODEX_HOOKS / f"{event}.json").read_bytes())
    assert result.code == 0 and result.err == ""
    assert not (root / "logs").exists()
    shown = aj(home, "show", "--json", "--observations", "--root", str(root),
               "--workspace", "w").json()
    (obs,) = shown["entries"]
    kinds = {"SessionStart": "session_start", "UserPromptSubmit": "prompt",
             "PreToolUse": "tool_call", "PostToolUse": "tool_call", "PreCompact": "pre_compact",
             "PostCompact": "post_compact", "Stop": "assistant_message"}
    assert obs["kind"] == kinds[event]
    if event == "SessionStart":
        # Codex's session-start output schema allows no other key, at either level.
        out = json.loads(result.out)
        assert list(out) == ["hookSpecificOutput"]
        assert set(out["hookSpecificOutput"]) == {"hookEventName", "additionalContext"}
        assert out["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    else:
        assert result.out == ""
    if event == "PostToolUse":
        assert (obs["status"], obs["exitCode"]) == ("error", 1)


def test_codex_hook_fails_open_on_garbage(home, tmp_path):
    root = tmp_path / "j"
    result = aj(home, "hook", "codex", "--root", str(root), input=b"not json")
    assert (result.code, result.out) == (0, "")
    assert "hook codex failed open" in (root / "logs" / "hook.log").read_text()


def test_import_codex_exec_streams_and_session_files(home, tmp_path):
    root = tmp_path / "j"
    common = ("--root", str(root), "--workspace", "w")
    reports = [aj(home, "import", "codex", str(path), "--json", *common).json()
               for path in sorted(CODEX_STREAMS.glob("*.jsonl"))]
    assert [r["calls"] for r in reports] == [1, 1]
    assert reports[0]["sessions"] == ["019a2d7a-6455-7170-a661-c6d8b94c630a"]
    rollout = aj(home, "import", "codex", str(ROLLOUT), "--json", *common).json()
    assert (rollout["calls"], rollout["unfinished"]) == (4, 1)
    again = aj(home, "import", "codex", str(ROLLOUT), "--json", *common).json()
    assert again["eventsWritten"] == 0
    shown = aj(home, "show", "--json", "--observations", *common).json()["entries"]
    by_id = {o["id"]: o for o in shown}
    assert by_id["019a2d7a-6455-7170-a661-c6d8b94c630a:item_1"]["tool"] == "Bash"
    assert (by_id["call_cat02"]["status"], by_id["call_cat02"]["exitCode"]) == ("error", 1)
    assert by_id["call_patch03"]["tool"] == "apply_patch"
    listing = aj(home, "get", "call_ls01", *common)
    assert "README.md\nsrc\n" in listing.out
    digest = aj(home, "digest", *common).out
    assert "`ls`" in digest and "sleep 600" in digest


def test_import_codex_refuses_what_is_not_codex_and_writes_nothing(home, tmp_path):
    root = tmp_path / "j"
    transcript = next((DATA / "claude-code" / "transcripts").rglob("*.jsonl"))
    for path in (transcript, CLAUDE_DOCS / "PreToolUse.json"):
        result = aj(home, "import", "codex", str(path), "--root", str(root), "--workspace", "w")
        assert result.code == 1 and "not a Codex session" in result.err, result
        assert "nothing imported" in result.err
    assert not root.exists()



TRANSCRIPTS = DATA / "claude-code" / "transcripts"


def test_import_refuses_a_session_from_another_project_unless_told(home, tmp_path):
    root = tmp_path / "j"
    common = ("--root", str(root), "--workspace", "w")
    first = TRANSCRIPTS / "daaain-claude-code-log" / "2b4ed4c0-b905-41de-9238-273db3ec737a.jsonl"
    other = TRANSCRIPTS / "DRMacIver-claude-reliability" / "coverage-test-fix" / "transcript.jsonl"
    report = aj(home, "import", "claude-code", str(first), "--json", *common).json()
    assert report["project"]["cwd"] == "/src/experiments/claude_p"
    assert report["otherProject"] is None
    before = snapshot(root)
    for agent, path, cwd in (("claude-code", other, "/tmp/tmpw6sk2trg"),
                             ("codex", ROLLOUT, "/home/user/project")):
        refused = aj(home, "import", agent, str(path), *common)
        assert refused.code == 1 and refused.out == "", refused
        (line,) = refused.err.splitlines()
        assert "/src/experiments/claude_p" in line and cwd in line
        assert "--other-project" in line and "nothing imported" in line
        assert snapshot(root) == before
    accepted = aj(home, "import", "claude-code", str(other), "--other-project", *common)
    assert accepted.code == 0, accepted
    (warning,) = accepted.err.splitlines()
    assert warning.startswith("WARNING:") and "/tmp/tmpw6sk2trg" in warning
    assert "/src/experiments/claude_p" in warning
    assert "project /tmp/tmpw6sk2trg (master)" in accepted.out
    assert snapshot(root) != before
    again = aj(home, "import", "codex", str(ROLLOUT), "--other-project", "--json", *common)
    assert again.code == 0 and again.json()["otherProject"] is not None
    assert again.json()["project"] == {"cwd": "/home/user/project", "branch": None,
                                       "repository": None}


def test_import_of_the_same_projects_sessions_does_not_warn(home, tmp_path):
    common = ("--root", str(tmp_path / "j"), "--workspace", "w")
    sessions = sorted((TRANSCRIPTS / "PackmindHub-context-evaluator").rglob("*.jsonl"))[:2]
    for path in sessions:
        result = aj(home, "import", "claude-code", str(path), "--json", *common)
        assert result.code == 0 and result.err == "", result
        assert result.json()["otherProject"] is None
        assert result.json()["project"]["cwd"] == "/Users/cedricteyton/Code/agents-md-evaluator"


# -- doctor ------------------------------------------------------------------------------

def test_doctor_names_a_pattern_that_does_not_compile(home, tmp_path):
    root = tmp_path / "j"
    assert aj(home, "record", "--kind", "note", "--id", "n", "--text", "t", "--root", str(root),
              "--workspace", "w").code == 0
    (root / "config.json").write_text(json.dumps(
        {"redact": {"patterns": [{"name": "broken-one", "regex": "(unclosed"}]}}))
    result = aj(home, "doctor", "--root", str(root))
    assert result.code == 1
    (line,) = [ln for ln in result.out.splitlines() if ln.startswith("problem")]
    assert "redaction config" in line and "broken-one" in line and "fix:" in line
    report = json.loads(aj(home, "doctor", "--root", str(root), "--json").out)
    assert report["ok"] is False
    assert {c["name"] for c in report["checks"] if not c["ok"]} == {"redaction config"}
    assert set(report["checks"][0]) == {"name", "ok", "detail", "fix"}


def test_doctor_reports_recent_hook_failures_and_creates_nothing(home, tmp_path):
    root = tmp_path / "j"
    assert aj(home, "doctor", "--root", str(root)).code == 0
    assert not root.exists()
    aj(home, "hook", "claude-code", "--root", str(root), input=b"{")
    result = aj(home, "doctor", "--root", str(root))
    assert result.code == 1 and "1 hook failure(s) in the last day" in result.out


# -- conventions -----------------------------------------------------------------------------

def test_version_and_short_help(home):
    import agent_journal

    assert aj(home, "--version").out == f"agent-journal {agent_journal.__version__}\n"
    short = aj(home, "record", "-h")
    assert short.code == 0 and "--kind" in short.out and short.out == aj(
        home, "record", "--help").out
    assert "(required)" in aj(home, "record", "--help", COLUMNS="200").out


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts(home, shell):
    from agent_journal.cli.commands import COMMANDS

    result = aj(home, "completion", shell)
    assert result.code == 0
    for name in COMMANDS:
        assert name.split()[-1] in result.out
    if shell == "bash":
        check = subprocess.run(["bash", "-n"], input=result.out.encode(), capture_output=True)
        assert check.returncode == 0, check.stderr
        probe = result.out + ('COMP_WORDS=(agent-journal hooks install codex --sc); '
                              'COMP_CWORD=4; _agent_journal; echo "${COMPREPLY[@]}"\n')
        out = subprocess.run(["bash", "-c", probe], capture_output=True, text=True).stdout
        assert out.strip() == "--scope"
    assert aj(home, "completion", "tcsh").code == 2


def test_observe_kind_is_limited_to_the_documented_kinds(home, tmp_path):
    root = tmp_path / "j"
    bad = aj(home, "observe", "--kind", "tool-call", "--id", "o", "--root", str(root),
             "--workspace", "w")
    assert bad.code == 2 and "must be one of tool_call" in bad.err and not root.exists()
    good = aj(home, "observe", "--kind", "user_prompt", "--id", "o", "--root", str(root),
              "--workspace", "w")
    assert good.code == 0


# -- the project file: law and hot path ----------------------------------------------------

@given(st.text(min_size=1), st.one_of(st.none(), st.text(min_size=1)))
def test_the_project_file_reads_back_what_it_wrote_as_toml_does(workspace, root):
    import tomllib

    from agent_journal.storage.project_file import _read_simple, render

    text = render(workspace, root)
    expected = {"workspace": workspace} | ({"root": root} if root is not None else {})
    assert tomllib.loads(text) == expected
    assert _read_simple(text) == expected


def test_a_project_file_keeps_the_write_path_lean(home, project, tmp_path):
    import sys

    from test_architecture import HOOK_PAYLOAD, PROBE

    assert aj(home, "hooks", "install", "codex", "--root", str(tmp_path / "j"),
              cwd=project).code == 0
    for args in (["record", "--kind", "note", "--id", "n", "--text", "t"],
                 ["hook", "claude-code"], ["hook", "codex"]):
        proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True,
                              text=True, env=env_for(home), input=HOOK_PAYLOAD, cwd=project)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stderr.split("MODULES ")[1]) == [], args
    assert not (tmp_path / "j" / "logs").exists()
    assert sorted(os.listdir(tmp_path / "j" / "workspaces")) == ["shop"]


def test_a_failing_hook_logs_under_the_root_the_project_file_names(home, project, tmp_path):
    # The root came from .agent-journal.toml: a failure must be logged where the journal
    # lives, not under the default root (which doctor, run in the project, never reads).
    root = tmp_path / "j"
    assert aj(home, "hooks", "install", "claude-code", "--root", str(root),
              cwd=project).code == 0
    default_log = home / ".local" / "share" / "agent-journal" / "logs" / "hook.log"
    # Before the payload is read (not JSON): the project file nearest the hook's folder.
    result = aj(home, "hook", "claude-code", input=b"not json", cwd=project / "app")
    assert (result.code, result.out, result.err) == (0, "", "")
    assert "hook claude-code failed open" in (root / "logs" / "hook.log").read_text()
    assert not default_log.exists()
    # After the payload named its folder: the root the write went to, even when the hook
    # runs elsewhere. (The workspace folder is a file, so the write fails.)
    (root / "workspaces").mkdir(parents=True, exist_ok=True)
    (root / "workspaces" / "shop").write_text("in the way")
    result = aj(home, "hook", "claude-code", cwd=home,
                input=payload(CLAUDE_DOCS / "PreToolUse.json", project / "app"))
    assert (result.code, result.out, result.err) == (0, "", "")
    assert (root / "logs" / "hook.log").read_text().count("failed open") == 2
    assert not default_log.exists()
    # A broken project file is itself the failure: it is logged under the default root.
    (project / ".agent-journal.toml").write_text('colour = "red"\n')
    result = aj(home, "hook", "claude-code", cwd=project,
                input=payload(CLAUDE_DOCS / "PreToolUse.json", project))
    assert result.code == 0 and "unknown key(s) colour" in default_log.read_text()


def test_install_from_a_subfolder_finds_the_project_and_says_so(home, project):
    (project / ".git").mkdir()
    sub = project / "app" / "models"
    result = aj(home, "hooks", "install", "claude-code", cwd=sub)
    assert result.code == 0, result
    assert (project / ".claude" / "settings.json").is_file()
    assert not (sub / ".claude").exists() and not (sub / ".agent-journal.toml").exists()
    assert (project / ".agent-journal.toml").read_text().endswith('workspace = "shop"\n')
    assert f"project {project}: the folder above the current one that is the git top " \
        "level" in result.out
    # Codex and the MCP entry land in the same folder; uninstall finds it the same way.
    assert aj(home, "hooks", "install", "codex", cwd=sub).code == 0
    assert (project / ".codex" / "hooks.json").is_file()
    assert aj(home, "hooks", "install", "claude-code", "--mcp", cwd=sub).code == 0
    assert (project / ".mcp.json").is_file() and not (sub / ".mcp.json").exists()
    doctor = aj(home, "doctor", cwd=sub)
    assert sum("hooks (" in line for line in doctor.out.splitlines()) == 2, doctor.out
    for agent in ("claude-code", "codex"):
        assert aj(home, "hooks", "uninstall", agent, cwd=sub).code == 0
    assert sorted(p.name for p in project.iterdir()) == [".git", "app"]
    # The nearest marker wins; the home folder's own .claude (the user scope) is no project.
    (project / "app" / ".claude").mkdir()
    assert aj(home, "hooks", "install", "claude-code", cwd=sub).code == 0
    assert (project / "app" / ".claude" / "settings.json").is_file()
    (home / ".claude").mkdir()
    loose = home / "notes" / "deep"
    loose.mkdir(parents=True)
    result = aj(home, "hooks", "install", "claude-code", cwd=loose)
    assert result.code == 0 and "the folder above" not in result.out
    assert (loose / ".claude" / "settings.json").is_file()


def test_a_codex_patch_that_did_not_apply_changed_no_file(home, tmp_path):
    # The rollout's own lines, then a patch Codex refused to apply: its output says so in
    # Codex's words, with no exit code.
    lines = ROLLOUT.read_text().splitlines()[:9]
    patch = "*** Begin Patch\n*** Update File: src/app.py\n@@\n-old\n+new\n*** End Patch\n"
    lines += [json.dumps({"timestamp": "2025-10-29T00:59:42.500Z", "type": "response_item",
                          "payload": {"type": "custom_tool_call", "status": "completed",
                                      "call_id": "call_patch05", "name": "apply_patch",
                                      "input": patch}}),
              json.dumps({"timestamp": "2025-10-29T00:59:42.700Z", "type": "response_item",
                          "payload": {"type": "custom_tool_call_output",
                                      "call_id": "call_patch05",
                                      "output": "apply_patch verification failed: Failed to "
                                                "find expected lines in /home/user/project/"
                                                "src/app.py:\n-old"}})]
    rollout = tmp_path / "rollout-2025-10-29T00-59-38-failed-patch.jsonl"
    rollout.write_text("\n".join(lines) + "\n")
    common = ("--root", str(tmp_path / "j"), "--workspace", "w")
    assert aj(home, "import", "codex", str(rollout), "--json", *common).json()["calls"] == 4
    digest = aj(home, "digest", "--json", *common).json()
    assert [f["path"] for f in digest["files"]] == ["hello.txt"]
    refused = [p for p in digest["openProblems"] if p["id"] == "call_patch05"]
    assert refused and refused[0]["reason"].startswith("apply_patch verification failed")


AGENTV = DATA / "claude-code" / "codex" / "EntityProcess-agentv" / "a6" / "0726a7452e" / "0" / \
    "full.jsonl"


def _rollout_lines(*call_ids: str) -> list[str]:
    """The lines of the real agentv rollout (provenance in claude-code/README.md) that
    hold the given calls and their outputs."""
    kept = []
    for line in AGENTV.read_text(encoding="utf-8").splitlines():
        payload = json.loads(line).get("payload") or {}
        if payload.get("call_id") in call_ids:
            kept.append(line)
    return kept


def _codex_stop(home: Path, root: Path, base: dict[str, Any]) -> None:
    """Codex's Stop hook for the session of `base` (a tool payload), which reads the
    rollout at its transcript_path."""
    stop = {k: v for k, v in base.items() if k not in ("tool_name", "tool_use_id",
                                                       "tool_input", "turn_id")}
    result = aj(home, "hook", "codex", "--root", str(root), "--workspace", "w",
                input=json.dumps(dict(stop, hook_event_name="Stop", stop_hook_active=False,
                                      last_assistant_message="done")).encode())
    assert (result.code, result.err) == (0, "")


def test_codex_stop_reads_how_patches_and_failed_commands_ended_from_the_rollout(home,
                                                                               tmp_path):
    # apply_patch gets a PreToolUse and no PostToolUse; a command's PostToolUse may carry no
    # exit code. The Stop hook reads the rollout: the patch is not left unfinished, the
    # failed command is a failure, and reading it again adds nothing.
    patch, failed = "call_2hzDhZRr94h9mDxH0rJeog5t", "call_CdO9OkVGJD0NyUcsTPTxqq3z"
    rollout = tmp_path / "rollout.jsonl"
    rollout.write_text("\n".join(_rollout_lines(patch, failed)) + "\n")
    root = tmp_path / "j"
    base = json.loads((CODEX_HOOKS / "PreToolUse.json").read_text())
    base["transcript_path"] = str(rollout)

    def send(event: str, **fields: Any) -> None:
        payload = dict(base, hook_event_name=event, **fields)
        result = aj(home, "hook", "codex", "--root", str(root), "--workspace", "w",
                    input=json.dumps(payload).encode())
        assert (result.code, result.err) == (0, "")

    send("PreToolUse", tool_name="apply_patch", tool_use_id=patch,
         tool_input={"command": "*** Begin Patch"})
    send("PreToolUse", tool_name="Bash", tool_use_id=failed,
         tool_input={"command": "gh issue view 1 --json closedByPullRequestsReferences"})
    send("PostToolUse", tool_name="Bash", tool_use_id=failed,
         tool_input={"command": "gh issue view 1 --json closedByPullRequestsReferences"},
         tool_response="Unknown JSON field")
    for _ in range(2):
        _codex_stop(home, root, base)
    report = aj(home, "digest", "--json", "--root", str(root), "--workspace", "w").json()
    assert report["unfinishedToolCalls"] == []
    assert [p["id"] for p in report["openProblems"]] == [failed]
    shown = aj(home, "show", "--json", "--observations", "--root", str(root),
               "--workspace", "w").json()
    calls = {o["id"]: o for o in shown["entries"] if o["kind"] == "tool_call"}
    assert calls[patch]["status"] == "ok" and calls[failed]["exitCode"] == 1
    rows = 0
    for seg in (root / "workspaces").rglob("*.sqlite"):
        with sqlite3.connect(seg) as conn:
            rows += conn.execute("SELECT count(*) FROM events").fetchone()[0]
    assert rows == 3 + 2 + 2  # the tool events, two Stops, one ending per call


def test_doctor_hook_failures_can_be_acknowledged_once_fixed(home, tmp_path):
    """Issue 33: a fixed hook failure stayed red for a day. `--ack-hook-log` marks the
    failures logged so far as dealt with; a later one is reported again."""
    root = tmp_path / "j"
    aj(home, "hook", "claude-code", "--root", str(root), input=b"{",
       AGENT_JOURNAL_NOW="2026-12-07T10:00:00Z")
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    aj(home, "hook", "claude-code", "--root", str(root), input=b"{", AGENT_JOURNAL_NOW=now)
    result = aj(home, "doctor", "--root", str(root))
    assert result.code == 1 and "doctor --ack-hook-log" in result.out
    acked = aj(home, "doctor", "--root", str(root), "--ack-hook-log")
    assert acked.code == 0, acked.out
    assert "none since they were acknowledged" in acked.out
    assert (root / "logs" / "hook.log.ack").read_text().strip() == now.replace("Z", ".000Z")
    assert oct((root / "logs" / "hook.log.ack").stat().st_mode & 0o777) == "0o600"
    assert aj(home, "doctor", "--root", str(root)).code == 0
    later = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 5))
    aj(home, "hook", "claude-code", "--root", str(root), input=b"{", AGENT_JOURNAL_NOW=later)
    again = aj(home, "doctor", "--root", str(root))
    assert again.code == 1 and "1 hook failure(s) in the last day since the last " \
        "acknowledged" in again.out


def test_doctor_fix_for_a_root_in_a_shared_folder_is_not_a_chmod_of_nothing(home, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    result = aj(home, "doctor", "--root", str(shared / "journal"))
    (line,) = [ln for ln in result.out.splitlines() if "journal root" in ln]
    assert line.startswith("problem") and "chmod" not in line.split("fix:")[1]
    assert "--root DIR" in line


def test_uninstall_at_user_scope_keeps_the_agents_home_folder(home):
    """Issue 33: uninstall removed an empty ~/.codex it had not created."""
    (home / ".codex").mkdir()
    for verb in ("install", "uninstall"):
        result = aj(home, "hooks", verb, "codex", "--scope", "user")
        assert result.code == 0, result.err
    assert (home / ".codex").is_dir() and list((home / ".codex").iterdir()) == []


def test_local_scope_makes_sure_git_ignores_the_personal_file(home, project):
    """Issue 33: --scope local wrote .claude/settings.local.json without making sure git
    ignores it. Install adds it to .git/info/exclude (nothing committed changes) when no
    rule ignores it already; uninstall takes the line back."""
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    exclude = project / ".git" / "info" / "exclude"
    original = exclude.read_text()

    def untracked() -> str:
        return subprocess.run(["git", "-C", str(project), "status", "--porcelain",
                               "--untracked-files=all"], capture_output=True, text=True,
                              check=True).stdout

    dry = aj(home, "hooks", "install", "claude-code", "--scope", "local", "--dry-run",
             cwd=project)
    assert dry.code == 0 and "+/.claude/settings.local.json" in dry.out
    assert exclude.read_text() == original
    result = aj(home, "hooks", "install", "claude-code", "--scope", "local", cwd=project)
    assert result.code == 0, result.err
    assert "git now ignores .claude/settings.local.json" in result.out
    assert (project / ".claude" / "settings.local.json").is_file()
    assert "settings.local.json" not in untracked()
    again = aj(home, "hooks", "install", "claude-code", "--scope", "local", cwd=project)
    assert again.code == 0 and exclude.read_text().count("settings.local.json") == 1
    assert aj(home, "hooks", "uninstall", "claude-code", "--scope", "local",
              cwd=project).code == 0
    assert exclude.read_text() == original
    # Already ignored by the project's own rule: nothing added.
    (project / ".gitignore").write_text(".claude/settings.local.json\n")
    assert aj(home, "hooks", "install", "claude-code", "--scope", "local",
              cwd=project).code == 0
    assert exclude.read_text() == original


def test_codex_exec_output_loses_its_header_and_keeps_its_exit_code():
    from agent_journal.capture.codex import _output

    raw = ("Chunk ID: efaa97\nWall time: 0.2336 seconds\nProcess exited with code 1\n"
           "Original token count: 65\nOutput:\nUnknown JSON field: x\n")
    assert _output(raw) == ("Unknown JSON field: x\n", 1)
    assert _output("Chunk ID is a phrase\nno header here") == (
        "Chunk ID is a phrase\nno header here", None)


def test_codex_stop_tells_how_a_command_that_outlived_its_call_ended(home, tmp_path):
    # A long `bun run test`: its PostToolUse says only "Process running with session ID
    # 77"; the agent polls with write_stdin until the chunk that says it exited. The Stop
    # hook reads the rollout and journals how the command itself ended.
    def record(ts, payload):
        return json.dumps({"timestamp": f"2026-06-18T08:0{ts}:00.000Z",
                           "type": "response_item", "payload": payload})

    def chunk(state, body):
        return f"Chunk ID: ab\nWall time: 30.0 seconds\n{state}\nOriginal token count: 9\n" \
               f"Output:\n{body}"

    running = "Process running with session ID 77"
    done = (" 9 pass\n 0 fail\nRan 9 tests across 2 files. [1.00s]\n"
            "pkg test: Exited with code 0\n")
    lines = [
        record(1, {"type": "function_call", "name": "exec_command", "call_id": "call_run",
                   "arguments": json.dumps({"cmd": "bun run test"})}),
        record(1, {"type": "function_call_output", "call_id": "call_run",
                   "output": chunk(running, "bun test v1.3\n")}),
        record(2, {"type": "function_call", "name": "write_stdin", "call_id": "call_poll",
                   "arguments": json.dumps({"session_id": 77, "chars": ""})}),
        record(2, {"type": "function_call_output", "call_id": "call_poll",
                   "output": chunk("Process exited with code 0", done)})]
    rollout = tmp_path / "rollout.jsonl"
    rollout.write_text("\n".join(lines) + "\n")
    root = tmp_path / "j"
    base = json.loads((CODEX_HOOKS / "PreToolUse.json").read_text())
    base["transcript_path"] = str(rollout)
    for event, extra in (("PreToolUse", {}), ("PostToolUse", {"tool_response": running})):
        payload = dict(base, hook_event_name=event, tool_name="Bash", tool_use_id="call_run",
                       tool_input={"command": "bun run test"}, **extra)
        result = aj(home, "hook", "codex", "--root", str(root), "--workspace", "w",
                    input=json.dumps(payload).encode())
        assert (result.code, result.err) == (0, "")
    # Before Stop the command has not ended: no run, no pass, an unfinished call.
    report = aj(home, "digest", "--json", "--root", str(root), "--workspace", "w").json()
    assert report["testRuns"] == []
    assert [c["id"] for c in report["unfinishedToolCalls"]] == ["call_run"]
    _codex_stop(home, root, base)
    report = aj(home, "digest", "--json", "--root", str(root), "--workspace", "w").json()
    assert report["unfinishedToolCalls"] == []
    [run] = report["testRuns"]
    assert run["command"] == "bun run test" and run["ok"]
    assert "9 pass, 0 fail" in run["summary"]
