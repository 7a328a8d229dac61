"""The command a hooks file runs: which `agent-journal` it names, and whether a handler
there is ours; and which project folder an install is for.

Invariant: the command written is stable: the bare script name when the `agent-journal` on
PATH is this installation, else an absolute path. A shared (committed) file only ever gets
the bare name: when the one on PATH is not this installation, install there is refused with
the fix. A handler is ours whichever installation or workspace it names.
"""

from __future__ import annotations

import os
import shlex
import sys

from agent_journal.core.errors import JournalError
from agent_journal.storage import project_file

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any

    from agent_journal.agents.agent import Target

SCRIPT = "agent-journal"


def hook_executable() -> list[str]:
    """argv prefix that runs this installation's CLI, by absolute path.

    The console script beside the running interpreter is the one installed with this
    package. sys.executable is not resolved through symlinks: a virtualenv's python is
    a symlink, and its real folder holds no agent-journal script. Paths inside a
    version manager's `shims` folder are never used: a shim picks its Python at run time.
    """
    candidates = [os.path.join(os.path.dirname(os.path.abspath(sys.executable)), SCRIPT)]
    if os.path.basename(sys.argv[0]) == SCRIPT:
        candidates.append(os.path.abspath(sys.argv[0]))
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.X_OK) and not _is_shim(path):
            return [path]
    python = os.path.abspath(sys.executable)
    if _is_shim(python):
        raise JournalError(f"cannot find this installation's {SCRIPT} script (the Python "
                           f"in use, {python}, is a version-manager shim)")
    return [python, "-m", "agent_journal"]


def _is_shim(path: str) -> bool:
    return "shims" in path.split(os.sep)


def stable_executable() -> list[str]:
    """`agent-journal` when the one on PATH is this installation, else hook_executable()."""
    import shutil

    own = hook_executable()
    found = shutil.which(SCRIPT)
    if found and len(own) == 1 and os.path.realpath(found) == os.path.realpath(own[0]):
        return [SCRIPT]
    return own


FIX_PATH = ("put this installation's command on PATH (pipx install agent-journal, or uv "
            "tool install agent-journal; README \"Installing the command\")")


def path_problem() -> str | None:
    """Why a shared file cannot name the bare `agent-journal` (None when it can): the one
    on PATH is missing or is another installation."""
    import shutil

    if stable_executable() == [SCRIPT]:
        return None
    found = shutil.which(SCRIPT)
    if found is None:
        return f"{SCRIPT} is not on PATH"
    return f"the {SCRIPT} on PATH ({found}) is not this installation"


def shared_command(path: str) -> list[str]:
    """[SCRIPT] for a file every teammate shares (never this machine's path), or a
    one-line refusal naming the fix."""
    problem = path_problem()
    if problem is not None:
        raise JournalError(f"refusing to write {path}, a file shared with the project: "
                           f"{problem}; {FIX_PATH}, or use --scope local or --scope user "
                           "(they may name this machine's path); nothing was written")
    return [SCRIPT]


def command_for(agent: str, target: Target, extra: list[str]) -> list[str]:
    """The hook command for `agent`, as words: the PATH command in a shared file, else the
    stable command of this installation."""
    words = shared_command(target.path) if target.shared else stable_executable()
    return words + ["hook", agent] + extra


def handler_words(handler: Any) -> list[str] | None:
    """The command a hooks file's handler runs, as words (exec form: `command` and
    `args`; else its shell command line split), or None when it names none."""
    if not isinstance(handler, dict) or handler.get("type") != "command":
        return None
    command, args = handler.get("command"), handler.get("args")
    if not isinstance(command, str):
        return None
    if args is not None:
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            return None
        return [command, *args]
    try:
        return shlex.split(command)
    except ValueError:
        return None


def is_ours_for(agent: str, handler: Any) -> bool:
    """An agent-journal hook handler for `agent`, whichever installation or workspace."""
    words = handler_words(handler)
    if words is None:
        return False
    if len(words) >= 3 and os.path.basename(words[0]) == SCRIPT:
        return words[1:3] == ["hook", agent]
    return len(words) >= 5 and words[1:5] == ["-m", "agent_journal", "hook", agent]


def project_folder(project: str | None) -> str:
    return find_project(project)[0]


# What marks a project's top folder, as the agents find it: the project file (ours), the
# agents' own settings folders, the git top level (`.git` is a file in worktrees and
# submodules). In the home folder only the project file counts: ~/.claude and ~/.codex are
# the user-scope settings, and a ~/.git is a dotfiles repository, not the project.
PROJECT_MARKERS = ((project_file.NAME, "holds an existing " + project_file.NAME),
                   (".claude", "holds .claude"), (".codex", "holds .codex"),
                   (".git", "is the git top level"))


def find_project(project: str | None) -> tuple[str, str]:
    """(folder, note): `project` when given, else the nearest folder from the current one
    upwards that a PROJECT_MARKERS entry marks (else the current folder). The note says
    which folder was chosen and why when it is not the current one (else it is empty)."""
    if project is not None:
        folder = os.path.abspath(os.path.expanduser(project))
        if not os.path.isdir(folder):
            raise JournalError(f"project folder {folder} does not exist")
        return folder, ""
    try:
        here = os.getcwd()
    except OSError:
        raise JournalError("the current folder no longer exists; pass --project") from None
    home = os.path.abspath(os.path.expanduser("~"))
    folder = here
    while True:
        for name, why in PROJECT_MARKERS[:1] if folder == home else PROJECT_MARKERS:
            if os.path.lexists(os.path.join(folder, name)):
                if folder == here:
                    return folder, ""
                return folder, (f"project {folder}: the folder above the current one that "
                                f"{why}; --project picks another")
        parent = os.path.dirname(folder)
        if parent == folder:
            return here, ""
        folder = parent
