"""Failed calls with their reason, refusals told apart, and what a later success resolved.

Invariants: a failure is `denied` (a permission denial) or `rejected` (the user's
rejection) only by Claude Code's own wording (reasons.refusal), else `error`; a Python
run that exited 0 but printed a traceback (reasons.printed_traceback) is a `traceback`
failure. A call that
failed as a benign no-op (reasons.BENIGN_NOOPS: `nothing to commit, working tree clean`)
is not a failure at all. A failure
is resolved when a later call of the same tool on the same target succeeded (for a test
or check command: when a later run of it passed, or a later passing run that
test_runs counts as one of it: a chain that ran it, or a run whose selection holds its
selection), or when a later `a && b` chain that succeeded ran it; it is open otherwise.
"""

from __future__ import annotations

import re

from agent_journal.core.recovery.calls import Call, ordered
from agent_journal.core.recovery.record import Record
from agent_journal.core.recovery.test_runs import (
    TestRunsFold,
    chain_keys,
    check_key,
    command_key,
    run_key,
)

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


Key = tuple  # (tool, target): what a later success must be to resolve a failure


class FailuresFold:
    """failures as a step-and-state fold over calls in (ts, id) order.

    A failure stepped in as `hidden` shows elsewhere while it is open (with its test run).
    With `keep` None the state is every failure. With `keep` N it is bounded by what can
    show: of the open failures of each key (and of those no success can resolve), the
    latest N hidden and the latest N not hidden, with counts of the rest (a key's
    failures are resolved all at once, so an older one can never show while a newer one
    of its key does not); of the resolved ones the latest N by their own (ts, id)."""

    __slots__ = ("open", "waiting", "stuck", "dropped", "visible_open", "resolved",
                 "resolved_total", "keep", "n")

    def __init__(self, keep: int | None = None) -> None:
        # call id -> [order, failure, hidden, key]: the open failures kept
        self.open: dict[str, list[Any]] = {}
        self.waiting: dict[Key, list[str]] = {}  # key -> its open failures kept, in order
        self.stuck: list[str] = []  # open failures no success can resolve, in order
        # key (None: stuck) -> [hidden, not hidden] open failures no longer kept
        self.dropped: dict[Key | None, list[int]] = {}
        self.visible_open = 0  # open failures not hidden, kept or not
        self.resolved: list[tuple[int, Failure]] = []  # in (ts, id) order
        self.resolved_total = 0
        self.keep = keep
        self.n = 0  # failures seen: each one's place in (ts, id) order

    def step(self, call: Call, hidden: bool = False, covered: Iterable[str] = ()
             ) -> Failure | None:
        """Fold in one call; the failure it is, if it is one. `covered` holds the run keys
        of the failing commands this passing run counts for (TestRunsFold.covered)."""
        if not call.is_tool_call or call.unfinished:
            return None
        if call.failed and call.get("noop"):
            return None  # nothing needed doing: nothing is lost, nothing is open
        if call.succeeded and call.get("traceback") and _RUNS_PYTHON.search(call.target or ""):
            # Exit 0, yet the Python it ran crashed (and printed it): a failure all the same.
            failure = Failure(call.id, call.tool, call.target, TRACEBACK,
                              call.get("traceback"), call.ts, description=call.get("desc"))
            self._add(failure, _same(call), hidden)
            return failure
        if call.failed:
            check = call.get("check") or {}
            failure = Failure(call.id, call.tool, call.target, call.get("refusal") or ERROR,
                              call.get("reason"), call.ts, call.get("exit"), call.get("words"),
                              description=call.get("desc"), summary=check.get("summary"),
                              first_failure=check.get("firstFailure"),
                              failing=list(check.get("failing") or []))
            key = _same(call)
            self._add(failure, key if key[1] is not None else None, hidden)
            return failure
        if not self.waiting:
            return None  # nothing open that a success could resolve
        run = call.check
        if run is not None and not run.ok:
            return None  # the command ran again and still fails
        keys = [_same(call)]
        if call.tool == "Bash" and call.target:
            keys.append((call.tool, check_key(command_key(call.target))))
            # A failure that printed no run summary was keyed by the command itself.
            keys.append((call.tool, run_key(command_key(call.target))))
            keys += [(call.tool, part) for part in chain_keys(call.target)]
            keys += [(call.tool, other) for other in covered]
        for same in keys:
            for call_id in self.waiting.pop(same, ()):
                order, failure, was_hidden, _ = self.open.pop(call_id)
                failure.resolved_by = call.id
                self._resolve(order, failure, was_hidden)
            hidden_n, visible_n = self.dropped.pop(same, (0, 0))
            self.resolved_total += hidden_n + visible_n
            self.visible_open -= visible_n
        return None

    def _add(self, failure: Failure, key: Key | None, hidden: bool) -> None:
        self.open[failure.call_id] = [self.n, failure, hidden, key]
        self.n += 1
        if not hidden:
            self.visible_open += 1
        group = self.stuck if key is None else self.waiting.setdefault(key, [])
        group.append(failure.call_id)
        if self.keep is not None and len(group) > self.keep:
            alike = [i for i in group if self.open[i][2] == hidden]
            if len(alike) > self.keep:
                oldest = alike[0]
                group.remove(oldest)
                del self.open[oldest]
                self.dropped.setdefault(key, [0, 0])[0 if hidden else 1] += 1

    def _resolve(self, order: int, failure: Failure, hidden: bool) -> None:
        from bisect import insort

        self.resolved_total += 1
        if not hidden:
            self.visible_open -= 1
        insort(self.resolved, (order, failure), key=lambda p: p[0])
        if self.keep is not None and len(self.resolved) > self.keep:
            del self.resolved[0]

    def open_failures(self, *, hidden: bool = True) -> list[Failure]:
        """The open failures kept (without the hidden ones unless `hidden`), in (ts, id)
        order; visible_open counts those not hidden, kept or not."""
        kept = sorted(self.open.values(), key=lambda p: p[0])
        return [p[1] for p in kept if hidden or not p[2]]

    def resolved_failures(self) -> list[Failure]:
        """The resolved failures kept, in (ts, id) order (resolved_total counts them all)."""
        return [f for _, f in self.resolved]

    def packed(self) -> list[Any]:
        return [[[n, list(f.fields()), hidden, None if key is None else list(key)]
                 for n, f, hidden, key in self.open.values()],
                [[list(k), ids] for k, ids in self.waiting.items()], self.stuck,
                [[None if k is None else list(k), v] for k, v in self.dropped.items()],
                self.visible_open, [[n, list(f.fields())] for n, f in self.resolved],
                self.resolved_total, self.keep, self.n]

    @classmethod
    def unpacked(cls, packed: list[Any]) -> FailuresFold:
        opened, waiting, stuck, dropped, visible, resolved, total, keep, n = packed
        fold = cls(keep)
        fold.open = {f[0]: [i, Failure(*f), hidden, None if key is None else tuple(key)]
                     for i, f, hidden, key in opened}
        fold.waiting = {tuple(k): list(ids) for k, ids in waiting}
        fold.stuck = list(stuck)
        fold.dropped = {None if k is None else tuple(k): list(v) for k, v in dropped}
        fold.visible_open = visible
        fold.resolved = [(i, Failure(*f)) for i, f in resolved]
        fold.resolved_total, fold.n = total, n
        return fold


def failures(calls: Iterable[Call]) -> list[Failure]:
    """Every failed tool call, in (ts, id) order, each marked resolved or open."""
    fold = FailuresFold()
    runs = TestRunsFold(keep_ids=False)  # which passing runs count for other commands
    for call in ordered(calls):
        runs.step(call)
        fold.step(call, covered=runs.covered)
    found = [(p[0], p[1]) for p in fold.open.values()] + fold.resolved
    return [f for _, f in sorted(found, key=lambda p: p[0])]
