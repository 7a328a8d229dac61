"""digest: what an agent needs to resume work, ready to put in front of a prompt.

Invariants:
- Objectives and live constraints are rendered verbatim (a human wrote
  them): never trimmed, never redacted, never rewritten. When they alone
  exceed the bound they are printed whole and the digest says so.
- Tombstoned content never renders at all: no tombstoned entry or
  observation contributes a single field. Invalidated and suppressed
  entries never appear as live; they are listed only under "Retracted",
  with the reason.
- An anchor is `present` only when the observation it cites is held here and
  not tombstoned; evidence that is gone reads `unknown`, and anchors outside
  the journal read `external` (not checked), never `present`.
- Bounded: the Markdown fits `max_chars` by dropping the least important
  sections' oldest items first, and it says what it left out. `--json`
  carries the same selection as structure.
- `downgradedAnchors` is null: only a retention pass (compact) assesses it.
- The output is a function of the event set (every order is (ts, id)),
  whether the events were read from the segments or through the digest's
  cache (digest_cache.py): observations are classified by the same fields
  either way, and the few that are rendered are read whole.

Everything above "the operation" is pure; below it, the reads.
"""

from __future__ import annotations

import json

from agent_journal.core.anchors import EXTERNAL, anchor_report
from agent_journal.core.codec import PeekedEvent, PeekOnlyEvent
from agent_journal.core.derive import INVALIDATED, Derived
from agent_journal.core.model import ENTRY_FIELDS, Event

TYPE_CHECKING = False  # `typing` costs ~5 ms to import; mypy reads this as True
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from agent_journal.ops.context import Context
    from agent_journal.storage.segment_reader import ReadResult
    from agent_journal.storage.workspace import Workspace

DEFAULT_MAX_CHARS = 8000

if TYPE_CHECKING:
    Fill = Callable[[Derived, set[str]], None]

TOOL_CALL = "tool_call"
STARTED = "started"
FAILED_STATUSES = frozenset({"error", "cancelled"})

# The input key that names what a tool acted on, shown verbatim.
MAIN_INPUT_KEYS: dict[str, tuple[str, ...]] = {
    "Bash": ("command",),
    "Read": ("file_path",),
    "Write": ("file_path",),
    "Edit": ("file_path",),
    "MultiEdit": ("file_path",),
    "NotebookEdit": ("notebook_path", "file_path"),
    "Grep": ("pattern",),
    "Glob": ("pattern",),
    "WebFetch": ("url",),
    "WebSearch": ("query",),
}
WRITING_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})
# Inputs of other tools are shown as compact JSON, cut to this many characters.
GENERIC_INPUT_CHARS = 200

# How many items each section keeps as candidates before the bound is applied;
# the rest are counted as "earlier, not shown". A busy journal holds far more
# tool calls than any prompt should carry, and because the bound trims whole
# sections in priority order, a long list of old successes must not be able to
# starve the recent activity below it.
CAPS = {
    "unfinishedToolCalls": 50,
    "liveEntries": 500,
    "retracted": 50,
    "failedToolCalls": 30,
    "succeededToolCalls": 15,
    "filesTouched": 50,
    "recentActivity": 20,
}

WATERMARK = ("These tool calls started but never recorded an outcome: the session may "
             "have crashed or been compacted mid-call, so their effects are unknown. "
             "Verify the workspace before acting; do not repeat them blindly.")
RETRACTED_NOTE = "Not live: their reasoning was retracted. Do not rely on them."


# -- pure helpers -------------------------------------------------------------------------

def main_input(tool: str | None, value: Any) -> str | None:
    """The part of a tool's input a reader recognises it by, verbatim when known."""
    if value is None:
        return None
    if isinstance(value, dict) and isinstance(tool, str) and tool in MAIN_INPUT_KEYS:
        for key in MAIN_INPUT_KEYS[tool]:
            if isinstance(value.get(key), str):
                return str(value[key])
    if isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    if len(text) > GENERIC_INPUT_CHARS:
        cut = len(text) - GENERIC_INPUT_CHARS
        text = f"{text[:GENERIC_INPUT_CHARS]}... ({cut} more characters)"
    return text


