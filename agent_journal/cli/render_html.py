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
header{padding:12px 16px;background:#fff;border-bottom:1px solid #ddd;position:sticky;top:0}
h1{font-size:16px;margin:0 0 6px}
.facts{white-space:pre-wrap;color:#444;margin:4px 0}
.bar label{margin-right:16px}
.row{border-left:6px solid #999;background:#fff;margin:2px 8px;padding:2px 8px}
.row summary{cursor:pointer;list-style:none;white-space:nowrap;overflow:hidden;
text-overflow:ellipsis}
.row summary::-webkit-details-marker{display:none}
.row .ts{color:#666}.row .ses{color:#888}.row .tool{font-weight:bold}
.row pre{white-space:pre-wrap;word-break:break-all;background:#f4f4f4;padding:6px;margin:4px 0}
.k-read{border-left-color:#2f6fdf}.k-write{border-left-color:#2e9d49}
.k-bash{border-left-color:#f08c00}.k-search{border-left-color:#7b61c4}
.k-tool{border-left-color:#777}.k-session{border-left-color:#bbb}
.t-entry{border-left-color:#8e44ad;background:#f8f0fc}
.t-invalidation{border-left-color:#b7791f;background:#fff8e6}
.t-tombstone{border-left-color:#000;background:#eee}
.t-checkpoint{border-left-color:#0f8b8d;background:#eefafa}
.row.failed{border-left-color:#d00;background:#ffecec;color:#a00000}
.badge{display:inline-block;padding:0 4px;border-radius:3px;background:#eee;color:#333}
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
      option.textContent = s;
      session.appendChild(option);
    }
  }
  function apply() {
    var count = 0;
    for (var i = 0; i < rows.length; i++) {
      var r = rows[i];
      var ok = (!failures.checked || r.getAttribute('data-failed') === '1') &&
               (!session.value || r.getAttribute('data-session') === session.value);
      r.hidden = !ok;
      if (ok) { count++; }
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
    return f"<div>{escape(label)}</div><pre>{escape(text)}</pre>"


def row_html(line: Line, output: str | None, problem: str | None) -> str:
    from agent_journal.cli.render_timeline import (
        duration,
        label,
        line_duration,
        status_text,
        target_text,
    )

    classes = ["row", f"t-{line.type}" if line.type == "observation" else "", _kind_class(line)]
    if line.failed:
        classes.append("failed")
    status = status_text(line)
    summary = (f"<span class=ts>{escape(line.ts)}</span> "
               f"<span class=ses>{escape((line.session or '-')[:8])}</span> "
               f"<span class=tool>{escape(label(line))}</span> "
               f"{escape(target_text(line))} "
               + (f"<span class=badge>{escape(status)}</span> " if status else "")
               + escape(duration(line_duration(line))))
    body = [f"<div>id {escape(str(line.id))}; events {escape(', '.join(line.event_ids))}; "
            f"by {escape(line.author)}{'' if line.session is None else ', session '}"
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
        text = line.input if isinstance(line.input, str) else json.dumps(
            line.input, indent=2, ensure_ascii=False, sort_keys=True)
        body.append(_pre("input", text))
    if problem is not None:
        body.append(_pre("output not shown", problem))
    elif output is not None:
        body.append(_pre("output", output))
    failed = "1" if line.failed else "0"
    return (f'<details class="{" ".join(c for c in classes if c)}" data-failed="{failed}" '
            f'data-session="{escape(line.session or "", quote=True)}">'
            f"<summary>{summary}</summary>{''.join(body)}</details>\n")


def _csp() -> str:
    digest = base64.b64encode(hashlib.sha256(SCRIPT.encode("utf-8")).digest()).decode()
    return (f"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{digest}'; "
            "img-src 'none'; connect-src 'none'; form-action 'none'; base-uri 'none'")


def write_page(stream: TextIO, workspace: str, timeline: Any) -> int:
    from agent_journal.cli.render_timeline import header_lines

    head = timeline.header()
    facts = "\n".join(header_lines(workspace, head, False)[1:])
    title = f"Timeline of workspace {workspace}"
    if head.get("asOf"):
        title += f", as of {head['asOf']}"
    stream.write(
        "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
        f'<meta http-equiv="Content-Security-Policy" content="{escape(_csp(), quote=True)}">'
        '<meta name=viewport content="width=device-width">'
        f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>\n"
        f"<header><h1>{escape(title)}</h1><div class=facts>{escape(facts)}</div>"
        "<div class=bar><label><input type=checkbox id=failures-only> failures only</label>"
        "<label>session <select id=session><option value=''>all</option></select></label>"
        "<button id=expand type=button>expand all</button> "
        "<button id=collapse type=button>collapse all</button> "
        "<span><span id=shown></span> shown</span></div></header>\n<main>\n")
    count = 0
    for line in timeline.lines():
        output, problem = (None, None)
        if line.type == "observation":
            output, problem = timeline.whole_output(line)
        stream.write(row_html(line, output, problem))
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
