"""`doctor`: is this installation, its project and its journal set up to work?

Invariant: read-only (it creates no root, no log, no cache), and every check gives one line:
`ok` with what was found, or `problem` with what is wrong and how to fix it (a fix that
answers that very problem). A check that cannot run is itself a problem, never a
traceback. The one write is asked for by name: `--ack-hook-log` marks the hook failures
logged so far as dealt with (<root>/logs/hook.log.ack, the instant of the last of them),
so the check reports only failures logged after it.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Callable
from typing import Any

from agent_journal.core.errors import JournalError

MIN_FREE_BYTES = 100 * 1024 * 1024
RECENT_S = 24 * 3600


class Check:
    def __init__(self, name: str, ok: bool, detail: str, fix: str | None = None) -> None:
        self.name = name
        self.ok = ok
        self.detail = detail
        self.fix = fix

    def line(self) -> str:
        if self.ok:
            return f"ok       {self.name}: {self.detail}"
        return f"problem  {self.name}: {self.detail}; fix: {self.fix}"

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "detail": self.detail, "fix": self.fix}


def as_json(checks: list[Check]) -> dict[str, Any]:
    return {"ok": all(c.ok for c in checks), "checks": [c.as_json() for c in checks]}


def run_checks(*, project: str | None, root: str | None, ack_hook_log: bool = False
               ) -> list[Check]:
    checks: list[Check] = []
    folder = os.path.abspath(project if project is not None else ".")
    found = _guard(checks, "project file", lambda: _project(checks, folder))
    root_path = _guard(checks, "journal root", lambda: _root(checks, root, found))
    # From a subfolder, the project is where its project file is, else where install
    # would have put the hooks (hook_command.find_project).
    hooks_folder = folder
    if project is None:
        from agent_journal.agents.hook_command import find_project

        hooks_folder = found.folder if found is not None else find_project(None)[0]
    _guard(checks, "hooks", lambda: _hooks(checks, hooks_folder))
    _guard(checks, "session syncs", lambda: _syncs(checks, hooks_folder, root_path, found))
    if root_path is not None:
        _guard(checks, "redaction config", lambda: _redaction(checks, root_path))
        _guard(checks, "thesaurus", lambda: _thesaurus(checks, root_path))
        _guard(checks, "hook log", lambda: _hook_log(checks, root_path, ack_hook_log))
        _guard(checks, "capture spool", lambda: _spool(checks, root_path))
    _guard(checks, "sqlite", lambda: _sqlite(checks, root_path, found))
    _guard(checks, "disk space", lambda: _disk(checks, root_path or folder))
    return checks


def _guard(checks: list[Check], name: str, work: Callable[[], Any]) -> Any:
    try:
        return work()
    except JournalError as exc:
        checks.append(Check(name, False, exc.message, "correct it and run doctor again"))
    except OSError as exc:
        checks.append(Check(name, False, f"{exc.filename}: {exc.strerror}",
                            "check the path and its permissions"))
    return None


def _project(checks: list[Check], folder: str) -> Any:
    from agent_journal.storage.project_file import NAME, find

    try:
        found = find(folder)
    except JournalError as exc:
        checks.append(Check("project file", False, exc.message,
                            "fix or remove it, or run `agent-journal hooks install` again"))
        return None
    if found is None:
        checks.append(Check("project file", True, f"no {NAME} in {folder} or above; commands "
                            "need --workspace or $AGENT_JOURNAL_WORKSPACE here"))
        return None
    root = f", root {found.root_path()}" if found.root else ""
    checks.append(Check("project file", True,
                        f"{found.path} (workspace {found.workspace}{root})"))
    return found


def _root(checks: list[Check], root: str | None, found: Any) -> str | None:
    from agent_journal.core.errors import UnsafeRootError
    from agent_journal.storage.root import ENV_ROOT, check_root, resolve_root

    if root is None and not os.environ.get(ENV_ROOT) and found is not None:
        root = found.root_path()
    path = resolve_root(root)
    try:
        exists = check_root(path, create=False)
    except UnsafeRootError as exc:
        if os.path.lexists(path):
            fix = f"chmod go-w {shlex.quote(path)}"
        else:  # it would be made in a folder others can write (/tmp, say)
            fix = ("choose a root in a folder only you can write (--root DIR or "
                   "$AGENT_JOURNAL_ROOT), or make the folder private first")
        checks.append(Check("journal root", False, exc.message, fix))
        return None
    if not exists:
        checks.append(Check("journal root", True, f"{path} (not created yet; the first write "
                            "creates it, private)"))
        return path
    if not os.access(path, os.R_OK | os.W_OK | os.X_OK):
        checks.append(Check("journal root", False, f"{path} is not readable and writable by "
                            "this user", f"chown/chmod {path} so this user owns it"))
        return path
    checks.append(Check("journal root", True, f"{path} (private)"))
    return path


def _hooks(checks: list[Check], folder: str) -> None:
    """Every route a Claude Code or Codex session can reach us by: the hooks at each scope,
    the plugin (enabled in any settings file), the MCP server at each scope."""
    import agent_journal
    from agent_journal.agents import hook_settings
    from agent_journal.agents.agent import every_agent

    version = agent_journal.__version__

    installed = 0
    for agent in every_agent():
        for scope in agent.scopes:
            target = agent.settings(scope, folder)
            if not os.path.isfile(target.path):
                continue
            name = f"{agent.name} hooks ({scope})"
            try:
                _, settings, _ = hook_settings.load(target.path)
            except JournalError as exc:
                checks.append(Check(name, False, exc.message, f"fix {target.path} by hand"))
                continue
            if agent.name == "claude-code":
                installed += _plugin(checks, scope, target.path, settings, version)
            commands = _our_commands(settings, agent.ours)
            if not commands:
                continue
            installed += 1
            fix = _install_fix(agent.name, scope, folder)
            if target.shared and any(os.path.isabs(shlex.split(c)[0]) for c in commands):
                checks.append(Check(name, False, f"{target.path} (shared with the project) "
                                    "runs a command by this machine's path", fix))
                continue
            check = _command_check(name, target.path, sorted(commands), version, fix, "hook")
            if check.ok and agent.pending is not None:
                # (whether the agent trusts them is its own record, which doctor cannot read)
                check.detail += f"; {agent.pending(scope)}"
            checks.append(check)
    installed += _mcp(checks, folder, version)
    if not installed:
        checks.append(Check("hooks", True, "no agent-journal hook, plugin or MCP server "
                            "installed for this project or user (agent-journal hooks install "
                            "claude-code|codex adds one)"))


def _syncs(checks: list[Check], folder: str, root: str | None, found: Any) -> None:
    """The session syncs `hooks install --sync` added: they sync the project's workspace
    with its remotes, so a workspace with none makes every session log a failed sync."""
    from agent_journal.agents.agent import every_agent
    from agent_journal.agents.hook_settings import load
    from agent_journal.agents.sync_hooks import is_sync_handler

    where = [target.path for agent in every_agent() for scope in agent.scopes
             if os.path.isfile((target := agent.settings(scope, folder)).path)
             and _our_commands(load(target.path)[1], is_sync_handler)]
    if not where:
        return
    workspace = found.workspace if found is not None else None
    if workspace is None:
        checks.append(Check("session syncs", False, f"{', '.join(where)} syncs at session "
                            "start and end, but no project file here names a workspace",
                            "agent-journal hooks install claude-code|codex --sync (writes "
                            "the project file)"))
        return
    from agent_journal.ops.context import Context
    from agent_journal.ops.remotes import configured

    ctx = Context(root, workspace)
    if found.remote is not None:
        ctx.project_remote = (found.remote, found.remote_endpoint, found.path)
    names = [spec.name for spec in configured(ctx)]
    if not names:
        checks.append(Check("session syncs", False, f"{', '.join(where)} syncs workspace "
                            f"{workspace} at session start and end, but it has no remote: "
                            "every session logs a failed sync",
                            f"agent-journal remote add NAME URL --workspace {workspace}, or "
                            f'remote = "s3://BUCKET/PREFIX" in {found.path}'))
        return
    checks.append(Check("session syncs", True, f"workspace {workspace} syncs with "
                        f"{', '.join(names)} at session start and end"))


def _cli() -> str:
    """How to run this installation's CLI from any shell."""
    from agent_journal.agents.hook_command import stable_executable

    return " ".join(shlex.quote(w) for w in stable_executable())


