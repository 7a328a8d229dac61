"""`hooks install|uninstall claude-code`: the hook entries in a project's .claude/settings.json.

Invariants:
- Everything in settings.json that is not an agent-journal hook handler is kept: every
  other key, every other hook, their order, and the file's indentation.
- Install is idempotent (a second run changes no byte) and uninstall removes exactly the
  handlers install adds, plus any group, event list or `hooks` object left empty by that
  (and the file, and an empty .claude folder, when nothing else is left in it).
- A file that is not strict JSON (duplicate keys, NaN, trailing garbage) or not shaped as
  Claude Code settings is refused, never rewritten; the file is replaced atomically
  (temp file, fsync, rename) and keeps its permissions.
- The hook command names this installation's own console script by absolute path, never
  a version-manager shim, so the hook runs the same code whatever PATH the agent has.
"""

from __future__ import annotations

import copy
import os
import shlex
import sys

from agent_journal.capture.claude_code import sanitise_workspace_id
from agent_journal.core.errors import JournalError
from agent_journal.core.model import validate_id
from agent_journal.storage.files import write_file_atomic
from agent_journal.storage.root import ENV_ROOT, check_root, resolve_root

TYPE_CHECKING = False  # `typing` costs ~5 ms to import; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any

# The events the hook journals, in the order they are written into settings.json.
EVENTS = ("PreToolUse", "PostToolUse", "PostToolUseFailure", "UserPromptSubmit",
          "SessionStart", "PreCompact", "PostCompact", "Stop", "SubagentStop", "SessionEnd")
# Seconds. The hook gives up on a locked journal after ~16 s at worst (hook.py); SessionStart
# also reads the workspace to build its context.
TIMEOUTS = {"SessionStart": 60}
DEFAULT_TIMEOUT = 30
SETTINGS = os.path.join(".claude", "settings.json")
SCRIPT = "agent-journal"


class Change:
    """What install/uninstall did or would do."""

    def __init__(self, path: str, before: str | None, after: str | None, message: str,
                 diff: str | None = None) -> None:
        self.path = path
        self.before = before
        self.after = after
        self.message = message
        self.diff = diff

    @property
    def changed(self) -> bool:
        return self.after != self.before


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


def hook_command(workspace: str, root: str | None) -> str:
    words = hook_executable() + ["hook", "claude-code", "--workspace", workspace]
    if root is not None:
        words += ["--root", root]
    return " ".join(shlex.quote(w) for w in words)


def is_ours(handler: Any) -> bool:
    """An agent-journal hook handler, whichever installation or workspace it names."""
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
        return words[1:3] == ["hook", "claude-code"]
    return len(words) >= 5 and words[1:5] == ["-m", "agent_journal", "hook", "claude-code"]


# -- operations -------------------------------------------------------------------------

def install(*, project: str | None, workspace: str | None, root: str | None,
            dry_run: bool) -> Change:
    folder = _project(project)
    if workspace is None:
        workspace = sanitise_workspace_id(folder)
    validate_id(workspace, "workspace")
    root_path = None
    if root is not None or os.environ.get(ENV_ROOT):
        root_path = resolve_root(root)
        check_root(root_path, create=False)
    command = hook_command(workspace, root_path)
    path = os.path.join(folder, SETTINGS)
    before, settings, indent = _load(path)
    original = copy.deepcopy(settings)
    hooks = settings.setdefault("hooks", {})
    for event in EVENTS:
        handler = {"type": "command", "command": command,
                   "timeout": TIMEOUTS.get(event, DEFAULT_TIMEOUT)}
        groups = hooks.setdefault(event, [])
        _check_groups(path, event, groups)
        _place(groups, handler)
    # Already installed as wanted: the file is left as it is, whatever its formatting.
    after = before if settings == original else _dump(settings, indent)
    return _finish(path, before, after, dry_run,
                   done=f"installed agent-journal hooks (workspace {workspace}) in {path}",
                   same=f"agent-journal hooks already installed in {path}; nothing changed")


def uninstall(*, project: str | None, dry_run: bool) -> Change:
    folder = _project(project)
    path = os.path.join(folder, SETTINGS)
    if not os.path.exists(path):
        return Change(path, None, None, f"no {path}; nothing to remove",
                      diff="" if dry_run else None)
    before, settings, indent = _load(path)
    original = copy.deepcopy(settings)
    hooks = settings.get("hooks")
    emptied = False
    if isinstance(hooks, dict):
        for event in list(hooks):
            groups = hooks[event]
            if not isinstance(groups, list):
                continue
            removed = False
            for group in list(groups):
                if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
                    continue
                kept = [h for h in group["hooks"] if not is_ours(h)]
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
    # A settings file left holding nothing is removed: it is what install started from
    # when it created the file, and an empty object configures nothing either way.
    if settings == original:
        after = before
    else:
        after = _dump(settings, indent) if settings else None
    return _finish(path, before, after, dry_run,
                   done=f"removed agent-journal hooks from {path}",
                   same=f"no agent-journal hooks in {path}; nothing changed")


# -- helpers ----------------------------------------------------------------------------

def _project(project: str | None) -> str:
    folder = os.path.abspath(os.path.expanduser(project if project is not None else "."))
    if not os.path.isdir(folder):
        raise JournalError(f"project folder {folder} does not exist")
    return folder


def _load(path: str) -> tuple[str | None, dict[str, Any], str]:
    from agent_journal.capture.strictjson import StrictJSONError, loads

    try:
        with open(path, "rb") as fh:
            raw = fh.read()
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
    return text, settings, _indent_of(text)


def _check_groups(path: str, event: str, groups: Any) -> None:
    if not isinstance(groups, list) or not all(
            isinstance(g, dict) and isinstance(g.get("hooks", []), list) for g in groups):
        raise JournalError(f'refusing to edit {path}: "hooks.{event}" is not a list of '
                           "matcher groups")


def _place(groups: list[Any], handler: dict[str, Any]) -> None:
    """Put `handler` where an earlier install's handler is, else in a new group at the end.

    The first handler of ours is replaced in place (so a re-install with another
    workspace moves nothing); any further copy is removed, so the hook never journals
    one payload twice.
    """
    placed = False
    for group in list(groups):
        handlers = group.get("hooks")
        if not isinstance(handlers, list):
            continue
        kept: list[Any] = []
        for existing in handlers:
            if not is_ours(existing):
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


def _indent_of(text: str) -> str:
    for line in text.splitlines()[1:]:
        stripped = line.lstrip(" \t")
        if stripped and len(stripped) < len(line):
            return line[: len(line) - len(stripped)]
    return "  "


def _dump(settings: dict[str, Any], indent: str) -> str:
    import json

    return json.dumps(settings, indent=indent, ensure_ascii=False) + "\n"


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
        try:
            os.rmdir(os.path.dirname(path))  # only when install's .claude folder is empty
        except OSError:
            pass
    else:
        _write(path, after)
    return Change(path, before, after, done)


def _write(path: str, text: str) -> None:
    """Temp file, fsync, rename, keeping the old file's mode (settings.json may be shared)."""
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
