"""Claude Code 2.1.3xx keeps its task list as TaskCreate/TaskUpdate calls: the digest's
task list is built from them as from a TodoWrite."""

from __future__ import annotations

from agent_journal.core.recovery.calls import Call
from agent_journal.core.recovery.digest_fold import DigestFold
from agent_journal.core.recovery.facts import event_facts


def _call(i: int, tool: str, value: dict, output: str) -> Call:
    ts = f"2026-01-01T00:00:{i:02d}Z"
    facts = event_facts("tool_call", {"tool": tool, "input": value, "output": output,
                                      "status": "ok"}) or {}
    return Call(f"c{i}", "tool_call", "s", ts, ts, facts)


def test_task_create_and_update_make_the_latest_task_list():
    calls = [
        _call(1, "TaskCreate", {"subject": "Install deps", "description": "x"},
              "Task #1 created successfully: Install deps"),
        _call(2, "TaskCreate", {"subject": "Write the tree view"},
              "Task #2 created successfully: Write the tree view"),
        _call(3, "TaskUpdate", {"taskId": "1", "status": "completed"}, "Updated task #1 status"),
        _call(4, "TaskUpdate", {"taskId": "2", "status": "in_progress"},
              "Updated task #2 status"),
        _call(5, "TaskUpdate", {"taskId": "9", "status": "completed"}, "Task not found"),
    ]
    fold = DigestFold()
    for call in calls:
        fold.step(call)
    assert fold.todo is not None
    todo, _ = fold.todo
    assert todo.id == "c4"
    assert todo.get("todos") == [["completed", "Install deps"],
                                 ["in_progress", "Write the tree view"]]
