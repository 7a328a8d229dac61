"""The handlers of the commands that bring events in and read one back: `hooks
install|uninstall`, `import`, `get`, `mcp` (each one library call, printed through
cli/common.py). The agents' hooks have their own, lighter module: hook_commands.py.

Invariant: loaded only when one of these commands runs (cli/main.py dispatches to
`capture_commands:NAME` by importing this module then).
"""

from __future__ import annotations

import os
import sys

from agent_journal.cli import output
from agent_journal.cli.common import context, emit_action, existing_context

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any


# -- capture: hook, installer, import, get ---------------------------------------------

def _print_install(result: Any) -> None:
    if result.diff:
        output.emit_raw(result.diff.encode("utf-8"))
    elif result.message:
        output.emit_line(result.message)


def _install_options(a: dict[str, Any]) -> dict[str, Any]:
    return {"project": a["project"], "scope": a["scope"] or "project",
            "workspace": a["workspace"], "root": a["root"], "dry_run": a["dry_run"],
            "sync": a["sync"]}


def _print_changes(changes: Any) -> None:
    for change in changes:
        _print_install(change)
        for text in change.warnings:
            output.warn(text)


def _hooks(name: str, action: str, a: dict[str, Any]) -> int:
    from agent_journal.agents import hook_install
    from agent_journal.agents.agent import agent

    _print_changes(getattr(hook_install, action)(agent(name), **_install_options(a)))
    return 0


def cmd_hooks_install(a: dict[str, Any]) -> int:
    if not a["mcp"]:
        return _hooks("claude-code", "install", a)
    from agent_journal.agents import hook_install, mcp_installer
    from agent_journal.agents.agent import agent

    options = _install_options(a)
    register = {k: options[k] for k in ("project", "scope", "workspace", "root")}
    # Checked first: a refusal here must leave the hooks untouched too.
    mcp_installer.register(**register, dry_run=True)
    _print_changes(hook_install.install(agent("claude-code"), **options))
    _print_install(mcp_installer.register(**register, dry_run=a["dry_run"]))
    return 0


def cmd_hooks_uninstall(a: dict[str, Any]) -> int:
    from agent_journal.agents import mcp_installer

    _hooks("claude-code", "uninstall", a)
    mcp_change = mcp_installer.unregister(project=a["project"], scope=a["scope"] or "project",
                                          dry_run=a["dry_run"])
    if mcp_change.changed or mcp_change.diff:
        _print_install(mcp_change)
    return 0


def cmd_hooks_install_codex(a: dict[str, Any]) -> int:
    return _hooks("codex", "install", a)


def cmd_hooks_uninstall_codex(a: dict[str, Any]) -> int:
    return _hooks("codex", "uninstall", a)


def cmd_import_codex(a: dict[str, Any]) -> int:
    from agent_journal.agents import codex_import

    return _import(a, codex_import.import_codex)


def cmd_import_claude_code(a: dict[str, Any]) -> int:
    from agent_journal.agents import claude_code_import

    return _import(a, claude_code_import.import_claude_code)


def _import(a: dict[str, Any], importer: Any) -> int:
    """An agent's import: progress on a terminal, the other-project warning, the report."""
    progress = output.progress if sys.stderr is not None and sys.stderr.isatty() else None
    report = importer(context(a), a["transcript"], progress=progress,
                      other_project=bool(a["other_project"]))
    _warn_other_project(report)
    emit_action(a, report, "import_text")
    return 0


def _warn_other_project(report: dict[str, Any]) -> None:
    from agent_journal.cli.render_actions import other_project_warning

    warning = other_project_warning(report)
    if warning is not None:
        output.warn(warning)


def cmd_get(a: dict[str, Any]) -> int:
    from agent_journal.ops import evidence

    found = evidence.get(existing_context(a), a["id"])
    if found.record is not None and a["json"]:
        output.emit_json(found.record)
    elif found.record is not None:
        from agent_journal.cli.render_reads import entry_text, event_text

        output.emit_text(event_text(found.record) if found.event
                         else entry_text(found.record))
    else:
        output.emit_raw(found.raw or b"")
    for warning in found.warnings:
        output.warn(warning)
    output.floor_warning(found.unreadable, found.malformed)
    return 0


# -- recall inside a session: the MCP server (issue 20) ---------------------------------

def cmd_mcp(a: dict[str, Any]) -> int:
    from agent_journal.agents import mcp_server
    from agent_journal.capture.observation import sanitise_workspace_id

    # A user-scope registration names no workspace: the folder the client starts us in does.
    workspace = a["workspace"] or sanitise_workspace_id(os.getcwd())
    mcp_server.serve(a["root"], workspace, a["session"])
    return 0
