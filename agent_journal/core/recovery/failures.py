"""Failed calls with their reason, refusals told apart, and what a later success resolved.

Invariants: a failure is `denied` (a permission denial) or `rejected` (the user's
rejection) only by Claude Code's own wording (reasons.refusal), else `error`; a Python
run that exited 0 but printed a traceback (reasons.printed_traceback) is a `traceback`
failure. A call that
failed as a benign no-op (reasons.BENIGN_NOOPS: `nothing to commit, working tree clean`)
is not a failure at all. A failure
is resolved when a later call of the same tool on the same target succeeded (for a test
or check command: when a later run of it passed), or when a later `a && b` chain that
succeeded ran it; it is open otherwise.
"""

from __future__ import annotations

import re

from agent_journal.core.recovery.calls import Call, ordered
from agent_journal.core.recovery.record import Record
from agent_journal.core.recovery.test_runs import chain_keys, check_key, command_key, run_key

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

ERROR = "error"
TRACEBACK = "traceback"
_RUNS_PYTHON = re.compile(r"\bpython[\d.]*\b|\b(?:uv|poetry|pipenv|pdm|hatch) run\b")


class Failure(Record):
    __slots__ = (
        "call_id", "tool", "target", "kind", "reason", "ts", "exit_code", "words",
        "resolved_by", "description", "summary", "first_failure", "failing"
    )
    DEFAULTS = {"exit_code": None, "words": None, "resolved_by": None, "description": None,
                "summary": None, "first_failure": None, "failing": list}
    call_id: str
    tool: str | None
    target: str | None
    kind: str
    reason: str | None
    ts: str
    exit_code: int | None
    words: str | None
    resolved_by: str | None
    description: str | None
    summary: str | None  # a failing test or check run's own summary line(s)
    first_failure: str | None  # and the first failure line it printed
    failing: list[str]  # and the tests or codes it names as failing

    @property
    def resolved(self) -> bool:
        return self.resolved_by is not None


def _same(call: Call) -> tuple[str | None, str | None]:
    target = call.target
    if call.tool == "Bash" and target:
        # A test or check run is the same run whatever its options (check_key).
        key = run_key if call.get("check") is None else check_key
        target = key(command_key(target))
    return (call.tool, target)


class FailuresFold:
    """failures as a step-and-state fold over calls in (ts, id) order. The state is every
    failure still open, and of the resolved ones the latest `keep_resolved` (None: all)
    by their own (ts, id), with a count of the rest."""

    __slots__ = ("open", "waiting", "resolved", "resolved_total", "keep_resolved", "n")

    def __init__(self, keep_resolved: int | None = None) -> None:
        self.open: dict[str, tuple[int, Failure]] = {}  # call id -> (order, failure)
        # (tool, target) -> the open failures a later success of it resolves
        self.waiting: dict[tuple[str | None, str | None], list[Failure]] = {}
        self.resolved: list[tuple[int, Failure]] = []  # in (ts, id) order
        self.resolved_total = 0
        self.keep_resolved = keep_resolved
        self.n = 0  # failures seen: each one's place in (ts, id) order

    def step(self, call: Call) -> Failure | None:
        """Fold in one call; the failure it is, if it is one."""
        if not call.is_tool_call or call.unfinished:
            return None
        if call.failed and call.get("noop"):
            return None  # nothing needed doing: nothing is lost, nothing is open
        if call.succeeded and call.get("traceback") and _RUNS_PYTHON.search(call.target or ""):
            # Exit 0, yet the Python it ran crashed (and printed it): a failure all the same.
            failure = Failure(call.id, call.tool, call.target, TRACEBACK,
                              call.get("traceback"), call.ts, description=call.get("desc"))
            self._add(failure, _same(call))
            return failure
        if call.failed:
            check = call.get("check") or {}
            failure = Failure(call.id, call.tool, call.target, call.get("refusal") or ERROR,
                              call.get("reason"), call.ts, call.get("exit"), call.get("words"),
                              description=call.get("desc"), summary=check.get("summary"),
                              first_failure=check.get("firstFailure"),
                              failing=list(check.get("failing") or []))
            key = _same(call)
            self._add(failure, key if key[1] is not None else None)
            return failure
        if not self.waiting:
            return None  # nothing open that a success could resolve
        run = call.check
        if run is not None and not run.ok:
            return None  # the command ran again and still fails
        keys = [_same(call)]
        if call.tool == "Bash" and call.target:
            keys.append((call.tool, check_key(command_key(call.target))))
            keys += [(call.tool, part) for part in chain_keys(call.target)]
        for same in keys:
            for failure in self.waiting.pop(same, ()):
                failure.resolved_by = call.id
                self._resolve(self.open.pop(failure.call_id))
        return None

    def _add(self, failure: Failure, key: tuple[str | None, str | None] | None) -> None:
        self.open[failure.call_id] = (self.n, failure)
        self.n += 1
        if key is not None:
            self.waiting.setdefault(key, []).append(failure)

    def _resolve(self, placed: tuple[int, Failure]) -> None:
        from bisect import insort

        self.resolved_total += 1
        insort(self.resolved, placed, key=lambda p: p[0])
        if self.keep_resolved is not None and len(self.resolved) > self.keep_resolved:
            del self.resolved[0]

    def open_failures(self) -> list[Failure]:
        """The open failures, in (ts, id) order."""
        return [f for _, f in sorted(self.open.values(), key=lambda p: p[0])]

    def resolved_failures(self) -> list[Failure]:
        """The resolved failures kept, in (ts, id) order (resolved_total counts them all)."""
        return [f for _, f in self.resolved]

    def packed(self) -> list[Any]:
        waiting = [[list(k), [f.call_id for f in fs]] for k, fs in self.waiting.items()]
        return [[[n, list(f.fields())] for n, f in self.open.values()], waiting,
                [[n, list(f.fields())] for n, f in self.resolved], self.resolved_total,
                self.keep_resolved, self.n]

    @classmethod
    def unpacked(cls, packed: list[Any]) -> FailuresFold:
        opened, waiting, resolved, total, keep, n = packed
        fold = cls(keep)
        fold.open = {f[0]: (i, Failure(*f)) for i, f in opened}
        fold.waiting = {(k[0], k[1]): [fold.open[c][1] for c in ids] for k, ids in waiting}
        fold.resolved = [(i, Failure(*f)) for i, f in resolved]
        fold.resolved_total, fold.n = total, n
        return fold


def failures(calls: Iterable[Call]) -> list[Failure]:
    """Every failed tool call, in (ts, id) order, each marked resolved or open."""
    fold = FailuresFold()
    for call in ordered(calls):
        fold.step(call)
    return [f for _, f in sorted([*fold.open.values(), *fold.resolved], key=lambda p: p[0])]
