"""`hooks install|uninstall AGENT`: our handlers in the agent's hooks file, and the project
file, for any agent by its record (agents/agent.py).

Invariants:
- Those of hook_settings (everything else in the file kept, idempotent, exact uninstall,
  strict JSON) and hook_command (a stable command; a shared file only the bare name; a
  user-scope command never names a workspace).
- Every check runs before the first write: a folder that cannot be written, or a file that
  is a symlink out of the project, is refused with nothing written. Files are replaced
  atomically (temp file, fsync, rename) and keep their permissions.
- Uninstall removes the file when install created it and nothing else is left, and a
  project's .claude or .codex folder left empty; never the agent's home, ~/.claude or
  ~/.codex, which the agent may have made and need; so install then uninstall gives the
  file back byte for byte. The project file goes once no hooks file of the project holds
  one of our hooks.
"""

from __future__ import annotations

import os

from agent_journal.agents import sync_hooks
from agent_journal.agents.agent import every_agent
from agent_journal.agents.hook_command import command_for, find_project
from agent_journal.agents.hook_settings import (
    add_handlers,
    deep,
    has_ours,
    kept_text,
    load,
    refuse_irregular,
    remove_handlers,
    rendered,
    splice_install,
    splice_uninstall,
)
from agent_journal.core.errors import JournalError
from agent_journal.storage import project_file
from agent_journal.storage.files import write_file_atomic

TYPE_CHECKING = False
if TYPE_CHECKING:
    from agent_journal.agents.agent import Agent


class Change:
    """What install/uninstall did or would do to one file."""

    def __init__(self, path: str, before: str | None, after: str | None, message: str,
                 diff: str | None = None, warnings: list[str] | None = None,
                 prune: bool = False) -> None:
        self.path = path
        self.prune = prune  # removing the file also removes its folder when left empty
        self.before = before
        self.after = after
        self.message = message
        self.diff = diff
        self.warnings = warnings or []

    @property
    def changed(self) -> bool:
        return self.after != self.before



# -- the project file -------------------------------------------------------------------

def project_file_change(folder: str, workspace: str | None, root: str | None,
                        default_workspace: str) -> tuple[str, str | None, str, str]:
    """(path, text before, text after, workspace) for install's project file."""
    from agent_journal.core.model import validate_id

    path = os.path.join(folder, project_file.NAME)
    try:
        refuse_irregular(path, os.stat(path).st_mode)  # a pipe there would hold the read
    except OSError:
        pass  # absent, or unreadable: project_file.load says so
    existing = project_file.load(path) if os.path.lexists(path) else None
    chosen = workspace or (existing.workspace if existing else None) or default_workspace
    validate_id(chosen, "workspace")
    kept_root = root if root is not None else (existing.root if existing else None)
    after = project_file.render(chosen, kept_root)
    if existing is not None and _same_values(existing, chosen, kept_root):
        after = existing.text  # the same values in other formatting: left alone
    return path, existing.text if existing else None, after, chosen


def _same_values(existing: project_file.ProjectFile, workspace: str, root: str | None) -> bool:
    return existing.workspace == workspace and existing.root == root


def project_file_removal(folder: str) -> tuple[str, str | None, str | None]:
    """(path, before, after) for uninstall: the file goes only when it is exactly as install
    writes it (a hand-edited one is kept)."""
    path = os.path.join(folder, project_file.NAME)
    if not os.path.isfile(path):
        return path, None, None
    existing = project_file.load(path)
    if existing.workspace and existing.text == project_file.render(existing.workspace,
                                                                   existing.root):
        return path, existing.text, None
    return path, existing.text, existing.text


# -- writing ----------------------------------------------------------------------------

def check_writable(path: str, boundary: str | None) -> None:
    """Refuse, before anything is written, a file we could not write or one that leads out
    of the project through a symlink (the file itself or a folder on its way)."""
    real = os.path.realpath(path)
    if boundary is not None:
        inside = os.path.realpath(boundary)
        if real != inside and not real.startswith(inside.rstrip(os.sep) + os.sep):
            raise JournalError(f"refusing to write {path}: it leads to {real}, outside the "
                               f"project {boundary} (a symlink); nothing was written")
    folder = os.path.dirname(real)
    while not os.path.exists(folder):
        folder = os.path.dirname(folder)
    if not os.path.isdir(folder):
        raise JournalError(f"cannot write {path}: {folder} is not a folder; nothing was "
                           "written")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise JournalError(f"cannot write {path}: {folder} is not writable; nothing was "
                           "written")