def _longest_backtick_run(text: str) -> int:
    longest = run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    return longest


def code(text: str) -> str:
    """`text` as Markdown code, its bytes unchanged (fences outgrow any backtick run).

    Multi-line text becomes a fenced block that starts on its own line.
    """
    if text == "":
        return "(empty)"
    ticks = _longest_backtick_run(text) + 1
    if "\n" in text or "\r" in text:
        fence = "`" * max(3, ticks)
        return f"\n{fence}\n{text}\n{fence}"
    pad = " " if text[0] in "` " or text[-1] in "` " else ""
    return f"{'`' * ticks}{pad}{text}{pad}{'`' * ticks}"


def _fields_text(kind: str, fields: dict[str, Any]) -> str:
    if kind == "finding" and "claim" in fields:
        return str(fields["claim"])
    if kind == "decision" and "question" in fields and "chosen" in fields:
        return f"{fields['question']} — chosen: {fields['chosen']}"
    if list(fields) == ["text"]:
        return str(fields["text"])
    names = list(ENTRY_FIELDS.get(kind, ())) + sorted(n for n in fields
                                                      if n not in ENTRY_FIELDS.get(kind, ()))
    return "; ".join(f"{n}: {fields[n]}" for n in names if n in fields)


def _anchor_md(report: dict[str, Any]) -> str:
    status = report["status"]
    if status == EXTERNAL:
        return f"{code(report['anchor'])} external (outside the journal, not checked)"
    if report["reason"]:
        return f"{code(report['anchor'])} {status} ({report['reason']})"
    return f"{code(report['anchor'])} {status}"


class Section:
    """One trimmable part of the digest: rendered items, oldest first."""

    __slots__ = ("key", "title", "intro", "noun", "md", "items", "total")

    def __init__(self, key: str, title: str, noun: str, intro: str | None = None) -> None:
        self.key = key
        self.title = title
        self.intro = intro
        self.noun = noun
        self.md: list[str] = []
        self.items: list[dict[str, Any]] = []
        self.total = 0

    def add(self, item: dict[str, Any], md: str) -> None:
        self.items.append(item)
        self.md.append(md)

    def head(self) -> str:
        return f"## {self.title}\n" + (f"{self.intro}\n" if self.intro else "")

    def footer(self, shown: int) -> str:
        hidden = self.total - shown
        return f"- ... and {hidden} earlier {self.noun} not shown\n" if hidden else ""

    def render(self, shown: int) -> str:
        if shown == 0:
            return ""
        return self.head() + "".join(self.md[len(self.md) - shown:]) + self.footer(shown) + "\n"


# -- collecting ---------------------------------------------------------------------------

def _tool_call_item(view: dict[str, Any], main: str | None) -> dict[str, Any]:
    return {"id": view["id"], "kind": view["kind"], "tool": view["tool"], "mainInput": main,
            "status": view["status"], "exitCode": view["exitCode"], "ts": view["ts"],
            "session": view["session"]}


def _tool_call_md(item: dict[str, Any], show_session: bool) -> str:
    label = item["tool"] or item["kind"]
    meta = [item["status"] or "no status"]
    if item["exitCode"] is not None:
        meta.append(f"exit {item['exitCode']}")
    meta.append(item["ts"])
    meta.append(f"id {item['id']}")
    if show_session and item["session"]:
        meta.append(f"session {item['session']}")
    meta_text = ", ".join(str(m) for m in meta)
    main = item["mainInput"]
    if main is None:
        return f"- {label} ({meta_text})\n"
    rendered = code(main)
    if rendered.startswith("\n"):
        return f"- {label} ({meta_text}):{rendered}\n"
    return f"- {label} {rendered} ({meta_text})\n"


# What collect classifies observations by. A large journal is mostly
# observations, and parsing every body in Python cost several times the read
# itself, so the storage layer has SQLite read these from the verified bytes
# (store.Peek); a body it does not peek is parsed as usual (see _summary).
PEEK_VALUES = ("$.kind", "$.session", "$.data.status", "$.data.exitCode", "$.data.tool",
               "$.data.input.file_path", "$.data.input.notebook_path")
