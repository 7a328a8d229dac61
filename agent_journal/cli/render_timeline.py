"""The timeline as text for a terminal or a pipe, and as JSON lines.

Invariants:
- One line per timeline line, written as it arrives (nothing is gathered
  in memory), so the output streams. Under the text header, which folds
  every line, the lines go to a spool file as the one read makes them and
  follow the header from there: a journal is read once, not twice.
- Colour only on a terminal and only when NO_COLOR is unset or empty; a
  pipe gets plain text. Failed calls are red.
- Stored text never breaks a line: control characters in a target are
  shown escaped, so each timeline line is one line of output. The whole
  output under `--failures-only` is printed as stored, each line indented.
- Stored text never reads as other text: bidi controls (core/bidi.py) are
  shown as `<U+XXXX>` markers, in the lines, the header and the whole output.
"""

from __future__ import annotations

import os
import re
from typing import Any, TextIO

from agent_journal.core.bidi import BIDI_CONTROLS, visible
from agent_journal.core.timeline import Line, short_session, short_sessions

RED = "\033[31m"
DIM = "\033[2m"
BOLD = "\033[1m"
RESET = "\033[0m"
PIPE_WIDTH = 160


def use_colour(stream: TextIO) -> bool:
    return stream.isatty() and not os.environ.get("NO_COLOR")


def _width(stream: TextIO) -> int:
    if stream.isatty():
        import shutil

        return max(60, shutil.get_terminal_size((PIPE_WIDTH, 24)).columns)
    return PIPE_WIDTH


# What one_line escapes or marks; text without any is printed as it is.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f" + "".join(sorted(BIDI_CONTROLS)) + "]")


def one_line(text: str) -> str:
    """Control characters escaped, so stored text cannot end or rewrite a line, and bidi
    controls shown as markers, so it cannot read as other text."""
    if _CONTROL.search(text) is None:
        return text
    out = []
    for ch in visible(text):
        if ch == "\n":
            out.append("⏎ ")
        elif ord(ch) < 32 or ord(ch) == 127 or 0x80 <= ord(ch) < 0xA0:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return "".join(out)


def duration(ms: int | None) -> str:
    if ms is None:
        return ""
    if ms < 1000:
        return f"{ms}ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def span(first: str | None, last: str | None) -> str:
    if first is None or last is None:
        return "nothing"
    from agent_journal.core.clock import parse_instant

    ms = int((parse_instant(last) - parse_instant(first)).total_seconds() * 1000)
    return f"{first} .. {last} ({duration(ms) or '0ms'})"


def status_text(line: Line) -> str:
    if line.type == "observation":
        status = line.status or "-"
        if line.exit_code is not None and (line.exit_code != 0 or status != "ok"):
            status = f"{status} exit {line.exit_code}"
        return status
    return line.status or ""


def label(line: Line) -> str:
    if line.type == "observation":
        return line.tool or line.kind
    if line.type == "entry":
        return line.kind
    return line.type


def target_text(line: Line) -> str:
    if line.type == "entry":
        return f"{line.id}: {line.target or ''}"
    if line.type in ("invalidation", "tombstone"):
        return f"{line.target}: {line.text or ''}"
    if line.type == "checkpoint":
        return f"{line.target}" + (f": {line.text}" if line.text else "")
    return line.target or ""


def line_duration(line: Line) -> int | None:
    """The recorded duration, else the time from the call's start to its finish."""
    if line.duration_ms is not None or line.end_ts is None:
        return line.duration_ms
    from agent_journal.core.clock import parse_instant

    try:
        return int((parse_instant(line.end_ts) - parse_instant(line.ts)).total_seconds() * 1000)
    except Exception:
        return None


class Columns:
    """The widths of the text columns, fitted to what the lines hold: a tool or kind,
    a status or a duration is never cut (one longer than the cap widens only its own
    line), and each session shows in the shortest form that tells it from the others
    (core/timeline.py short_sessions)."""

    LABEL_CAP = 24
    STATUS_CAP = 24

    def __init__(self) -> None:
        self.label = 4
        self.status = 1
        self.duration = 1
        self.sessions: set[str] = set()
        self.table: dict[str, str] | None = None

    def add(self, label_text: str, status: str, duration_text: str,
            session: str | None) -> None:
        self.label = max(self.label, min(len(label_text), self.LABEL_CAP))
        self.status = max(self.status, min(len(status), self.STATUS_CAP))
        self.duration = max(self.duration, len(duration_text))
        if session is not None and len(self.sessions) < MAX_SESSIONS:
            self.sessions.add(session)

    def session_text(self, session: str | None) -> str:
        if self.table is None:
            self.table = short_sessions(self.sessions)
        return one_line(short_session(session, self.table))

    @property
    def session(self) -> int:
        if self.table is None:
            self.table = short_sessions(self.sessions)
        return max([1, *(len(v) for v in self.table.values())])


# Sessions whose forms are fitted to each other; any beyond show their default form.
MAX_SESSIONS = 100_000


def format_line(line: Line, width: int, colour: bool, columns: Columns | None = None) -> str:
    """One line of text. Without `columns`, the widths that fit this line alone."""
    if columns is None:
        columns = Columns()
        columns.add(label(line), status_text(line), duration(line_duration(line)), line.session)
    return _format(_fields(line), width, colour, columns)