def finish(changes: list[tuple[Change, str | None]], dry_run: bool) -> list[Change]:
    """Write each change (after None: remove the file), or with dry_run describe each one as
    a diff. Each entry pairs a change with the boundary its file must stay inside."""
    if dry_run:
        for change, _ in changes:
            change.diff = _diff(change) if change.changed else ""
        return [c for c, _ in changes]
    for change, boundary in changes:
        if change.changed:
            check_writable(change.path, boundary)
    for change, _ in changes:
        if not change.changed:
            continue
        try:
            if change.after is None:
                os.unlink(change.path)
                if change.prune:
                    try:
                        os.rmdir(os.path.dirname(change.path))  # only when left empty
                    except OSError:
                        pass
            else:
                _write(change.path, change.after)
        except OSError as exc:
            raise JournalError(f"cannot write {change.path}: {exc.strerror}") from None
    return [c for c, _ in changes]


def _diff(change: Change) -> str:
    import difflib

    return "".join(difflib.unified_diff(
        (change.before or "").splitlines(keepends=True),
        (change.after or "").splitlines(keepends=True),
        fromfile=change.path if change.before is not None else "/dev/null",
        tofile=change.path if change.after is not None else "/dev/null"))


def _write(path: str, text: str) -> None:
    """Temp file, fsync, rename, keeping the old file's mode (a project file is shared)."""
    target = os.path.realpath(path)
    folder = os.path.dirname(target)
    if not os.path.isdir(folder):
        os.makedirs(folder)
        os.chmod(folder, 0o755)
    try:
        mode = os.stat(target).st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o644
    write_file_atomic(target, text.encode("utf-8"), mode=mode)



# -- the install and uninstall flows, shared by every agent -----------------------------

def _root_given(root: str | None) -> str | None:
    from agent_journal.storage.root import ENV_ROOT, check_root, resolve_root

    if root is None and not os.environ.get(ENV_ROOT):
        return None
    path = resolve_root(root)
    check_root(path, create=False)
    return path


def install(agent: Agent, *, project: str | None, scope: str, workspace: str | None,
            root: str | None, dry_run: bool, sync: bool = False) -> list[Change]:
    """Our handlers into `agent`'s hooks file at `scope`, and (but at user scope) the
    project file naming the workspace (and the root when one was given); with `sync`,
    the sync handlers too (agents/sync_hooks.py)."""
    from agent_journal.capture.observation import sanitise_workspace_id
    from agent_journal.core.model import validate_id

    folder, note = (find_project(project) if scope != "user" or project is not None
                    else (None, ""))
    target = agent.settings(scope, folder)
    root_path = _root_given(root)
    if workspace is not None:
        validate_id(workspace, "workspace")
    extra: list[str] = []
    warnings: list[str] = []
    if scope == "user":
        # One file for every project: never a workspace (each project's own
        # .agent-journal.toml, else its folder name, names it at run time); a root only when
        # one was asked for (this user's own file may name this machine's path).
        if workspace is not None:
            warnings.append(f"workspace {workspace} is not pinned at user scope: each "
                            "project's .agent-journal.toml (else its folder name) names its "
                            "workspace; use --scope project or local to write one")
        if root_path is not None:
            extra += ["--root", root_path]
    command = command_for(agent.name, target, extra)
    before, settings, indent = load(target.path, allowed_top=agent.allowed_top)
    original = deep(settings)
    if before is None:
        settings.update(deep(agent.new_file))
    wanted = agent.handlers(command)
    add_handlers(target.path, settings, wanted, agent.ours)
    syncing = sync_hooks.handlers(agent, target, extra) if sync else {}
    add_handlers(target.path, settings, syncing, sync_hooks.is_sync_handler)
    after = before if settings == original else rendered(None, {}, settings, indent)


    def splice(text: str) -> str:
        text = splice_install(text, wanted, agent.ours, indent)
        return splice_install(text, syncing, sync_hooks.is_sync_handler, indent) \
            if syncing else text

    after = kept_text(before, after, settings, splice)
    changes: list[tuple[Change, str | None]] = []
    described = ""
    if folder is not None and scope != "user":
        path, pf_before, pf_after, chosen = project_file_change(
            folder, workspace, root_path, sanitise_workspace_id(folder))
        described = f" (workspace {chosen})"
        changes.append((Change(path, pf_before, pf_after,
                               f"wrote {path}" if pf_after != pf_before else ""), folder))
    message = (f"installed agent-journal hooks{described} in {target.path}" if after != before
               else f"agent-journal hooks already installed in {target.path}; nothing changed")
    if note:
        message += f" ({note})"
    if after != before and agent.pending is not None:
        warnings.append(agent.pending(scope))
    changes.insert(0, (Change(target.path, before, after, message, warnings=warnings,
                              prune=True), target.boundary))
    if target.boundary is not None and not target.shared:
        ignore = git_ignore_change(target.path, target.boundary, add=True)
        if isinstance(ignore, str):
            changes[0][0].warnings.append(ignore)
        elif ignore is not None:
            changes.append((ignore, None))
    return finish(changes, dry_run)


