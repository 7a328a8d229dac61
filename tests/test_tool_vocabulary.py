"""The core reads tool calls through its tool vocabulary (core/tools.py), never by an agent's
tool names: each agent's names are mapped into it by capture/tool_vocabulary.py, and a new
agent's tools are read by the core as soon as its table is installed."""

import ast
from pathlib import Path

import pytest

from agent_journal.capture import tool_vocabulary
from agent_journal.core import tools
from agent_journal.core.recovery.facts import event_facts
from agent_journal.core.recovery.failures import is_lookup

CORE = Path(__file__).resolve().parents[1] / "agent_journal" / "core"
NAMES = (set(tool_vocabulary.CLAUDE_CODE) | set(tool_vocabulary.CODEX)
         | set(tool_vocabulary.PREFIXES))


def test_no_module_of_the_core_names_an_agents_tool() -> None:
    """A string literal of the core (docstrings aside) that is an agent's tool name, or
    starts with an agent's tool prefix, is a rule that a third agent would have to edit."""
    found = []
    for path in sorted(set(CORE.rglob("*.py")) - {CORE / "tools.py"}):  # the kinds' own
        tree = ast.parse(path.read_text())
        docs = {id(node.body[0].value) for node in ast.walk(tree)
                if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
                and node.body and isinstance(node.body[0], ast.Expr)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and id(node) not in docs and (node.value in NAMES or any(
                        node.value.startswith(p) for p in tool_vocabulary.PREFIXES)):
                found.append(f"{path.relative_to(CORE)}:{node.lineno} {node.value!r}")
    assert not found, found


def test_every_agents_table_is_installed() -> None:
    for table in (tool_vocabulary.CLAUDE_CODE, tool_vocabulary.CODEX):
        for name, (kind, fields) in table.items():
            assert tools.kind_of(name) == kind
            assert tools.target_fields(name) == fields
    assert tools.kind_of("mcp__github__create_issue") == tools.MCP
    assert tools.kind_of("not a tool anyone maps") is None
    assert tools.target_fields("not a tool anyone maps") is None


def test_a_name_mapped_twice_differently_is_refused() -> None:
    tools.install({"Bash": (tools.SHELL, ("command",))})  # the same again: nothing changes
    with pytest.raises(ValueError, match="mapped twice"):
        tools.install({"Bash": (tools.OTHER_SHELL, None)})


def test_a_third_agents_tools_are_read_by_the_core_once_its_table_is_installed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A new agent's shell, edit and lookup tools, under names no agent used before, are
    read as the existing agents' are: their targets, files, edits and lookups."""
    for table in ("_TOOLS", "_KINDS", "_FIELDS"):  # installed for this test only
        monkeypatch.setattr(tools, table, dict(getattr(tools, table)))
    call = {"tool": "run_terminal_cmd", "status": "ok", "exitCode": 0,
            "input": {"cmd": "rm old.py"}, "output": "", "hook": {"cwd": "/w"}}
    edit = {"tool": "str_replace", "status": "ok", "input": {
        "target_file": "/w/a.py", "old_string": "x = 1", "new_string": "def f():\n    x = 2"}}
    before = (event_facts("tool_call", call), event_facts("tool_call", edit))
    assert before[0] is not None and "fileOps" not in before[0]
    assert before[1] is not None and "change" not in before[1]
    assert not is_lookup("grep_search", "TODO")
    tools.install({"run_terminal_cmd": (tools.SHELL, ("cmd",)),
                   "str_replace": (tools.EDIT, ("target_file",)),
                   "grep_search": (tools.SEARCH, ("query",))})
    shell, edited = event_facts("tool_call", call), event_facts("tool_call", edit)
    assert shell is not None and shell["target"] == "rm old.py"
    assert shell["fileOps"] == [["deleted", "/w/old.py"]]
    assert edited is not None and edited["target"] == "/w/a.py"
    assert edited["change"] == ["def f():", "x = 1"]
    assert is_lookup("grep_search", "TODO")
