"""Commits, pushes and the branch, as git's output in the journal reports them.

Invariants: a commit is listed only when git printed it being made (git_output), with its
hash as git printed it; for a merge (`git merge -m MSG`, whose output names no hash), when
a later `git log` listed a commit with exactly that message; a `git commit -m MSG` that
succeeded with no commit in its output (a wrapper hid it) is listed with its message and no
hash; a git operation (rebase, reset, submodule add, stash,
...: git_operations) only when the call that ran it succeeded; a push
(or a push's rejection) only when git printed the ref update (or ` ! [rejected]`); the
branch is the latest one git or the agent's context named; order of unrelated calls
does not matter (everything is read in (ts, id) order).
"""

from __future__ import annotations

import re

from agent_journal.core import tools
from agent_journal.core.recovery.calls import Call, ordered
from agent_journal.core.recovery.record import Record
from agent_journal.core.recovery.test_runs import command_key

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any


class Commit(Record):
    __slots__ = ("hash", "subject", "branch", "call_id", "ts", "agent")
    DEFAULTS = {"agent": None}
    hash: str
    subject: str
    branch: str
    call_id: str
    ts: str
    agent: str | None


class Push(Record):
    __slots__ = ("remote", "source", "destination", "call_id", "ts")
    remote: str
    source: str
    destination: str
    call_id: str
    ts: str


class Rejected(Record):
    """A ref a push had refused, with git's reason (`non-fast-forward`, `fetch first`)."""

    __slots__ = ("remote", "source", "destination", "why", "call_id", "ts")
    remote: str
    source: str
    destination: str
    why: str
    call_id: str
    ts: str


class GitState(Record):
    __slots__ = ("commits", "pushes", "branch", "branches", "log", "log_call", "rejected",
                 "operations")
    DEFAULTS = {
        "commits": list, "pushes": list, "branch": None, "branches": list, "log": list,
        "log_call": None, "rejected": list, "operations": list
    }
    commits: list[Commit]
    pushes: list[Push]
    branch: str | None
    branches: list[str]
    log: list[tuple[str, str]]
    log_call: str | None
    rejected: list[Rejected]
    operations: list[tuple[str, str, str]]  # (git command, call id, ts) that changed the repo


def merge_message(command: str) -> str | None:
    """The message a `git merge ... -m MSG` command gives its merge commit, or None."""
    if "git merge" not in command:
        return None
    return _message(command)


# `git commit -m "$(cat <<'EOF'` then the message's lines, then `EOF`: how Claude Code
# writes a commit message.
# (The command a call keeps may be cut before the closing line: the first line is enough.)
_HEREDOC = re.compile(r"git commit\b[^\n]*?-m\s+\"\$\(cat\s+<<-?\s*'?\w+'?\s*\n\s*([^\n]+)")


def commit_message(command: str) -> str | None:
    """The first line of the message a `git commit -m MSG` (maybe after `git add ...
    &&`), or a `-m "$(cat <<'EOF' ... EOF)"` heredoc, gives its commit, or None (no
    message, a substitution of anything else)."""
    if not re.search(r"(?:^|&& |rtk )git commit\b", command):
        return None
    heredoc = _HEREDOC.search(command)
    if heredoc is not None:
        return heredoc.group(1).strip().rstrip("…").strip() or None
    if "$(" in command:
        return None
    message = _message(command.split("git commit", 1)[1])
    return message.splitlines()[0].strip() if message else None


def _message(command: str) -> str | None:
    import shlex

    try:
        words = shlex.split(command, posix=True)
    except ValueError:
        return None
    for i, word in enumerate(words[:-1]):
        if word in ("-m", "--message"):
            return words[i + 1].strip() or None
    return None


# git commands that change a repository's shape other than by committing or pushing.
_GIT_OPERATION = re.compile(
    r"^git (?:-C \S+ )?(?:submodule (?:add|deinit|set-url)|rebase|reset|revert|cherry-pick|"
    r"stash(?:$| (?:push|pop|apply|drop|save)\b)|tag (?!-l\b|--list\b|-n\b)|"
    r"remote (?:add|set-url|remove)|"
    r"checkout -[bB]|checkout (?:[^-\s]\S* )?-- |switch -[cC]|branch -[dDmM]|merge |"
    r"worktree (?:add|remove)|mv |rm |restore |clean )")


_MERGE = re.compile(r"^git (?:-C \S+ )?merge ")
_BRANCH_DELETE = re.compile(r"^git (?:-C \S+ )?branch -[dD] ")
DELETED_BRANCHES = "deleted branches: "  # an operation told by git's output, not a command


def git_operations(command: str) -> list[str]:
    """The parts of a shell command that are git operations (_GIT_OPERATION), verbatim
    but for output plumbing (`2>&1`, a pipe into tail)."""
    if "git " not in command:
        return []
    # An abort puts back what was there before: it changes nothing worth a line.
    return [command_key(part) for part in re.split(r"&&|;|\|\||\n", command)
            if _GIT_OPERATION.match(part.strip()) and not _ABORT.search(part)]


_ABORT = re.compile(r" --(?:abort|quit)\b")


