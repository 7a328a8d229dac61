"""The layer rules, checked by reading imports, and the lean hot path, checked in a process."""

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CLI, REPO, clean_env

from agent_journal.agents import claude_code, codex

PKG = Path(__file__).resolve().parents[1] / "agent_journal"

# What each layer (a folder of the package) may import. Imports run one way:
# cli -> agents -> ops -> storage -> core, with capture pure beside core.
ALLOWED = {
    "core": {"core"},
    "capture": {"core", "capture"},
    "storage": {"core", "storage"},
    "ops": {"core", "capture", "storage", "ops"},
    "agents": {"core", "capture", "storage", "ops", "agents"},
    "cli": {"core", "capture", "storage", "ops", "agents", "cli"},
}
PURE = {"core", "capture"}
HEAVY = {"typer", "click", "pydantic", "rich", "sqlite_utils", "dateutil.parser"}


def layer_of(path: Path) -> str:
    rel = path.relative_to(PKG)
    return rel.parts[0] if len(rel.parts) > 1 else ""


def modules() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)


def _type_only(tree: ast.AST) -> set[int]:
    """ids of the import nodes under `if TYPE_CHECKING:` (never run)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            found.update(id(n) for n in ast.walk(node))
    return found


def imported_modules(path: Path, *, run_time_only: bool = False) -> set[str]:
    """Every agent_journal module `path` imports, at top level or inside a function
    (with `run_time_only`, leaving out imports only a type checker reads)."""
    tree = ast.parse(path.read_text())
    skip = _type_only(tree) if run_time_only else set()
    names = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "agent_journal":
                names.update(f"agent_journal.{a.name}" for a in node.names)
            else:
                names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return {n.removeprefix("agent_journal.") for n in names
            if n.startswith("agent_journal.")}


MODULE_LINES = 600  # a module a newcomer reads at once (issue 29)
FUNCTION_LINES = 80  # a function read at once


def test_no_module_or_function_is_too_long_to_read_at_once():
    too_long = []
    for path in modules():
        text = path.read_text()
        rel = path.relative_to(PKG)
        if text.count("\n") > MODULE_LINES:
            too_long.append(f"{rel}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > FUNCTION_LINES:
                    too_long.append(f"{rel}:{node.lineno} {node.name}: {lines} lines")
    assert not too_long, too_long


def test_every_module_lives_in_a_layer():
    loose = [p.name for p in modules() if layer_of(p) == ""]
    assert sorted(loose) == ["__init__.py", "__main__.py"], loose
    assert {layer_of(p) for p in modules()} - {""} == set(ALLOWED)


def test_imports_run_one_way():
    for path in modules():
        layer = layer_of(path)
        if not layer:
            continue
        for dep in imported_modules(path):
            assert dep.split(".")[0] in ALLOWED[layer], (str(path.relative_to(PKG)), dep)


def test_no_import_cycles():
    graph = {}
    for path in modules():
        rel = path.relative_to(PKG).with_suffix("")
        name = ".".join(rel.parts).removesuffix(".__init__")
        graph[name] = {d for d in imported_modules(path, run_time_only=True)
                       if (PKG / (d.replace(".", "/") + ".py")).exists()}
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for dep in graph.get(node, ()):
            assert state.get(dep) != 1, " -> ".join([*stack, node, dep])
            if dep not in state:
                visit(dep, [*stack, node])
        state[node] = 2

    for node in graph:
        if node not in state:
            visit(node, [])


def test_pure_layers_do_no_io():
    for path in modules():
        if layer_of(path) in PURE:
            text = path.read_text()
            assert "sqlite3" not in text and "open(" not in text, path


def test_only_storage_touches_sqlite():
    for path in modules():
        if layer_of(path) == "storage":
            continue
        text = path.read_text()
        for word in ("sqlite3", "PRAGMA", ".commit()", "COMMIT", "executescript", ".execute("):
            assert word not in text, (str(path.relative_to(PKG)), word)


SDK = {"mcp", "mcp_types", "anyio"}


def test_only_the_mcp_server_imports_the_mcp_sdk():
    """The SDK is an optional extra and slow to import: one adapter loads it, on start."""
    for path in modules():
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
            elif isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
        if names & SDK:
            assert path.relative_to(PKG).as_posix() == "agents/mcp_server.py", path


PROBE = r"""
import sys, json
from agent_journal.cli.main import main
rc = main(sys.argv[1:])
mods = sorted(m for m in sys.modules if m.split('.')[0] in
              {'typer', 'click', 'pydantic', 'rich', 'sqlite_utils', 'typing', 'pathlib', 'uuid',
               'mcp', 'mcp_types', 'anyio'}
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


SESSION_START = json.dumps({"session_id": "s2", "cwd": "/home/user/ws",
                            "hook_event_name": "SessionStart", "source": "startup"})


def test_the_session_start_hook_imports_nothing_heavy(root):
    """SessionStart prints the digest on every session start: filling its cache (cold) and
    reading it (warm) stay off typing, pathlib and the other slow imports."""
    env = clean_env(AGENT_JOURNAL_ROOT=str(root), AGENT_JOURNAL_WORKSPACE="ws")
    for payload in (HOOK_PAYLOAD, HOOK_PAYLOAD.replace("toolu_01", "toolu_02").replace(
            '"stdout": "a\\nb\\n"', '"stdout": "1 failed, 2 passed in 0.5s"')):
        subprocess.run([sys.executable, "-m", "agent_journal", "hook", "claude-code"],
                       env=env, input=payload, text=True, check=True, capture_output=True)
    for _cold_then_warm in range(2):
        proc = subprocess.run([sys.executable, "-c", PROBE, "hook", "claude-code"],
                              capture_output=True, text=True, env=env, input=SESSION_START)
        assert proc.returncode == 0, proc.stderr
        assert "additionalContext" in proc.stdout
        loaded = json.loads(proc.stderr.split("MODULES ")[1])
        assert loaded == [], loaded
    assert not (root / "logs").exists()


# What the hook may load, checked in, for every event each installer installs: a module
# joining a hook's path is a decision a change makes on purpose (it costs every tool call,
# or every session start), so it shows in the diff of tests/data/hook_modules/. After such a
# change, regenerate the lists with AGENT_JOURNAL_REGEN_HOOK_MODULES=1 and read the diff.
HOOK_MODULES = Path(__file__).resolve().parent / "data" / "hook_modules"
HOOK_PAYLOADS = {"claude-code": REPO / "tests" / "data" / "claude-code" / "hooks" / "docs"
                 / "input", "codex": REPO / "tests" / "data" / "codex" / "hooks"}
# Payloads written here for events the docs give no example of (see its README).
BUILT_PAYLOADS = REPO / "tests" / "data" / "claude-code" / "hooks" / "built"


def hook_payload(agent: str, event: str) -> Path:
    docs = HOOK_PAYLOADS[agent] / f"{event}.json"
    return docs if docs.exists() or agent != "claude-code" else BUILT_PAYLOADS / f"{event}.json"


HOOK_EVENTS = [("claude-code", e) for e in claude_code.EVENTS] + \
    [("codex", e) for e in codex.EVENTS]
HOOK_MODULES_HEADER = """\
# Modules `agent-journal hook {agent}` may load for a {event} payload (a journal holding
# an entry and an observation). tests/test_architecture.py fails when it loads one not
# listed here; AGENT_JOURNAL_REGEN_HOOK_MODULES=1 rewrites this file from what it loads.
# agent_journal modules by name, anything else by its top-level package.
"""

MODULE_PROBE = r"""
import json, sys
from agent_journal.cli.main import main
rc = main(sys.argv[1:])
sys.stderr.write('\nMODULES ' + json.dumps(sorted(sys.modules)) + '\n')
sys.exit(rc)
"""


@pytest.fixture(scope="module")
def used_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A journal with something in it, so SessionStart's digest has content to read."""
    root = tmp_path_factory.mktemp("hooks") / "journal"
    env = clean_env(AGENT_JOURNAL_ROOT=str(root), AGENT_JOURNAL_WORKSPACE="ws")
    for args in (["observe", "--kind", "tool_call", "--id", "o1", "--tool", "Bash",
                  "--output", "-"],
                 ["record", "--kind", "finding", "--id", "f1", "--claim", "it builds",
                  "--anchor", "tool_use:o1"]):
        subprocess.run([CLI, *args], check=True, capture_output=True, env=env, input=b"ok")
    return root


def test_every_installed_hook_event_has_a_payload_and_a_list():
    for agent, event in HOOK_EVENTS:
        assert hook_payload(agent, event).is_file(), (agent, event)
    if not os.environ.get("AGENT_JOURNAL_REGEN_HOOK_MODULES"):
        listed = {(p.parent.name, p.stem) for p in HOOK_MODULES.glob("*/*.txt")}
        assert listed == set(HOOK_EVENTS), "regenerate tests/data/hook_modules/"


@pytest.mark.parametrize(("agent", "event"), HOOK_EVENTS)
def test_the_hook_loads_no_module_beyond_its_checked_in_list(used_root, tmp_path, agent,
                                                             event):
    # A copy each: what one hook wrote (or cached) must not change what the next loads.
    root = tmp_path / "journal"
    shutil.copytree(used_root, root)
    env = clean_env(AGENT_JOURNAL_ROOT=str(root), AGENT_JOURNAL_WORKSPACE="ws")
    payload = hook_payload(agent, event).read_bytes()
    proc = subprocess.run([sys.executable, "-c", MODULE_PROBE, "hook", agent],
                          capture_output=True, text=True, env=env, input=payload.decode())
    assert proc.returncode == 0, proc.stderr
    assert not (root / "logs").exists(), (root / "logs" / "hook.log").read_text()
    # agent_journal's own modules by name; anything else by its top-level package (which
    # codecs or submodules the interpreter loads may vary with the machine's locale).
    loaded = {m if m.startswith("agent_journal") else m.split(".")[0]
              for m in json.loads(proc.stderr.split("MODULES ")[1])}
    listing = HOOK_MODULES / agent / f"{event}.txt"
    if os.environ.get("AGENT_JOURNAL_REGEN_HOOK_MODULES"):
        listing.parent.mkdir(parents=True, exist_ok=True)
        listing.write_text(HOOK_MODULES_HEADER.format(agent=agent, event=event)
                           + "".join(f"{m}\n" for m in sorted(loaded)))
    allowed = {line.strip() for line in listing.read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    # `select` waits for a payload the agent has not finished writing (agents/hook.py
    # read_payload): whether it is needed depends on who started first, not on the code.
    allowed.add("select")
    extra = sorted(loaded - allowed)
    assert not extra, (f"the {agent} {event} hook now loads modules not in {listing} (add "
                       f"them there on purpose, or keep them off the path): {extra}")


BARE_PROBE = r"""
import sys
from agent_journal.cli.main import main
rc = main(sys.argv[1:])
sys.stderr.write('\nMODULES ' + ' '.join(sorted(sys.modules)) + '\n')
sys.exit(rc)
"""


@pytest.mark.parametrize(("agent", "event"), [("claude-code", "PreToolUse"),
                                              ("claude-code", "PostToolUse"),
                                              ("codex", "PostToolUse")])
def test_a_tool_call_hook_loads_neither_json_nor_re(used_root, tmp_path, agent, event):
    """The per-call hook (one process per tool call) parses its payload and encodes its
    event through json's own C code (core/cjson.py) and reads ids and exit codes without
    a regex: `json` and `re` (with enum and functools) cost it about 6 ms of a ~20 ms
    process. A payload holding a secret's trigger still loads `re`, to redact it."""
    root = tmp_path / "journal"
    shutil.copytree(used_root, root)
    env = clean_env(AGENT_JOURNAL_ROOT=str(root), AGENT_JOURNAL_WORKSPACE="ws")
    proc = subprocess.run([sys.executable, "-c", BARE_PROBE, "hook", agent],
                          capture_output=True, text=True, env=env,
                          input=hook_payload(agent, event).read_text())
    assert proc.returncode == 0, proc.stderr
    assert not (root / "logs").exists(), (root / "logs" / "hook.log").read_text()
    loaded = set(proc.stderr.split("MODULES ")[1].split())
    assert not loaded & {"json", "re", "enum", "typing"}, sorted(
        loaded & {"json", "re", "enum", "typing"})


def test_a_tool_call_hook_in_a_project_loads_neither_json_nor_re(used_root, tmp_path):
    """As installed: the hook command names no workspace, the project's .agent-journal.toml
    (found from the payload's cwd) does, in the plain form install writes; reading it
    must not cost the call `re` (storage/project_file.py)."""
    from agent_journal.storage import project_file

    root = tmp_path / "journal"
    shutil.copytree(used_root, root)
    project = tmp_path / "project"
    project.mkdir()
    (project / project_file.NAME).write_text(project_file.render("ws", str(root)))
    payload = json.loads(hook_payload("claude-code", "PostToolUse").read_text())
    payload["cwd"] = str(project)
    proc = subprocess.run([sys.executable, "-c", BARE_PROBE, "hook", "claude-code"],
                          capture_output=True, text=True, env=clean_env(), cwd=project,
                          input=json.dumps(payload))
    assert proc.returncode == 0, proc.stderr
    assert not (root / "logs").exists(), (root / "logs" / "hook.log").read_text()
    loaded = set(proc.stderr.split("MODULES ")[1].split())
    assert "agent_journal.storage.project_file" in loaded  # (the project file was read)
    assert not loaded & {"json", "re", "enum", "typing", "tomllib"}, sorted(
        loaded & {"json", "re", "enum", "typing", "tomllib"})
