"""The layer rules, checked by reading imports, and the lean hot path, checked in a process."""

import ast
import json
import subprocess
import sys
from pathlib import Path

from conftest import clean_env

PKG = Path(__file__).resolve().parents[1] / "agent_journal"

# Lower layers never import higher ones.
CORE = {"errors", "clock", "model", "codec", "derive", "plan", "merge_plan"}
STORE = {"store"}
CLI = {"cli", "argv", "commands", "help", "output", "__main__"}
HEAVY = {"typer", "click", "pydantic", "rich", "sqlite_utils", "dateutil.parser"}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return {n.removeprefix("agent_journal.") for n in names
            if n.startswith("agent_journal.")}


def test_core_does_no_io_and_imports_only_core():
    for name in CORE:
        path = PKG / f"{name}.py"
        if not path.exists():
            continue
        text = path.read_text()
        deps = {d.split(".")[0] for d in imported_modules(path)} - {""}
        assert deps <= CORE, (name, deps - CORE)
        assert "sqlite3" not in text and "open(" not in text, name


def test_store_never_imports_cli_or_operations():
    deps = {d.split(".")[0] for d in imported_modules(PKG / "store.py")}
    assert deps <= CORE | STORE, deps


def test_nothing_but_cli_imports_cli_modules():
    for path in PKG.rglob("*.py"):
        name = path.stem
        if name in CLI:
            continue
        deps = {d.split(".")[0] for d in imported_modules(path)}
        assert not deps & (CLI - {"output"}) or name in CLI, (path, deps & CLI)


def test_only_store_opens_sqlite():
    for path in PKG.rglob("*.py"):
        if path.stem in STORE:
            continue
        assert "sqlite3.connect" not in path.read_text(), path


def test_only_store_sets_pragmas_and_ends_transactions():
    for path in PKG.rglob("*.py"):
        if path.stem in STORE:
            continue
        text = path.read_text()
        for word in ("PRAGMA", ".commit()", "COMMIT", "executescript"):
            assert word not in text, (path, word)


PROBE = r"""
import sys, json
from agent_journal.cli import main
rc = main(sys.argv[1:])
mods = sorted(m for m in sys.modules if m.split('.')[0] in
              {'typer', 'click', 'pydantic', 'rich', 'sqlite_utils', 'typing', 'pathlib', 'uuid'}
              or m == 'dateutil.parser')
sys.stderr.write('\nMODULES ' + json.dumps(mods) + '\n')
sys.exit(rc)
"""


HOOK_PAYLOAD = json.dumps({
    "session_id": "s1", "cwd": "/home/user/ws", "hook_event_name": "PostToolUse",
    "tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": "toolu_01",
    "tool_response": {"stdout": "a\nb\n", "stderr": "", "interrupted": False},
})


def test_write_commands_import_nothing_heavy(root):
    env = clean_env(AGENT_JOURNAL_ROOT=str(root), AGENT_JOURNAL_WORKSPACE="ws")
    for args in (["record", "--kind", "note", "--id", "n", "--text", "t"],
                 ["observe", "--kind", "tool_call", "--id", "o", "--tool", "Bash"],
                 ["invalidate", "n", "--reason", "r"],
                 ["tombstone", "o", "--reason", "r"],
                 ["hook", "claude-code"]):
        proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True,
                              text=True, env=env, input=HOOK_PAYLOAD)
        assert proc.returncode == 0, proc.stderr
        loaded = json.loads(proc.stderr.split("MODULES ")[1])
        assert loaded == [], (args, loaded)
    # The hook fails open, so its exit code proves nothing: it must also have logged nothing.
    assert not (root / "logs").exists()