class GitFold:
    """commits as a step-and-state fold over calls in (ts, id) order. The state: the
    branch, the hashes already listed, the merges still waiting for a `git log` to name
    their commit, the latest `keep` (None: all) commits, pushes, rejections and
    operations with a count of each, and the latest listing."""

    __slots__ = ("state", "seen", "merges", "keep", "counts", "named")

    def __init__(self, keep: int | None = None) -> None:
        self.state = GitState()
        self.seen: set[str] = set()
        self.merges: dict[str, Call] = {}  # a merge's message -> the call that made it
        self.keep = keep
        self.counts = [0, 0, 0]  # commits, pushes, rejections
        self.named: list[str] = []  # earlier merges the last step's listing named

    def step(self, call: Call) -> bool:
        """Fold in one call; whether it made a commit or a push that is listed (`named`:
        the earlier calls whose merge commit its listing named)."""
        state = self.state
        self.named = []
        branch = call.get("branch")
        if isinstance(branch, str):
            state.branch = branch
        if not call.is_tool_call:
            return False
        committed = False
        seen = self.seen
        for hash_, subject, on in call.get("commits") or ():
            if hash_[:7] in seen:
                continue
            seen.add(hash_[:7])
            self._add(0, state.commits,
                      Commit(hash_, subject, on, call.id, call.ts, call.get("agent")))
            state.branch = on
            committed = True
        shell = tools.kind_of(call.tool) == tools.SHELL
        if not committed and call.succeeded and shell and call.target:
            subject = commit_message(call.target)
            if subject:
                # It succeeded, but its output (hidden by a wrapper, or cut) named no hash.
                self._add(0, state.commits, Commit("", subject, state.branch or "", call.id,
                                                   call.ts, call.get("agent")))
                committed = True
        listed = committed
        for remote, source, destination in call.get("pushes") or ():
            self._add(1, state.pushes, Push(remote, source, destination, call.id, call.ts))
            listed = True
        for remote, source, destination, why in call.get("pushRejected") or ():
            self._add(2, state.rejected,
                      Rejected(remote, source, destination, why, call.id, call.ts))
        gone = call.get("branchesDeleted")
        if gone:
            # Named as git's output names them: a loop's `git branch -D "$b"` does not.
            said = ", ".join(f"{name} (was {hash_})" for name, hash_ in gone)
            state.operations.append((f"{DELETED_BRANCHES}{said}", call.id, call.ts))
        if call.succeeded and shell and call.target:
            for operation in git_operations(call.target):
                # A merge that made a listed commit is told by that commit.
                if not (committed and _MERGE.match(operation)) and not (
                        gone and _BRANCH_DELETE.match(operation)):
                    state.operations.append((operation, call.id, call.ts))
        switched = call.get("switched")
        if isinstance(switched, str):
            state.branch = switched
        if call.get("merged") and call.succeeded:
            subject = merge_message(call.target or "")
            if subject:
                self.merges[subject] = call
        if call.get("log") and "git log" in (call.target or ""):
            state.log = [tuple(x) for x in call.get("log")]  # type: ignore[misc]
            state.log_call = call.id
            for hash_, subject in state.log:
                made = self.merges.pop(subject, None)
                if made is not None and hash_[:7] not in seen:
                    # A merge's output names no hash: the first listing after it does.
                    seen.add(hash_[:7])
                    self._add(0, state.commits,
                              Commit(hash_, subject, made.get("branch") or state.branch
                                     or "", made.id, made.ts, made.get("agent")))
                    state.operations = [op for op in state.operations
                                        if not (op[1] == made.id and _MERGE.match(op[0]))]
                    if made.id == call.id:
                        listed = True
                    else:
                        self.named.append(made.id)
        self._trim_operations()
        return listed

    def _add(self, which: int, items: list[Any], item: Any) -> None:
        self.counts[which] += 1
        items.append(item)
        if self.keep is not None and len(items) > self.keep:
            del items[0]

    def _trim_operations(self) -> None:
        """Keep the latest `keep` operations that are settled, and every merge whose
        commit a later listing may still name (it would then leave the list)."""
        ops = self.state.operations
        if self.keep is None or len(ops) <= self.keep:
            return
        waiting = {c.id for c in self.merges.values()}
        settled = 0
        kept: list[tuple[str, str, str]] = []
        for op in reversed(ops):
            if op[1] in waiting and _MERGE.match(op[0]):
                kept.append(op)
            elif settled < self.keep:
                settled += 1
                kept.append(op)
        kept.reverse()
        self.state.operations = kept

    def result(self) -> GitState:
        state = self.state
        names: list[str] = []
        for commit in state.commits:
            if commit.branch not in names:
                names.append(commit.branch)
        state.branches = names
        return state

    def packed(self) -> list[Any]:
        st = self.state
        return [st.branch, sorted(self.seen),
                [[k, list(c.fields())] for k, c in self.merges.items()],
                [list(c.fields()) for c in st.commits], [list(p.fields()) for p in st.pushes],
                [list(r.fields()) for r in st.rejected], [list(o) for o in st.operations],
                [list(x) for x in st.log], st.log_call, self.keep, self.counts]

    @classmethod
    def unpacked(cls, packed: list[Any]) -> GitFold:
        (branch, seen, merges, commits_, pushes, rejected, operations, log, log_call, keep,
         counts) = packed
        fold = cls(keep)
        fold.seen = set(seen)
        fold.merges = {k: Call(*c) for k, c in merges}
        fold.state = GitState(
            [Commit(*c) for c in commits_], [Push(*p) for p in pushes], branch, [],
            [tuple(x) for x in log], log_call, [Rejected(*r) for r in rejected],
            [tuple(o) for o in operations])
        fold.counts = list(counts)
        return fold


def commits(calls: Iterable[Call]) -> GitState:
    fold = GitFold()
    for call in ordered(calls):
        fold.step(call)
    return fold.result()