PEEK_TYPES = ("$.data.input",)
KIND, SESSION, STATUS, EXIT_CODE, TOOL, FILE_PATH, NOTEBOOK_PATH, INPUT_TYPE = range(8)
PATH_FIELDS = {"file_path": FILE_PATH, "notebook_path": NOTEBOOK_PATH}
PEEKED_TYPES = frozenset({PeekedEvent, PeekOnlyEvent})


def _summary(ev: Event) -> tuple[Any, ...]:
    """What collect reads of one observation event, laid out as its peek is.

    `inputType` is the JSON type name of data.input (None when absent); the
    path fields are the input's own keys when it is an object. A parsed
    event gives the same answers from its data.
    """
    if type(ev) in PEEKED_TYPES:
        return ev.peek  # type: ignore[attr-defined, no-any-return]
    data = ev.data
    value = data.get("input")
    input_type: str | None = None
    paths: tuple[Any, Any] = (None, None)
    if isinstance(value, dict):
        paths, input_type = (value.get("file_path"), value.get("notebook_path")), "object"
    elif value is not None:
        input_type = "other"
    return (ev.kind, ev.session, data.get("status"), data.get("exitCode"), data.get("tool"),
            *paths, input_type)


def _latest(summaries: list[tuple[Any, ...]], field: int) -> Any:
    """The latest non-null value of one field (Derived.observation_view's fold)."""
    for summary in reversed(summaries):
        value = summary[field]
        if value is not None:
            return value
    return None


def _latest_written_path(tool: str, summaries: list[tuple[Any, ...]]) -> str | None:
    """The path a writing tool wrote, from its latest non-null input: that
    input's first non-empty string among the tool's path keys, if it is an
    object."""
    for summary in reversed(summaries):
        input_type = summary[INPUT_TYPE]
        if input_type is None or input_type == "null":
            continue
        if input_type != "object":
            return None
        for key in MAIN_INPUT_KEYS[tool]:
            value = summary[PATH_FIELDS[key]]
            if isinstance(value, str) and value:
                return value
        return None
    return None


def _is_failed(status: Any, exit_code: Any) -> bool:
    return (isinstance(status, str) and status in FAILED_STATUSES) or (
        isinstance(exit_code, int) and not isinstance(exit_code, bool) and exit_code != 0)


def _entry_item(d: Derived, entry_id: str) -> dict[str, Any]:
    ev = d.entry_events[entry_id]
    return {"id": entry_id, "kind": ev.kind, "fields": dict(ev.data.get("fields", {})),
            "subject": ev.data.get("subject"), "author": ev.author, "session": ev.session,
            "ts": ev.ts}


def _live_entry(d: Derived, entry_id: str) -> tuple[dict[str, Any], str]:
    item = _entry_item(d, entry_id)
    kind = item["kind"]
    item["anchors"] = [anchor_report(d, a)
                       for a in d.entry_events[entry_id].data.get("anchors", ())]
    md = f"- {kind} {entry_id}: {_fields_text(kind, item['fields'])}\n"
    if item["anchors"]:
        md += "  anchors: " + "; ".join(_anchor_md(r) for r in item["anchors"]) + "\n"
    elif kind in ("finding", "decision"):
        md += "  anchors: none\n"
    return item, md


def _retracted_entry(d: Derived, entry_id: str) -> tuple[dict[str, Any], str]:
    item = _entry_item(d, entry_id)
    kind = item["kind"]
    outcome = d.outcome.get(entry_id)
    item["outcome"] = outcome
    if outcome == INVALIDATED:
        reason = str(d.invalidations[entry_id][0].data.get("reason"))
        item["reason"] = reason
        why = f"invalidated: {reason}"
    else:
        through = list(d.suppressed_through.get(entry_id, []))
        item["suppressedThrough"] = through
        item["reason"] = ("depends on retracted " + ", ".join(through) if through
                          else "depends on a retracted entry")
        why = f"suppressed: {item['reason']}"
    return item, f"- {kind} {entry_id} ({why}); it said: {_fields_text(kind, item['fields'])}\n"


