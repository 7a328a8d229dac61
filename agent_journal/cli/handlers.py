"""The handlers of the journal's own commands (write, read, compact, doctor...): each parses
nothing itself (argv does, from the command table), calls one library function, and renders
the result through output. cli/main.py dispatches to them by name; the capture and replica
commands' handlers live in capture_commands.py and replica_commands.py, the hook's in
hook_commands.py.
"""

from __future__ import annotations

import sys

from agent_journal.cli import output
from agent_journal.cli.common import context as _context
from agent_journal.cli.common import emit_action as _emit_action
from agent_journal.cli.common import emit_read as _emit_read
from agent_journal.cli.common import existing_context as _existing_context
from agent_journal.cli.common import read_context as _read_context
from agent_journal.cli.common import render as _render
from agent_journal.core.errors import UsageError

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any


def _read_output_arg(value: str | None) -> str | None:
    if value is None:
        return None
    if value == "-" and sys.stdin is None:  # `<&-`: Python leaves no stdin object
        raise UsageError("cannot read --output -: stdin is closed")
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
    except RecursionError:
        raise UsageError(f"{flag} is nested too deeply") from None


def _print_write(result: Any, verb: str, as_json: bool) -> None:
    if as_json:
        output.emit_json(result.as_json())
    else:
        output.emit_line(f"{verb} {result.id}")
    if result.warning:
        output.warn(result.warning)


# -- handlers ---------------------------------------------------------------------------

def cmd_record(a: dict[str, Any]) -> int:
    from agent_journal.ops import writes

    result = writes.record(
        _context(a), kind=a["kind"], entry_id=a["id"],
        fields={"claim": a["claim"], "question": a["question"], "chosen": a["chosen"],
                "text": a["text"]},
        anchors=a["anchor"], depends_on=a["depends_on"], subject=a["subject"])
    _print_write(result, "recorded", a["json"])
    return 0


def cmd_observe(a: dict[str, Any]) -> int:
    from agent_journal.ops import writes

    input_value = _parse_json_arg("--input", a["input"])
    result = writes.observe(
        _context(a), kind=a["kind"], obs_id=a["id"], tool=a["tool"], call_id=a["call_id"],
        input_value=input_value, output=_read_output_arg(a["output"]), status=a["status"],
        exit_code=a["exit_code"], duration_ms=a["duration_ms"])
    _print_write(result, "observed", a["json"])
    return 0


def cmd_invalidate(a: dict[str, Any]) -> int:
    from agent_journal.ops import writes

    _print_write(writes.invalidate(_context(a), a["target"], a["reason"]), "invalidated",
                 a["json"])
    return 0


def cmd_tombstone(a: dict[str, Any]) -> int:
    from agent_journal.ops import writes

    _print_write(writes.tombstone(_context(a), a["target"], a["reason"]), "tombstoned",
                 a["json"])
    return 0


def cmd_show(a: dict[str, Any]) -> int:
    from agent_journal.ops import show as show_op

    report, result = show_op.show_stream(_read_context(a), only_id=a["id"],
                                         observations=a["observations"], as_of=a["as_of"])
    if a["json"]:
        output.emit_json(report)
    else:
        from agent_journal.cli.render_reads import show_lines

        output.emit_text(_as_of_note(a))
        output.emit_lines(show_lines(report))
    output.floor_warning(result.unreadable, result.malformed)
    return 0


def _as_of_note(a: dict[str, Any]) -> str:
    return "" if a.get("as_of") is None else f"As of {a['as_of']}\n\n"


# -- search (issue 7) -------------------------------------------------------------------

def cmd_search(a: dict[str, Any]) -> int:
    from agent_journal.ops import search

    if a["misses"]:
        return _search_misses(a)
    if a["query"] is None:
        raise UsageError("missing argument QUERY (or --misses)")
    report = search.search(_existing_context(a), a["query"], limit=a["limit"], kind=a["kind"],
                           include_retracted=a["include_retracted"])
    if a["json"]:
        output.emit_json(report)
    else:
        output.search_lines(report)
    for text in report["warnings"]:
        output.warn(text)
    output.floor_warning(report["unreadable"], report["malformed"])
    return 0


def _search_misses(a: dict[str, Any]) -> int:
    from agent_journal.ops import search_misses

    given = [flag for flag, dest in (("QUERY", "query"), ("--limit", "limit"),
                                     ("--kind", "kind"),
                                     ("--include-retracted", "include_retracted"))
             if a[dest] not in (None, False)]
    if given:
        raise UsageError(f"--misses lists the logged queries; it takes no {given[0]}")
    report = search_misses.misses(_existing_context(a))
    if a["json"]:
        output.emit_json(report)
    else:
        output.misses_lines(report)
    output.floor_warning(report["unreadable"], report["malformed"])
    return 0


def _alias(a: dict[str, Any], report: dict[str, Any]) -> int:
    if a["json"]:
        output.emit_json(report)
    else:
        output.alias_lines(report)
    return 0


def cmd_alias_add(a: dict[str, Any]) -> int:
    from agent_journal.ops import thesaurus

    return _alias(a, thesaurus.add(a["root"], a["word"], a["terms"]))


def cmd_alias_remove(a: dict[str, Any]) -> int:
    from agent_journal.ops import thesaurus

    return _alias(a, thesaurus.remove(a["root"], a["word"], a["terms"]))


def cmd_alias_list(a: dict[str, Any]) -> int:
    from agent_journal.ops import thesaurus

    report = thesaurus.listing(a["root"])
    _alias(a, report)
    if report["problem"] is not None:
        output.warn(f"thesaurus {report['path']} is broken ({report['problem']}); search "
                    "treats it as empty")
    return 0