def _install_fix(agent: str, scope: str, folder: str, *, mcp: bool = False) -> str:
    """The install command that rewrites the entry doctor found wrong, as it will work
    here: a shared file needs this installation on PATH first."""
    from agent_journal.agents.hook_command import FIX_PATH, path_problem

    args = f"hooks install {agent} --scope {scope}"
    if scope != "user":
        args += f" --project {shlex.quote(folder)}"
    if mcp:
        args += " --mcp"
    if scope == "project" and path_problem() is not None:
        return f"{FIX_PATH}, then run `agent-journal {args}`"
    return f"run `{_cli()} {args}`"


def _plugin(checks: list[Check], scope: str, path: str, settings: dict[str, Any],
            version: str) -> int:
    """The agent-journal plugin, when a Claude Code settings file enables it: its hooks run
    `agent-journal` from PATH."""
    from agent_journal.agents.claude_code import hook_command
    from agent_journal.agents.hook_command import FIX_PATH

    enabled = settings.get("enabledPlugins")
    if not isinstance(enabled, dict) or not any(
            isinstance(k, str) and k.split("@")[0] == "agent-journal" and v is True
            for k, v in enabled.items()):
        return 0
    checks.append(_command_check(f"claude-code plugin ({scope})", path,
                                 [shlex.join(hook_command())],
                                 version, FIX_PATH, "hook"))
    return 1