def collect(d: Derived, session: str | None, fill: Fill | None = None) -> dict[str, Any]:
    """Everything the digest may show, before the bound is applied.

    `fill(d, ids)` is called with the observation ids whose items will be
    rendered, before any is: events read with only their peek must be
    replaced by whole ones there.
    """
    objectives: list[dict[str, Any]] = []
    constraints: list[dict[str, Any]] = []
    live_ids: list[str] = []
    retracted_ids: list[str] = []
    for entry_id in d.visible_entry_ids():
        if not d.is_live(entry_id):
            retracted_ids.append(entry_id)
            continue
        kind = d.entry_events[entry_id].kind
        if kind in ("objective", "constraint"):
            item = _entry_item(d, entry_id)
            item["text"] = _fields_text(kind, item["fields"])
            (objectives if kind == "objective" else constraints).append(item)
        else:
            live_ids.append(entry_id)
    live = Section("liveEntries", "Live decisions and findings", "entries")
    retracted = Section("retracted", "Retracted entries", "retracted entries",
                        RETRACTED_NOTE)
    for section, ids, render in ((live, live_ids, _live_entry),
                                 (retracted, retracted_ids, _retracted_entry)):
        section.total = len(ids)
        for entry_id in ids[-CAPS[section.key]:]:
            section.add(*render(d, entry_id))

    show_session = session is None
    unfinished = Section("unfinishedToolCalls", "Unfinished tool calls", "unfinished tool calls",
                         WATERMARK)
    failed = Section("failedToolCalls", "Failed tool calls", "failed tool calls")
    succeeded = Section("succeededToolCalls", "Succeeded tool calls", "succeeded tool calls")
    files = Section("filesTouched", "Files written or edited", "files")
    recent = Section("recentActivity", "Recent activity", "observations")
    unfinished_ids: list[str] = []
    failed_ids: list[str] = []
    succeeded_ids: list[str] = []
    activity_ids: list[str] = []
    touched: dict[str, dict[str, Any]] = {}
    for obs_id in d.visible_observation_ids():
        events = d.observation_events[obs_id]
        first = _summary(events[0])
        if session is not None and first[SESSION] != session:
            continue
        activity_ids.append(obs_id)
        if first[KIND] != TOOL_CALL:
            continue
        # The same fold as Derived.observation_view (latest non-null value wins;
        # the latest event's status wins), for the few fields classifying needs:
        # building a full view of every observation would dominate a large read.
        summaries = [first] if len(events) == 1 else [_summary(ev) for ev in events]
        status = summaries[-1][STATUS] or _latest(summaries, STATUS)
        if status == STARTED:
            unfinished_ids.append(obs_id)
        elif _is_failed(status, _latest(summaries, EXIT_CODE)):
            failed_ids.append(obs_id)
        else:
            succeeded_ids.append(obs_id)
            tool = _latest(summaries, TOOL)
            if not isinstance(tool, str) or tool not in WRITING_TOOLS:
                continue
            path = _latest_written_path(tool, summaries)
            if path is not None:
                last_ts = events[-1].ts
                entry = touched.setdefault(path, {"path": path, "tools": {}, "count": 0,
                                                  "lastTs": last_ts})
                entry["tools"][tool] = entry["tools"].get(tool, 0) + 1
                entry["count"] += 1
                entry["lastTs"] = max(entry["lastTs"], last_ts)

    listed = ((unfinished, unfinished_ids), (failed, failed_ids), (succeeded, succeeded_ids),
              (recent, activity_ids))
    if fill is not None:
        fill(d, {i for section, ids in listed for i in ids[-CAPS[section.key]:]})
    for section, ids in listed:
        section.total = len(ids)
        for obs_id in ids[-CAPS[section.key]:]:
            view = d.observation_view(obs_id)
            item = _tool_call_item(view, main_input(view["tool"], view["input"]))
            section.add(item, _tool_call_md(item, show_session))

    files.total = len(touched)
    ordered = sorted(touched.values(), key=lambda f: (f["lastTs"], f["path"]))
    for f in ordered[-CAPS["filesTouched"]:]:
        tools = ", ".join(f"{t} x{n}" if n > 1 else t for t, n in sorted(f["tools"].items()))
        item = {"path": f["path"], "tools": dict(sorted(f["tools"].items())),
                "count": f["count"], "lastTs": f["lastTs"]}
        files.add(item, f"- {code(f['path'])} ({tools}; last {f['lastTs']})\n")

    # Priority order, most important first: trimming starts from the end.
    sections = [unfinished, live, retracted, failed, succeeded, files, recent]
    return {"objectives": objectives, "liveConstraints": constraints, "sections": sections}


