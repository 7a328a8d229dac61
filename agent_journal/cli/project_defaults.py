"""Defaults taken from the project file for options neither given nor set in the environment.

Invariant: the project file is looked up once per process, from the current folder upwards,
and only when an option asks for it; the root it names is used only when $AGENT_JOURNAL_ROOT
is not set (the flag, then the variable, then the project file, then the default). With no
project file, the workspace is the one the hooks name after the current folder, only when
the root already holds it: nothing is made under a guessed name.
"""

from __future__ import annotations

import os

from agent_journal.storage.project_file import ProjectFile, find
from agent_journal.storage.root import ENV_ROOT

_FOUND: list[ProjectFile | None] = []


def current_project() -> ProjectFile | None:
    if not _FOUND:
        _FOUND.append(find())
    return _FOUND[0]


def project_default(key: str) -> str | None:
    if key == "root" and os.environ.get(ENV_ROOT):
        return None
    project = current_project()
    if project is None:
        return None
    if key == "root":
        return project.root_path()
    return project.workspace


def folder_workspace(root: str | None) -> str | None:
    """The workspace the hooks name after the current folder (agents/hook_target.py), when
    the root holds one by that name: a plugin install writes no project file, and its
    hooks write there."""
    from agent_journal.capture.observation import sanitise_workspace_id
    from agent_journal.core.errors import UsageError
    from agent_journal.storage.root import resolve_root

    try:
        name = sanitise_workspace_id(os.getcwd())
        root_path = resolve_root(root)
    except (OSError, UsageError):
        return None
    return name if os.path.isdir(os.path.join(root_path, "workspaces", name)) else None


def project_remote(workspace: str) -> tuple[str, str | None, str] | None:
    """The sync remote the project file names, (url, endpoint url, the file's path), for
    the workspace the file names (or any, when it names none); None without one."""
    project = current_project()
    if project is None or project.remote is None or project.workspace not in (None, workspace):
        return None
    return project.remote, project.remote_endpoint, project.path
