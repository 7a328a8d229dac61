"""Defaults taken from the project file for options neither given nor set in the environment.

Invariant: the project file is looked up once per process, from the current folder upwards,
and only when an option asks for it; the root it names is used only when $AGENT_JOURNAL_ROOT
is not set (the flag, then the variable, then the project file, then the default).
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
