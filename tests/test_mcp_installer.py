"""`hooks install claude-code --mcp`: our server's entry in Claude Code's MCP config."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import BIN
from mcp import Client, StdioServerParameters

from agent_journal.agents import mcp_installer
from agent_journal.core.errors import JournalError

# Shaped like the examples in Claude Code's MCP documentation.
OTHER_SERVERS = """{
    "mcpServers": {
        "github": {
            "type": "stdio",
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-github"],
            "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}"}
        }
    }
}
"""
CLAUDE_JSON = """{
  "numStartups": 12,
  "projects": {
    "/elsewhere": {
      "allowedTools": [],
      "mcpServers": {}
    }
  },
  "mcpServers": {
    "notion": {
      "type": "http",
      "url": "https://mcp.notion.com/mcp"
    }
  }
}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "my-project"
    folder.mkdir()
    return folder


def hooks(cli, project: Path, *args: str, **kw: Any):
    kw.setdefault("workspace", None)
    kw.setdefault("use_root", False)
    kw["env"] = {"PATH": ON_PATH, **(kw.get("env") or {})}
    return cli("hooks", *args, "--project", str(project), **kw)


ON_PATH = f"{BIN}:/usr/bin:/bin"  # this installation's command on PATH, as after pipx install


def test_install_registers_the_server_and_uninstall_takes_it_out(cli, project):
    mcp_json = project / ".mcp.json"
    mcp_json.write_text(OTHER_SERVERS)
    result = hooks(cli, project, "install", "claude-code", "--mcp")
    assert result.code == 0, result.err
    assert f"registered the agent-journal MCP server (project scope, workspace my-project) " \
           f"in {mcp_json}" in result.out
    config = json.loads(mcp_json.read_text())
    assert list(config["mcpServers"]) == ["github", "agent-journal"]
    assert config["mcpServers"]["agent-journal"] == {
        "type": "stdio", "command": "agent-journal", "args": ["mcp", "--workspace", "my-project"],
        "env": {}}
    assert mcp_json.read_text().startswith('{\n    "mcpServers"')  # its indentation kept
    installed = mcp_json.read_bytes()
    again = hooks(cli, project, "install", "claude-code", "--mcp")
    assert "already registered" in again.out and mcp_json.read_bytes() == installed

    removed = hooks(cli, project, "uninstall", "claude-code")
    assert removed.code == 0 and "removed the agent-journal MCP server" in removed.out
    assert json.loads(mcp_json.read_text()) == json.loads(OTHER_SERVERS)
    assert not (project / ".claude").exists()


def test_a_file_left_empty_goes(cli, project):
    assert hooks(cli, project, "install", "claude-code", "--mcp").code == 0
    assert (project / ".mcp.json").exists()
    assert hooks(cli, project, "uninstall", "claude-code").code == 0
    assert list(project.iterdir()) == []


def test_without_mcp_the_config_is_not_touched(cli, project):
    assert hooks(cli, project, "install", "claude-code").code == 0
    assert not (project / ".mcp.json").exists()
    result = hooks(cli, project, "uninstall", "claude-code")
    assert result.code == 0 and "MCP" not in result.out


def test_a_server_of_that_name_that_is_not_ours_is_refused(cli, project):
    theirs = '{"mcpServers": {"agent-journal": {"command": "node", "args": ["x.js"]}}}\n'
    (project / ".mcp.json").write_text(theirs)
    result = hooks(cli, project, "install", "claude-code", "--mcp")
    assert result.code == 1 and "is not agent-journal's" in result.err
    assert result.err.count("\n") == 1
    assert (project / ".mcp.json").read_text() == theirs
    assert not (project / ".claude").exists()  # the hooks were not installed either
    assert hooks(cli, project, "uninstall", "claude-code").code == 0
    assert (project / ".mcp.json").read_text() == theirs


@pytest.mark.parametrize("text", ['{"mcpServers": {}, "mcpServers": {}}', "[]", "{,}",
                                  '{"mcpServers": []}'])
def test_config_that_is_not_an_mcp_object_is_refused(cli, project, text):
    (project / ".mcp.json").write_text(text)
    result = hooks(cli, project, "install", "claude-code", "--mcp")
    assert result.code == 1 and "refusing to edit" in result.err
    assert (project / ".mcp.json").read_text() == text


def test_dry_run_shows_the_entry_and_writes_nothing(cli, project):
    result = hooks(cli, project, "install", "claude-code", "--mcp", "--dry-run")
    assert result.code == 0 and '+    "agent-journal": {' in result.out
    assert list(project.iterdir()) == []


