"""Editing an agent's hooks file (Claude Code settings, Codex hooks.json) and the project file.

Both agents keep hooks as `{"hooks": {EVENT: [{"matcher"?, "hooks": [HANDLER, ...]}]}}`, so
one editor serves both; each installer says which file, which events and which handlers are
its own.

Invariants:
- Everything that is not one of our handlers is kept: every other key, every other hook,
  their order, and the file's indentation. Install is idempotent; uninstall removes exactly
  our handlers, plus any group, event list or `hooks` object that removal emptied (and the
  file, when install created it, and a project's .claude or .codex folder left empty; never
  the agent's home, ~/.claude or ~/.codex, which the agent may have made and need), so
  install then uninstall gives the file back byte for byte.
- A file that is not strict JSON or not shaped as a hooks file is refused with its path (and
  line, where the parser says), never rewritten; so is a path that is not a regular file (a
  named pipe, a socket, a device, a folder), before it is read: nothing waits on it.
- Every check runs before the first write: a folder that cannot be written, or a file that
  is a symlink out of the project, is refused with nothing written. Files are replaced
  atomically (temp file, fsync, rename) and keep their permissions.
- The command written is stable: the bare script name when the `agent-journal` on PATH is
  this installation, else an absolute path. A shared (committed) file only ever gets the
  bare name: when the one on PATH is not this installation, install there is refused with
  the fix. A user-scope command never names a workspace.
"""

from __future__ import annotations

import copy
import functools
import os
import shlex
import sys
from collections.abc import Callable
from typing import Any

from agent_journal.core.errors import JournalError
from agent_journal.storage import project_file
from agent_journal.storage.files import write_file_atomic

SCRIPT = "agent-journal"


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


class Target:
    """One hooks file: where it is, the folder it must stay inside, and who shares it."""

    def __init__(self, path: str, boundary: str | None, shared: bool) -> None:
        self.path = path
        self.boundary = boundary  # the project folder, None for a user-level file
        self.shared = shared      # committed to the project: seen by every teammate


# -- the command ------------------------------------------------------------------------

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


def command_for(agent: str, target: Target, extra: list[str]) -> str:
    """The hook command for `agent`: the PATH command in a shared file, else the stable
    command of this installation."""
    words = shared_command(target.path) if target.shared else stable_executable()
    return " ".join(shlex.quote(w) for w in words + ["hook", agent] + extra)


def is_ours_for(agent: str, handler: Any) -> bool:
    """An agent-journal hook handler for `agent`, whichever installation or workspace."""
    if not isinstance(handler, dict) or handler.get("type") != "command":
        return False
    command = handler.get("command")
    if not isinstance(command, str):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
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


# -- editing ----------------------------------------------------------------------------

def load(path: str, *, allowed_top: tuple[str, ...] | None = None
         ) -> tuple[str | None, dict[str, Any], str]:
    """(text or None when absent, parsed object, indentation) of a hooks file."""
    from agent_journal.capture.strictjson import StrictJSONError, loads

    try:
        raw = _read_regular(path)
    except FileNotFoundError:
        return None, {}, "  "
    except OSError as exc:
        raise JournalError(f"cannot read {path}: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8")
        settings = loads(text)
    except (UnicodeDecodeError, StrictJSONError) as exc:
        raise JournalError(f"refusing to edit {path}: it is not valid JSON ({exc}); fix it "
                           "by hand first") from None
    if not isinstance(settings, dict):
        raise JournalError(f"refusing to edit {path}: it is not a JSON object")
    hooks = settings.get("hooks")
    if hooks is not None and not isinstance(hooks, dict):
        raise JournalError(f'refusing to edit {path}: "hooks" is not an object')
    if allowed_top is not None:
        extra = [k for k in settings if k not in allowed_top]
        if extra:
            raise JournalError(f"refusing to edit {path}: it may hold only "
                               f"{' and '.join(allowed_top)} at its top level, not "
                               f"{', '.join(extra)}")
    return text, settings, _indent_of(text)