def _mcp(checks: list[Check], folder: str, version: str) -> int:
    """Our MCP server entry at each scope: runnable, this version, with the [mcp] extra,
    no machine path in the shared .mcp.json and no workspace pinned at user scope."""
    import sys

    from agent_journal.agents import hook_settings, mcp_installer
    from agent_journal.agents.mcp_server import EXTRA, sdk_missing

    found = 0
    for scope in mcp_installer.SCOPES:
        path = mcp_installer.config_path(scope, folder)
        if not os.path.isfile(path):
            continue
        name = f"MCP server ({scope})"
        try:
            _, holder, _ = hook_settings.load(path)
        except JournalError as exc:
            checks.append(Check(name, False, exc.message, f"fix {path} by hand"))
            continue
        entry: Any = holder
        for key in mcp_installer.servers_path(scope, folder):
            entry = entry.get(key) if isinstance(entry, dict) else None
        entry = entry.get(mcp_installer.SERVER) if isinstance(entry, dict) else None
        if not mcp_installer.is_ours(entry):
            continue
        found += 1
        fix = _install_fix("claude-code", scope, folder, mcp=True)
        words = [entry["command"], *entry.get("args", [])]
        if scope == "project" and (os.path.isabs(words[0]) or "--root" in words):
            checks.append(Check(name, False, f"{path} (shared with the project) names this "
                                "machine's path", fix))
            continue
        if scope == "user" and "--workspace" in words:
            checks.append(Check(name, False, f"{path} pins one workspace for every project",
                                fix))
            continue
        check = _command_check(name, path, [shlex.join(words)], version, fix, "mcp")
        if check.ok and sdk_missing() and _is_this_installation(words[0]):
            check = Check(name, False, f"{path} registers a server this installation cannot "
                          "start: the mcp package is missing",
                          f"{shlex.quote(sys.executable)} -m pip install '{EXTRA}'")
        checks.append(check)
    return found


