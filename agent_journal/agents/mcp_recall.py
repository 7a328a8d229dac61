"""What the MCP recall server answers, as bounded text, without the MCP SDK.

The tools are few and their schemas short on purpose: an agent's client sends every
tool's schema with every turn. This module holds the tool table, checks arguments
against it, runs the same operations the CLI runs and renders compact text;
mcp_server.py only carries that text over the protocol.

Invariants:
- Every answer comes from the CLI's own operations (ops/search, ops/evidence,
  ops/trace, ops/digest, ops/writes), so it follows the CLI's rules: nothing
  tombstoned is ever returned, retracted entries carry their outcome, and an exact
  output is returned only after `evidence.get` verified it; a mismatch is an error
  answer holding no content at all, never a preview.
- Every answer is bounded (MAX_CHARS characters of text in all) and ends with a note
  saying what was cut and how to ask for the rest.
- Arguments are checked against the tool's schema before anything is read or
  written; a bad one is a one-line error answer, never a write.
- `search` never returns an observation of this server's own tools (a tool name
  starting with OWN_TOOLS, the name the installer registers the server under): the
  hook journals each call before it runs, so a search's top hit was the search itself.
  They are left out before the limit, so the page is filled by other hits.
- Each call reads the journal afresh: nothing is kept between calls, so an event
  anyone writes (a tombstone from the CLI) holds from the very next call.
- Writes are authored as the agent, with the server's session; without a session
  they are refused rather than recorded as a person's (a weak search is then not
  logged either, whatever config.json says).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agent_journal.agents.mcp_installer import SERVER
from agent_journal.core.errors import JournalError, UsageError
from agent_journal.core.model import ENTRY_FIELDS, ENTRY_KINDS, validate_id
from agent_journal.ops.context import Context

# Text in one answer, all blocks together: about 4,000 tokens, well under what agent
# clients accept from one tool result before they cut it themselves.
MAX_CHARS = 16_000
SEARCH_LIMIT, SEARCH_MAX = 10, 50
GET_MAX_IDS = 20
TIMELINE_LAST, TIMELINE_MAX = 30, 500
TARGET_CHARS = 80  # a timeline line's target (command, path, text) is cut to this
# A snippet is a few words, but one word can be a megabyte long: a hit's line is cut to
# this, so no single hit outgrows the answer and leaves it empty.
SNIPPET_CHARS = 400

DIGEST_URI = "agent-journal://digest"
DIGEST_NAME = "digest"
DIGEST_DESCRIPTION = ("What to resume from: objectives, constraints, live findings and "
                      "decisions, unfinished and failed tool calls.")
INSTRUCTIONS = ("This project's journal of findings, decisions and tool calls. Search it "
                "before re-deriving something; get returns exact outputs; record what you "
                "establish, anchored to its evidence.")
TEXT_FIELDS = ("claim", "question", "chosen", "text")
# Claude Code names an MCP tool mcp__<server>__<tool> (Codex's capture names its calls the
# same way, capture/codex.py); the server is registered as SERVER (mcp_installer.py).
OWN_TOOLS = f"mcp__{SERVER}__"
NO_SESSION = ("writes need the agent's session: start the server with --session ID or "
              "$AGENT_JOURNAL_SESSION")


class Answer:
    """One tool result: text blocks, and whether the call failed."""

    def __init__(self, blocks: list[str], is_error: bool = False) -> None:
        self.blocks = blocks
        self.is_error = is_error

    @classmethod
    def error(cls, text: str) -> Answer:
        return cls([text], is_error=True)

    @property
    def text(self) -> str:
        return "\n".join(self.blocks)


class Journal:
    """The one workspace a server answers for, and the session its writes carry."""

    def __init__(self, root: str | None, workspace: str, session: str | None) -> None:
        self.reads = Context(root, workspace)
        self.writes = Context(root, workspace, session) if session else None

    def writer(self) -> Context:
        if self.writes is None:
            raise UsageError(NO_SESSION)
        return self.writes


# -- the tool table ------------------------------------------------------------------------

def _str(description: str | None = None) -> dict[str, Any]:
    return {"type": "string", **({"description": description} if description else {})}


def _strs(description: str | None = None, max_items: int | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "array", "items": {"type": "string"}}
    if max_items is not None:
        schema.update(minItems=1, maxItems=max_items)
    if description:
        schema["description"] = description
    return schema


def _int(minimum: int, maximum: int | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "integer", "minimum": minimum}
    if maximum is not None:
        schema["maximum"] = maximum
    return schema


def _object(properties: dict[str, Any], required: tuple[str, ...]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required),
            "additionalProperties": False}


TOOLS: dict[str, dict[str, Any]] = {
    "search": {
        "description": "Search this project's agent memory (its journal): what earlier "
                       "sessions did and found, tool calls, findings, decisions. Ranked; get "
                       "reads a hit whole.",
        "inputSchema": _object({"query": _str(), "kind": _str("e.g. finding, tool_call"),
                                "limit": _int(1, SEARCH_MAX)}, ("query",)),
        "readOnly": True,
    },
    "get": {
        "description": "Read journal records whole by id: an entry, or a past tool call's "
                       "exact output (verified). Long text is cut; offset skips characters.",
        "inputSchema": _object({"ids": _strs(max_items=GET_MAX_IDS), "offset": _int(0)},
                               ("ids",)),
        "readOnly": True,
    },
    "timeline": {
        "description": "The project's journal history in time order: recent tool calls, "
                       "prompts and failures of this and earlier sessions, one line each.",
        "inputSchema": _object({"since": _str("ISO time, or 30m, 2h, 3d"),
                                "last": _int(1, TIMELINE_MAX),
                                "failures_only": {"type": "boolean"},
                                "session": _str()}, ()),
        "readOnly": True,
    },
    "trace": {
        "description": "Why, from the journal: the findings and decisions citing an id (a "
                       "call, a file, an entry) and every entry built on them.",
        "inputSchema": _object({"id": _str()}, ("id",)),
        "readOnly": True,
    },
    "record": {
        "description": "Remember in the project's journal, for later sessions: a finding "
                       "(claim), decision (question, chosen), constraint, objective, note.",
        "inputSchema": _object({
            "kind": {"type": "string", "enum": list(ENTRY_KINDS)},
            "id": _str(),
            **{name: _str() for name in TEXT_FIELDS},
            "anchors": _strs("tool_use:ID, file:PATH, commit:SHA or url:URL"),
            "depends_on": _strs("entry ids"),
        }, ("kind", "id")),
        "readOnly": False,
    },
    "invalidate": {
        "description": "Retract a journal finding or decision that proved wrong; it and "
                       "the entries built on it stop being live.",
        "inputSchema": _object({"target": _str(), "reason": _str()}, ("target", "reason")),
        "readOnly": False,
    },
}


def check_arguments(tool: str, arguments: Any) -> dict[str, Any]:
    """`arguments` as the tool's schema allows them, else UsageError naming the first fault."""
    schema = TOOLS[tool]["inputSchema"]
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise UsageError(f"{tool}: arguments must be an object")
    properties = schema["properties"]
    for name in arguments:
        if name not in properties:
            raise UsageError(f"{tool}: unknown argument {name!r}; it takes "
                             + ", ".join(properties))
    for name in schema["required"]:
        if arguments.get(name) is None:
            raise UsageError(f"{tool}: {name} is required")
    clean = {}
    for name, value in arguments.items():
        if value is not None:  # an explicit null is the same as leaving it out
            _check_value(f"{tool}: {name}", properties[name], value)
            clean[name] = value
    return clean


