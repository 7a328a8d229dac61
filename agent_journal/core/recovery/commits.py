"""Commits, pushes and the branch, as git's output in the journal reports them.

Invariants: a commit is listed only when git printed it being made (git_output), a push
(or a push's rejection) only when git printed the ref update (or ` ! [rejected]`); the
branch is the latest one git or the agent's context named; order of unrelated calls
does not matter (everything is read in (ts, id) order).
"""

from __future__ import annotations

from agent_journal.core.recovery.calls import Call, ordered
from agent_journal.core.recovery.record import Record

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
    __slots__ = ("commits", "pushes", "branch", "branches", "log", "log_call", "rejected")
    DEFAULTS = {
        "commits": list, "pushes": list, "branch": None, "branches": list, "log": list,
        "log_call": None, "rejected": list
    }
    commits: list[Commit]
    pushes: list[Push]
    branch: str | None
    branches: list[str]
    log: list[tuple[str, str]]
    log_call: str | None
    rejected: list[Rejected]


def commits(calls: Iterable[Call]) -> GitState:
    state = GitState()
    seen: set[str] = set()
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
        switched = call.get("switched")
        if isinstance(switched, str):
            state.branch = switched
        if call.get("log"):
            state.log = [tuple(x) for x in call.get("log")]  # type: ignore[misc]
            state.log_call = call.id
    names: list[str] = []
    for commit in state.commits:
        if commit.branch not in names:
            names.append(commit.branch)
    state.branches = names
    return state