# -- audit and recovery reads: trace, digest, coverage, decay ---------------------------

def cmd_trace(a: dict[str, Any]) -> int:
    from agent_journal.ops.trace import trace

    report, result = trace(_read_context(a), a["id"], as_of=a["as_of"], must_name=True)
    return _emit_read(a, report, result,
                      lambda r: _as_of_note(a) + _render("trace_text")(a["id"], r))


def cmd_digest(a: dict[str, Any]) -> int:
    from agent_journal.ops.digest import digest

    markdown, report, result = digest(_read_context(a), session=a["session"],
                                      max_chars=a["max_chars"], as_of=a["as_of"])
    from agent_journal.core.bidi import visible

    return _emit_read(a, report, result, lambda r: visible(markdown))


def cmd_coverage(a: dict[str, Any]) -> int:
    from agent_journal.ops.coverage import coverage

    report, result = coverage(_read_context(a))
    return _emit_read(a, report, result, _render("coverage_text"))


def cmd_stats(a: dict[str, Any]) -> int:
    from agent_journal.ops.stats import stats

    report, result = stats(_read_context(a))
    return _emit_read(a, report, result, _render("stats_text"))


def cmd_decay(a: dict[str, Any]) -> int:
    from agent_journal.ops.decay import decay

    report, result = decay(_read_context(a))
    return _emit_read(a, report, result, _render("decay_text"))


# -- audit views for people: timeline, checkpoints ------------------------------------

TIMELINE_WINDOW = 200  # the lines `timeline` prints as text unless told otherwise


def cmd_timeline(a: dict[str, Any]) -> int:
    from agent_journal.ops.timeline import Filters, Timeline

    filters = Filters(session=a["session"], tool=a["tool"], kind=a["kind"],
                      failures_only=a["failures_only"], since=a["since"], until=a["until"])
    html_path = None
    if a["html"] is not None:
        from agent_journal.cli import render_html

        if a["json"]:
            raise UsageError("--html and --json cannot be combined")
        html_path = render_html.check_destination(a["html"], a["root"])
    last = a["last"]
    if a["all"] and last is not None:
        raise UsageError("--all and --last cannot be combined")
    # Text is for a person: a window, unless every line is asked for (issue 30).
    window = last is None and not a["all"] and not a["json"] and html_path is None
    if window:
        last = TIMELINE_WINDOW
    timeline = Timeline(_read_context(a), filters, last=last, as_of=a["as_of"])
    with timeline:
        if html_path is not None:
            count = render_html.write_file(html_path, timeline.ctx.workspace_name, timeline)
            output.emit_line(f"wrote {count} timeline rows to {html_path}")
        elif a["json"]:
            from agent_journal.cli.render_timeline import write_json_lines

            write_json_lines(sys.stdout, timeline)
        else:
            from agent_journal.cli.render_timeline import write_text

            shown = write_text(sys.stdout, timeline.ctx.workspace_name, timeline, header=True)
            if window and shown >= TIMELINE_WINDOW:
                output.emit_line(f"(the last {TIMELINE_WINDOW} lines: `--last N` for more, "
                                 "`--all` for every line)")
        sys.stdout.flush()
        output.floor_warning(timeline.unreadable, timeline.malformed)
    return 0


def cmd_checkpoint(a: dict[str, Any]) -> int:
    from agent_journal.ops.checkpoints import checkpoint

    result = checkpoint(_context(a), a["name"], a["note"])
    if a["json"]:
        output.emit_json(result.as_json())
    else:
        output.emit_line(f"checkpoint {result.id} ({result.events} events)")
    if result.warning:
        output.warn(result.warning)
    return 0


def cmd_checkpoints(a: dict[str, Any]) -> int:
    from agent_journal.ops.checkpoints import list_checkpoints

    report = list_checkpoints(_existing_context(a))
    if a["json"]:
        output.emit_json(report)
    else:
        from agent_journal.cli.render_reads import checkpoints_text

        output.emit_text(checkpoints_text(report))
    output.floor_warning(report["unreadable"], report["malformed"])
    return 0


# -- retention: compact ----------------------------------------------------------------

def cmd_compact(a: dict[str, Any]) -> int:
    from agent_journal.ops import compact

    # Like a read, it refuses a workspace that is not there (a typo would plan nothing).
    outcome = compact.compact(_existing_context(a), entry_ttl_days=a["entry_ttl_days"],
                              observation_ttl_days=a["observation_ttl_days"],
                              apply=a["apply"])
    if a["json"]:
        # Its lists are of ids, a million of them for a large TTL run: written as
        # they are encoded (a list of strings streams to the same bytes).
        output.emit_json({key: iter(value) if isinstance(value, list) else value
                          for key, value in outcome.report.items()})
    else:
        _emit_action(a, outcome.report, "compact_text")
    for text in outcome.warnings:
        output.warn(text)
    if outcome.skipped:
        output.error(compact.busy_message(len(outcome.skipped)))
        return 1
    return 0


# -- checks and conventions: doctor, completion ------------------------------------------

def cmd_doctor(a: dict[str, Any]) -> int:
    from agent_journal.agents import doctor

    checks = doctor.run_checks(project=a["project"], root=a["root"],
                               ack_hook_log=a["ack_hook_log"])
    if a["json"]:
        output.emit_json(doctor.as_json(checks))
    else:
        for check in checks:
            output.emit_line(check.line())
    return 1 if any(not c.ok for c in checks) else 0


def cmd_completion(a: dict[str, Any]) -> int:
    from agent_journal.cli.completion import script

    output.emit_text(script(a["shell"]))
    return 0
