"""Files created, edited, moved and deleted, with the latest state of each; and the files
only read.

Invariants: only calls that succeeded count. Write is `created` or `updated` as the tool's
response says (`written` when it does not say); Edit, MultiEdit and NotebookEdit are
`edited`; a patch (Codex's apply_patch) changes what patches.patch_file_ops reads off it;
a shell call counts only in the plain forms shell_words.shell_file_ops reads (`reverted` for a
`git checkout -- path` or `git restore path`: its uncommitted changes are gone, and when
the path is a folder so are those of the files under it this span edited or updated), or
through `git rm`'s own output and, for a call that ran `git clean`, its output. A file's
state is its latest change; a file created in the journal's span stays `created` through
later edits (it is new work); its `last_change` is the latest change's first added and
removed line when that change was an edit or a patch's update of it (none after a change
that does not say, a shell's), and `defines` the latest MAX_DEFINES names its
changes defined (symbols.py; a patch's names count only when it changed that one file).
The packages successful calls installed (dependencies.py) are kept apart, the latest
MAX_INSTALLED by their latest install.
A file is "only read" when a successful Read
(or a plain shell read, facts `reads`) named it and no successful call changed it.
"""

from __future__ import annotations

import re

from agent_journal.core import tools
from agent_journal.core.recovery.calls import Call, ordered
from agent_journal.core.recovery.record import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

CREATED, UPDATED, WRITTEN, EDITED = "created", "updated", "written", "edited"
_GIT_CLEAN = re.compile(r"\bgit clean\b")
READERS = frozenset({tools.READ})  # kinds of tool (core/tools.py)
DELETED, MOVED, REVERTED = "deleted", "moved", "reverted"
MAX_DEFINES = 8  # names kept per file
MAX_INSTALLED = 20  # packages kept (dependencies.py), the latest installed last


class FileState(Record):
    __slots__ = ("path", "state", "changes", "last_ts", "call_ids", "moved_to", "last_change",
                 "defines", "removes")
    DEFAULTS = {"call_ids": list, "moved_to": None, "last_change": None, "defines": list,
                "removes": list}
    path: str
    state: str
    changes: int
    last_ts: str
    call_ids: list[str]
    moved_to: str | None
    last_change: list[str | None] | None  # the latest edit's [added, removed] line
    defines: list[str]  # names its changes defined (symbols.py), the latest last
    removes: list[str]  # names its changes took out and none defined again, the latest last


