"""Which root and workspace an agent hook writes to.

Invariant: an explicit flag wins, then the environment ($AGENT_JOURNAL_WORKSPACE,
$AGENT_JOURNAL_ROOT), then the project file nearest the payload's cwd (or, when the payload
names no folder that has one, the hook's own working folder, which the agent sets to the
project), then the name of the payload's cwd folder. So one command string serves every
project, every scope and the plugin.
"""

from __future__ import annotations

import os

from agent_journal.capture.observation import sanitise_workspace_id
from agent_journal.storage.project_file import ProjectFile, find
from agent_journal.storage.root import ENV_ROOT

TYPE_CHECKING = False  # typing is costly on the hook path; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any


def project_for(root: str | None, workspace: str | None, cwd: Any) -> ProjectFile | None:
    """The project file to take defaults from, or None when no default is needed."""
    if workspace is not None and (root is not None or os.environ.get(ENV_ROOT)):
        return None
    found = None
    if isinstance(cwd, str) and cwd and os.path.isdir(cwd):
        found = find(cwd)
    return found if found is not None else find()


def root_for(root: str | None, project: ProjectFile | None) -> str | None:
    if root is not None or os.environ.get(ENV_ROOT) or project is None:
        return root
    return project.root_path()


def workspace_for(workspace: str | None, project: ProjectFile | None, cwd: Any) -> str:
    if workspace:
        return workspace
    if project is not None and project.workspace:
        return project.workspace
    return sanitise_workspace_id(cwd if isinstance(cwd, str) else None)
