"""`timeline --html FILE`: the timeline as one self-contained HTML page.

Invariants:
- Self-contained: no network, no external asset, no font, no image; one
  inline stylesheet and one inline script, and a Content-Security-Policy
  that allows nothing else (the script by its hash), so the page works from
  a file URL and even a failure of escaping could not run stored text.
- Every stored text (targets, inputs, outputs, entry fields, reasons, ids,
  session names) goes through `escape`: `html.escape` after bidi controls
  are made visible markers (core/bidi.py), so a tool output holding
  `<script>` shows as text and a command holding U+202E reads as it ran.
- Tombstoned content is never written: the page is made from the same lines
  as the text timeline (ops/timeline.py), which never yield it.
- Read as a person needs it: a row's summary keeps its status badge in view
  however long its target (the target is what gives way), a failure shows its
  first error line, times are short under a heading per day (the whole instant
  on hover), an edit is a diff, a task list a list.
- All or nothing: the page is written to a temporary file beside FILE and
  renamed over it only when complete; a missing folder or a FILE that
  exists and is not a regular file is refused before anything is read.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from html import escape as _html_escape
from typing import Any, TextIO

from agent_journal.core.bidi import visible
from agent_journal.core.errors import JournalError, UsageError
from agent_journal.core.timeline import Line

STYLE = """
body{font:13px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;margin:0;
background:#fafafa;color:#222}
header{padding:12px 16px;background:#fff;border-bottom:1px solid #ddd;position:sticky;top:0;
z-index:1}
h1{font-size:16px;margin:0 0 6px}
.facts{white-space:pre-wrap;color:#444;margin:4px 0}
.bar label{margin-right:16px}
.day{margin:10px 8px 2px;color:#555;font-weight:bold}
.row{border-left:6px solid #999;background:#fff;margin:2px 8px;padding:2px 8px}
.row summary{cursor:pointer;list-style:none;display:grid;column-gap:10px;
grid-template-columns:max-content max-content max-content max-content max-content minmax(0,1fr);
align-items:baseline;white-space:nowrap}
.row summary::-webkit-details-marker{display:none}
.row summary .tgt{overflow:hidden;text-overflow:ellipsis}
.row .ts{color:#666}.row .ses{color:#888}.row .tool{font-weight:bold}
.row .dur{color:#666;min-width:3.5em;text-align:right}
.row .errline{grid-column:1/-1;padding-left:6em;overflow:hidden;text-overflow:ellipsis;
font-weight:bold}
.row pre{white-space:pre-wrap;word-break:break-all;background:#f4f4f4;padding:6px;margin:4px 0}
.row .label{color:#555;margin-top:6px}
.diff .del{background:#ffe3e3;color:#8a1010;display:block}
.diff .add{background:#dcf5dc;color:#11621c;display:block}
.diff .hunk{color:#6a5acd;display:block}
ul.tasks{list-style:none;padding-left:6px;margin:4px 0}
ul.tasks li .mark{display:inline-block;width:2.2em}
ul.tasks li.done{color:#4a7d4a;text-decoration:line-through}
ul.tasks li.doing{font-weight:bold}
.k-read{border-left-color:#2f6fdf}.k-write{border-left-color:#2e9d49}
.k-bash{border-left-color:#f08c00}.k-search{border-left-color:#7b61c4}
.k-tool{border-left-color:#777}.k-session{border-left-color:#bbb}
.t-entry{border-left-color:#8e44ad;background:#f8f0fc}
.t-invalidation{border-left-color:#b7791f;background:#fff8e6}
.t-tombstone{border-left-color:#000;background:#eee}
.t-checkpoint{border-left-color:#0f8b8d;background:#eefafa}
.row.failed{border-left-color:#d00;background:#ffecec;color:#a00000}
.badge{display:inline-block;justify-self:start;padding:0 4px;border-radius:3px;background:#eee;
color:#333}
.failed .badge{background:#d00;color:#fff}
"""

SCRIPT = """
(function () {
  var rows = document.querySelectorAll('.row');
  var failures = document.getElementById('failures-only');
  var session = document.getElementById('session');
  var shown = document.getElementById('shown');
  var seen = {};
  for (var i = 0; i < rows.length; i++) {
    var s = rows[i].getAttribute('data-session');
    if (s && !seen[s]) {
      seen[s] = true;
      var option = document.createElement('option');
      option.value = s;
      option.textContent = rows[i].getAttribute('data-session-shown') + '  (' + s + ')';
      session.appendChild(option);
    }
  }
  var days = document.querySelectorAll('.day');
  function apply() {
    var count = 0;
    for (var i = 0; i < rows.length; i++) {
      var r = rows[i];
      var ok = (!failures.checked || r.getAttribute('data-failed') === '1') &&
               (!session.value || r.getAttribute('data-session') === session.value);
      r.hidden = !ok;
      if (ok) { count++; }
    }
    for (var j = 0; j < days.length; j++) {
      var any = false;
      for (var n = days[j].nextElementSibling; n && !n.classList.contains('day');
           n = n.nextElementSibling) {
        if (!n.hidden) { any = true; break; }
      }
      days[j].hidden = !any;
    }
    shown.textContent = String(count);
  }
  failures.addEventListener('change', apply);
  session.addEventListener('change', apply);
  document.getElementById('expand').addEventListener('click', function () {
    var all = document.querySelectorAll('details.row');
    for (var i = 0; i < all.length; i++) { all[i].open = true; }
  });
  document.getElementById('collapse').addEventListener('click', function () {
    var all = document.querySelectorAll('details.row');
    for (var i = 0; i < all.length; i++) { all[i].open = false; }
  });
  apply();
})();
"""

TOOL_CLASSES = {
    "Read": "k-read", "NotebookRead": "k-read",
    "Write": "k-write", "Edit": "k-write", "MultiEdit": "k-write", "NotebookEdit": "k-write",
    "Bash": "k-bash", "Grep": "k-search", "Glob": "k-search", "WebFetch": "k-search",
    "WebSearch": "k-search",
}


def escape(text: str, quote: bool = True) -> str:
    """The one escape of the page: bidi controls as markers, then HTML's own."""
    return _html_escape(visible(text), quote)


def check_destination(path: str, root: str | None) -> str:
    """Refuse (usage error, nothing written) a FILE the page cannot replace, or one
    inside the journal `root` (compaction would never erase the page)."""
    from agent_journal.storage.root import refuse_inside_root

    if not path:
        raise UsageError("--html needs a file name")
    absolute = os.path.abspath(path)
    refuse_inside_root(absolute, root, "--html")
    folder = os.path.dirname(absolute)
    if not os.path.isdir(folder):
        raise UsageError(f"--html {path}: folder {folder} does not exist")
    if os.path.lexists(absolute) and not os.path.isfile(absolute):
        raise UsageError(f"--html {path}: exists and is not a regular file")
    return absolute


def _kind_class(line: Line) -> str:
    if line.type != "observation":
        return f"t-{line.type}" if line.type in (
            "entry", "invalidation", "tombstone", "checkpoint") else "t-other"
    if line.tool in TOOL_CLASSES:
        return TOOL_CLASSES[line.tool]
    return "k-tool" if line.kind == "tool_call" else "k-session"


def _pre(label: str, text: str) -> str:
    return f"<div class=label>{escape(label)}</div><pre>{escape(text)}</pre>"


# Characters of an edit's old and new text compared line by line; larger texts are shown
# whole, one after the other.
DIFF_CHARS = 200_000
# A first error line is looked for among the output's first lines.
ERROR_SCAN_LINES = 400
_ERROR_WORDS = ("error", "fail", "fatal", "exception", "traceback", "denied", "not found",
                "no such", "cannot", "can't", "refused", "invalid", "panic")


def short_time(ts: str) -> str:
    """HH:MM:SS of an instant (the date stands above it, the whole instant on hover)."""
    return ts[11:19] if len(ts) >= 19 and ts[10:11] == "T" else ts


def first_error_line(output: str | None, problem: str | None = None) -> str | None:
    """The line of a failed call's output that says what went wrong: the first naming an
    error or failure, else the first that is not blank."""
    if problem is not None:
        return problem
    if not output:
        return None
    first = None
    for number, text in enumerate(output.splitlines()):
        if number >= ERROR_SCAN_LINES:
            break
        text = text.strip()
        if not text:
            continue
        if first is None:
            first = text
        lowered = text.lower()
        if any(word in lowered for word in _ERROR_WORDS):
            return text
    return first


def _diff_html(old: str, new: str) -> str:
    """Old and new text as a unified diff: deleted lines red, added green."""
    import difflib

    if len(old) + len(new) > DIFF_CHARS:
        return _pre("old text", old) + _pre("new text", new)
    lines = []
    for text in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=3):
        if text.startswith(("---", "+++")):
            continue
        lines.append(_diff_line(text))
    if not lines:
        return "<div class=label>no change</div>"
    return f"<pre class=diff>{''.join(lines)}</pre>"


def _diff_line(text: str) -> str:
    cls = {"-": "del", "+": "add", "@": "hunk"}.get(text[:1])
    if cls is None:
        return escape(text) + "\n"
    return f"<span class={cls}>{escape(text)}</span>"


def _patch_html(text: str) -> str:
    """A patch (Codex's apply_patch, a unified diff) with its lines coloured."""
    return f"<pre class=diff>{''.join(_diff_line(t) for t in text.splitlines())}</pre>"


_TASK_MARKS = {"completed": ("[x]", "done"), "in_progress": ("[~]", "doing"),
               "pending": ("[ ]", "todo"), "cancelled": ("[-]", "done")}


def _tasks_html(items: list[tuple[str, str]]) -> str:
    out = []
    for status, text in items:
        mark, cls = _TASK_MARKS.get(status, (f"[{status}]", "todo"))
        out.append(f"<li class={cls}><span class=mark>{escape(mark)}</span>{escape(text)}</li>")
    return f"<ul class=tasks>{''.join(out)}</ul>"


def _str_field(value: dict[str, Any], key: str) -> str | None:
    found = value.get(key)
    return found if isinstance(found, str) else None


def input_html(tool: str | None, value: Any) -> str:
    """A call's input as a person reads it: an edit as a diff, a task list as a list, a
    patch coloured, a command as text; anything else as indented JSON."""
    if isinstance(value, str):
        if tool == "apply_patch" or value.startswith(("*** Begin Patch", "--- ", "diff --git")):
            return "<div class=label>patch</div>" + _patch_html(value)
        return _pre("input", value)
    if not isinstance(value, dict):
        return _pre("input", _json(value))
    path = _str_field(value, "file_path") or _str_field(value, "path")
    if tool in ("Edit", "MultiEdit"):
        edits = [value] if tool == "Edit" else value.get("edits")
        if isinstance(edits, list) and edits and all(
                isinstance(e, dict) and isinstance(e.get("old_string"), str)
                and isinstance(e.get("new_string"), str) for e in edits):
            head = f"edit of {path}" if path else "edit"
            if any(e.get("replace_all") is True for e in edits):
                head += " (every occurrence)"
            return f"<div class=label>{escape(head)}</div>" + "".join(
                _diff_html(e["old_string"], e["new_string"]) for e in edits)
    if tool == "Write" and isinstance(value.get("content"), str):
        return _pre(f"content written to {path}" if path else "content", value["content"])
    tasks = _task_items(tool, value)
    if tasks is not None:
        head = "task list" if tool != "update_plan" else "plan"
        body = f"<div class=label>{escape(head)}</div>{_tasks_html(tasks)}"
        explanation = _str_field(value, "explanation")
        return body + (_pre("explanation", explanation) if explanation else "")
    if tool == "Bash" and isinstance(value.get("command"), str):
        body = _pre("command", value["command"])
        description = _str_field(value, "description")
        return body + (f"<div class=label>{escape(description)}</div>" if description else "")
    return _pre("input", _json(value))


def _task_items(tool: str | None, value: dict[str, Any]) -> list[tuple[str, str]] | None:
    """TodoWrite's todos, Codex's update_plan steps, TaskCreate/TaskUpdate's task."""
    if tool == "TodoWrite" and isinstance(value.get("todos"), list):
        return [(str(t.get("status")), str(t.get("content") or t.get("activeForm") or ""))
                for t in value["todos"] if isinstance(t, dict)]
    if tool == "update_plan" and isinstance(value.get("plan"), list):
        return [(str(t.get("status")), str(t.get("step") or ""))
                for t in value["plan"] if isinstance(t, dict)]
    if tool in ("TaskCreate", "TaskUpdate") and (
            isinstance(value.get("subject"), str) or isinstance(value.get("status"), str)):
        subject = _str_field(value, "subject") or f"task {value.get('taskId', '')}".strip()
        return [(_str_field(value, "status") or "pending", subject)]
    return None


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def row_html(line: Line, output: str | None, problem: str | None,
             sessions: dict[str, str] | None = None) -> str:
    from agent_journal.cli.render_timeline import (
        duration,
        label,
        line_duration,
        status_text,
        target_text,
    )
    from agent_journal.core.timeline import short_session

    classes = ["row", f"t-{line.type}" if line.type == "observation" else "", _kind_class(line)]
    if line.failed:
        classes.append("failed")
    status = status_text(line)
    shown_session = short_session(line.session, sessions)
    when = escape(line.ts, quote=True)
    summary = (f'<time class=ts datetime="{when}" title="{when}">'
               f"{escape(short_time(line.ts))}</time>"
               f'<span class=ses title="{escape(line.session or "", quote=True)}">'
               f"{escape(shown_session)}</span>"
               f"<span class=tool>{escape(label(line))}</span>"
               + (f"<span class=badge>{escape(status)}</span>" if status else "<span></span>")
               + f"<span class=dur>{escape(duration(line_duration(line)))}</span>"
               f'<span class=tgt title="{escape(target_text(line), quote=True)}">'
               f"{escape(target_text(line))}</span>")
    if line.failed:
        error = first_error_line(output, problem)
        if error:
            summary += f"<span class=errline>{escape(error)}</span>"
    ended = "" if line.end_ts is None or line.end_ts == line.ts else f"; ended {line.end_ts}"
    body = [f"<div>id {escape(str(line.id))}; at {escape(line.ts)}{escape(ended)}; events "
            f"{escape(', '.join(line.event_ids))}; by {escape(line.author)}"
            f"{'' if line.session is None else ', session '}"
            f"{escape(line.session or '')}</div>"]
    if line.type == "tombstone":
        body.append(_pre("tombstone: this id's content is hidden everywhere; reason",
                         line.text or ""))
    elif line.type == "invalidation":
        body.append(_pre(f"invalidation of {line.target}: its reasoning was retracted; reason",
                         line.text or ""))
    elif line.type == "entry":
        body.append(_pre(f"{line.kind} (as recorded)", line.text or ""))
    elif line.type == "checkpoint":
        body.append(_pre("checkpoint note", line.text or "(none)"))
    if line.input is not None:
        body.append(input_html(line.tool, line.input))
    if problem is not None:
        body.append(_pre("output not shown", problem))
    elif output is not None:
        body.append(_pre("output", output))
    failed = "1" if line.failed else "0"
    return (f'<details class="{" ".join(c for c in classes if c)}" data-failed="{failed}" '
            f'data-session="{escape(line.session or "", quote=True)}" '
            f'data-session-shown="{escape(shown_session, quote=True)}">'
            f"<summary>{summary}</summary>{''.join(body)}</details>\n")


def _column_style(columns: Any) -> str:
    """The summary's columns as wide as the widest of their kind on this page (in
    characters of the monospaced font), so the rows line up; one wider than that
    widens its own row only, and the target takes what is left."""
    widths = (8, columns.session, columns.label, columns.status + 2, columns.duration)
    cells = " ".join(f"minmax({w}ch,max-content)" for w in widths)
    return f".row summary{{grid-template-columns:{cells} minmax(0,1fr)}}\n"


def _csp() -> str:
    digest = base64.b64encode(hashlib.sha256(SCRIPT.encode("utf-8")).digest()).decode()
    return (f"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{digest}'; "
            "img-src 'none'; connect-src 'none'; form-action 'none'; base-uri 'none'")


def write_page(stream: TextIO, workspace: str, timeline: Any) -> int:
    from agent_journal.cli.render_timeline import (
        Columns,
        duration,
        header_lines,
        label,
        line_duration,
        status_text,
    )
    from agent_journal.core.timeline import Header, short_sessions

    fold = Header()
    columns = Columns()
    for line in timeline.lines():
        fold.add(line)
        columns.add(label(line), status_text(line), duration(line_duration(line)),
                    line.session)
    head = timeline.header_of(fold)
    sessions = short_sessions(fold.sessions)
    columns.table = sessions
    facts = "\n".join(header_lines(workspace, head, False)[1:])
    title = f"Timeline of workspace {workspace}"
    if head.get("asOf"):
        title += f", as of {head['asOf']}"
    stream.write(
        "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
        f'<meta http-equiv="Content-Security-Policy" content="{escape(_csp(), quote=True)}">'
        '<meta name=viewport content="width=device-width">'
        f"<title>{escape(title)}</title><style>{STYLE}{_column_style(columns)}</style>"
        "</head><body>\n"
        f"<header><h1>{escape(title)}</h1><div class=facts>{escape(facts)}</div>"
        "<div class=bar><label><input type=checkbox id=failures-only> failures only</label>"
        "<label>session <select id=session><option value=''>all</option></select></label>"
        "<button id=expand type=button>expand all</button> "
        "<button id=collapse type=button>collapse all</button> "
        "<span><span id=shown></span> shown</span></div></header>\n<main>\n")
    count = 0
    day = None
    for line in timeline.lines():
        output, problem = (None, None)
        if line.type == "observation":
            output, problem = timeline.whole_output(line)
        if line.ts[:10] != day:
            day = line.ts[:10]
            stream.write(f"<div class=day>{escape(day)}</div>\n")
        stream.write(row_html(line, output, problem, sessions))
        count += 1
    stream.write(f"</main>\n<script>{SCRIPT}</script>\n</body></html>\n")
    return count


def write_file(path: str, workspace: str, timeline: Any) -> int:
    """Write the page to `path` (checked by check_destination) all or nothing."""
    folder = os.path.dirname(path)
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    try:
        with open(tmp, "x", encoding="utf-8", newline="\n") as fh:
            count = write_page(fh, workspace, timeline)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise JournalError(f"cannot write --html {path}: "
                               f"{exc.strerror or exc.__class__.__name__}") from None
        raise
    return count