# -- rendering ----------------------------------------------------------------------------

def _fixed_md(workspace: str, session: str | None, collected: dict[str, Any],
              damage: dict[str, Any]) -> str:
    scope = f"session {session}" if session is not None else "all sessions"
    out = [f"# Journal digest: workspace {workspace}\n",
           f"Tool calls: {scope}. Entries: all sessions.\n"]
    unreadable, malformed = damage["unreadable"], damage["malformed"]
    if unreadable or malformed:
        out.append(f"WARNING: {len(unreadable)} unreadable segment(s), {len(malformed)} "
                   "malformed row(s): this digest is a floor, not a total.\n")
    out.append("\n## Objectives\n")
    if not collected["objectives"]:
        out.append("(none recorded)\n")
    for item in collected["objectives"]:
        out.append(f"- {item['id']} ({item['author']}): {item['text']}\n")
    out.append("\n## Live constraints\n")
    if not collected["liveConstraints"]:
        out.append("(none)\n")
    for item in collected["liveConstraints"]:
        out.append(f"- {item['id']} ({item['author']}): {item['text']}\n")
    out.append("\n")
    return "".join(out)


def _trim_note(sections: list[Section], shown: list[int], max_chars: int) -> str:
    parts = [f"{s.title} ({len(s.md) - n} of {len(s.md)})"
             for s, n in zip(sections, shown, strict=True) if n < len(s.md)]
    if not parts:
        return ""
    return (f"_Left out to fit --max-chars {max_chars}, least important first: "
            + "; ".join(parts) + "._\n")


def fit(fixed: str, sections: list[Section], max_chars: int) -> list[int]:
    """How many items of each section to show: drop the least important section's
    oldest items first until the whole document fits (or nothing is left to drop)."""
    shown = [len(s.md) for s in sections]
    # suffix[i][n]: characters of the newest n items of section i
    suffix: list[list[int]] = []
    for s in sections:
        sums = [0]
        for md in reversed(s.md):
            sums.append(sums[-1] + len(md))
        suffix.append(sums)
    heads = [len(s.head()) for s in sections]

    def size() -> int:
        total = len(fixed)
        for i, s in enumerate(sections):
            if shown[i]:
                total += heads[i] + suffix[i][shown[i]] + len(s.footer(shown[i])) + 1
        return total + len(_trim_note(sections, shown, max_chars))

    i = len(sections) - 1
    while i >= 0 and size() > max_chars:
        if shown[i] == 0:
            i -= 1
            continue
        shown[i] -= 1
    return shown


def build(d: Derived, *, workspace: str, session: str | None, max_chars: int,
          damage: dict[str, Any], fill: Fill | None = None) -> tuple[str, dict[str, Any]]:
    """(markdown, json) for one digest."""
    collected = collect(d, session, fill)
    sections: list[Section] = collected["sections"]
    fixed = _fixed_md(workspace, session, collected, damage)
    shown = fit(fixed, sections, max_chars)
    body = "".join(s.render(n) for s, n in zip(sections, shown, strict=True))
    note = _trim_note(sections, shown, max_chars)
    markdown = (fixed + body + note).rstrip("\n") + "\n"
    over = len(markdown) > max_chars
    if over and len(fixed) > max_chars:
        markdown += (f"_The objectives and live constraints alone exceed --max-chars "
                     f"{max_chars}; they are printed whole._\n")
    elif over:
        markdown += f"_This digest exceeds --max-chars {max_chars}: the bound is too small._\n"
    report: dict[str, Any] = {
        "workspace": workspace,
        "session": session,
        "objectives": collected["objectives"],
        "liveConstraints": collected["liveConstraints"],
    }
    for s, n in zip(sections, shown, strict=True):
        report[s.key] = s.items[len(s.items) - n:] if n else []
    report["unfinishedInstruction"] = WATERMARK if report["unfinishedToolCalls"] else None
    report["notShown"] = {s.key: s.total - n for s, n in zip(sections, shown, strict=True)
                          if s.total - n}
    report["trimmedToFit"] = {s.key: len(s.md) - n for s, n in zip(sections, shown, strict=True)
                              if len(s.md) - n}
    report["maxChars"] = max_chars
    report["chars"] = len(markdown)
    report["overBound"] = over
    report["downgradedAnchors"] = None
    report.update(damage)
    return markdown, report


