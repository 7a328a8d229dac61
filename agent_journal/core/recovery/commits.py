"""Commits, pushes and the branch, as git's output in the journal reports them.

Invariants: a commit is listed only when git printed it being made (git_output), or, for
a merge (`git merge -m MSG`, whose output names no hash), when a later `git log` listed a
commit with exactly that message; a git operation (rebase, reset, submodule add, stash,
...: git_operations) only when the call that ran it succeeded; a push
(or a push's rejection) only when git printed the ref update (or ` ! [rejected]`); the
branch is the latest one git or the agent's context named; order of unrelated calls
does not matter (everything is read in (ts, id) order).
"""

from __future__ import annotations

import re

from agent_journal.core.recovery.calls import Call, ordered
from agent_journal.core.recovery.record import Record
from agent_journal.core.recovery.test_runs import command_key

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable


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
    r"checkout -[bB]|switch -[cC]|branch -[dDmM]|merge |worktree (?:add|remove)|mv |rm |"
    r"restore |clean )")


_MERGE = re.compile(r"^git (?:-C \S+ )?merge ")


def git_operations(command: str) -> list[str]:
    """The parts of a shell command that are git operations (_GIT_OPERATION), verbatim
    but for output plumbing (`2>&1`, a pipe into tail)."""
    if "git " not in command:
        return []
    return [command_key(part) for part in re.split(r"&&|;|\|\|", command)
            if _GIT_OPERATION.match(part.strip())]


def commits(calls: Iterable[Call]) -> GitState:
    state = GitState()
    seen: set[str] = set()
    merges: dict[str, Call] = {}  # a merge's message -> the call that made it
    for call in ordered(calls):
        branch = call.get("branch")
        if isinstance(branch, str):
            state.branch = branch
        if not call.is_tool_call:
            continue
        for hash_, subject, on in call.get("commits") or ():
            if hash_ in seen:
                continue
            seen.add(hash_)
            state.commits.append(Commit(hash_, subject, on, call.id, call.ts, call.get("agent")))
            state.branch = on
        for remote, source, destination in call.get("pushes") or ():
            state.pushes.append(Push(remote, source, destination, call.id, call.ts))
        for remote, source, destination, why in call.get("pushRejected") or ():
            state.rejected.append(Rejected(remote, source, destination, why, call.id, call.ts))
        if call.succeeded and call.tool == "Bash" and call.target:
            for operation in git_operations(call.target):
                state.operations.append((operation, call.id, call.ts))
        switched = call.get("switched")
        if isinstance(switched, str):
            state.branch = switched
        if call.get("merged") and call.succeeded:
            subject = merge_message(call.target or "")
            if subject:
                merges[subject] = call
        if call.get("log") and "git log" in (call.target or ""):
            state.log = [tuple(x) for x in call.get("log")]  # type: ignore[misc]
            state.log_call = call.id
            for hash_, subject in state.log:
                made = merges.pop(subject, None)
                if made is not None and hash_ not in seen:
                    # A merge's output names no hash: the first listing after it does.
                    seen.add(hash_)
                    state.commits.append(Commit(hash_, subject, made.get("branch") or
                                                state.branch or "", made.id, made.ts,
                                                made.get("agent")))
    # A merge that made a listed commit is told by that commit.
    by_commit = {c.call_id for c in state.commits}
    state.operations = [op for op in state.operations
                        if not (op[1] in by_commit and _MERGE.match(op[0]))]
    names: list[str] = []
    for commit in state.commits:
        if commit.branch not in names:
            names.append(commit.branch)
    state.branches = names
    return state
