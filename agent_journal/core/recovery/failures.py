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


def failures(calls: Iterable[Call]) -> list[Failure]:
    """Every failed tool call, in (ts, id) order, each marked resolved or open."""
    found: list[Failure] = []
    waiting: dict[tuple[str | None, str | None], list[Failure]] = {}
    for call in ordered(calls):
        if not call.is_tool_call or call.unfinished:
            continue
        key = _same(call)
        if call.failed and call.get("noop"):
            continue  # nothing needed doing: nothing is lost, nothing is open
        if call.succeeded and call.get("traceback") and _RUNS_PYTHON.search(call.target or ""):
            # Exit 0, yet the Python it ran crashed (and printed it): a failure all the same.
            failure = Failure(call.id, call.tool, call.target, TRACEBACK,
                              call.get("traceback"), call.ts, description=call.get("desc"))
            found.append(failure)
            waiting.setdefault(key, []).append(failure)
            continue
        if call.failed:
            failure = Failure(call.id, call.tool, call.target, call.get("refusal") or ERROR,
                              call.get("reason"), call.ts, call.get("exit"), call.get("words"),
                              description=call.get("desc"),
                              summary=(call.get("check") or {}).get("summary"),
                              first_failure=(call.get("check") or {}).get("firstFailure"),
                              failing=list((call.get("check") or {}).get("failing") or []))
            found.append(failure)
            if key[1] is not None:
                waiting.setdefault(key, []).append(failure)
        else:
            run = call.check
            if run is not None and not run.ok:
                continue  # the command ran again and still fails
            keys = [key]
            if call.tool == "Bash" and call.target:
                keys.append((call.tool, check_key(command_key(call.target))))
                keys += [(call.tool, part) for part in chain_keys(call.target)]
            for same in keys:
                for failure in waiting.pop(same, ()):
                    failure.resolved_by = call.id
    return found
