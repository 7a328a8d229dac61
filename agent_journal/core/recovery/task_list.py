"""The task list of clients that keep it as separate calls (Claude Code 2.1.3xx's
TaskCreate and TaskUpdate), folded into the same shape a TodoWrite call carries.

Invariant: `step(table, call)` changes `table` (task id -> [status, subject]) by one
successful TaskCreate (a new pending task, its id as the tool's result names it) or
TaskUpdate (a new status or subject for a known id; `deleted` removes it), and returns the
whole list as `todos` ([status, subject] in id order) after a change, else None. A task
whose id no result named, or an update of an id never created, changes nothing.
"""

from __future__ import annotations

import re

from agent_journal.core import tools

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from agent_journal.core.recovery.calls import Call  # (facts loads this module)

_CREATED = re.compile(r"Task #(\w+) created")
MAX_TASKS = 40


def task_facts(tool: str | None, value: Any, output: str | None) -> dict[str, str]:
    """What one event of a TaskCreate or TaskUpdate call says of its task: `taskId` (a
    TaskCreate's from its result, a TaskUpdate's from its input), `taskSubject`,
    `taskStatus`. A call's start and end are separate events: the facts merge."""
    facts: dict[str, str] = {}
    if tool == tools.TASK_CREATE:
        found = _CREATED.search(output or "")
        if found:
            facts["taskId"] = found.group(1)
    if isinstance(value, dict):
        subject, status = value.get("subject"), value.get("status")
        if isinstance(subject, str) and subject.strip():
            facts["taskSubject"] = subject[:160]
        if isinstance(status, str):
            facts["taskStatus"] = status
        if tool == tools.TASK_UPDATE and isinstance(value.get("taskId"), str | int):
            facts["taskId"] = str(value["taskId"])
    return facts


def step(table: dict[str, list[str]], call: Call) -> list[list[str]] | None:
    """Fold one call into `table`; the task list after it, when it changed it."""
    task_id = call.get("taskId")
    if not task_id or not call.succeeded:
        return None
    subject, status = call.get("taskSubject"), call.get("taskStatus")
    if tools.kind_of(call.tool) == tools.TASK_CREATE:
        if len(table) >= MAX_TASKS and task_id not in table:
            return None
        table[task_id] = [status or "pending", subject or ""]
    elif task_id in table:
        if status == "deleted":
            del table[task_id]
        else:
            table[task_id] = [status or table[task_id][0], subject or table[task_id][1]]
    else:
        return None
    return [list(v) for _, v in sorted(table.items(), key=lambda kv: _order(kv[0]))]


def _order(task_id: str) -> tuple[int, str]:
    return (int(task_id), "") if task_id.isdigit() else (1 << 30, task_id)
