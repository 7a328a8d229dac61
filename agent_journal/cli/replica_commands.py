"""The handlers of the commands that move a journal between roots: export, merge, remote,
push, pull, sync (each one library call, printed through cli/common.py).

Invariant: loaded only when one of these commands runs (cli/main.py dispatches to
`replica_commands:NAME` by importing this module then).
"""

from __future__ import annotations

from agent_journal.cli import output
from agent_journal.cli.common import context, emit_action, existing_context
from agent_journal.core.errors import UsageError

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any


# -- replicas: export, merge ----------------------------------------------------------

def cmd_export(a: dict[str, Any]) -> int:
    if a["sqlite"] is not None:
        return export_sqlite(a)
    if a["overwrite"]:
        raise UsageError("--overwrite goes with --sqlite FILE")
    if a["dest"] is None:
        raise UsageError("missing argument DEST (or --sqlite FILE)")
    from agent_journal.ops import export

    progress = output.progress_for_terminal()
    try:
        report = export.export(existing_context(a), a["dest"], progress=progress)
    finally:
        output.progress_done(progress)
    emit_action(a, report, "export_text")
    output.floor_warning(report["unreadable"], report["malformed"])
    if report["artifactsMissing"]:
        output.warn(f"{len(report['artifactsMissing'])} artifact(s) could not be exported "
                    "(missing or not matching their checksum)")
    return 0


def export_sqlite(a: dict[str, Any]) -> int:
    from agent_journal.ops import export_sqlite

    if a["dest"] is not None:
        raise UsageError("--sqlite FILE takes no DEST folder")
    progress = output.progress_for_terminal()
    try:
        report = export_sqlite.export_sqlite(existing_context(a), a["sqlite"],
                                             overwrite=a["overwrite"], progress=progress)
    finally:
        output.progress_done(progress)
    emit_action(a, report, "export_sqlite_text")
    return 0


def cmd_merge(a: dict[str, Any]) -> int:
    from agent_journal.ops import replicas

    progress = output.progress_for_terminal()
    try:
        report = replicas.merge(context(a), a["source"], allow_damaged=a["allow_damaged"],
                                progress=progress)
    finally:
        output.progress_done(progress)
    emit_action(a, report, "merge_text")
    if report["unreadable"] or report["malformed"]:
        output.warn(f"the source has {len(report['unreadable'])} unreadable segment(s) and "
                    f"{len(report['malformed'])} malformed row(s); they were not imported "
                    "(none could be a tombstone)")
    if report["replicaIdCollisions"]:
        output.warn("replica id shared by two roots (a copied journal root?): "
                    + ", ".join(report["replicaIdCollisions"]) + "; every event was kept")
    return 0


# -- sync through a bucket or a shared folder ----------------------------------------

def _sync_context(a: dict[str, Any]) -> Any:
    """The context of a command that uses the remotes: with the project file's remote."""
    from agent_journal.cli.project_defaults import project_remote

    ctx = context(a)
    ctx.project_remote = project_remote(ctx.workspace_name)
    return ctx


def cmd_remote_add(a: dict[str, Any]) -> int:
    from agent_journal.ops import remotes

    emit_action(a, remotes.add(context(a), a["name"], a["url"],
                                endpoint_url=a["endpoint_url"]), "remote_add_text")
    return 0


def cmd_remote_list(a: dict[str, Any]) -> int:
    from agent_journal.ops import remotes

    emit_action(a, remotes.list_remotes(_sync_context(a)), "remote_list_text")
    return 0


def cmd_remote_remove(a: dict[str, Any]) -> int:
    from agent_journal.ops import remotes

    emit_action(a, remotes.remove(_sync_context(a), a["name"]), "remote_remove_text")
    return 0


def cmd_remote_status(a: dict[str, Any]) -> int:
    from agent_journal.ops import sync

    report = sync.status(_sync_context(a), a["name"])
    emit_action(a, report, "remote_status_text")
    for text in report["warnings"]:
        output.warn(text)
    return 1 if report["refused"] else 0


def sync_command(a: dict[str, Any], what: str) -> int:
    from agent_journal.ops import sync

    if a["within"] is not None:
        return _within(a, what)
    progress = output.progress_for_terminal()
    try:
        report = getattr(sync, what)(_sync_context(a), a["name"], progress=progress)
    finally:
        output.progress_done(progress)
    emit_action(a, report, f"{what}_text")
    for text in report["warnings"]:
        output.warn(text)
    # Something the remote holds failed verification: the run did what it
    # could, but a script must not read it as complete.
    refused = report.get("refused") or (report.get("pull") or {}).get("refused")
    return 1 if refused else 0


def _within(a: dict[str, Any], what: str, *, quiet: bool = False) -> int:
    """The command in a process of its own, waited for at most --within seconds; exit 0
    whatever it does (ops/sync_background.py). `quiet`: nothing on stdout (an agent
    reads a session hook's stdout as context)."""
    from agent_journal.ops.sync_background import run_within

    ctx = context(a)  # the workspace checked here, and named to the other process
    argv = [what, *([a["name"]] if a["name"] else []), "--workspace", ctx.workspace_name,
            *(["--root", a["root"]] if a["root"] else [])]
    report = run_within(what, argv, a["within"], a["root"])
    if a["json"]:
        output.emit_json(report)
    elif not quiet:
        state = ("done" if report["exitCode"] == 0 else "failed" if report["finished"]
                 else "goes on in the background")
        output.emit_text(f"{what}: {state} (log: {report['log']})")
    for text in report["warnings"]:
        output.warn(text)
    return 0


def cmd_sync_hook_start(a: dict[str, Any]) -> int:
    return _sync_hook(a, "pull", "start")


def cmd_sync_hook_end(a: dict[str, Any]) -> int:
    return _sync_hook(a, "push", "end")


def _sync_hook(a: dict[str, Any], what: str, when: str) -> int:
    """A session hook's sync (agents/sync_hooks.py): `what --within` its bound. Declared
    fail_open: anything that goes wrong here is logged, and the agent sees exit 0."""
    from agent_journal.agents.sync_hooks import WITHIN
    from agent_journal.cli.argv import _check_clock

    _check_clock()  # as argv checks it for every command that is not fail-open
    if a["workspace"] is None:
        raise UsageError("no workspace here (no --workspace, $AGENT_JOURNAL_WORKSPACE or "
                         ".agent-journal.toml); nothing to sync")
    return _within({**a, "name": None, "json": False, "within": WITHIN[when]}, what,
                   quiet=True)


def cmd_push(a: dict[str, Any]) -> int:
    return sync_command(a, "push")


def cmd_pull(a: dict[str, Any]) -> int:
    return sync_command(a, "pull")


def cmd_sync(a: dict[str, Any]) -> int:
    return sync_command(a, "sync")
