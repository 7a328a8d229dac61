"""Test and check runs: the latest result per command, and which failures were fixed.

Invariants: a run is a shell call whose output holds a runner's summary
(checks.parse_run). Runs of the same command (`command_key`) are one history: its latest
run is its state, and a failing run followed by a passing one counts as fixed. Unrelated
calls, and the order they were read in, change nothing.
"""

from __future__ import annotations

import re

from agent_journal.core.recovery.calls import Call, ordered
from agent_journal.core.recovery.record import Record
from agent_journal.core.recovery.run_summary import RunSummary

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

# Output plumbing that does not change what ran: `2>&1`, and a pipe into a pager-like tail.
_PLUMBING = re.compile(r"\s+2>&1|\s*\|\s*(?:tail|head|less|more|cat)\b[^|]*$")


def command_key(command: str) -> str:
    """The command with output plumbing removed and blanks collapsed."""
    previous = None
    while previous != command:
        previous = command
        command = _PLUMBING.sub("", command)
    return " ".join(command.split())


class TestRun(Record):
    """The history of one command that ran tests or a checker."""

    __slots__ = ("command", "latest", "call_id", "ts", "runs", "failed_runs", "fixed", "call_ids")
    DEFAULTS = {"call_ids": list}

    command: str
    latest: RunSummary
    call_id: str
    ts: str
    runs: int
    failed_runs: int
    fixed: bool
    call_ids: list[str]

    @property
    def passing(self) -> bool:
        return self.latest.ok


def test_runs(calls: Iterable[Call]) -> list[TestRun]:
    """Every command that ran tests or a checker, in order of its latest run."""
    history: dict[str, TestRun] = {}
    for call in ordered(calls):
        run = call.check
        if run is None or not call.is_tool_call:
            continue
        command = command_key(call.target or call.tool or "")
        seen = history.get(command)
        if seen is None:
            history[command] = TestRun(command, run, call.id, call.ts, 1, 0 if run.ok else 1,
                                       False, [call.id])
            continue
        seen.runs += 1
        seen.call_ids.append(call.id)
        if not run.ok:
            seen.failed_runs += 1
        seen.fixed = run.ok and (seen.fixed or not seen.latest.ok or seen.failed_runs > 0)
        seen.latest, seen.call_id, seen.ts = run, call.id, call.ts
    return sorted(history.values(), key=lambda r: (r.ts, r.call_id))
