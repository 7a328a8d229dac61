"""Editing an agent's hooks file (Claude Code settings, Codex hooks.json): reading it
strictly, putting our handlers in and taking them out, as objects and as text.

Both agents keep hooks as `{"hooks": {EVENT: [{"matcher"?, "hooks": [HANDLER, ...]}]}}`, so
one editor serves both; each agent's record (agents/agent.py) says which file, which events
and which handlers are its own, and hook_install.py runs the install and uninstall flows.

Invariants:
- Everything that is not one of our handlers is kept: every other key, every other hook,
  their order, and the file's indentation; the text itself, byte for byte outside our
  entries, whenever an edit in place means the same (`kept_text`). Install is idempotent;
  uninstall removes exactly our handlers, plus any group, event list or `hooks` object that
  removal emptied.
- A file that is not strict JSON or not shaped as a hooks file is refused with its path (and
  line, where the parser says), never rewritten; so is a path that is not a regular file (a
  named pipe, a socket, a device, a folder), before it is read: nothing waits on it.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from typing import Any

from agent_journal.core.errors import JournalError


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
