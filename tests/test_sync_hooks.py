"""Sync from an agent's session hooks (spec/SYNC.md, "Syncing from an agent's hooks"):
`hooks install --sync` adds a bounded pull at session start and a push that does not
wait at session end, beside the capture hook; `pull|push --within` never fails and never
holds its caller past the bound. Real processes, run as the agent runs a handler (its
command line through a shell, in the project folder)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from conftest import CLI
from s3_support import aws_env
from test_remote_project import project, run, two_machines
from test_replicas import make_root

from agent_journal.agents import hook_install, sync_hooks
from agent_journal.agents.agent import agent


def as_the_agent(folder: Path, root: Path, command: str) -> subprocess.CompletedProcess[str]:
    """A handler's command, as the agent runs it: a shell line in the project folder."""
    return subprocess.run(command, shell=True, cwd=folder, capture_output=True, text=True,
                          env=aws_env(AGENT_JOURNAL_ROOT=str(root)), stdin=subprocess.DEVNULL,
                          timeout=120)


def settings_of(folder: Path) -> dict:
    return json.loads((folder / ".claude" / "settings.local.json").read_text())


def commands(settings: dict, event: str) -> list[str]:
    """Each handler's command line: a shell-form `command`, or an exec-form `command` and
    its `args` quoted as a shell would take them."""
    import shlex

    return [shlex.join([h["command"], *h["args"]]) if "args" in h else h["command"]
            for g in settings["hooks"].get(event, []) for h in g["hooks"]]


def install(folder: Path, name: str = "claude-code", **kw) -> None:
    hook_install.install(agent(name), project=str(folder), scope="local" if name ==
                         "claude-code" else "user", workspace=None, root=None, dry_run=False,
                         **kw)


def test_install_sync_adds_the_sync_handlers_after_the_capture_hook(tmp_path) -> None:
    folder = project(tmp_path, "p", "")
    install(folder, sync=True)
    settings = settings_of(folder)
    start = commands(settings, "SessionStart")
    assert len(start) == 2 and " hook claude-code" in start[0]
    assert start[1].endswith(" hook sync-start")
    end = commands(settings, "SessionEnd")
    assert len(end) == 2 and end[1].endswith(" hook sync-end")
    claude = agent("claude-code")
    sync_handlers = [g["hooks"][0] for event in ("SessionStart", "SessionEnd")
                     for g in settings["hooks"][event][1:]]
    assert not any(claude.ours(h) for h in sync_handlers), "never the capture hook"
    assert all(sync_hooks.is_sync_handler(h) for h in sync_handlers)
    assert not any(sync_hooks.is_sync_handler(g["hooks"][0])
                   for g in settings["hooks"]["SessionStart"][:1])
    text = (folder / ".claude" / "settings.local.json").read_text()
    install(folder, sync=True)
    assert (folder / ".claude" / "settings.local.json").read_text() == text  # idempotent
    install(folder)  # without --sync: the capture hook again, the sync handlers kept
    assert settings_of(folder) == settings
    hook_install.uninstall(agent("claude-code"), project=str(folder), scope="local",
                           dry_run=False)
    assert not (folder / ".claude" / "settings.local.json").exists()


def test_codex_pushes_at_each_stop(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))
    folder = project(tmp_path, "p", "")
    install(folder, "codex", sync=True)
    hooks = json.loads((tmp_path / "codex-home" / "hooks.json").read_text())
    assert commands(hooks, "Stop")[-1].endswith(" hook sync-end")
    assert commands(hooks, "SessionStart")[-1].endswith(" hook sync-start")


def test_the_installed_handlers_sync_two_machines(tmp_path) -> None:
    alice, bob, a_root, b_root = two_machines(tmp_path)
    share = tmp_path / "share"  # (the remote both project files name)
    install(alice, sync=True)
    install(bob, sync=True)
    assert run(alice, a_root, "record", "--kind", "note", "--id", "n1",
               "--text", "from alice").returncode == 0
    push = commands(settings_of(alice), "SessionEnd")[1]
    pushed = as_the_agent(alice, a_root, push)
    assert pushed.returncode == 0 and pushed.stdout == "", pushed
    # The push went on by itself, in the background: the manifest lands once it is done.
    _wait_for(lambda: list(share.rglob("manifest.json")))
    pull = commands(settings_of(bob), "SessionStart")[1]
    pulled = as_the_agent(bob, b_root, pull)
    assert pulled.returncode == 0 and pulled.stdout == "", pulled  # no context injected
    # Within its bound, or after it in the background, the pull brings alice's note.
    _wait_for(lambda: _entry_ids(bob, b_root) == {"n1"})
    assert "pull" in (b_root / "logs" / "sync.log").read_text()


