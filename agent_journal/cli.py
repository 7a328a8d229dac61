"""The command-line surface.

Invariants:
- Each command handler parses nothing itself (argv does, from the command
  table), calls one library function, and renders the result through output.
- Exit codes are decided in one place, `run`: 0 ok, 1 refused or failed
  (JournalError), 2 usage error (UsageError, raised before anything is written).
- No traceback reaches the user: unexpected exceptions become a one-line error.
- The hot path (write commands, the hook) imports neither typer nor click:
  typer is loaded only to render --help.
"""

from __future__ import annotations

import os
import sys

from agent_journal import output
from agent_journal.errors import JournalError, UsageError

TYPE_CHECKING = False  # `typing` costs ~5 ms to import; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any

PROG = "agent-journal"


def _read_output_arg(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        if value == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(value, "rb") as fh:
                data = fh.read()
    except OSError as exc:
        raise UsageError(f"cannot read --output {value}: {exc.strerror}") from None
    return data.decode("utf-8", errors="replace")


def _parse_json_arg(flag: str, value: str | None) -> Any:
    if value is None:
        return None
    import json

    def reject(name: str) -> Any:
        raise UsageError(f"{flag} must be JSON without NaN or Infinity")

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, val in items:
            if key in out:
                raise UsageError(f"{flag} has a duplicate key {key!r}")
            out[key] = val
        return out

    try:
        return json.loads(value, object_pairs_hook=pairs, parse_constant=reject)
    except ValueError as exc:
        raise UsageError(f"{flag} is not valid JSON: {exc}") from None


def _context(a: dict[str, Any]) -> Any:
    from agent_journal.journal import Context

    return Context(a["root"], a["workspace"], a.get("session"))


def _print_write(result: Any, verb: str, as_json: bool) -> None:
    if as_json:
        output.emit_json(result.as_json())
    else:
        output.emit_line(f"{verb} {result.id}")
    if result.warning:
        output.warn(result.warning)


# -- handlers ---------------------------------------------------------------------------

def cmd_record(a: dict[str, Any]) -> int:
    from agent_journal import journal

    result = journal.record(
        _context(a), kind=a["kind"], entry_id=a["id"],
        fields={"claim": a["claim"], "question": a["question"], "chosen": a["chosen"],
                "text": a["text"]},
        anchors=a["anchor"], depends_on=a["depends_on"], subject=a["subject"])
    _print_write(result, "recorded", a["json"])
    return 0


def cmd_observe(a: dict[str, Any]) -> int:
    from agent_journal import journal

    input_value = _parse_json_arg("--input", a["input"])
    result = journal.observe(
        _context(a), kind=a["kind"], obs_id=a["id"], tool=a["tool"], call_id=a["call_id"],
        input_value=input_value, output=_read_output_arg(a["output"]), status=a["status"],
        exit_code=a["exit_code"], duration_ms=a["duration_ms"])
    _print_write(result, "observed", a["json"])
    return 0


def cmd_invalidate(a: dict[str, Any]) -> int:
    from agent_journal import journal

    _print_write(journal.invalidate(_context(a), a["target"], a["reason"]), "invalidated",
                 a["json"])
    return 0


def cmd_tombstone(a: dict[str, Any]) -> int:
    from agent_journal import journal

    _print_write(journal.tombstone(_context(a), a["target"], a["reason"]), "tombstoned",
                 a["json"])
    return 0


def cmd_show(a: dict[str, Any]) -> int:
    from agent_journal import journal

    report, result = journal.show(_context(a), only_id=a["id"], observations=a["observations"])
    output.emit_json(report)
    output.floor_warning(result.unreadable, result.malformed)
    return 0


# -- replicas: export, merge ----------------------------------------------------------

def cmd_export(a: dict[str, Any]) -> int:
    from agent_journal import replicas

    progress = output.progress_for_terminal()
    try:
        report = replicas.export(_context(a), a["dest"], progress=progress)
    finally:
        output.progress_done(progress)
    output.emit_json(report)
    output.floor_warning(report["unreadable"], report["malformed"])
    if report["artifactsMissing"]:
        output.warn(f"{len(report['artifactsMissing'])} artifact(s) could not be exported "
                    "(missing or not matching their checksum)")
    return 0


def cmd_merge(a: dict[str, Any]) -> int:
    from agent_journal import replicas

    progress = output.progress_for_terminal()
    try:
        report = replicas.merge(_context(a), a["source"], progress=progress)
    finally:
        output.progress_done(progress)
    output.emit_json(report)
    if report["unreadable"] or report["malformed"]:
        output.warn(f"the source has {len(report['unreadable'])} unreadable segment(s) and "
                    f"{len(report['malformed'])} malformed row(s); they were not imported")
    if report["replicaIdCollisions"]:
        output.warn("replica id shared by two roots (a copied journal root?): "
                    + ", ".join(report["replicaIdCollisions"]) + "; every event was kept")
    return 0


# -- dispatch ---------------------------------------------------------------------------

def _wants_help(argv: list[str]) -> bool:
    return not argv or any(t in ("--help", "-h") for t in argv if t != "--") \
        or argv[0] == "help"


def run(argv: list[str]) -> int:
    from agent_journal.argv import find_command, parse

    if _wants_help(argv):
        from agent_journal.help import show_help

        return show_help(argv)
    cmd, rest = find_command(argv)
    try:
        if cmd is None:
            raise UsageError(f"no such command {argv[0]!r}; see {PROG} --help")
        values = parse(cmd, rest)
        handler = globals()[cmd.handler]
        return int(handler(values))
    except JournalError as exc:
        output.error(exc.message)
        return exc.exit_code
    except KeyboardInterrupt:
        output.error("interrupted")
        return 130
    except BrokenPipeError:
        return 1
    except Exception as exc:  # never a traceback in front of a user
        output.error(f"internal error: {exc.__class__.__name__}: {exc}")
        if os.environ.get("AGENT_JOURNAL_DEBUG"):
            raise
        return 1


def main(argv: list[str] | None = None) -> int:
    # Files and folders the journal creates are private whatever the caller's umask.
    os.umask(0o077)
    return run(list(sys.argv[1:] if argv is None else argv))