def _is_this_installation(command: str) -> bool:
    import shutil
    import sys

    from agent_journal.agents.hook_command import hook_executable

    exe = command if os.path.isabs(command) else shutil.which(command)
    if exe is None:
        return False
    ours = {os.path.realpath(hook_executable()[0]), os.path.realpath(sys.executable)}
    return os.path.realpath(exe) in ours


def _our_commands(settings: dict[str, Any], ours: Callable[[Any], bool]) -> set[str]:
    from agent_journal.agents.hook_command import handler_words

    found: set[str] = set()
    for groups in (settings.get("hooks") or {}).values():
        for group in groups if isinstance(groups, list) else ():
            for handler in group.get("hooks", []) if isinstance(group, dict) else ():
                words = handler_words(handler) if ours(handler) else None
                if words is not None:
                    found.add(shlex.join(words))
    return found


def _command_check(name: str, path: str, commands: list[str], version: str, fix: str,
                   marker: str) -> Check:
    """Whether the one command `path` runs is runnable and this version (the words before
    `marker` are the CLI it runs)."""
    import shutil
    import subprocess

    if len(commands) > 1:
        return Check(name, False, f"{path} runs {len(commands)} different commands", fix)
    words = shlex.split(commands[0])
    exe = words[0] if os.path.isabs(words[0]) else shutil.which(words[0])
    if exe is None or not os.access(exe, os.X_OK):
        return Check(name, False, f"{words[0]} (in {path}) cannot be run", fix)
    prefix = words[: words.index(marker)]
    try:
        proc = subprocess.run(prefix + ["--version"], capture_output=True, timeout=30)
        theirs = proc.stdout.decode("utf-8", "replace").strip().rpartition(" ")[2]
    except (OSError, subprocess.SubprocessError) as exc:
        return Check(name, False, f"{words[0]} (in {path}) failed to run: {exc}", fix)
    if theirs != version:
        return Check(name, False, f"{path} runs agent-journal {theirs or '?'}, this is "
                     f"{version}", fix)
    return Check(name, True, f"{path} runs {commands[0]} (version {version})")


def _redaction(checks: list[Check], root: str) -> None:
    from agent_journal.ops.redaction_config import redactor_for

    if not os.path.isdir(root):
        return
    try:
        redactor_for(root)
    except JournalError as exc:
        checks.append(Check("redaction config", False, exc.message,
                            f"correct the pattern in {os.path.join(root, 'config.json')}"))
        return
    checks.append(Check("redaction config", True, "built-in rules and config load"))


def _thesaurus(checks: list[Check], root: str) -> None:
    """The search thesaurus (<root>/thesaurus.json): a broken one is searched as empty."""
    from agent_journal.ops import thesaurus

    loaded = thesaurus.load(root)
    if loaded.problem is not None:
        checks.append(Check("thesaurus", False, f"{loaded.path} is broken ({loaded.problem}); "
                            "every search ignores it", "correct it by hand, or remove it and "
                            "add the aliases again with `agent-journal alias add`"))
    elif not loaded.present:
        checks.append(Check("thesaurus", True, "none (agent-journal alias add WORD TERM "
                            "makes one)"))
    else:
        checks.append(Check("thesaurus", True, f"{loaded.path}: {len(loaded.mapping)} "
                            f"word(s), sha256 {loaded.sha256[:12]}"))


HOOK_LOG_ACK = "hook.log.ack"


def _hook_log(checks: list[Check], root: str, ack: bool = False) -> None:
    """Hook failures logged in the last day and not acknowledged (`--ack-hook-log`
    records the instant of the last failure logged so far)."""
    from agent_journal.storage.config import LOGS_DIR

    path = os.path.join(root, LOGS_DIR, "hook.log")
    ack_path = os.path.join(root, LOGS_DIR, HOOK_LOG_ACK)
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()
    except FileNotFoundError:
        checks.append(Check("hook log", True, "no hook failure logged"))
        return
    if ack and lines:
        _acknowledge(ack_path, _instant(lines[-1]))
    seen = _acknowledged(ack_path)
    since = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(time.time() - RECENT_S))
    recent = [line for line in lines if line[:19] >= since]
    new = [line for line in recent if seen is None or _instant(line) > seen]
    if not new:
        said = f"no hook failure in the last day ({path})"
        if recent:
            said = (f"{len(recent)} hook failure(s) in the last day, none since they were "
                    f"acknowledged ({path})")
        checks.append(Check("hook log", True, said))
        return
    checks.append(Check("hook log", False, f"{len(new)} hook failure(s) in the last day"
                        + ("" if seen is None else " since the last acknowledged")
                        + f", the last: {new[-1][:300]}",
                        f"read {path} and fix the cause; then `{_cli()} doctor "
                        "--ack-hook-log` marks these as dealt with"))


