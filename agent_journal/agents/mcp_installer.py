"""`hooks install claude-code --mcp`: our MCP server's entry in Claude Code's MCP config.

Scopes, as Claude Code keeps them: `project` is `mcpServers` in the project's .mcp.json
(shared, committed), `local` is `projects[<project path>].mcpServers` in ~/.claude.json
(this user, this project), `user` is `mcpServers` in ~/.claude.json (this user, every
project).

Invariants:
- Only the one server entry named SERVER is ours, and only when it runs this package's
  `mcp` command: an entry of that name that runs anything else is refused, never
  replaced or removed. Everything else in the file is kept: every other key and server,
  their order, and the file's indentation.
- Install is idempotent (a second run changes no byte); uninstall removes exactly our
  entry, plus the objects that removal left empty, and the file when nothing is left in
  it, so install then uninstall gives back what was there.
- The shared .mcp.json gets the PATH command (`agent-journal`), never this machine's path
  or root: when the one on PATH is not this installation, registering there is refused
  with the fix. A user-scope entry names no workspace. Nothing is registered when this
  installation cannot import the `mcp` package (the `[mcp]` extra).
- A file that is not strict JSON, or not shaped as MCP config, is refused, never rewritten;
  files are replaced atomically (temp file, fsync, rename) and keep their permissions.
"""

from __future__ import annotations

import copy
import os
from typing import Any

from agent_journal.agents.hook_install import Change
from agent_journal.core.errors import JournalError, UsageError

SERVER = "agent-journal"
SCOPES = ("project", "local", "user")
PROJECT_FILE = ".mcp.json"
USER_FILE = ".claude.json"


def server_entry(workspace: str, root: str | None, scope: str = "local",
                 path: str = PROJECT_FILE) -> dict[str, Any]:
    """The entry for `scope`: in the shared .mcp.json the PATH command and no root (the
    project file names it); at user scope no workspace (the project file or the folder
    the client starts the server in names it); at local scope this installation."""
    from agent_journal.agents.hook_command import shared_command, stable_executable

    words = shared_command(path) if scope == "project" else stable_executable()
    args = words[1:] + ["mcp"]
    if scope != "user":
        args += ["--workspace", workspace]
    if root is not None and scope != "project":
        args += ["--root", root]
    return {"type": "stdio", "command": words[0], "args": args, "env": {}}


def check_extra() -> None:
    """Refuse to register a server this installation cannot start (no `mcp` package)."""
    from agent_journal.agents.mcp_server import EXTRA, sdk_missing

    if sdk_missing():
        raise JournalError(f"refusing to register the MCP server: this installation cannot "
                           f"import the mcp package; install the extra first: pip install "
                           f"'{EXTRA}' (nothing was written)")


def is_ours(entry: Any) -> bool:
    """An agent-journal `mcp` server entry, whichever installation or workspace it names."""
    if not isinstance(entry, dict):
        return False
    command, args = entry.get("command"), entry.get("args", [])
    if not isinstance(command, str) or not isinstance(args, list):
        return False
    if os.path.basename(command) == SERVER:
        return args[:1] == ["mcp"]
    return args[:3] == ["-m", "agent_journal", "mcp"]


def config_path(scope: str, folder: str) -> str:
    if scope == "project":
        return os.path.join(folder, PROJECT_FILE)
    return os.path.join(os.path.expanduser("~"), USER_FILE)


def servers_path(scope: str, folder: str) -> list[str]:
    """The keys leading to the `mcpServers` object our entry lives in."""
    return ["projects", folder, "mcpServers"] if scope == "local" else ["mcpServers"]


def register(*, project: str | None, workspace: str | None, root: str | None,
             dry_run: bool, scope: str = "project") -> Change:
    """`hooks install claude-code --mcp`: the project, workspace and root resolved as the
    hook installer resolves them, so the server reads what the hook writes."""
    from agent_journal.capture.observation import sanitise_workspace_id
    from agent_journal.core.model import validate_id
    from agent_journal.storage import project_file
    from agent_journal.storage.root import ENV_ROOT, check_root, resolve_root

    check_extra()
    folder = project_folder(project)
    if workspace is None:
        # The workspace the project's hooks write to: the project file's (which install
        # writes, or keeps), else the folder's name, as the hook installer chooses it.
        path = os.path.join(folder, project_file.NAME)
        existing = project_file.load(path) if os.path.lexists(path) else None
        workspace = (existing.workspace if existing else None) or sanitise_workspace_id(folder)
    validate_id(workspace, "workspace")
    root_path = None
    if root is not None or os.environ.get(ENV_ROOT):
        root_path = resolve_root(root)
        check_root(root_path, create=False)
    return install(scope=scope, folder=folder, workspace=workspace, root=root_path,
                   dry_run=dry_run)


