"""The timeline: events in time order as lines a person reads. Pure; no I/O.

Invariants:
- One line per event, in the order the events arrive ((ts, eventId) order
  from the reader), except that a tool call's start and its own finishing
  event are one line, also when other events came between them (calls run
  in parallel), as long as the finish comes within MERGE_WINDOW events of
  the start: the call, at its start's place, timed from its start, with the
  finish's status, exit code and duration. A finish stamped before its own
  start (the two hook processes' clocks disagree) arrives first; when its
  start follows at once, the two are one line too, at the finish's place,
  with the finish's status (a start never undoes a finish, as in
  core/observation_fold.py) and, unless a duration was recorded, 0 ms.
  Lines keep the order of their first events, so they stream: memory holds
  the lines after a call still waiting for its finish (at most
  MERGE_WINDOW of them) and the targets of calls still open (bounded by the
  calls that never finished).
- A line is a function of its events (and, for a finish read apart from its
  start, the start's target): the same events give the same line.
- `failed` means status `error` or `cancelled`, or a non-zero exit code,
  the digest's rule.
- The header's facts (files changed, latest test results) are folds over
  the lines, bounded by the number of distinct files and test commands.
  They are the timeline's seam to the digest's derivations: `target_of`,
  `FilesChanged` and `TestResults` are the only places that decide what a
  call acted on and what a test run said.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any

from agent_journal.core import tools
from agent_journal.core.model import (
    CHECKPOINT,
    ENTRY,
    INVALIDATION,
    OBSERVATION,
    TOMBSTONE,
    Event,
)
from agent_journal.core.recovery.facts import output_text
from agent_journal.core.recovery.facts import target_of as call_target
from agent_journal.core.recovery.test_runs import command_key

STARTED = "started"
FAILED_STATUSES = frozenset({"error", "cancelled"})
TARGET_CHARS = 200
PROMPT_WORDS = 12

WRITING_TOOLS = frozenset({tools.WRITE, tools.EDIT, tools.NOTEBOOK_EDIT})  # core/tools.py
SUMMARY_CHARS = 160


def is_failed(status: Any, exit_code: Any) -> bool:
    return (isinstance(status, str) and status in FAILED_STATUSES) or (
        isinstance(exit_code, int) and not isinstance(exit_code, bool) and exit_code != 0)


def cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def target_of(tool: Any, kind: str, data: dict[str, Any]) -> str | None:
    """What an observation was about: the file, command or pattern of a tool
    call (the input field the digest names a call by, core/recovery/facts.py),
    the first words of a prompt, else a short JSON of its input."""
    value = data.get("input")
    found = call_target(tool if isinstance(tool, str) else None, value)
    if found:
        return cut(found, TARGET_CHARS)
    found = task_list_summary(tool, value)
    if found:
        return cut(found, TARGET_CHARS)
    hook = data.get("hook")
    if isinstance(hook, dict):
        for key in ("prompt", "last_assistant_message", "message", "source", "trigger"):
            found = hook.get(key)
            if isinstance(found, str) and found.strip():
                return first_words(found)
    for key in ("text", "prompt", "message"):
        found = data.get(key)
        if isinstance(found, str) and found.strip():
            return first_words(found)
    if value is None or value == {}:
        return None
    if isinstance(value, str):
        return first_words(value) if kind != "tool_call" else cut(value, TARGET_CHARS)
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return cut(text, TARGET_CHARS)


def task_list_summary(tool: Any, value: Any) -> str | None:
    """A task list (a whole list's todos, or its plan steps) in a few words: how many
    tasks, how many done, and the one in progress (else the next one)."""
    if not isinstance(value, dict):
        return None
    kind = tools.kind_of(tool if isinstance(tool, str) else None)
    items = value.get("todos") if kind == tools.TODO_LIST else (
        value.get("plan") if kind == tools.PLAN_STEPS else None)
    if not isinstance(items, list):
        return None
    tasks = [(t.get("status"), t.get("content") or t.get("step") or t.get("activeForm"))
             for t in items if isinstance(t, dict)]
    done = sum(1 for status, _ in tasks if status == "completed")
    text = f"{len(tasks)} task{'' if len(tasks) == 1 else 's'}, {done} done"
    for wanted, word in (("in_progress", "now"), ("pending", "next")):
        found = next((str(what) for status, what in tasks
                      if status == wanted and isinstance(what, str)), None)
        if found is not None:
            return f"{text}; {word}: {found}"
    return text


def first_words(text: str) -> str:
    words = text.split()
    head = " ".join(words[:PROMPT_WORDS])
    return cut(head + (" …" if len(words) > PROMPT_WORDS else ""), TARGET_CHARS)


def entry_text(kind: str, fields: Any) -> str:
    if not isinstance(fields, dict):
        return ""
    if kind == "decision" and "question" in fields:
        return f"{fields.get('question')} -> {fields.get('chosen')}"
    for key in ("claim", "text"):
        if isinstance(fields.get(key), str):
            return str(fields[key])
    return "; ".join(f"{k}: {v}" for k, v in sorted(fields.items()))


class Line:
    """One timeline line; `as_json` is its documented JSON-lines object."""

    __slots__ = ("ts", "end_ts", "type", "kind", "id", "session", "author", "replica", "tool",
                 "target", "status", "exit_code", "duration_ms", "failed", "event_ids",
                 "text", "input", "output", "artifact", "pos")

    def __init__(self, ev: Event) -> None:
        self.ts = ev.ts
        self.end_ts: str | None = None
        self.type = ev.type
        self.kind = ev.kind
        self.id = ev.id
        self.session = ev.session
        self.author = ev.author
        self.replica = ev.replica
        self.tool: str | None = None
        self.target: str | None = None
        self.status: str | None = None
        self.exit_code: int | None = None
        self.duration_ms: int | None = None
        self.failed = False
        self.event_ids = [ev.event_id]
        self.text: str | None = None
        self.input: Any = None
        # Observations only: the output as stored in the event (a preview when
        # `artifact` says the whole is a blob), for the failures view and HTML.
        self.output: Any = None
        self.artifact: Any = None
        # The position of its first event in the events `lines` was given.
        self.pos = 0

    def as_json(self) -> dict[str, Any]:
        return {"ts": self.ts, "endTs": self.end_ts, "type": self.type, "kind": self.kind,
                "id": self.id, "session": self.session, "author": self.author,
                "tool": self.tool, "target": self.target, "status": self.status,
                "exitCode": self.exit_code, "durationMs": self.duration_ms,
                "failed": self.failed, "text": self.text, "eventIds": list(self.event_ids)}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _observe(line: Line, ev: Event) -> None:
    """Fold one observation event into its line: later non-null values win."""
    data = ev.data
    get = data.get
    tool = get("tool")
    if type(tool) is str:
        line.tool = tool
    value = get("input")
    if value is not None:
        line.input = value
    if value is not None or line.target is None:
        target = target_of(line.tool, ev.kind, data)
        if target is not None:
            line.target = target
    status = get("status")
    if type(status) is str and not (status == STARTED and line.status not in (None, STARTED)):
        line.status = status
    exit_code = get("exitCode")
    if type(exit_code) is int:
        line.exit_code = exit_code
    duration = get("durationMs")
    if type(duration) is int:
        line.duration_ms = duration
    output = get("output")
    if output is not None:
        line.output = output
        line.artifact = get("artifact")
    line.failed = is_failed(line.status, line.exit_code)


def line_of(ev: Event) -> Line:
    line = Line(ev)
    data = ev.data
    if ev.type == OBSERVATION:
        _observe(line, ev)
    elif ev.type == ENTRY:
        line.text = entry_text(ev.kind, data.get("fields"))
        line.target = cut(line.text, TARGET_CHARS)
        line.status = "recorded"
    elif ev.type in (INVALIDATION, TOMBSTONE):
        line.text = _str(data.get("reason"))
        line.target = ev.id
        line.status = "purged" if data.get("purged") is True else None
    elif ev.type == CHECKPOINT:
        line.text = _str(data.get("note"))
        line.target = ev.id
    return line


# How far apart (in events, counted in the order read) a call's start and its finish may
# be and still make one line: calls run in parallel interleave their events, and a line
# waits at most this long for its finish before it is shown as started.
MERGE_WINDOW = 32


def lines(events: Iterable[Event], hidden: set[str] | frozenset[str] = frozenset()
          ) -> Iterator[Line]:
    """Lines of `events` (already in time order). Events about a `hidden`
    (tombstoned) id, other than the tombstones themselves, give nothing.

    A call's start waits for its finish: the lines after it are held until it
    finishes or MERGE_WINDOW events have passed since it started (then it is
    shown as started, and its finish is a line of its own). Each line's `pos`
    is the position of its first event among `events` (hidden ones counted).
    Which events make a line is decided within MERGE_WINDOW events of its first
    one (of the events about one id, which mostly are a start and a finish), so
    a part of the events gives the same lines as the whole, but near its ends
    (ops/timeline.py reads `--last N` backward on that promise)."""
    held: deque[Line] = deque()
    # id -> its started line, held until its finish arrives.
    waiting: dict[str, Line] = {}
    # id -> (tool, target) of a start shown before its finish arrived.
    open_targets: dict[str, tuple[str | None, str | None]] = {}
    # The newest line, when it is a finish no start was seen for: its own start,
    # stamped later (the two hook processes' clocks disagree), may follow at once.
    late: Line | None = None
    previous = None
    pos = -1
    for ev in events:
        pos += 1
        yield from _release(held, waiting, open_targets, pos, late)
        if ev.event_id == previous:
            continue  # a second copy of one event (two segments hold it)
        previous = ev.event_id
        if ev.id in hidden and ev.type in (ENTRY, OBSERVATION, INVALIDATION):
            continue
        finish, late = late, None
        if ev.type == OBSERVATION:
            key = str(ev.id)
            started = ev.data.get("status") == STARTED
            line = waiting.get(key)
            if line is not None and not started:
                _observe(line, ev)
                line.event_ids.append(ev.event_id)
                line.end_ts = ev.ts
                if line.status != STARTED:
                    del waiting[key]
                continue
            if finish is not None and finish.id == ev.id and started \
                    and pos - finish.pos <= MERGE_WINDOW:
                _late_start(finish, ev)
                continue
        line = line_of(ev)
        line.pos = pos
        if ev.type == OBSERVATION and line.status == STARTED:
            # (A second start of an id still waiting is a call of its own: the
            # first is let go, shown as started.)
            waiting[str(ev.id)] = line
        elif ev.type == OBSERVATION and line.status is not None:
            known = open_targets.pop(str(ev.id), None)
            if known is not None:
                line.tool = line.tool or known[0]
                line.target = line.target or known[1]
            else:
                late = line
        held.append(line)
    while held:
        yield held.popleft()


def _release(held: deque[Line], waiting: dict[str, Line],
             open_targets: dict[str, tuple[str | None, str | None]], pos: int,
             late: Line | None) -> Iterator[Line]:
    """The held lines that may go before the event at `pos`: those before the oldest
    call still waiting for its finish (a call that has waited MERGE_WINDOW events goes,
    shown as started) and before a finish whose own start may still follow."""
    while held:
        head = held[0]
        if head is late:
            return
        if head.status == STARTED and waiting.get(str(head.id)) is head:
            if pos - head.pos <= MERGE_WINDOW:
                return
            del waiting[str(head.id)]
            open_targets[str(head.id)] = (head.tool, head.target)
        yield held.popleft()


def _late_start(finish: Line, start: Event) -> Line:
    """A finish and its own start stamped after it: one call, at the finish's place."""
    _observe(finish, start)
    finish.event_ids.append(start.event_id)
    finish.end_ts = finish.ts
    if finish.duration_ms is None:
        finish.duration_ms = 0  # the stamps say nothing of how long it ran
    return finish


# -- session ids as people tell them apart ------------------------------------------------

SESSION_CHARS = 8
# A UUID whose first characters are a clock (versions 1, 6 and 7): Codex's session and
# thread ids are version 7, so sessions started in the same minute or so share their
# first eight characters. Their last characters are random.
_CLOCK_FIRST = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[167][0-9a-fA-F]{3}-"
                          r"[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
TAIL_MARK = "…"


def clock_first(session: str) -> bool:
    return _CLOCK_FIRST.fullmatch(session) is not None


def short_session(session: str | None, table: dict[str, str] | None = None) -> str:
    """How a session id is shown: its form in `table` (short_sessions), else its first
    SESSION_CHARS characters, or for a clock-first UUID `…` and its last ones."""
    if session is None:
        return "-"
    if table is not None and session in table:
        return table[session]
    if clock_first(session):
        return TAIL_MARK + session[-SESSION_CHARS:]
    return session[:SESSION_CHARS]


def short_sessions(sessions: Iterable[str]) -> dict[str, str]:
    """Each session's shortest form of at least SESSION_CHARS characters that no other
    of `sessions` shares (as git shortens hashes): a prefix, or for a clock-first UUID
    `…` and a suffix."""
    out: dict[str, str] = {}
    heads = sorted({s for s in sessions if not clock_first(s)})
    tails = sorted({s[::-1] for s in sessions if clock_first(s)})
    for keys, tail in ((heads, False), (tails, True)):
        for i, key in enumerate(keys):
            need = SESSION_CHARS
            for j in (i - 1, i + 1):
                if 0 <= j < len(keys):
                    need = max(need, _shared(key, keys[j]) + 1)
            part = key[:need]
            if tail:
                out[key[::-1]] = TAIL_MARK + part[::-1] if need < len(key) else key[::-1]
            else:
                out[key] = part
    return out


def _shared(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def session_matches(session: str | None, given: str) -> bool:
    """`--session` as the help says: the id, its first characters, or the form shown
    (`…` and the last characters of a clock-first UUID, with or without the mark)."""
    if session is None:
        return False
    if session.startswith(given):
        return True
    tail = given[len(TAIL_MARK):] if given.startswith(TAIL_MARK) else given
    return len(tail) >= 4 and clock_first(session) and session.endswith(tail)


# -- header facts: the seam to the digest's derivations -----------------------------------

class FilesChanged:
    """Paths that succeeded calls writing or editing a file acted on."""

    def __init__(self) -> None:
        self.paths: dict[str, dict[str, Any]] = {}

    def add(self, line: Line) -> None:
        if line.type != OBSERVATION or tools.kind_of(line.tool) not in WRITING_TOOLS \
                or line.failed or line.status in (None, STARTED) or not line.target:
            return
        have = self.paths.setdefault(line.target, {"path": line.target, "count": 0,
                                                   "lastTs": line.ts})
        have["count"] += 1
        have["lastTs"] = max(have["lastTs"], line.ts)

    def result(self) -> list[dict[str, Any]]:
        return sorted(self.paths.values(), key=lambda f: (f["lastTs"], f["path"]))


def test_run(line: Line, parse_run: Any = None) -> Any:
    """What a finished shell call's output says as a test or check run (the digest's
    parsers, core/recovery/checks.py, whose `parse_run` a caller folding many lines
    passes in), or None when it is not one."""
    if parse_run is None:
        from agent_journal.core.recovery.checks import parse_run
    text = output_text(line.output) or ""
    tail = line.artifact.get("tail") if isinstance(line.artifact, dict) else None
    if isinstance(tail, str):
        text = f"{text}\n{tail}"
    return parse_run(text)


class TestResults:
    """The latest finished run of each test or check command: a shell call whose output
    holds a runner's summary, as the digest finds them (core/recovery)."""

    __test__ = False  # not a pytest class
    KEEP = 5

    def __init__(self) -> None:
        # The parsers' module is imported here, not by every reader of this one
        # (show's text names calls by target_of), and once, not once a line.
        from agent_journal.core.recovery.checks import parse_run

        self.parse_run = parse_run
        self.latest: dict[str, dict[str, Any]] = {}

    def add(self, line: Line) -> None:
        if line.type != OBSERVATION or tools.kind_of(line.tool) != tools.SHELL \
                or not line.target or line.status in (None, STARTED):
            return
        run = test_run(line, self.parse_run)
        if run is None:
            return
        key = command_key(line.target)
        self.latest.pop(key, None)
        self.latest[key] = {
            "command": line.target, "ts": line.ts, "passed": bool(run.ok) and not line.failed,
            "status": line.status, "exitCode": line.exit_code,
            "summary": cut(run.summary, SUMMARY_CHARS), "id": line.id}
        while len(self.latest) > self.KEEP:
            self.latest.pop(next(iter(self.latest)))

    def result(self) -> list[dict[str, Any]]:
        return list(self.latest.values())


class Header:
    """Counts, span, files changed and latest test results over lines."""

    def __init__(self) -> None:
        self.lines = 0
        self.by_type: dict[str, int] = {}
        self.failed = 0
        self.first: str | None = None
        self.last: str | None = None
        self.sessions: set[str] = set()
        self.files = FilesChanged()
        self.tests = TestResults()

    def add(self, line: Line) -> None:
        self.lines += 1
        self.by_type[line.type] = self.by_type.get(line.type, 0) + 1
        self.failed += line.failed
        end = line.end_ts or line.ts
        self.first = line.ts if self.first is None else min(self.first, line.ts)
        self.last = end if self.last is None else max(self.last, end)
        if line.session is not None and len(self.sessions) < 1000:
            self.sessions.add(line.session)
        self.files.add(line)
        self.tests.add(line)

    def as_json(self) -> dict[str, Any]:
        return {"lines": self.lines, "byType": dict(sorted(self.by_type.items())),
                "failed": self.failed, "first": self.first, "last": self.last,
                "sessions": len(self.sessions), "filesChanged": self.files.result(),
                "tests": self.tests.result()}