def _instant(line: str) -> str:
    """When a hook.log line was logged: its first word."""
    return line.partition(" ")[0]


def _acknowledged(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read().strip()
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    return text or None


def _acknowledge(path: str, instant: str) -> None:
    from agent_journal.storage.files import write_file_atomic

    write_file_atomic(path, (instant + "\n").encode("utf-8"))


def _spool(checks: list[Check], root: str) -> None:
    """Events hooks spooled (the journal was locked past their budget) and not yet
    journaled; a full spool loses events, a damaged file is kept aside."""
    from agent_journal.storage import spool

    base = os.path.join(root, spool.SPOOL_DIR)
    waiting = {ws: len(spool.pending(root, ws)) for ws in _folders(base)}
    bad = {ws: len(spool.damaged(root, ws)) for ws in _folders(base)}
    full = [ws for ws, n in waiting.items() if n >= spool.MAX_FILES]
    if full:
        checks.append(Check("capture spool", False, f"the spool of workspace {full[0]} is "
                            f"full ({spool.MAX_FILES} events): new events are being lost",
                            "run `agent-journal compact --apply` there (it journals the "
                            "spool first) and look for what keeps the journal locked"))
    elif any(bad.values()):
        ws = next(w for w, n in bad.items() if n)
        checks.append(Check("capture spool", False, f"{bad[ws]} damaged spool file(s) in "
                            f"{os.path.join(base, ws)} could not be journaled",
                            "inspect them, then delete the *.bad files"))
    else:
        total = sum(waiting.values())
        checks.append(Check("capture spool", True, "empty" if not total else
                            f"{total} event(s) waiting; the next hook journals them"))


def _folders(path: str) -> list[str]:
    try:
        return sorted(n for n in os.listdir(path) if os.path.isdir(os.path.join(path, n)))
    except (FileNotFoundError, NotADirectoryError):
        return []


def _sqlite(checks: list[Check], root: str | None, found: Any) -> None:
    from agent_journal.storage import diagnostics

    detail = (f"SQLite {diagnostics.sqlite_version()}, journal mode "
              f"{diagnostics.intended_journal_mode()} for new segments")
    if root is not None and found is not None and found.workspace:
        folder = os.path.join(root, "workspaces", found.workspace, "segments")
        names = sorted(n for n in os.listdir(folder) if n.endswith(".sqlite")) \
            if os.path.isdir(folder) else []
        if names:
            mode = diagnostics.segment_journal_mode(os.path.join(folder, names[-1]))
            if mode is None:
                checks.append(Check("sqlite", False, f"{names[-1]} cannot be read",
                                    f"run `{_cli()} coverage` to see what is damaged; "
                                    "restore the segment from a backup or replica "
                                    "(`merge`) and move the damaged file out of "
                                    f"{folder}"))
                return
            detail += f"; {names[-1]} is in {mode}"
    checks.append(Check("sqlite", True, detail))


def _disk(checks: list[Check], path: str) -> None:
    from agent_journal.storage import diagnostics

    free = diagnostics.free_bytes(path)
    if free < MIN_FREE_BYTES:
        checks.append(Check("disk space", False, f"{free // (1024 * 1024)} MiB free under "
                            f"{path}", "free some space; writes fail on a full disk"))
        return
    checks.append(Check("disk space", True, f"{free // (1024 * 1024)} MiB free"))