class FilesFold:
    """files_touched as a step-and-state fold over calls in (ts, id) order: one state per
    distinct file changed (with `keep_ids`, every call id that changed it too)."""

    __slots__ = ("files", "keep_ids", "installed")

    def __init__(self, keep_ids: bool = True) -> None:
        self.files: dict[str, FileState] = {}
        self.keep_ids = keep_ids
        # package (as its manager printed it) -> when it was last installed, the latest last
        self.installed: dict[str, str] = {}

    def _touch(self, path: str, state: str, call: Call) -> None:
        entry = self.files.get(path)
        if entry is None:
            self.files[path] = FileState(path, state, 1, call.ts,
                                         [call.id] if self.keep_ids else [])
            return
        entry.changes += 1
        entry.last_ts = call.ts
        entry.last_change = None
        if self.keep_ids:
            entry.call_ids.append(call.id)
        if entry.state == CREATED and state in (EDITED, UPDATED, WRITTEN):
            return
        entry.state = state
        if state != MOVED:
            entry.moved_to = None

    def _defines(self, call: Call, names: list[str], gone: list[str]) -> None:
        """Names a change defined and names it took out, kept on the file it changed (a
        patch of one file): a name defined again is no longer taken out, and the reverse."""
        paths = [call.target] if tools.kind_of(call.tool) in (tools.WRITE, tools.EDIT) else \
            list(dict.fromkeys(op[-1] for op in call.get("fileOps") or ()))
        if len(paths) != 1 or paths[0] not in self.files:
            return
        entry = self.files[paths[0]]
        for kept, other, changed in ((entry.defines, entry.removes, names),
                                     (entry.removes, entry.defines, gone)):
            for name in changed:
                if name in kept:
                    kept.remove(name)
                if name in other:
                    other.remove(name)
                kept.append(name)
            del kept[:-MAX_DEFINES]

    def _revert(self, path: str, call: Call) -> None:
        """`git checkout -- path` / `git restore path` puts the path back; when it names a
        folder, every file under it that this span edited or updated is put back too
        (a file it created or wrote may be untracked, which git leaves alone; a file it
        deleted or moved stays as it is)."""
        self._touch(path, REVERTED, call)
        folder = path.rstrip("/") + "/"
        for other in [p for p, f in self.files.items() if p.startswith(folder)
                      and f.state in (EDITED, UPDATED)]:
            self._touch(other, REVERTED, call)

    def step(self, call: Call) -> None:
        if not call.succeeded:
            return
        files, touch = self.files, self._touch
        tool, target = tools.kind_of(call.tool), call.target
        if tool == tools.WRITE and target:
            touch(target, call.get("write") or WRITTEN, call)
        elif tool in (tools.EDIT, tools.NOTEBOOK_EDIT) and target:
            touch(target, EDITED, call)
            files[target].last_change = call.get("change")
        names, gone = call.get("defines"), call.get("undefines")
        if names or gone:
            self._defines(call, names or [], gone or [])
        for package in call.get("installs") or ():
            self.installed.pop(package, None)
            self.installed[package] = call.ts
            if len(self.installed) > MAX_INSTALLED:
                del self.installed[next(iter(self.installed))]
        for op in call.get("fileOps") or ():
            if op[0] == REVERTED and len(op) == 2:
                self._revert(op[1], call)
            elif op[0] in (DELETED, CREATED, EDITED) and len(op) == 2:
                touch(op[1], op[0], call)
                if op[0] == EDITED:  # (a patch says what it changed; a shell edit not)
                    files[op[1]].last_change = (call.get("changes") or {}).get(op[1])
            elif op[0] == MOVED and len(op) == 3:
                touch(op[1], MOVED, call)
                files[op[1]].moved_to = op[2]
                touch(op[2], CREATED if op[2] not in files else UPDATED, call)
        removed = call.get("removed") or []
        if target and _GIT_CLEAN.search(target):
            removed = [*removed, *(call.get("cleaned") or ())]
        for path in removed:
            if files.get(path) is None or files[path].state != DELETED:
                touch(path, DELETED, call)

    def result(self) -> list[FileState]:
        return sorted(self.files.values(), key=lambda f: (f.last_ts, f.path))

    def packed(self) -> list[Any]:
        return [[list(f.fields()) for f in self.files.values()], self.installed]

    @classmethod
    def unpacked(cls, packed: list[Any]) -> FilesFold:
        files, installed = packed
        fold = cls(keep_ids=False)
        fold.files = {f[0]: FileState(*f) for f in files}
        fold.installed = dict(installed)
        return fold


def files_touched(calls: Iterable[Call]) -> list[FileState]:
    """Every file a successful call changed, in order of its latest change."""
    fold = FilesFold()
    for call in ordered(calls):
        fold.step(call)
    return fold.result()


class FileRead(Record):
    __slots__ = ("path", "reads", "last_ts")
    path: str
    reads: int
    last_ts: str


class ReadsFold:
    """The files read, as a step-and-state fold over calls in (ts, id) order: one state
    per distinct file read; `result` leaves out the files changed."""

    __slots__ = ("read",)

    def __init__(self) -> None:
        self.read: dict[str, FileRead] = {}

    def step(self, call: Call) -> None:
        if not call.succeeded:
            return
        paths = [call.target] if tools.kind_of(call.tool) in READERS and call.target else []
        paths += call.get("reads") or []
        read = self.read
        for path in paths:
            entry = read.get(path)
            if entry is None:
                read[path] = FileRead(path, 1, call.ts)
            else:
                entry.reads += 1
                entry.last_ts = call.ts

    def result(self, changed: set[str] | dict[str, Any]) -> list[FileRead]:
        return sorted((f for f in self.read.values() if f.path not in changed),
                      key=lambda f: (f.last_ts, f.path))

    def packed(self) -> list[Any]:
        return [list(f.fields()) for f in self.read.values()]

    @classmethod
    def unpacked(cls, packed: list[Any]) -> ReadsFold:
        fold = cls()
        fold.read = {f[0]: FileRead(*f) for f in packed}
        return fold


def files_read(calls: Iterable[Call], touched: Iterable[FileState] | None = None
               ) -> list[FileRead]:
    """Every file read and never changed by a successful call, in order of its last read.
    `touched`: files_touched of the same calls, when the caller has it already."""
    calls = ordered(calls)
    changed = {f.path for f in (files_touched(calls) if touched is None else touched)}
    fold = ReadsFold()
    for call in calls:
        fold.step(call)
    return fold.result(changed)
