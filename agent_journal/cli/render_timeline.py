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
from agent_journal.core.timeline import Line

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


def short_session(session: str | None) -> str:
    return "-" if session is None else session[:8]


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


def format_line(line: Line, width: int, colour: bool) -> str:
    # Target last: it is the only column of unbounded width.
    ts = line.ts[:19].replace("T", " ")
    session, tool = one_line(short_session(line.session)), one_line(label(line))
    left = (f"{ts}  {session:<8}  {tool[:12]:<12}  "
            f"{status_text(line)[:14]:<14} {duration(line_duration(line)):>6}  ")
    room = max(20, width - len(left))
    target = one_line(target_text(line))
    if len(target) > room:
        target = target[:room - 1] + "…"
    text = f"{left}{target}".rstrip()
    if colour:
        if line.failed:
            return f"{RED}{text}{RESET}"
        if line.type != "observation":
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
_COPY_CHARS = 1024 * 1024


def write_text(stream: TextIO, workspace: str, timeline: Any, header: bool) -> int:
    if not header:
        return _write_lines(stream, timeline, None)
    import shutil
    import tempfile

    from agent_journal.core.timeline import Header

    head = Header()
    # Every str round-trips through the spool (surrogatepass), so the stream
    # receives exactly the text it would have been given directly.
    with tempfile.SpooledTemporaryFile(_SPOOL_MEMORY, mode="w+", encoding="utf-8",
                                       errors="surrogatepass", newline="") as spool:
        count = _write_lines(spool, timeline, head, colour=use_colour(stream),
                             width=_width(stream))
        for text in header_lines(workspace, timeline.header_of(head), use_colour(stream)):
            stream.write(text + "\n")
        stream.write("\n")
        spool.seek(0)
        shutil.copyfileobj(spool, stream, _COPY_CHARS)
    return count


def _write_lines(stream: Any, timeline: Any, head: Any, *, colour: bool | None = None,
                 width: int | None = None) -> int:
    colour = use_colour(stream) if colour is None else colour
    width = _width(stream) if width is None else width
    count = 0
    whole = timeline.filters.failures_only
    for line in timeline.lines():
        count += 1
        if head is not None:
            head.add(line)
        stream.write(format_line(line, width, colour) + "\n")
        if whole:
            output, problem = timeline.whole_output(line)
            if problem is not None:
                stream.write(f"    (whole output not shown: {problem})\n")
            elif output is None or output == "":
                stream.write("    (no output recorded)\n")
            else:
                for text in output.splitlines():
                    stream.write(f"    │ {visible(text)}\n")
            stream.write("\n")
    if count == 0:
        stream.write("(no events match)\n")
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
