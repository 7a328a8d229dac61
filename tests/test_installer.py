"""`hooks install|uninstall claude-code` against real settings.json shapes from the docs."""

from __future__ import annotations

import copy
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import BIN, CLI, DATA, clean_env

SETTINGS_EXAMPLES = DATA / "claude-code" / "hooks" / "docs" / "settings"
EVENTS = ["PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionDenied",
          "UserPromptSubmit", "SessionStart", "PreCompact", "PostCompact", "Stop",
          "SubagentStop", "SessionEnd"]
SCRIPT = str(BIN / "agent-journal")

def command_line(handler: dict[str, Any]) -> str:
    """The command a hooks file's handler runs, as one shell line (exec form or not)."""
    from agent_journal.agents.hook_command import handler_words

    return shlex.join(handler_words(handler) or [])



@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "my-project"
    folder.mkdir()
    return folder


ON_PATH = f"{BIN}:/usr/bin:/bin"  # this installation's command on PATH, as after pipx install


def run(cli, *args: str, **kw: Any):
    kw.setdefault("workspace", None)
    kw.setdefault("use_root", False)
    kw["env"] = {"PATH": ON_PATH, **(kw.get("env") or {})}
    return cli("hooks", *args, **kw)


def settings_path(project: Path) -> Path:
    return project / ".claude" / "settings.json"