def unregister(*, project: str | None, dry_run: bool, scope: str = "project") -> Change:
    """`hooks uninstall claude-code`: our server entry goes with the hooks."""
    return uninstall(scope=scope, folder=project_folder(project), dry_run=dry_run)


def project_folder(project: str | None) -> str:
    """The project the hooks are installed for (the same folder, found the same way)."""
    from agent_journal.agents.hook_command import find_project

    return find_project(project)[0]


def install(*, scope: str, folder: str, workspace: str, root: str | None,
            dry_run: bool) -> Change:
    """Add (or update in place) our server entry at `scope` for the project `folder`."""
    _check_scope(scope)
    path = config_path(scope, folder)
    before, config, indent = _load(path)
    original = copy.deepcopy(config)
    servers = config
    for key in servers_path(scope, folder):
        servers = servers.setdefault(key, {})
        if not isinstance(servers, dict):
            raise JournalError(f"refusing to edit {path}: {key!r} is not an object")
    existing = servers.get(SERVER)
    if existing is not None and not is_ours(existing):
        raise JournalError(f"refusing to edit {path}: its MCP server {SERVER!r} is not "
                           "agent-journal's; rename or remove it first")
    servers[SERVER] = server_entry(workspace, root, scope, path)
    after = before if config == original else _dump(config, indent)
    named = "" if scope == "user" else f", workspace {workspace}"
    return _finish(path, before, after, dry_run,
                   done=f"registered the agent-journal MCP server ({scope} scope{named}) in "
                        f"{path}",
                   same=f"agent-journal MCP server already registered in {path}; nothing "
                        "changed")


def uninstall(*, scope: str, folder: str, dry_run: bool) -> Change:
    """Remove our server entry at `scope`, and only it (with what its removal emptied)."""
    _check_scope(scope)
    path = config_path(scope, folder)
    if not os.path.exists(path):
        return Change(path, None, None, f"no {path}; no MCP server to remove",
                      diff="" if dry_run else None)
    before, config, indent = _load(path)
    original = copy.deepcopy(config)
    chain: list[tuple[dict[str, Any], str]] = []
    holder: Any = config
    for key in servers_path(scope, folder):
        if not isinstance(holder, dict) or not isinstance(holder.get(key), dict):
            holder = None
            break
        chain.append((holder, key))
        holder = holder[key]
    if isinstance(holder, dict) and is_ours(holder.get(SERVER)):
        del holder[SERVER]
        # Objects this removal emptied go, innermost first; one the user left empty stays.
        for parent, key in reversed(chain):
            if parent[key]:
                break
            del parent[key]
    after = before if config == original else (_dump(config, indent) if config else None)
    return _finish(path, before, after, dry_run,
                   done=f"removed the agent-journal MCP server from {path}",
                   same=f"no agent-journal MCP server in {path}; nothing changed")


# -- the file ------------------------------------------------------------------------------

def _check_scope(scope: str) -> None:
    if scope not in SCOPES:
        raise UsageError(f"scope must be one of {', '.join(SCOPES)}, not {scope!r}")


def _load(path: str) -> tuple[str | None, dict[str, Any], str]:
    """(text or None when absent, parsed object, indentation): read as the hook
    installer reads a settings file, refused the same way when it is not JSON."""
    from agent_journal.agents.hook_settings import load

    return load(path)


def _dump(config: dict[str, Any], indent: str) -> str:
    import json

    return json.dumps(config, indent=indent, ensure_ascii=False) + "\n"


def _finish(path: str, before: str | None, after: str | None, dry_run: bool, *, done: str,
            same: str) -> Change:
    """Write `after` (None: remove the file), or with `dry_run` describe it as a diff."""
    if after == before:
        return Change(path, before, before, same, diff="" if dry_run else None)
    if dry_run:
        import difflib

        diff = "".join(difflib.unified_diff(
            (before or "").splitlines(keepends=True), (after or "").splitlines(keepends=True),
            fromfile=path if before is not None else "/dev/null",
            tofile=path if after is not None else "/dev/null"))
        return Change(path, before, after, done, diff=diff)
    if after is None:
        os.unlink(path)
    else:
        _write(path, after)
    return Change(path, before, after, done)


def _write(path: str, text: str) -> None:
    """Atomically, keeping the old file's mode (~/.claude.json is private, .mcp.json shared)."""
    from agent_journal.storage.files import write_file_atomic

    target = os.path.realpath(path)
    try:
        mode = os.stat(target).st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o600 if os.path.basename(target) == USER_FILE else 0o644
    write_file_atomic(target, text.encode("utf-8"), mode=mode)
