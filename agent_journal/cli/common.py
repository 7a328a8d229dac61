"""What the command handlers share: the context of a run, and how an answer is printed.

Invariant: every handler prints through these and `output` (JSON with --json, else the
text of the command's renderer), so one command prints as every other does.
"""

from __future__ import annotations

from agent_journal.cli import output

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any


def context(a: dict[str, Any]) -> Any:
    from agent_journal.ops.context import Context

    return Context(a["root"], a["workspace"], a.get("session"))


def existing_context(a: dict[str, Any]) -> Any:
    """The context of a read: a workspace that does not exist is refused, not made."""
    ctx = context(a)
    ctx.must_exist = True
    return ctx


def read_context(a: dict[str, Any]) -> Any:
    import gc

    from agent_journal.ops.context import Context

    # This process is about to hold a whole workspace and then exit. The
    # operations pause the cyclic collector while they work; turned off here it
    # also skips the one full pass over everything read that re-enabling it
    # would trigger while the result is printed. Nothing read forms a cycle.
    gc.disable()
    ctx = Context(a["root"], a["workspace"])
    ctx.must_exist = True
    return ctx


def render(name: str) -> Any:
    """A text renderer of cli/render_reads.py, loaded only when text is printed."""
    from agent_journal.cli import render_reads

    return getattr(render_reads, name)


def emit_action(a: dict[str, Any], report: Any, renderer: str) -> None:
    """What a command that does something did: its JSON with --json, else the text of
    cli/render_actions.py `renderer` (loaded only then)."""
    if a["json"]:
        output.emit_json(report)
    else:
        from agent_journal.cli import render_actions

        output.emit_text(getattr(render_actions, renderer)(report))


def emit_read(a: dict[str, Any], report: Any, result: Any, text: Any) -> int:
    """A read's answer: its JSON with --json, else `text(report)`; then the floor warning."""
    if a["json"]:
        output.emit_json(report)
    else:
        output.emit_text(text(report))
    output.floor_warning(result.unreadable, result.malformed)
    return 0


def log_failed_open(name: str, argv: list[str], exc: BaseException, *,
                    root: str | None = None) -> None:
    """Log the failure of a fail-open command (the agent hook) in <root>/logs/hook.log
    (agents/hook_log.py: at `root`, else the root `argv` leads to); with no private place to
    log (the root itself is unsafe or unusable), say so on stderr, which is not shown to
    the agent on exit 0."""
    try:
        from agent_journal.agents.hook_log import log_failure

        log_failure(name, argv, exc, root=root)
    except BaseException as log_exc:
        try:
            output.error(f"{name} failed ({exc.__class__.__name__}) and could not log it: "
                         f"{log_exc.__class__.__name__}")
        except BaseException:
            pass