def uninstall(agent: Agent, *, project: str | None, scope: str,
              workspace: str | None = None, root: str | None = None,
              dry_run: bool, sync: bool = False) -> list[Change]:
    """Remove exactly our handlers, the sync handlers too (workspace, root and sync are
    accepted, like install's, and do not matter: every handler of ours goes, whichever
    workspace it names)."""
    folder, note = (find_project(project) if scope != "user" or project is not None
                    else (None, ""))
    target = agent.settings(scope, folder)
    changes: list[tuple[Change, str | None]] = []
    if not os.path.lexists(target.path):
        changes.append((Change(target.path, None, None,
                               f"no {target.path}; nothing to remove"
                               + (f" ({note})" if note else "")), target.boundary))
    else:
        before, settings, indent = load(target.path)
        original = deep(settings)
        remove_handlers(settings, agent.ours)
        remove_handlers(settings, sync_hooks.is_sync_handler)
        after = rendered(before, original, settings, indent, empty=agent.empty)
        after = kept_text(before, after, settings,
                          lambda text: splice_uninstall(splice_uninstall(text, agent.ours),
                                                        sync_hooks.is_sync_handler))
        message = (f"removed agent-journal hooks from {target.path}" if after != before
                   else f"no agent-journal hooks in {target.path}; nothing changed")
        if note:
            message += f" ({note})"
        # A project's folder (.claude, .codex) left empty goes with the file; an agent's
        # own home (~/.claude, ~/.codex) stays, whoever made it: the agent may need it.
        changes.append((Change(target.path, before, after, message, prune=scope != "user"),
                        target.boundary))
        if after is None and target.boundary is not None and not target.shared:
            ignore = git_ignore_change(target.path, target.boundary, add=False)
            if isinstance(ignore, Change):
                changes.append((ignore, None))
    if folder is not None and scope != "user" and not _ours_left(folder, target.path):
        path, pf_before, pf_after = project_file_removal(folder)
        if pf_before is not None:
            changes.append((Change(path, pf_before, pf_after,
                                   f"removed {path}" if pf_after is None else ""), folder))
    return finish(changes, dry_run)


# The line `hooks install --scope local` adds to the repository's .git/info/exclude (never a
# committed .gitignore) when git would otherwise offer the personal file for a commit.
EXCLUDE_NOTE = "# agent-journal hooks install --scope local: a personal settings file"


def git_ignore_change(path: str, folder: str, *, add: bool) -> Change | str | None:
    """Making sure git ignores a personal settings file inside the project (`add`), or
    taking back the line that did (uninstall): the change to the repository's
    .git/info/exclude, a warning when git cannot tell, None when there is nothing to do
    (not a repository, or already ignored by some other rule)."""
    import subprocess

    def git(*args: str) -> subprocess.CompletedProcess[str] | None:
        try:
            return subprocess.run(["git", "-C", folder, *args], capture_output=True,
                                  text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return None

    top = git("rev-parse", "--show-toplevel", "--git-path", "info/exclude")
    if top is None:
        return (f"could not run git to make sure it ignores {path} (a personal file): "
                "add it to .gitignore or .git/info/exclude yourself") if add else None
    if top.returncode != 0:
        return None  # not a git repository: nothing would commit the file
    toplevel, exclude = (top.stdout.splitlines() + ["", ""])[:2]
    exclude = os.path.join(folder, exclude) if not os.path.isabs(exclude) else exclude
    line = "/" + os.path.relpath(os.path.realpath(path),
                                 os.path.realpath(toplevel)).replace(os.sep, "/")
    try:
        with open(exclude, encoding="utf-8") as fh:
            before: str | None = fh.read()
    except FileNotFoundError:
        before = None
    except (OSError, UnicodeDecodeError) as exc:
        return f"cannot read {exclude} ({exc}): make sure git ignores {path}" if add else None
    ours = f"{EXCLUDE_NOTE}\n{line}\n"
    if not add:
        if before is None or ours not in before:
            return None
        return Change(exclude, before, before.replace(ours, "", 1),
                      f"git no longer ignores {line[1:]} for us ({exclude})")
    if before is not None and ours in before:
        return None
    ignored = git("check-ignore", "-q", "--no-index", "--", path)
    if ignored is not None and ignored.returncode == 0:
        return None
    text = before or ""
    if text and not text.endswith("\n"):
        text += "\n"
    return Change(exclude, before, text + ours,
                  f"git now ignores {line[1:]} ({exclude}; not a committed .gitignore)")



def _ours_left(folder: str, changing: str) -> bool:
    """Whether any other project-level hooks file (of any agent, at any scope but user)
    still holds one of our hooks."""
    for agent in every_agent():
        for scope in agent.scopes:
            if scope == "user":
                continue
            path = agent.settings(scope, folder).path
            if path == changing or not os.path.isfile(path):
                continue
            try:
                _, settings, _ = load(path)
            except JournalError:
                return True  # unreadable: assume it may still use the project file
            if has_ours(settings, agent.ours):
                return True
    return False