def refuse_irregular(path: str, mode: int) -> None:
    """Refuse a path that is there but is not a regular file: reading a named pipe waits
    for a writer forever, and a socket, a device or a folder is no settings file."""
    import stat

    if stat.S_ISREG(mode):
        return
    what = ("a named pipe (FIFO)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a folder" if stat.S_ISDIR(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a file")
    raise JournalError(f"refusing to edit {path}: it is {what}, not a regular file; nothing "
                       "was written")


def _read_regular(path: str) -> bytes:
    """The bytes of the regular file at `path` (a symlink to one is followed), never
    blocking: anything else is refused before it is opened, and again by what was opened
    (O_NONBLOCK, so a pipe put there in between cannot hold the open)."""
    refuse_irregular(path, os.stat(path).st_mode)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as fh:
        refuse_irregular(path, os.fstat(fd).st_mode)
        return fh.read()


def add_handlers(path: str, settings: dict[str, Any], handlers: dict[str, dict[str, Any]],
                 ours: Callable[[Any], bool]) -> None:
    """Put each event's handler where an earlier install's is, else in a new group."""
    hooks = settings.setdefault("hooks", {})
    for event, handler in handlers.items():
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list) or not all(
                isinstance(g, dict) and isinstance(g.get("hooks", []), list) for g in groups):
            raise JournalError(f'refusing to edit {path}: "hooks.{event}" is not a list of '
                               "matcher groups")
        _place(groups, handler, ours)


def _place(groups: list[Any], handler: dict[str, Any], ours: Callable[[Any], bool]) -> None:
    """The first handler of ours is replaced in place (a re-install moves nothing); any
    further copy is removed, so the hook never journals one payload twice."""
    placed = False
    for group in list(groups):
        handlers = group.get("hooks")
        if not isinstance(handlers, list):
            continue
        kept: list[Any] = []
        for existing in handlers:
            if not ours(existing):
                kept.append(existing)
            elif not placed:
                kept.append(handler)
                placed = True
        dropped = len(kept) < len(handlers)
        group["hooks"] = kept
        if dropped and not kept:
            groups.remove(group)
    if not placed:
        groups.append({"hooks": [handler]})


def remove_handlers(settings: dict[str, Any], ours: Callable[[Any], bool]) -> None:
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        return
    emptied = False
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        removed = False
        for group in list(groups):
            if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
                continue
            kept = [h for h in group["hooks"] if not ours(h)]
            if len(kept) == len(group["hooks"]):
                continue
            removed = True
            if kept:
                group["hooks"] = kept
            else:
                groups.remove(group)
        # Only containers this removal emptied go; a list the user left empty stays.
        if removed and not groups:
            del hooks[event]
            emptied = True
    if emptied and not hooks:
        del settings["hooks"]


def has_ours(settings: dict[str, Any], ours: Callable[[Any], bool]) -> bool:
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        return False
    return any(ours(h) for groups in hooks.values() if isinstance(groups, list)
               for g in groups if isinstance(g, dict) and isinstance(g.get("hooks"), list)
               for h in g["hooks"])


def rendered(before: str | None, original: dict[str, Any], settings: dict[str, Any],
             indent: str, *, empty: Callable[[dict[str, Any]], bool] | None = None
             ) -> str | None:
    """The new text: unchanged when nothing changed (whatever its formatting), None (remove
    the file) when what is left configures nothing."""
    import json

    if settings == original:
        return before
    if not settings or (empty is not None and empty(settings)):
        return None
    return json.dumps(settings, indent=indent, ensure_ascii=False) + "\n"


def _indent_of(text: str) -> str:
    for line in text.splitlines()[1:]:
        stripped = line.lstrip(" \t")
        if stripped and len(stripped) < len(line):
            return line[: len(line) - len(stripped)]
    return "  "


def deep(settings: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(settings)


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

# Every project-level hooks file of ours: the project file stays while any of them still
# holds one of our hooks.
PROJECT_HOOK_FILES = ((os.path.join(".claude", "settings.json"), "claude-code"),
                      (os.path.join(".claude", "settings.local.json"), "claude-code"),
                      (os.path.join(".codex", "hooks.json"), "codex"))


class AgentSpec:
    """What one agent's installer knows: its name, its hooks file per scope, its handlers."""

    name = ""
    allowed_top: tuple[str, ...] | None = None  # keys a hooks file may hold at its top level
    new_file: dict[str, Any] = {}              # what a hooks file this install creates starts as

    def target(self, scope: str, folder: str | None) -> Target:
        raise NotImplementedError

    def handlers(self, command: str) -> dict[str, dict[str, Any]]:
        raise NotImplementedError

    def ours(self, handler: Any) -> bool:
        return is_ours_for(self.name, handler)

    def empty(self, settings: dict[str, Any]) -> bool:
        """True when what is left of the file is only what install itself put in it."""
        return all(settings.get(k) == v for k, v in self.new_file.items()) and \
            set(settings) <= set(self.new_file)


def _root_given(root: str | None) -> str | None:
    from agent_journal.storage.root import ENV_ROOT, check_root, resolve_root

    if root is None and not os.environ.get(ENV_ROOT):
        return None
    path = resolve_root(root)
    check_root(path, create=False)
    return path


def install_hooks(spec: AgentSpec, *, project: str | None, scope: str, workspace: str | None,
                  root: str | None, dry_run: bool) -> list[Change]:
    from agent_journal.capture.claude_code import sanitise_workspace_id
    from agent_journal.core.model import validate_id

    folder, note = (find_project(project) if scope != "user" or project is not None
                    else (None, ""))
    target = spec.target(scope, folder)
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
    command = command_for(spec.name, target, extra)
    before, settings, indent = load(target.path, allowed_top=spec.allowed_top)
    original = deep(settings)
    if before is None:
        settings.update(deep(spec.new_file))
    wanted = spec.handlers(command)
    add_handlers(target.path, settings, wanted, spec.ours)
    after = before if settings == original else rendered(None, {}, settings, indent)
    after = kept_text(before, after, settings,
                      lambda text: splice_install(text, wanted, spec.ours, indent))
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
    changes.insert(0, (Change(target.path, before, after, message, warnings=warnings,
                              prune=True), target.boundary))
    if target.boundary is not None and not target.shared:
        ignore = git_ignore_change(target.path, target.boundary, add=True)
        if isinstance(ignore, str):
            changes[0][0].warnings.append(ignore)
        elif ignore is not None:
            changes.append((ignore, None))
    return finish(changes, dry_run)


def uninstall_hooks(spec: AgentSpec, *, project: str | None, scope: str,
                    workspace: str | None = None, root: str | None = None,
                    dry_run: bool) -> list[Change]:
    """Remove exactly our handlers (workspace and root are accepted, like install's, and
    do not matter: every handler of ours goes, whichever workspace it names)."""
    folder, note = (find_project(project) if scope != "user" or project is not None
                    else (None, ""))
    target = spec.target(scope, folder)
    changes: list[tuple[Change, str | None]] = []
    if not os.path.lexists(target.path):
        changes.append((Change(target.path, None, None,
                               f"no {target.path}; nothing to remove"
                               + (f" ({note})" if note else "")), target.boundary))
    else:
        before, settings, indent = load(target.path)
        original = deep(settings)
        remove_handlers(settings, spec.ours)
        after = rendered(before, original, settings, indent, empty=spec.empty)
        after = kept_text(before, after, settings,
                          lambda text: splice_uninstall(text, spec.ours))
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


def entry_points(spec: AgentSpec) -> tuple[Callable[..., list[Change]],
                                            Callable[..., list[Change]]]:
    """An installer's `install(project=, scope=, workspace=, root=, dry_run=)` and
    `uninstall(...)` with the same keywords, bound to its spec."""
    return (functools.partial(install_hooks, spec), functools.partial(uninstall_hooks, spec))


def _ours_left(folder: str, changing: str) -> bool:
    """Whether any other project-level hooks file still holds one of our hooks."""
    for rel, agent in PROJECT_HOOK_FILES:
        path = os.path.join(folder, rel)
        if path == changing or not os.path.isfile(path):
            continue
        try:
            _, settings, _ = load(path)
        except JournalError:
            return True  # unreadable: assume it may still use the project file
        if has_ours(settings, functools.partial(is_ours_for, agent)):
            return True
    return False


# -- the same edits on the text, so that every other byte stays ---------------------------
# Every edit lies inside the top-level "hooks" value (or adds or removes that member): its
# text is found once and edited alone, so the rest of the file, however large, is read once.

def _ours_at(hooks: Any, event: str, ours: Callable[[Any], bool]) -> list[tuple[int, int]]:
    groups = hooks.get(event)
    found = []
    for gi, group in enumerate(groups if isinstance(groups, list) else []):
        for hi, handler in enumerate(group.get("hooks", []) if isinstance(group, dict) else []):
            if ours(handler):
                found.append((gi, hi))
    return found


def splice_install(text: str, handlers: dict[str, dict[str, Any]],
                   ours: Callable[[Any], bool], indent: str) -> str:
    from agent_journal.agents import json_splice as js

    node = js.find(text, ["hooks"])
    if node is None:
        return js.append(text, [], {e: [{"hooks": [h]}] for e, h in handlers.items()}, indent,
                         key="hooks")
    start, end = node.start, node.end
    return text[:start] + _install_in_hooks(text[start:end], handlers, ours, indent) + text[end:]


def _install_in_hooks(text: str, handlers: dict[str, dict[str, Any]],
                      ours: Callable[[Any], bool], indent: str) -> str:
    """splice_install on the text of the "hooks" object alone (one level deep)."""
    import json

    from agent_journal.agents import json_splice as js

    for event, handler in handlers.items():
        hooks = json.loads(text)
        if event not in hooks:
            text = js.append(text, [], [{"hooks": [handler]}], indent, key=event, depth=1)
            continue
        found = _ours_at(hooks, event, ours)
        if not found:
            text = js.append(text, [event], {"hooks": [handler]}, indent, depth=1)
            continue
        gi, hi = found[0]
        if hooks[event][gi]["hooks"][hi] != handler:
            text = js.replace(text, [event, gi, "hooks", hi], handler, indent, depth=1)
        for gi, hi in reversed(found[1:]):
            text, _ = _remove_handler(text, event, gi, hi)
    return text


def splice_uninstall(text: str, ours: Callable[[Any], bool]) -> str:
    import json

    from agent_journal.agents import json_splice as js

    node = js.find(text, ["hooks"])
    if node is None or node.kind != "object":
        return text
    start, end = node.start, node.end
    hooks_text, emptied = text[start:end], False
    while True:
        hooks = json.loads(hooks_text)
        hit = next(((event, *found[0]) for event in hooks
                    if (found := _ours_at(hooks, event, ours))), None)
        if hit is None:
            break
        hooks_text, emptied = _remove_handler(hooks_text, *hit, prune=True)
    if emptied:
        return js.remove(text, ["hooks"])
    return text[:start] + hooks_text + text[end:]


def _remove_handler(text: str, event: str, gi: int, hi: int, *, prune: bool = False
                    ) -> tuple[str, bool]:
    """Remove one handler from the text of the "hooks" object, its group when that empties
    it, and (with `prune`, as uninstall does) the event list when that empties it; and say
    whether that emptied the "hooks" object itself (then the caller removes it)."""
    import json

    from agent_journal.agents import json_splice as js

    hooks = json.loads(text)
    if len(hooks[event][gi]["hooks"]) > 1:
        return js.remove(text, [event, gi, "hooks", hi]), False
    text = js.remove(text, [event, gi])
    if not prune or hooks[event][gi + 1:] or hooks[event][:gi]:
        return text, False
    return js.remove(text, [event]), len(hooks) == 1


def kept_text(before: str | None, after: str | None, settings: dict[str, Any],
              splice: Callable[[str], str]) -> str | None:
    """The text edit in place of the re-serialised `after` when it means the same: every
    byte of the user's file outside our entries stays as it was."""
    import json

    if before is None or after is None or after == before:
        return after
    try:
        spliced = splice(before)
        if json.loads(spliced) == settings:
            return spliced
    except (ValueError, KeyError, IndexError, AssertionError, TypeError):
        pass
    return after