def test_a_failing_pull_never_fails_the_session(tmp_path) -> None:
    folder = project(tmp_path, "p", "")  # no remote anywhere
    root = make_root(tmp_path, "root")
    done = run(folder, root, "pull", "--within", "30")
    assert done.returncode == 0, done
    assert "pull failed (exit 2)" in done.stderr and "has no remote" in done.stderr


def test_a_hanging_remote_never_holds_the_session_start(tmp_path) -> None:
    # A server that takes the connection and never answers: the pull goes on in its own
    # process past the bound, and the caller has already returned.
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        port = server.getsockname()[1]
        folder = project(tmp_path, "p", f'remote = "s3://hangs/team"\n'
                         f'remote-endpoint-url = "http://127.0.0.1:{port}"\n')
        root = make_root(tmp_path, "root")
        done = run(folder, root, "pull", "--within", "1", "--json")
        assert done.returncode == 0, done
        report = json.loads(done.stdout)
        try:
            assert not report["finished"] and report["exitCode"] is None
            os.kill(report["pid"], 0)  # still running, detached
            assert "goes on in the background" in done.stderr
        finally:
            _stop(report["pid"])


def _entry_ids(folder: Path, root: Path) -> set[str]:
    shown = run(folder, root, "show", "--json")
    return {e["id"] for e in json.loads(shown.stdout)["entries"]} if shown.returncode == 0 \
        else set()


def _wait_for(done) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if done():
            return
        time.sleep(0.05)
    pytest.fail("the background sync did not finish")


def test_a_session_hook_never_exits_2_even_on_a_usage_error(tmp_path) -> None:
    # No workspace anywhere (no project file, no variable): the sync hook is a usage error
    # for `pull`, which would exit 2, and exit 2 from a Stop hook keeps an agent going.
    folder = tmp_path / "nowhere"
    folder.mkdir()
    root = make_root(tmp_path, "root")
    for when in ("start", "end"):
        done = subprocess.run([CLI, "hook", f"sync-{when}"], cwd=folder, capture_output=True,
                              text=True, env=aws_env(AGENT_JOURNAL_ROOT=str(root)),
                              stdin=subprocess.DEVNULL, timeout=60)
        assert done.returncode == 0 and done.stdout == "", done
    assert "nothing to sync" in (root / "logs" / "hook.log").read_text()


def _stop(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def test_doctor_says_when_the_session_syncs_have_no_remote(tmp_path, monkeypatch) -> None:
    from agent_journal.agents.doctor import run_checks

    folder = project(tmp_path, "p", "")
    root = make_root(tmp_path, "root")
    monkeypatch.setenv("AGENT_JOURNAL_ROOT", str(root))
    install(folder, sync=True)

    def files() -> dict:
        return {str(f): f.read_bytes() for f in sorted(root.rglob("*")) if f.is_file()}

    def syncs() -> list:
        before = files()
        found = [c for c in run_checks(project=str(folder), root=str(root))
                 if c.name == "session syncs"]
        assert files() == before  # doctor writes nothing, not even asking the remotes
        return found

    [check] = syncs()
    assert not check.ok and "has no remote" in check.detail and "remote add" in check.fix
    (folder / ".agent-journal.toml").write_text(
        'workspace = "team"\nremote = "file://' + str(tmp_path / "share") + '"\n')
    [check] = syncs()
    assert check.ok and "syncs with project" in check.detail
    # Without the sync handlers, doctor says nothing of syncs.
    hook_install.uninstall(agent("claude-code"), project=str(folder), scope="local",
                           dry_run=False)
    assert syncs() == []