def _check_value(what: str, schema: dict[str, Any], value: Any) -> None:
    kind = schema["type"]
    if kind == "string":
        if not isinstance(value, str):
            raise UsageError(f"{what} must be a string")
        if "enum" in schema and value not in schema["enum"]:
            raise UsageError(f"{what} must be one of {', '.join(schema['enum'])}")
    elif kind == "boolean":
        if not isinstance(value, bool):
            raise UsageError(f"{what} must be true or false")
    elif kind == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            raise UsageError(f"{what} must be a whole number")
        if value < schema["minimum"]:
            raise UsageError(f"{what} must be at least {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            raise UsageError(f"{what} must be at most {schema['maximum']}")
    elif kind == "array":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise UsageError(f"{what} must be a list of strings")
        if len(value) < schema.get("minItems", 0):
            raise UsageError(f"{what} must not be empty")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            raise UsageError(f"{what} takes at most {schema['maxItems']} items")


# The operations' messages name CLI flags; an agent knows these names as arguments.
_FLAG_WORDS = {"--kind": "kind", "--limit": "limit", "--id": "id", "--reason": "reason",
               "--depends-on": "depends_on", "--session": "session",
               **{f"--{name}": name for name in TEXT_FIELDS}}
_FLAG_RE = re.compile("|".join(re.escape(f) + r"\b" for f in
                               sorted(_FLAG_WORDS, key=len, reverse=True)))


def _argument_words(message: str) -> str:
    return _FLAG_RE.sub(lambda m: _FLAG_WORDS[m.group(0)], message)


def call(journal: Journal, tool: str, arguments: Any) -> Answer:
    """Run one tool call; every failure a caller can cause is an error answer."""
    run = _RUNNERS[tool]
    try:
        return run(journal, check_arguments(tool, arguments))
    except JournalError as exc:
        return Answer.error(_argument_words(exc.message))


# -- bounds --------------------------------------------------------------------------------

def _one_line(text: Any, limit: int | None = None) -> str:
    line = " ".join(str(text).split())
    if limit is not None and len(line) > limit:
        line = line[:limit - 1] + "…"
    return line


def _damage_note(unreadable: list[Any], malformed: list[Any]) -> list[str]:
    if not unreadable and not malformed:
        return []
    return [f"note: {len(unreadable)} unreadable segment(s), {len(malformed)} malformed "
            "row(s): this answer is a floor, not a total"]


def _fit_lines(lines: list[str], *, keep_last: bool = False) -> tuple[list[str], int]:
    """The lines that fit in MAX_CHARS characters (from the start, or from the end), and
    how many were left out."""
    budget = MAX_CHARS
    kept: list[str] = []
    used = 0
    for line in (reversed(lines) if keep_last else lines):
        if used + len(line) + 1 > budget:
            break
        kept.append(line)
        used += len(line) + 1
    if keep_last:
        kept.reverse()
    return kept, len(lines) - len(kept)


# -- search --------------------------------------------------------------------------------

def _search(journal: Journal, args: dict[str, Any]) -> Answer:
    from agent_journal.ops import search

    # Retracted entries are returned, marked: an agent that does not find a retracted
    # decision would take it up again.
    report = search.search(journal.reads, args["query"], limit=args.get("limit", SEARCH_LIMIT),
                           kind=args.get("kind"), include_retracted=True,
                           exclude_tools=(OWN_TOOLS,), log_as=journal.writes,
                           log_misses=journal.writes is not None)
    # What the thesaurus added and which words matched nothing, as the CLI says it.
    lines = [f"thesaurus: {word} also searched as {' '.join(added)}"
             for word, added in report["expansions"].items()]
    if report["unmatched"]:
        lines.append(f"no document holds: {' '.join(report['unmatched'])}")
    notes = len(lines)
    for hit in report["hits"]:
        mark = f" [{hit['outcome']}]" if hit["outcome"] not in (None, "live") else ""
        lines.append(f"{hit['id']}  {hit['type']}/{hit['kind']}  {hit['ts']}{mark}  "
                     f"{_one_line(hit['snippet'], SNIPPET_CHARS)}")
    shown, cut = _fit_lines(lines)
    if len(lines) == notes:
        shown = lines + ["no matches"]
    if cut:
        shown.append(f"note: {cut} more hit(s) cut to fit; ask with a smaller limit")
    shown += [f"note: {text}" for text in report["warnings"]]
    return Answer(["\n".join(shown + _damage_note(report["unreadable"], report["malformed"]))])


# -- get -----------------------------------------------------------------------------------

def _get(journal: Journal, args: dict[str, Any]) -> Answer:
    from agent_journal.ops import evidence

    ids = list(dict.fromkeys(args["ids"]))
    for some_id in ids:
        validate_id(some_id, "id")
    offset = args.get("offset", 0)
    found: list[tuple[str, Any]] = []
    failures: list[str] = []
    for some_id in ids:
        try:
            found.append((some_id, evidence.get(journal.reads, some_id)))
        except JournalError as exc:
            failures.append(exc.message)
    if failures:
        # Never a part: an answer is whole and verified, or it is an error (of one line).
        return Answer.error("; ".join(failures))
    blocks: list[str] = []
    notes: list[str] = []
    budget = MAX_CHARS
    for some_id, ev in found:
        if ev.record is not None:
            what = f"entry {some_id}"
            text = json.dumps(ev.record, ensure_ascii=False)
        else:
            what = f"output of {some_id}"
            text = (ev.raw or b"").decode("utf-8", errors="replace")
        notes += ev.warnings
        total = len(text)
        if budget <= 0:
            notes.append(f"{what}: not shown, the answer is full; get it on its own")
            continue
        if offset and offset >= total:
            notes.append(f"{what}: offset {offset} is past its {total} characters")
            continue
        part = text[offset:offset + budget]
        budget -= len(part)
        blocks.append(part)
        end = offset + len(part)
        if offset or end < total:
            more = (f"; get with offset={end} for the rest" if end < total else "")
            notes.append(f"{what}: characters {offset}-{end} of {total}{more}")
    if notes:
        blocks.append("note: " + "\nnote: ".join(notes))
    return Answer(blocks)


# -- timeline ------------------------------------------------------------------------------

_RELATIVE = re.compile(r"^\s*(\d+)\s*([smhd])\s*$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def since_ts(text: str) -> str:
    """A `since` argument (an ISO instant, or a span back from now: 30m, 2h, 3d) as a ts."""
    from datetime import timedelta

    from agent_journal.core import clock

    match = _RELATIVE.match(text)
    if match and len(match.group(1)) > 12:  # past any span back to year 1; int() refuses
        raise UsageError(f"since {text.strip()[:40]!r}… reaches before year 1")
    if match:
        try:
            instant = clock.now() - timedelta(seconds=int(match.group(1)) * _SECONDS[match[2]])
        except OverflowError:
            raise UsageError(f"since {text.strip()!r} reaches before year 1") from None
    else:
        try:
            instant = clock.parse_instant(text)
        except UsageError:
            raise UsageError(f"since must be an ISO instant or a span like 30m, 2h, 3d: "
                             f"{text!r}") from None
    return clock.format_ts(instant)


def timeline_rows(ctx: Context, *, since: str | None, last: int, failures_only: bool,
                  session: str | None
                  ) -> tuple[list[dict[str, Any]], tuple[list[Any], list[Any]]]:
    """The `timeline` command's lines (ops/timeline.py), newest `last`, oldest first, as
    rows for one short line each; and the damage the read met (unreadable, malformed)."""
    from agent_journal.core.model import TOMBSTONE
    from agent_journal.ops.timeline import Filters, Timeline

    filters = Filters(session=session, failures_only=failures_only, since=since)
    with Timeline(ctx, filters, last=last) as timeline:
        rows = [{"ts": line.ts, "id": line.id, "session": line.session,
                 "what": line.tool or line.kind, "target": line.target,
                 "status": line.status, "exitCode": line.exit_code,
                 "durationMs": line.duration_ms} for line in timeline.lines()
                # An agent is not told what was erased, not even its id.
                if line.type != TOMBSTONE]
        return rows, (timeline.unreadable, timeline.malformed)


def _fields_line(fields: Any) -> str:
    if not isinstance(fields, dict):
        return ""
    return " / ".join(str(fields[k]) for k in TEXT_FIELDS if fields.get(k) is not None)


def _timeline_line(row: dict[str, Any]) -> str:
    from agent_journal.core.timeline import short_session

    parts = [row["ts"], short_session(row["session"]), str(row["what"])]
    if row["target"]:
        parts.append(_one_line(row["target"], TARGET_CHARS))
    status = [str(row["status"])] if row["status"] else []
    if row["exitCode"] is not None:
        status.append(f"exit {row['exitCode']}")
    if row["durationMs"] is not None:
        status.append(f"{row['durationMs']} ms")
    if status:
        parts.append("[" + ", ".join(status) + "]")
    parts.append(f"id {row['id']}")
    return "  ".join(parts)


def _timeline(journal: Journal, args: dict[str, Any]) -> Answer:
    session = args.get("session")
    if session is not None:
        validate_id(session, "session")
    since = args.get("since")
    rows, damage = timeline_rows(journal.reads, since=None if since is None else since_ts(since),
                                 last=args.get("last", TIMELINE_LAST),
                                 failures_only=args.get("failures_only", False), session=session)
    lines, cut = _fit_lines([_timeline_line(r) for r in rows], keep_last=True)
    if not rows:
        lines = ["no events"]
    if cut:
        lines.insert(0, f"note: {cut} earlier event(s) cut to fit; narrow with since or last")
    return Answer(["\n".join(lines + _damage_note(*damage))])


# -- trace ---------------------------------------------------------------------------------

def _trace(journal: Journal, args: dict[str, Any]) -> Answer:
    from agent_journal.ops.trace import trace

    report, result = trace(journal.reads, args["id"])
    damage = _damage_note(result.unreadable, result.malformed)
    if not report["chain"]:
        return Answer(["\n".join([f"no entry cites {args['id']}"] + damage)])
    cites = {row["id"]: row["via"] for row in report["matched"]}
    lines = []
    for row in report["chain"]:
        how = (f"cites it as {cites[row['id']]}" if row["depth"] == 0
               else f"depends on {row['via']}")
        lines.append(f"{'  ' * row['depth']}{row['id']}  {row['kind']}  {row['outcome']}  {how}")
    shown, cut = _fit_lines(lines)
    if cut:
        shown.append(f"note: {cut} deeper entries cut to fit")
    return Answer(["\n".join(shown + damage)])


# -- writes --------------------------------------------------------------------------------

def _record(journal: Journal, args: dict[str, Any]) -> Answer:
    from agent_journal.ops import writes

    kind = args["kind"]
    wanted = ENTRY_FIELDS[kind]
    extra = [name for name in TEXT_FIELDS if name in args and name not in wanted]
    if extra:
        raise UsageError(f"record: {', '.join(extra)} does not apply to a {kind}; it takes "
                         + ", ".join(wanted))
    ctx = journal.writer()
    result = writes.record(ctx, kind=kind, entry_id=args["id"],
                           fields={name: args.get(name) for name in wanted},
                           anchors=args.get("anchors", []),
                           depends_on=args.get("depends_on", []), subject=None)
    return _written("recorded", result)


def _invalidate(journal: Journal, args: dict[str, Any]) -> Answer:
    from agent_journal.ops import writes

    ctx = journal.writer()
    return _written("invalidated", writes.invalidate(ctx, args["target"], args["reason"]))


def _written(verb: str, result: Any) -> Answer:
    text = f"{verb} {result.id} (event {result.event_id})"
    if result.warning:
        text += f"\nnote: {result.warning}"
    return Answer([text])


# -- the digest (a resource, and a prompt that loads it) -----------------------------------

def digest_text(journal: Journal) -> str:
    """The digest's Markdown, bounded by the digest's own rule (objectives and constraints
    are never cut; the digest says so when they alone overflow)."""
    from agent_journal.ops.digest import digest
    from agent_journal.storage.segment_reader import PausedGC

    with PausedGC():
        markdown, _, result = digest(journal.reads)
    notes = _damage_note(result.unreadable, result.malformed)
    return markdown + ("\n" + "\n".join(notes) + "\n" if notes else "")


if TYPE_CHECKING:
    Runner = Callable[[Journal, dict[str, Any]], Answer]

_RUNNERS: dict[str, Runner] = {
    "search": _search, "get": _get, "timeline": _timeline, "trace": _trace,
    "record": _record, "invalidate": _invalidate,
}