def _fields(line: Line) -> list[str]:
    """What a text line shows, each field free of control characters (so of tabs)."""
    return ["1" if line.failed else "0", "1" if line.type == "observation" else "0",
            line.ts[:19].replace("T", " "), one_line(line.session or ""),
            one_line(label(line)), one_line(status_text(line)),
            duration(line_duration(line)), one_line(target_text(line))]


def _format(fields: list[str], width: int, colour: bool, columns: Columns) -> str:
    # Target last: it is the only column of unbounded width.
    failed, observation, ts, session, tool, status, took, target = fields
    shown = columns.session_text(session or None)
    left = (f"{ts}  {shown:<{columns.session}}  {tool:<{columns.label}}  "
            f"{status:<{columns.status}} {took:>{columns.duration}}  ")
    room = max(20, width - len(left))
    if len(target) > room:
        target = target[:room - 1] + "…"
    text = f"{left}{target}".rstrip()
    if colour:
        if failed == "1":
            return f"{RED}{text}{RESET}"
        if observation == "0":
            return f"{BOLD}{text}{RESET}"
    return text


def header_lines(workspace: str, head: dict[str, Any], colour: bool) -> list[str]:
    title = f"Timeline of workspace {workspace}"
    if head.get("asOf"):
        title += f", as of {head['asOf']}"
    out = [f"{BOLD}{title}{RESET}" if colour else title]
    types = ", ".join(f"{t} {n}" for t, n in head["byType"].items()) or "none"
    out.append(f"  lines: {head['lines']} ({types}); failed: {head['failed']}; "
               f"sessions: {head['sessions']}")
    out.append(f"  span: {span(head['first'], head['last'])}")
    journal = head.get("journal") or {}
    total = sum(v["events"] for v in journal.values())
    out.append(f"  events read: {total} ("
               + ", ".join(f"{t} {v['events']}" for t, v in journal.items()) + ")")
    files = head["filesChanged"]
    out.append(f"  files changed: {len(files)}")
    for f in files[-10:]:
        out.append(f"    {one_line(f['path'])}" + (f" ({f['count']}x)" if f["count"] > 1 else ""))
    if len(files) > 10:
        out.append(f"    ... and {len(files) - 10} earlier")
    tests = head["tests"]
    out.append(f"  latest test results: {len(tests) or 'none'}")
    for t in tests:
        verdict = "PASS" if t["passed"] else "FAIL"
        if colour and not t["passed"]:
            verdict = f"{RED}{verdict}{RESET}"
        exit_text = "" if t["exitCode"] is None else f" exit {t['exitCode']}"
        out.append(f"    {verdict} {one_line(t['command'])[:80]} ({t['ts']}{exit_text})"
                   + (f": {one_line(t['summary'])}" if t.get("summary") else ""))
    return out


# Spooled lines stay in memory up to this size, then move to a temporary file.
_SPOOL_MEMORY = 4 * 1024 * 1024


def write_text(stream: TextIO, workspace: str, timeline: Any, header: bool) -> int:
    """The lines (under the header when `header`), from one read of the journal: each
    line's fields go to a spool as the read makes them, while the header and the
    column widths are folded; the lines are formatted as they are copied out."""
    import tempfile

    from agent_journal.core.timeline import Header

    head = Header() if header else None
    colour, width = use_colour(stream), _width(stream)
    columns = Columns()
    # Every str round-trips through the spool (surrogatepass), so the stream
    # receives exactly the text it would have been given directly.
    with tempfile.SpooledTemporaryFile(_SPOOL_MEMORY, mode="w+", encoding="utf-8",
                                       errors="surrogatepass", newline="") as spool:
        count = _spool_lines(spool, timeline, head, columns)
        if head is not None:
            for text in header_lines(workspace, timeline.header_of(head), colour):
                stream.write(text + "\n")
            stream.write("\n")
        spool.seek(0)
        for record in spool:
            what, _, rest = record[:-1].partition("\t")
            if what == "L":
                stream.write(_format(rest.split("\t"), width, colour, columns) + "\n")
            elif what == "O":
                stream.write(f"    │ {rest}\n")
            else:
                stream.write(rest + "\n")
    return count


def _spool_lines(spool: Any, timeline: Any, head: Any, columns: Columns) -> int:
    """Write each line's fields to `spool` as one tab-separated record (the fields hold
    no control character: one_line), its whole output under --failures-only as records
    of their own, and fold the header and the widths."""
    count = 0
    whole = timeline.filters.failures_only
    for line in timeline.lines():
        count += 1
        if head is not None:
            head.add(line)
        fields = _fields(line)
        columns.add(fields[4], fields[5], fields[6], line.session)
        spool.write("L\t" + "\t".join(fields) + "\n")
        if whole:
            output, problem = timeline.whole_output(line)
            if problem is not None:
                spool.write(f"T\t    (whole output not shown: {one_line(problem)})\n")
            elif output is None or output == "":
                spool.write("T\t    (no output recorded)\n")
            else:
                for text in output.splitlines():
                    spool.write(f"O\t{visible(text)}\n")
            spool.write("T\t\n")
    if count == 0:
        spool.write("T\t(no events match)\n")
    return count


def write_json_lines(stream: TextIO, timeline: Any) -> int:
    from agent_journal.cli.output import line_encoder

    encode = line_encoder()
    count = 0
    whole = timeline.filters.failures_only
    for line in timeline.lines():
        obj = line.as_json()
        if whole:
            output, problem = timeline.whole_output(line)
            obj["output"] = output
            obj["outputProblem"] = problem
        stream.write(encode(obj) + "\n")
        count += 1
    return count
