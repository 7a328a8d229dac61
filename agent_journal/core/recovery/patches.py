"""The files a patch tool call changes (Codex's `apply_patch`), read off its input.

Invariant: only what the patch itself names counts, in its own terms: `*** Add File: p`
is ["created", p], `*** Update File: p` ["edited", p] (followed by `*** Move to: q`,
["moved", p, q]), `*** Delete File: p` ["deleted", p]; a `codex exec --json`
`file_change` item's `changes` (`{"path", "kind": "add"|"update"|"delete"}`) likewise.
Anything else gives no operation: a patch that names no file changed none that can be told.
A patch whose output says it did not apply (`patch_refused`: Codex's own wording) changed
nothing, whatever it names.
"""

from __future__ import annotations

from agent_journal.core import tools

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

PATCH_TOOLS = frozenset({tools.PATCH})  # kinds of tool (core/tools.py)
_HEADS = (("*** Add File: ", "created"), ("*** Update File: ", "edited"),
          ("*** Delete File: ", "deleted"))
_MOVE = "*** Move to: "
_UPDATE = "*** Update File: "
_KINDS = {"add": "created", "create": "created", "update": "edited", "modify": "edited",
          "delete": "deleted", "remove": "deleted"}
_MAX_OPS = 50
# How Codex's apply_patch reports a patch it did not apply, on the output's first line
# (after the `Exit code: / Wall time: / Output:` header a shell-run patch gets).
_REFUSED = ("apply_patch verification failed", "Failed to apply patch", "patch rejected",
            "Invalid patch")
_HEADER = ("Exit code:", "Wall time:", "Output:")


def patch_text(value: Any) -> str | None:
    """The patch an apply_patch call was given: its input when it is the patch text, or the
    text in its `input`, `patch` or `command` field."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        for name in ("input", "patch", "command"):
            field = value.get(name)
            if isinstance(field, str) and "*** " in field:
                return field
            if isinstance(field, list) and field and all(isinstance(w, str) for w in field):
                joined = field[-1]  # ["apply_patch", "<patch>"]
                if "*** " in joined:
                    return joined
    return None


def patch_file_ops(value: Any) -> list[list[str]]:
    """["created"|"edited"|"deleted", path] and ["moved", src, dst] for one patch call's
    input (see the module docstring), in the patch's order."""
    ops: list[list[str]] = []
    if isinstance(value, dict) and isinstance(value.get("changes"), list):
        for change in value["changes"]:
            if isinstance(change, dict) and isinstance(change.get("path"), str):
                state = _KINDS.get(str(change.get("kind")))
                if state and change["path"]:
                    ops.append([state, change["path"]])
        return ops[:_MAX_OPS]
    text = patch_text(value)
    if not text:
        return ops
    for line in text.splitlines():
        if line.startswith(_MOVE) and ops and ops[-1][0] == "edited":
            ops[-1] = ["moved", ops[-1][1], line[len(_MOVE):].strip()]
            continue
        for head, state in _HEADS:
            if line.startswith(head) and line[len(head):].strip():
                ops.append([state, line[len(head):].strip()])
                break
        if len(ops) >= _MAX_OPS:
            break
    return ops


def patch_lines(value: Any) -> dict[str, tuple[list[str], list[str]]]:
    """Each file a patch updates, with the lines its hunks add and those they remove
    (the `+` and `-` lines, their marks taken off), in the patch's order: what an Edit's
    new and old strings are to an Edit."""
    text = patch_text(value)
    found: dict[str, tuple[list[str], list[str]]] = {}
    if not text:
        return found
    lines: tuple[list[str], list[str]] | None = None
    for line in text.splitlines():
        if line.startswith("*** "):
            path = line[len(_UPDATE):].strip() if line.startswith(_UPDATE) else ""
            lines = found.setdefault(path, ([], [])) if path else None
            if len(found) > _MAX_OPS:
                break
        elif lines is not None and line[:1] in "+-" and len(lines[0]) + len(lines[1]) < 400:
            lines[0 if line[0] == "+" else 1].append(line[1:])
    return found


def patch_refused(output: str | None) -> str | None:
    """The line a patch call's output says the patch did not apply with, or None."""
    for line in (output or "").splitlines()[:6]:
        line = line.strip()
        if not line or line.startswith(_HEADER):
            continue
        return line if line.startswith(_REFUSED) else None
    return None
