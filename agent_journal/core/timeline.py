"""The timeline: events in time order as lines a person reads. Pure; no I/O.

Invariants:
- One line per event, in the order the events arrive ((ts, eventId) order
  from the reader), except that a tool call's start immediately followed by
  its own finishing event is one line: the call, timed from its start, with
  the finish's status, exit code and duration. A finish stamped before its
  own start (the two hook processes' clocks disagree) arrives first; when
  its start follows at once, the two are one line too, at the finish's
  place, with the finish's status (a start never undoes a finish, as in
  core/observation_fold.py) and, unless a duration was recorded, 0 ms.
  Nothing is reordered, so the lines stream: memory holds one pending line
  and the targets of calls still open (bounded by the calls that never
  finished).
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
from collections.abc import Iterable, Iterator
from typing import Any

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

WRITING_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})
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
                 "text", "input", "output", "artifact")

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


def lines(events: Iterable[Event], hidden: set[str] | frozenset[str] = frozenset()
          ) -> Iterator[Line]:
    """Lines of `events` (already in time order). Events about a `hidden`
    (tombstoned) id, other than the tombstones themselves, give nothing."""
    # A start waiting for its finish, or a finish (no start seen) for its late start.
    pending: Line | None = None
    open_targets: dict[str, tuple[str | None, str | None]] = {}
    for ev in events:
        if ev.id in hidden and ev.type in (ENTRY, OBSERVATION, INVALIDATION):
            continue
        if pending is not None:
            if ev.type == OBSERVATION and ev.id == pending.id:
                if pending.status == STARTED:
                    _observe(pending, ev)
                    pending.event_ids.append(ev.event_id)
                    pending.end_ts = ev.ts
                    if pending.status != STARTED:
                        open_targets.pop(str(pending.id), None)
                        yield pending
                        pending = None
                    continue
                if ev.data.get("status") == STARTED:
                    yield _late_start(pending, ev)
                    pending = None
                    continue
            yield pending
            pending = None
        line = line_of(ev)
        if ev.type == OBSERVATION and line.status == STARTED:
            open_targets[str(ev.id)] = (line.tool, line.target)
            pending = line
            continue
        if ev.type == OBSERVATION and line.status is not None:
            known = open_targets.pop(str(ev.id), None)
            if known is not None:
                line.tool = line.tool or known[0]
                line.target = line.target or known[1]
            else:
                pending = line  # its start may follow, stamped later
                continue
        yield line
    if pending is not None:
        yield pending


def _late_start(finish: Line, start: Event) -> Line:
    """A finish and its own start stamped after it: one call, at the finish's place."""
    _observe(finish, start)
    finish.event_ids.append(start.event_id)
    finish.end_ts = finish.ts
    if finish.duration_ms is None:
        finish.duration_ms = 0  # the stamps say nothing of how long it ran
    return finish


# -- header facts: the seam to the digest's derivations -----------------------------------

class FilesChanged:
    """Paths that succeeded Write/Edit/MultiEdit/NotebookEdit calls acted on."""

    def __init__(self) -> None:
        self.paths: dict[str, dict[str, Any]] = {}

    def add(self, line: Line) -> None:
        if line.type != OBSERVATION or line.tool not in WRITING_TOOLS or line.failed \
                or line.status in (None, STARTED) or not line.target:
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
        if line.type != OBSERVATION or line.tool != "Bash" or not line.target \
                or line.status in (None, STARTED):
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