def ours(settings: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for event, groups in settings.get("hooks", {}).items():
        for group in groups:
            for handler in group.get("hooks", []):
                if " hook claude-code " in command_line(handler) + " ":
                    found.setdefault(event, []).append(handler)
    return found


def strip_ours(settings: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(settings)
    hooks = out.get("hooks", {})
    for event in list(hooks):
        for group in list(hooks[event]):
            group["hooks"] = [h for h in group["hooks"]
                              if " hook claude-code " not in command_line(h) + " "]
            if not group["hooks"]:
                hooks[event].remove(group)
        if not hooks[event]:
            del hooks[event]
    return out


def test_fresh_install(cli, project):
    result = run(cli, "install", "claude-code", "--project", str(project))
    assert (result.code, result.err) == (0, "")
    assert "installed agent-journal hooks (workspace my-project)" in result.out
    assert (project / ".agent-journal.toml").read_text().endswith('workspace = "my-project"\n')
    settings = json.loads(settings_path(project).read_text())
    found = ours(settings)
    assert list(found) == EVENTS
    for event, (handler,) in found.items():
        assert handler["type"] == "command"
        assert isinstance(handler["timeout"], int) and 10 <= handler["timeout"] <= 60
        # The per-call capture runs in the background (tests/test_real_clients.py shows
        # the real client running it); SessionStart, whose output is the context, does not.
        assert handler.get("async", False) is (event in (
            "PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionDenied"))
        # Exec form (Claude Code >= 2.1.337): the executable and its arguments, no shell.
        # A shared file: the PATH command, never this machine's path.
        assert (handler["command"], handler["args"]) == ("agent-journal",
                                                         ["hook", "claude-code"])
    # Each handler sits in its own group with no matcher: every tool, every source.
    assert all(group == {"hooks": [ours(settings)[event][0]]}
               for event, groups in settings["hooks"].items() for group in groups)


def test_second_install_changes_nothing(cli, project):
    run(cli, "install", "claude-code", "--project", str(project))
    path = settings_path(project)
    first = path.read_bytes()
    mtime = path.stat().st_mtime_ns
    result = run(cli, "install", "claude-code", "--project", str(project))
    assert result.code == 0 and "already installed" in result.out
    assert path.read_bytes() == first and path.stat().st_mtime_ns == mtime


def test_uninstall_removes_what_install_added(cli, project):
    run(cli, "install", "claude-code", "--project", str(project))
    result = run(cli, "uninstall", "claude-code", "--project", str(project))
    assert result.code == 0 and "removed" in result.out
    assert not settings_path(project).exists() and not (project / ".claude").exists()
    again = run(cli, "uninstall", "claude-code", "--project", str(project))
    assert again.code == 0 and "nothing to remove" in again.out


@pytest.mark.parametrize("example", sorted(p.name for p in SETTINGS_EXAMPLES.glob("*.json")))
def test_everything_else_is_kept(cli, project, example):
    original = json.loads((SETTINGS_EXAMPLES / example).read_text())
    original["permissions"] = {"allow": ["Bash(npm test)"], "deny": []}
    original["env"] = {"FOO": "bar"}
    path = settings_path(project)
    path.parent.mkdir()
    path.write_text(json.dumps(original, indent=2) + "\n")
    before = path.read_bytes()
    assert run(cli, "install", "claude-code", "--project", str(project)).code == 0
    installed = json.loads(path.read_text())
    assert strip_ours(installed) == original
    assert list(installed)[: len(original)] == list(original)
    assert len(ours(installed)) == len(EVENTS)
    for event, groups in original["hooks"].items():
        assert installed["hooks"][event][: len(groups)] == groups
    assert run(cli, "uninstall", "claude-code", "--project", str(project)).code == 0
    assert path.read_bytes() == before


def test_indentation_is_kept(cli, project):
    path = settings_path(project)
    path.parent.mkdir()
    path.write_text(json.dumps({"model": "opus", "hooks": {}}, indent="\t") + "\n")
    assert run(cli, "install", "claude-code", "--project", str(project)).code == 0
    assert '\n\t"model": "opus"' in path.read_text()


def test_handler_sharing_a_group_is_removed_alone(cli, project):
    path = settings_path(project)
    run(cli, "install", "claude-code", "--project", str(project))
    settings = json.loads(path.read_text())
    settings["hooks"]["Stop"][0]["hooks"].append({"type": "command", "command": "notify.sh"})
    settings["hooks"]["Stop"].insert(0, {"hooks": []})  # the user's own empty group stays
    path.write_text(json.dumps(settings, indent=2) + "\n")
    assert run(cli, "uninstall", "claude-code", "--project", str(project)).code == 0
    assert json.loads(path.read_text()) == {"hooks": {"Stop": [
        {"hooks": []}, {"hooks": [{"type": "command", "command": "notify.sh"}]}]}}


def test_reinstall_with_another_workspace_replaces_in_place(cli, project):
    run(cli, "install", "claude-code", "--project", str(project))
    path = settings_path(project)
    settings = json.loads(path.read_text())
    settings["hooks"]["PreToolUse"].append({"matcher": "Bash", "hooks": [
        {"type": "command", "command": "lint.sh"}]})
    path.write_text(json.dumps(settings, indent=2) + "\n")
    result = run(cli, "install", "claude-code", "--project", str(project),
                 "--workspace", "other")
    assert result.code == 0
    after = json.loads(path.read_text())
    found = ours(after)
    assert all(len(handlers) == 1 for handlers in found.values())
    assert all(command_line(h).endswith("hook claude-code") for (h,) in found.values())
    assert 'workspace = "other"' in (project / ".agent-journal.toml").read_text()
    assert after["hooks"]["PreToolUse"][1]["matcher"] == "Bash"  # order kept


def test_a_hand_made_duplicate_is_folded_into_one(cli, project):
    path = settings_path(project)
    path.parent.mkdir()
    command = f"{shlex.quote(SCRIPT)} hook claude-code --workspace x"
    dup = {"hooks": [{"type": "command", "command": command}]}
    path.write_text(json.dumps({"hooks": {"Stop": [dup, copy.deepcopy(dup)]}}, indent=2))
    assert run(cli, "install", "claude-code", "--project", str(project)).code == 0
    assert len(ours(json.loads(path.read_text()))["Stop"]) == 1


@pytest.mark.parametrize("how, expected", [
    ("flag", "ws-flag"),
    ("env", "ws-env"),
    ("none", "my-project"),
])
def test_workspace_choice(cli, project, how, expected):
    args = ["--workspace", "ws-flag"] if how == "flag" else []
    workspace = "ws-env" if how == "env" else None
    result = run(cli, "install", "claude-code", "--project", str(project), *args,
                 workspace=workspace)
    assert result.code == 0
    handler = ours(json.loads(settings_path(project).read_text()))["Stop"][0]
    assert shlex.split(handler["command"])[3:] == []
    assert f'workspace = "{expected}"' in (project / ".agent-journal.toml").read_text()


def test_root_is_written_only_when_given(cli, project, root):
    root.mkdir(mode=0o700)
    project_file = project / ".agent-journal.toml"
    assert run(cli, "install", "claude-code", "--project", str(project)).code == 0
    assert "root" not in project_file.read_text()
    assert run(cli, "install", "claude-code", "--project", str(project), "--root",
               str(root)).code == 0
    assert f'root = "{root}"' in project_file.read_text()
    project_file.unlink()
    assert run(cli, "install", "claude-code", "--project", str(project),
               use_root=True).code == 0  # AGENT_JOURNAL_ROOT set by the fixture
    assert f'root = "{root}"' in project_file.read_text()
    for handlers in ours(json.loads(settings_path(project).read_text())).values():
        assert "--root" not in handlers[0]["command"]


def test_unsafe_root_is_refused(cli, project, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    result = run(cli, "install", "claude-code", "--project", str(project), "--root",
                 str(shared / "j"))
    assert result.code == 1 and "group- or world-writable" in result.err
    assert not settings_path(project).exists()


def test_installed_command_really_journals(cli, project, root):
    root.mkdir(mode=0o700)
    run(cli, "install", "claude-code", "--project", str(project), "--root", str(root))
    handler = ours(json.loads(settings_path(project).read_text()))["PreToolUse"][0]
    payload = (DATA / "claude-code" / "hooks" / "docs" / "input" /
               "PreToolUse.json").read_bytes()
    # Claude Code runs it in exec form (the command found on PATH, its args as they are,
    # no shell), from the project, with its own environment.
    import shutil

    env = clean_env(PATH=ON_PATH)
    exe = shutil.which(handler["command"], path=env["PATH"])
    assert exe is not None
    proc = subprocess.run([exe, *handler["args"]], input=payload, cwd=project,
                          capture_output=True, env=env)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")
    shown = cli("show", "--json", "--observations", "--root", str(root),
                workspace="my-project").json()
    assert [o["id"] for o in shown["entries"]] == ["toolu_01ABC123..."]


def test_dry_run_shows_the_change_and_writes_nothing(cli, project):
    result = run(cli, "install", "claude-code", "--project", str(project), "--dry-run")
    assert result.code == 0
    assert result.out.startswith("--- /dev/null\n+++ ")
    assert '+            "command": ' in result.out
    assert not (project / ".claude").exists()
    run(cli, "install", "claude-code", "--project", str(project))
    path = settings_path(project)
    before = path.read_bytes()
    result = run(cli, "install", "claude-code", "--project", str(project), "--dry-run")
    assert result.out.startswith("agent-journal hooks already installed")
    result = run(cli, "uninstall", "claude-code", "--project", str(project), "--dry-run")
    assert result.code == 0 and result.out.endswith("+++ /dev/null\n" + result.out.split(
        "+++ /dev/null\n", 1)[1]) and '-            "command": ' in result.out
    assert path.read_bytes() == before
    assert run(cli, "install", "claude-code", "--dry-run=yes").code == 2


@pytest.mark.parametrize("text, why", [
    ('{"hooks": {}, "hooks": {}}', "duplicate key"),
    ('{"model": NaN}', "NaN"),
    ('{"model": "opus",}', "not valid JSON"),
    ('{"a": 1} trailing', "not valid JSON"),
    ("[1, 2]", "not a JSON object"),
    ('{"hooks": []}', '"hooks" is not an object'),
    ('{"hooks": {"Stop": {}}}', '"hooks.Stop" is not a list'),
    ("\xff\xfe", "not valid JSON"),
])
def test_settings_that_are_not_strict_json_are_refused(cli, project, text, why):
    path = settings_path(project)
    path.parent.mkdir()
    path.write_bytes(text.encode("latin-1") if text.startswith("\xff") else text.encode())
    before = path.read_bytes()
    for action in ("install", "uninstall"):
        result = run(cli, action, "claude-code", "--project", str(project))
        if action == "uninstall" and why.startswith('"hooks.Stop"'):
            assert result.code == 0  # nothing of ours to look for in a malformed list
            continue
        assert result.code == 1 and why in result.err and "refusing to edit" in result.err
    assert path.read_bytes() == before


def test_missing_project_is_refused(cli, tmp_path):
    result = run(cli, "install", "claude-code", "--project", str(tmp_path / "nope"))
    assert result.code == 1 and "does not exist" in result.err


def test_file_mode_and_symlink_inside_the_project_are_kept(cli, project):
    real = project / "config" / "claude-settings.json"
    real.parent.mkdir()
    real.write_text('{"model": "opus"}\n')
    os.chmod(real, 0o640)
    (project / ".claude").mkdir()
    settings_path(project).symlink_to(real)
    assert run(cli, "install", "claude-code", "--project", str(project)).code == 0
    assert settings_path(project).is_symlink()
    assert oct(real.stat().st_mode & 0o777) == "0o640"
    assert len(ours(json.loads(real.read_text()))) == len(EVENTS)
    assert not [p for p in real.parent.iterdir() if p.name.startswith(".")]


def test_new_settings_file_is_readable_like_any_project_file(cli, project):
    run(cli, "install", "claude-code", "--project", str(project))
    assert oct(settings_path(project).stat().st_mode & 0o777) == "0o644"


def test_executable_is_never_a_shim(tmp_path, monkeypatch):
    from agent_journal.agents import hook_command
    from agent_journal.agents.claude_code import AGENT
    from agent_journal.core.errors import JournalError

    shims = tmp_path / ".pyenv" / "shims"
    shims.mkdir(parents=True)
    for name in ("python", "agent-journal"):
        (shims / name).write_text("#!/bin/sh\n")
        os.chmod(shims / name, 0o755)
    monkeypatch.setattr(sys, "executable", str(shims / "python"))
    monkeypatch.setattr(sys, "argv", [str(shims / "agent-journal")])
    with pytest.raises(JournalError, match="version-manager shim"):
        hook_command.hook_executable()
    # A real interpreter with no script beside it: run the package through it.
    real = tmp_path / "venv" / "bin"
    real.mkdir(parents=True)
    monkeypatch.setattr(sys, "executable", str(real / "python"))
    assert hook_command.hook_executable() == [str(real / "python"), "-m", "agent_journal"]
    assert AGENT.ours({"type": "command",
                       "command": f"{real}/python -m agent_journal hook claude-code"})


def test_the_console_script_beside_the_interpreter_wins(monkeypatch):
    from agent_journal.agents import hook_command

    monkeypatch.setattr(sys, "argv", ["/somewhere/else/agent-journal"])
    assert hook_command.hook_executable() == [CLI]


@pytest.mark.parametrize("handler, expected", [
    ({"type": "command", "command": "/a/b/agent-journal hook claude-code --workspace w"}, True),
    ({"type": "command", "command": "'/a b/agent-journal' hook claude-code"}, True),
    ({"type": "command", "command": "/a/b/agent-journal hooks install claude-code"}, False),
    ({"type": "command", "command": "/a/b/agent-journal record --kind note"}, False),
    ({"type": "command", "command": "my-agent-journal hook claude-code"}, False),
    ({"type": "http", "command": "/a/agent-journal hook claude-code"}, False),
    ({"type": "command", "command": "echo 'unclosed"}, False),
    ({"type": "command"}, False),
    ("not a dict", False),
])
def test_is_ours(handler, expected):
    from agent_journal.agents.claude_code import AGENT

    assert AGENT.ours(handler) is expected


def test_an_install_in_other_formatting_is_left_alone(cli, project):
    run(cli, "install", "claude-code", "--project", str(project))
    path = settings_path(project)
    path.write_text(json.dumps(json.loads(path.read_text())))  # one line, no indent
    before = path.read_bytes()
    result = run(cli, "install", "claude-code", "--project", str(project))
    assert "already installed" in result.out and path.read_bytes() == before


# -- issue 32: a settings path that is not a regular file; a large settings file -----------

def _hooks_quickly(project: Path, *args: str) -> subprocess.CompletedProcess:
    """The real script, with a timeout: a read that waits on a pipe fails the test."""
    return subprocess.run([CLI, "hooks", *args, "claude-code", "--project", str(project)],
                          capture_output=True, text=True, timeout=30,
                          env=clean_env(HOME=str(project.parent), PATH=ON_PATH))


@pytest.mark.parametrize("what, make", [
    ("a named pipe (FIFO)", os.mkfifo),
    ("a folder", os.mkdir),
])
@pytest.mark.parametrize("name", [".claude/settings.json", ".agent-journal.toml"])
def test_a_path_that_is_not_a_regular_file_is_refused_at_once(project, what, make, name):
    (project / ".claude").mkdir()
    make(str(project / name))
    before = sorted(str(p.relative_to(project)) for p in project.rglob("*"))
    actions = ("install", "uninstall") if name.startswith(".claude") else ("install",)
    for action in actions:
        result = _hooks_quickly(project, action)
        assert result.returncode == 1, (action, result.stderr)
        assert result.stdout == "" and result.stderr.count("\n") == 1, result.stderr
        assert result.stderr.startswith(f"error: refusing to edit {project / name}: it is "
                                        f"{what}, not a regular file; nothing was written")
        assert sorted(str(p.relative_to(project)) for p in project.rglob("*")) == before


def big_settings(size: int) -> str:
    """About `size` bytes of settings.json, hand-formatted (escapes, ` ,`, `1.50`, other
    indentation) so that only an edit in place, not a re-serialisation, gives it back."""
    line = '      "Bash(npm run task-%07d --name \\u00e9t\\u00e9)" ,\n'
    head = '{\n  "model": "opus",\n  "permissions": {\n    "allow": [\n'
    tail = ('      "Read(*)"\n    ],\n    "deny": []\n  },\n'
            '  "hooks": {\n    "PreToolUse": [\n      {"matcher": "Bash", "hooks": '
            '[{"type": "command", "command": "echo \\u00e9"}]}\n    ]\n  },\n'
            '  "env": {"A": 1.50, "B": [1,2,3]}\n}\n')
    return head + "".join(line % i for i in range(size // len(line % 0))) + tail


def test_a_20_mb_settings_file_round_trips_quickly(project):
    import resource

    path = settings_path(project)
    path.parent.mkdir()
    path.write_text(big_settings(20_000_000))
    before = path.read_bytes()
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    installed = _hooks_quickly(project, "install")
    assert installed.returncode == 0, installed.stderr
    text = path.read_text()
    assert text.startswith(before.decode()[:4096]) and '"A": 1.50' in text
    assert len(ours(json.loads(text))) == len(EVENTS)
    removed = _hooks_quickly(project, "uninstall")
    assert removed.returncode == 0, removed.stderr
    assert path.read_bytes() == before
    done = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (done.ru_utime - used.ru_utime) + (done.ru_stime - used.ru_stime)
    assert cpu < 8, f"install and uninstall took {cpu:.1f} s of CPU"  # (was 50 s)


@pytest.mark.parametrize("agent, rel", [("claude-code", ".claude/settings.json"),
                                        ("codex", ".codex/hooks.json")])
@pytest.mark.parametrize("path", ["/usr/bin:/bin", "OTHER"])
def test_a_shared_file_never_gets_this_machines_path(cli, project, tmp_path, agent, rel, path):
    if path == "OTHER":  # another installation's agent-journal is first on PATH
        other = tmp_path / "other-bin"
        other.mkdir()
        (other / "agent-journal").write_text("#!/bin/sh\necho agent-journal 0.0.1\n")
        os.chmod(other / "agent-journal", 0o755)
        path = f"{other}:/usr/bin:/bin"
    result = run(cli, "install", agent, "--project", str(project), "--root",
                 str(tmp_path / "j"), env={"PATH": path})
    assert result.code == 1 and result.err.count("\n") == 1, result
    assert "a file shared with the project" in result.err
    assert "pipx install agent-journal" in result.err and "--scope local" in result.err
    assert list(project.iterdir()) == []  # nothing written, not even the project file
    # A personal scope may name this machine's path (Codex has none but user).
    scope = "local" if agent == "claude-code" else "user"
    env = {"PATH": path, "HOME": str(tmp_path / "home"), "CODEX_HOME": str(tmp_path / "cx")}
    assert run(cli, "install", agent, "--project", str(project), "--scope", scope,
               env=env).code == 0


def test_user_scope_never_pins_a_workspace(cli, project, tmp_path):
    env = {"HOME": str(tmp_path / "home")}
    result = run(cli, "install", "claude-code", "--scope", "user", "--workspace", "pinned",
                 env=env)
    assert result.code == 0 and "not pinned at user scope" in result.err
    settings = json.loads((tmp_path / "home" / ".claude" / "settings.json").read_text())
    for (handler,) in ours(settings).values():
        assert "--workspace" not in shlex.split(handler["command"])
