"""Commits, pushes and the branch, as git's output in the journal reports them.

Invariants: a commit is listed only when git printed it being made (git_output); the
branch is the latest one git or the agent's context named; order of unrelated calls
does not matter (everything is read in (ts, id) order).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agent_journal.core.recovery.calls import Call, ordered

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable


@dataclass
class Commit:
    hash: str
    subject: str
    branch: str
    call_id: str
    ts: str
    agent: str | None = None


@dataclass
class Push:
    remote: str
    source: str
    destination: str
    call_id: str
    ts: str


@dataclass
class GitState:
    commits: list[Commit] = field(default_factory=list)
    pushes: list[Push] = field(default_factory=list)
    branch: str | None = None
    branches: list[str] = field(default_factory=list)
    log: list[tuple[str, str]] = field(default_factory=list)
    log_call: str | None = None


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