def test_the_root_reaches_the_server_through_the_project_file(cli, project, root):
    assert cli("record", "--kind", "note", "--id", "n1", "--text", "registered servers read "
               "the hook's journal").code == 0
    assert hooks(cli, project, "install", "claude-code", "--mcp", "--root", str(root),
                 "--workspace", "ws").code == 0
    entry = json.loads((project / ".mcp.json").read_text())["mcpServers"]["agent-journal"]
    # The shared file names neither this machine's script nor its root.
    assert entry["command"] == "agent-journal" and entry["args"] == ["mcp", "--workspace", "ws"]

    # What was registered really serves: run it as Claude Code would, from the entry alone.
    async def scenario() -> None:
        params = StdioServerParameters(command=entry["command"], args=entry["args"],
                                       env={"PATH": ON_PATH, **entry["env"]}, cwd=str(project))
        async with Client(params, cache=None, read_timeout_seconds=60) as client:
            result = await client.call_tool("search", {"query": "registered"})
            assert result.content[0].text.startswith("n1  entry/note  ")

    anyio.run(scenario)


@pytest.mark.parametrize("scope, where", [("local", ["projects", "PROJECT", "mcpServers"]),
                                          ("user", ["mcpServers"])])
def test_local_and_user_scopes_edit_claude_json(project, tmp_path, monkeypatch, scope, where):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    claude_json = home / ".claude.json"
    claude_json.write_text(CLAUDE_JSON)
    claude_json.chmod(0o600)
    change = mcp_installer.install(scope=scope, folder=str(project), workspace="ws", root=None,
                                   dry_run=False)
    assert change.path == str(claude_json)
    config = json.loads(claude_json.read_text())
    holder: Any = config
    for key in where:
        holder = holder[str(project) if key == "PROJECT" else key]
    assert mcp_installer.is_ours(holder["agent-journal"])
    assert config["numStartups"] == 12 and "notion" in config["mcpServers"]
    assert claude_json.stat().st_mode & 0o777 == 0o600
    mcp_installer.uninstall(scope=scope, folder=str(project), dry_run=False)
    assert claude_json.read_text() == CLAUDE_JSON  # exactly what install put in, taken out


def test_unknown_scope_is_a_usage_error(project):
    with pytest.raises(JournalError, match="scope must be one of project, local, user"):
        mcp_installer.install(scope="team", folder=str(project), workspace="ws", root=None,
                              dry_run=True)


@pytest.mark.parametrize("entry, expected", [
    ({"command": "/venv/bin/agent-journal", "args": ["mcp", "--workspace", "w"]}, True),
    ({"command": "/usr/bin/python3", "args": ["-m", "agent_journal", "mcp"]}, True),
    ({"command": "/venv/bin/agent-journal", "args": ["hook", "claude-code"]}, False),
    ({"command": "node", "args": ["server.js"]}, False),
    ({"url": "https://example.invalid/mcp"}, False),
    ("agent-journal mcp", False),
])
def test_is_ours(entry, expected):
    assert mcp_installer.is_ours(entry) is expected


def test_no_path_command_no_registration_in_the_shared_file(cli, project):
    result = hooks(cli, project, "install", "claude-code", "--mcp",
                   env={"PATH": "/usr/bin:/bin"})
    assert result.code == 1 and result.err.count("\n") == 1
    assert "refusing to write" in result.err and "pipx install agent-journal" in result.err
    assert list(project.iterdir()) == []


def test_user_scope_names_no_workspace(project, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    change = mcp_installer.register(project=str(project), workspace="pinned", root=None,
                                    dry_run=False, scope="user")
    entry = json.loads(open(change.path).read())["mcpServers"]["agent-journal"]
    assert "--workspace" not in entry["args"] and entry["args"][-1] == "mcp"
    assert "workspace" not in change.message


def test_a_user_scope_server_serves_the_folder_it_is_started_in(cli, project, root):
    # No --workspace and no project file: the folder the client starts it in names it.
    assert cli("record", "--kind", "note", "--id", "n1", "--text", "found by folder",
               workspace="my-project").code == 0

    async def scenario() -> None:
        params = StdioServerParameters(command=str(BIN / "agent-journal"),
                                       args=["mcp", "--root", str(root)], env={},
                                       cwd=str(project))
        async with Client(params, cache=None, read_timeout_seconds=60) as client:
            result = await client.call_tool("search", {"query": "folder"})
            assert result.content[0].text.startswith("n1  entry/note  ")

    anyio.run(scenario)


def test_no_registration_without_the_mcp_extra(cli, project, tmp_path, monkeypatch):
    import sys

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setitem(sys.modules, "mcp", None)  # `import mcp` fails, as without the extra
    for scope in mcp_installer.SCOPES:
        with pytest.raises(JournalError, match=r"pip install 'agent-journal\[mcp\]'") as exc:
            mcp_installer.register(project=str(project), workspace=None, root=None,
                                   dry_run=False, scope=scope)
        assert "\n" not in exc.value.message
    assert list(project.iterdir()) == [] and list(tmp_path.glob(".claude*")) == []