# -- the operation ------------------------------------------------------------------------

class _Stale(Exception):
    """The segments changed between the cached read and fetching what it renders."""


def _read(ws: Workspace, *, cached: bool, as_of: str | None = None
          ) -> tuple[ReadResult, Derived, Fill | None]:
    """The workspace as the digest reads it: from the digest cache when it can be
    used; as of a checkpoint or instant, the events up to it (never cached)."""
    from agent_journal.core.derive import derive
    from agent_journal.storage import digest_cache
    from agent_journal.storage.segment_reader import Peek

    if as_of is not None:
        from agent_journal.ops.checkpoints import read_as_of, resolve_as_of

        resolved = resolve_as_of(ws, as_of)
        assert resolved is not None
        cut_result = read_as_of(ws, resolved)
        return cut_result, derive(cut_result.events), None

    peek = Peek(PEEK_VALUES, PEEK_TYPES)
    result = digest_cache.read(ws, peek) if cached else None
    if result is None:
        result = ws.read(peek=peek)
        return result, derive(result.events), None

    def fill(d: Derived, ids: set[str]) -> None:
        pending = {i for i in ids
                   if any(type(e) is PeekOnlyEvent for e in d.observation_events[i])}
        if not pending:
            return
        found: dict[str, list[Event]] = {}
        for ev in ws.events_with_subjects(pending, "observation"):
            found.setdefault(ev.id, []).append(ev)  # type: ignore[arg-type]
        for obs_id in pending:
            want = sorted(e.event_id for e in d.observation_events[obs_id])
            have = sorted(found.get(obs_id, []), key=lambda e: e.sort_key)
            if sorted(e.event_id for e in have) != want:
                raise _Stale(obs_id)
            d.observation_events[obs_id] = have

    return result, derive(result.events), fill


def _markdown_and_report(ws: Workspace, *, session: str | None, max_chars: int,
                         as_of: str | None = None) -> tuple[str, dict[str, Any], ReadResult]:
    from agent_journal.ops.context import damage_lists
    from agent_journal.storage.segment_reader import PausedGC

    with PausedGC():
        for cached in (True, False):
            result, d, fill = _read(ws, cached=cached and as_of is None, as_of=as_of)
            try:
                markdown, report = build(d, workspace=ws.name, session=session,
                                         max_chars=max_chars, damage=damage_lists(result),
                                         fill=fill)
            except _Stale:
                continue  # read again, from the segments themselves
            return markdown, report, result
    raise AssertionError("a direct read never goes stale")


def digest(ctx: Context, *, session: str | None = None, max_chars: int | None = None,
           as_of: str | None = None) -> tuple[str, dict[str, Any], ReadResult]:
    from agent_journal.core.errors import UsageError
    from agent_journal.core.model import validate_id
    from agent_journal.ops.checkpoints import parse_as_of

    parse_as_of(as_of)
    if session is not None:
        validate_id(session, "--session")
    if max_chars is None:
        max_chars = DEFAULT_MAX_CHARS
    if max_chars < 1:
        raise UsageError("--max-chars must be at least 1")
    return _markdown_and_report(ctx.open(create=False), session=session, max_chars=max_chars,
                                as_of=as_of)


def session_markdown(ws: Workspace, max_chars: int) -> str:
    """The digest the Claude Code hook prints at session start and after compaction.

    The objectives and constraints are never trimmed, so the result can exceed
    `max_chars`; the hook cuts it to Claude Code's limit.
    """
    return _markdown_and_report(ws, session=None, max_chars=max_chars)[0]
