"""Calls per tool, failures per command, time per session: the `stats` read, as a fold.

Invariants: `StatsFold` is a projection's pure fold (storage/projection.py): its state is
one record per tool-call observation id, as that id's latest event (by time, then event
id) left it ([tool, status, command head, session, first time, last time]), and the ids
tombstones name. `combine` merges the states of every segment (one call's events may lie
in several: the later event wins, as observation_fold's latest_wins has it), leaves out
every tombstoned call, and counts; a call failed when its status is `error`. No I/O.
"""

from __future__ import annotations

from agent_journal.core import tools
from agent_journal.core.model import OBSERVATION, TOMBSTONE

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from agent_journal.core.model import Event

FAILED = "error"
_SHELLS = frozenset({tools.SHELL, tools.OTHER_SHELL})  # kinds of tool (core/tools.py)


class StatsFold:
    """The fold a projection keeps per segment (storage/projection.Reader)."""

    area = "stats"
    layout = "stats/2"  # bumped whenever step or the state changes

    @staticmethod
    def start() -> list[Any]:
        return [{}, []]  # call id -> record; tombstoned ids

    @staticmethod
    def step(state: list[Any], ev: Event) -> list[Any]:
        if ev.type == TOMBSTONE:
            state[1].append(ev.id)
        elif ev.type == OBSERVATION and ev.kind == "tool_call" and ev.id:
            calls: dict[str, list[Any]] = state[0]
            _record(calls, ev.id, ev)
        return state

    @staticmethod
    def pack(state: list[Any]) -> list[Any]:
        return state

    @staticmethod
    def unpack(packed: Any) -> list[Any]:
        calls, tombstoned = packed
        return [{k: list(v) for k, v in calls.items()}, list(tombstoned)]


def _record(calls: dict[str, list[Any]], call_id: str, ev: Event) -> None:
    data = ev.data
    tool = str(data.get("tool") or "")
    head = command_head(data.get("input")) if tools.kind_of(tool) in _SHELLS else None
    seen = calls.get(call_id)
    if seen is None:
        calls[call_id] = [tool, data.get("status"), head, ev.session, ev.ts, ev.ts,
                          ev.event_id]
        return
    first = min(seen[4], ev.ts)
    if (ev.ts, ev.event_id) >= (seen[5], seen[6]):
        seen[:] = [tool or seen[0], data.get("status"), head or seen[2],
                   ev.session or seen[3], first, ev.ts, ev.event_id]
    else:
        seen[4] = first


def command_head(value: Any) -> str | None:
    """A shell call's program and subcommands as the digest names a command (failures.head
    of its core: `git commit`, `go test`, `gh api graphql`; a leading `cd dir &&` and an
    environment prefix dropped)."""
    from agent_journal.core.recovery.failures import head
    from agent_journal.core.recovery.test_runs import command_key, core, run_key

    command = value.get("command") if isinstance(value, dict) else value
    if isinstance(command, list):
        command = " ".join(str(w) for w in command)
    if not isinstance(command, str) or not command.strip():
        return None
    return head(run_key(core(command_key(command)))) or None


def combine(states: list[list[Any]]) -> dict[str, Any]:
    """The counts over every segment's state: {tools, commands, sessions, calls}."""
    calls: dict[str, list[Any]] = {}
    tombstoned: set[str] = set()
    for state in states:
        tombstoned.update(state[1])
        for call_id, record in state[0].items():
            seen = calls.get(call_id)
            if seen is None or (record[5], record[6]) > (seen[5], seen[6]):
                merged = list(record)
                if seen is not None:
                    merged[4] = min(seen[4], record[4])
                calls[call_id] = merged
            else:
                seen[4] = min(seen[4], record[4])
    tools: dict[str, list[int]] = {}
    commands: dict[str, list[int]] = {}
    sessions: dict[str, list[Any]] = {}
    for call_id, (tool, status, head, session, first, last, _) in calls.items():
        if call_id in tombstoned:
            continue
        failed = int(status == FAILED)
        row = tools.setdefault(tool, [0, 0])
        row[0] += 1
        row[1] += failed
        if head:
            row = commands.setdefault(head, [0, 0])
            row[0] += 1
            row[1] += failed
        span = sessions.setdefault(session or "", [first, last, 0])
        span[0], span[1], span[2] = min(span[0], first), max(span[1], last), span[2] + 1
    return {"calls": sum(r[0] for r in tools.values()), "tools": tools,
            "commands": commands, "sessions": sessions}
