"""digest: what an agent needs to resume work, ready to put in front of a prompt.

Invariants:
- Ordered by what a resuming agent needs: the goal (the first prompt, objectives and live
  constraints), the user's standing instructions, what the user asked since, where the
  work stopped (with the latest plan and todo list), unfinished calls, open problems
  before resolved ones, test runs, commits, files, live entries, ..., files only read,
  then recent activity. The derivations are the pure ones of core/recovery; this module
  picks and renders.
- Objectives and live constraints are rendered verbatim (a human wrote them): never
  trimmed, never redacted, never rewritten. When they alone exceed the bound they are
  printed whole and the digest says so. Every other text is clipped at a word boundary
  and marked `…`.
- Tombstoned content never renders at all: no tombstoned entry or observation
  contributes a single field. Invalidated and suppressed entries never appear as live;
  they are listed only under "Retracted", with the reason. An entry whose cited evidence
  is all gone says so.
- An anchor is `present` only when the observation it cites is held here and not
  tombstoned; evidence that is gone reads `unknown`, and anchors outside the journal
  read `external` (not checked), never `present`.
- Bounded: the Markdown fits `max_chars`, the note of what was left out included, by
  dropping first every run line's earlier runs (Section.lean), then the least important
  sections' oldest items. Whenever an item is not
  shown, the note names the commands that print it. `--json` carries the same
  selection as structure.
- `downgradedAnchors` is null: only a retention pass (compact) assesses it.
- The output is a function of the event set (every order is (ts, id)), whether the
  events were read from the segments or through the digest's cache (digest_cache.py):
  both give each observation event's recovery facts (core.recovery.facts), computed by
  the same function, and fold the visible calls through the same DigestFold, in order;
  through the cache, on from the fold it kept at a verified point, over one stream of
  spans, never all calls held at once.
"""

from __future__ import annotations

from agent_journal.core.anchors import EXTERNAL, PURGED, TOMBSTONED, UNKNOWN, anchor_report
from agent_journal.core.codec import PeekOnlyEvent
from agent_journal.core.derive import INVALIDATED, Derived
from agent_journal.core.model import ENTRY_FIELDS
from agent_journal.core.observation_fold import merge_spans, span_order
from agent_journal.core.recovery.calls import Call, ordered
from agent_journal.core.recovery.digest_fold import RECENT, TAIL, TASK, DigestFold
from agent_journal.core.recovery.facts import event_facts
from agent_journal.core.recovery.failures import is_lookup
from agent_journal.core.recovery.text import clip_middle
from agent_journal.ops.digest_md import clip, code, hhmm, one_line, quote

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any

    from agent_journal.core.model import Event
    from agent_journal.core.observation_fold import Span
    from agent_journal.core.recovery.failures import Failure
    from agent_journal.core.recovery.test_runs import TestRun
    from agent_journal.ops.context import Context
    from agent_journal.storage.segment_reader import ReadResult
    from agent_journal.storage.workspace import Workspace

# Claude Code shows additional context above 10,000 characters only as a short preview.
DEFAULT_MAX_CHARS = 10_000

GOAL_CHARS = 1500
PLAN_CHARS = 800
RECAP_CHARS = 800
PROMPT_CHARS = 500
LAST_MESSAGE_CHARS = 2500
MESSAGE_CHARS = 300
DIAGNOSIS_CHARS = 300  # of the agent's words after a failure, on the failure's line
OUTCOME_CHARS = 450
SUMMARY_CHARS = 1200
META_CHARS = 300
TARGET_CHARS = 120
REASON_CHARS = 200
RESULT_CHARS = 300
HISTORY_CHARS = 120  # an earlier run's summary on a run line

# How many items each section keeps as candidates before the bound is applied; the rest
# are counted as "earlier, not shown".
CAPS = {  # in the sections' priority order, most important first (collect)
    "standingInstructions": 20,
    "asked": 12,
    "stopped": 8,
    "unfinishedToolCalls": 30,
    "openProblems": 20,
    "testRuns": 12,
    "commits": 30,
    "files": 40,
    "liveEntries": 200,
    "outcomes": 10,
    "retracted": 30,
    "resolvedProblems": 20,
    "subagents": 10,
    "summaries": 3,
    "filesRead": 12,
    "sessionMessages": 2,
    "earlierMessages": 12,
    "rewound": 6,
    "recentActivity": 25,
    "failedLookups": 8,
}

# How many of its newest items each section keeps while a less important section still
# has items to give up (fit): what a resuming agent asks first, in every section.
FLOORS = {
    "standingInstructions": 20, "asked": 12, "stopped": 8, "unfinishedToolCalls": 5,
    "openProblems": 6, "testRuns": 10, "commits": 30, "files": 15, "liveEntries": 10,
    "retracted": 3, "resolvedProblems": 4, "subagents": 3, "summaries": 1, "filesRead": 2,
    "earlierMessages": 3, "outcomes": 4,
}

WATERMARK = ("These tool calls started but never recorded an outcome: the session may "
             "have crashed or been compacted mid-call, so their effects are unknown. "
             "Verify the workspace before acting; do not repeat them blindly.")
INSTRUCTIONS_NOTE = ("Rules the user set in prompts, quoted; they hold until the user "
                     "says otherwise.")
FOLDER_CHARS = 400
SHRINK_MIN = 300  # an item clipped to fit the bound keeps at least this much
GIT_OPERATIONS = 8  # the latest git operations (rebase, reset, submodule add, ...) shown
CHANGED_LINES = 12  # files whose latest edit's lines are shown
RETRACTED_NOTE = "Not live: their reasoning was retracted. Do not rely on them."
REWOUND_NOTE = ("Said on a branch of the conversation that was later rewound: not the "
                "current request.")
GONE_NOTE = "its only evidence was erased (tombstoned or purged): it stands unsupported"


# -- entries ------------------------------------------------------------------------------

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


def _entry_item(d: Derived, entry_id: str) -> dict[str, Any]:
    ev = d.entry_events[entry_id]
    return {"id": entry_id, "kind": ev.kind, "fields": dict(ev.data.get("fields", {})),
            "subject": ev.data.get("subject"), "author": ev.author, "session": ev.session,
            "ts": ev.ts}


def _live_entry(d: Derived, entry_id: str, held: Any = None) -> tuple[dict[str, Any], str]:
    item = _entry_item(d, entry_id)
    kind = item["kind"]
    item["anchors"] = [anchor_report(d, a, held)
                       for a in d.entry_events[entry_id].data.get("anchors", ())]
    md = f"- {kind} {entry_id}: {_fields_text(kind, item['fields'])}\n"
    reasons = {r["reason"] if r["status"] == UNKNOWN else r["status"] for r in item["anchors"]}
    # Its only evidence was erased here (tombstoned, or purged by compaction).
    item["evidenceGone"] = bool(item["anchors"]) and reasons <= {TOMBSTONED, PURGED}
    if item["anchors"]:
        md += "  anchors: " + "; ".join(_anchor_md(r) for r in item["anchors"])
        md += f" — {GONE_NOTE}\n" if item["evidenceGone"] else "\n"
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


class Section:
    """One trimmable part of the digest: rendered items, oldest first."""

    __slots__ = ("key", "title", "intro", "noun", "md", "items", "total", "shrink", "same",
                 "lean")

    def __init__(self, key: str, title: str, noun: str, intro: str | None = None) -> None:
        self.key = key
        self.title = title
        self.intro = intro
        self.noun = noun
        self.md: list[str] = []
        self.items: list[dict[str, Any]] = []
        self.total = 0
        # item index -> how to render it within N characters, for an item worth clipping
        # rather than dropping when it is all the bound leaves of its section.
        self.shrink: dict[int, Any] = {}
        # item index -> what it says, for items that may say what another says (a Task's
        # answer and its subagent's own last message): such an item shows once.
        self.same: dict[int, str] = {}
        # item index -> its rendering without the detail a tight bound drops before any
        # item (a run line's earlier runs).
        self.lean: dict[int, str] = {}

    def add(self, item: dict[str, Any], md: str, shrink: Any = None,
            lean: str | None = None, *, same: str | None = None) -> None:
        if shrink is not None:
            self.shrink[len(self.md)] = shrink
        if same:
            self.same[len(self.md)] = same
        if lean is not None:
            self.lean[len(self.md)] = lean
        self.items.append(item)
        self.md.append(md)
        self.total += 1

    def fill(self, items: list[Any], render: Any) -> None:
        """Render only the newest CAPS[key] of `items` (oldest first); count them all."""
        for x in items[-CAPS[self.key]:]:
            self.add(*render(x))
        self.total = len(items)

    def keep_latest(self) -> None:
        cap = CAPS[self.key]
        if len(self.md) > cap:
            cut = len(self.md) - cap
            del self.md[:-cap]
            del self.items[:-cap]
            self.same = {i - cut: s for i, s in self.same.items() if i >= cut}
            self.lean = {i - cut: md for i, md in self.lean.items() if i >= cut}
        if self.same:
            self._drop_repeats()

    def _drop_repeats(self) -> None:
        """Of kept items that say the same, only the last added shows (and counts)."""
        last = {s: i for i, s in sorted(self.same.items())}
        drop = {i for i, s in self.same.items() if last[s] != i}
        if not drop:
            return
        kept = [i for i in range(len(self.md)) if i not in drop]
        self.shrink = {n: self.shrink[i] for n, i in enumerate(kept) if i in self.shrink}
        self.lean = {n: self.lean[i] for n, i in enumerate(kept) if i in self.lean}
        self.md = [self.md[i] for i in kept]
        self.items = [self.items[i] for i in kept]
        self.total -= len(drop)
        self.same = {}

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

def _span(ev: Event) -> Span:
    """An observation event as a span: the span the cache kept (first event's ts and id,
    peek (kind, session, facts, last ts, last id)), or the event itself, its facts
    computed here."""
    if type(ev) is PeekOnlyEvent:
        kind, session, facts, last_ts, last_id = ev.peek  # type: ignore[attr-defined]
        return ev.ts, ev.event_id, last_ts, last_id, kind, session, facts
    return (ev.ts, ev.event_id, ev.ts, ev.event_id, ev.kind, ev.session,
            event_facts(ev.kind, ev.data) or {})


def whole_fold(d: Derived, session: str | None) -> DigestFold:
    """The digest's fold of every visible call of `d` (of `session`, when given)."""
    calls = ordered(calls_of(d, session))
    fold = fold_calls(calls)
    return fold if fold.sufficient() else fold_calls(calls, tail=None)


def calls_of(d: Derived, session: str | None) -> list[Call]:
    """Every visible observation as a Call, in (ts, id) order."""
    out: list[Call] = []
    observations = d.observation_events
    for obs_id in d.visible_observation_ids():
        events = observations[obs_id]
        if len(events) == 1:
            span = _span(events[0])
        else:
            # Single events in order never interleave; the cache hands over spans of
            # several segments only when they do not (digest_cache).
            merged = merge_spans(sorted((_span(ev) for ev in events), key=span_order))
            assert merged is not None
            span = merged
        if session is not None and span[5] != session:
            continue
        out.append(Call(obs_id, span[4], span[5], span[0], span[2], span[6]))
    return out


def _call_line(call: Call, *, result: str | None = None, with_id: bool = False) -> str:
    tool = call.tool or call.kind
    target = call.target
    what = f"{tool} {code(one_line(target, TARGET_CHARS))}" if target else tool
    workdir = call.get("workdir")
    if workdir:
        what += f" in {code(workdir)}"
    desc = call.get("desc")
    if desc and call.tool == "Bash":
        what += f" ({one_line(desc, 80)})"
    if result is None:
        result = _result_of(call)
    ident = f" [{call.id}]" if with_id else ""
    return f"- {hhmm(call.ts)} {what} -> {result}{ident}\n"


def _result_of(call: Call) -> str:
    if call.unfinished:
        return "no outcome recorded"
    run = call.check
    if run is not None:
        return one_line(run.summary, 120)
    if call.failed:
        kind = call.get("refusal") or ("no-op" if call.get("noop") else "error")
        exit_code = call.get("exit")
        reason = call.get("reason")
        head = kind if exit_code is None else f"{kind} (exit {exit_code})"
        return f"{head}: {one_line(reason, REASON_CHARS)}" if reason else head
    made = call.get("commits")
    if made:
        return "committed " + ", ".join(f"{c[1]} {c[0]}" for c in made)
    write = call.get("write")
    if write:
        return write
    result = call.get("result")
    if result:
        return "ok: " + one_line(result, 120)
    return "ok"


def _said_item(said: Any) -> dict[str, Any]:
    return {"id": said.id, "kind": said.kind, "ts": said.ts, "session": said.session,
            "text": said.text, "chars": said.chars, "agent": said.agent}


def fold_calls(calls: list[Call], tail: int | None = TAIL) -> DigestFold:
    """The digest's fold of `calls` (in (ts, id) order)."""
    fold = DigestFold(tail)
    for call in calls:
        fold.step(call)
    return fold


def run_item(r: TestRun) -> tuple[dict[str, Any], str, Any, str]:
    """A command's run line (item, Markdown, no shrink, the line without earlier runs):
    its latest run, then the earlier runs it keeps (test_runs.earlier_runs)."""
    state = "passing" if r.passing else "FAILING"
    extra = f"; fixed after {r.failed_runs} failing run(s)" if r.fixed else ""
    if r.passed_on_rerun:
        extra += "; passed when re-run with nothing edited or run since it failed: flaky?"
    line = (f"- {hhmm(r.ts)} {code(one_line(r.command, TARGET_CHARS))} -> {state}: "
            f"{one_line(r.latest.summary, 160)} ({r.runs} run(s){extra})\n")
    maybe = r.maybe_covered_by
    if maybe is not None:
        # Suggestive evidence only: said in words, never as open, never as fixed.
        line = (f"- {code(one_line(r.command, TARGET_CHARS))}: last seen failing "
                f"{hhmm(r.ts)} ({one_line(r.latest.summary, 120)}); "
                f"{code(one_line(maybe.summary, TARGET_CHARS))} passed at {hhmm(maybe.ts)}, "
                f"which may cover it ({r.runs} run(s))\n")
    earlier = ""
    if r.last_passed is not None:
        earlier += (f"  - last passing run ({hhmm(r.last_passed.ts)}): "
                    f"{one_line(r.last_passed.summary, HISTORY_CHARS)}\n")
    if r.first is not None:
        verdict = "passed" if r.first.ok else "failed"
        earlier += (f"  - first run ({hhmm(r.first.ts)}, {verdict}): "
                    f"{one_line(r.first.summary, HISTORY_CHARS)}\n")
    item = {"command": r.command, "callId": r.call_id, "ts": r.ts, "runs": r.runs,
            "failedRuns": r.failed_runs, "fixed": r.fixed, **r.latest.as_dict(),
            "lastPassed": None if r.last_passed is None else r.last_passed.as_dict(),
            "firstRun": None if r.first is None else r.first.as_dict(),
            "passedOnRerun": r.passed_on_rerun,
            "maybeCoveredBy": None if maybe is None else {
                "command": maybe.summary, "ts": maybe.ts, "callId": maybe.call_id}}
    return item, line + earlier, None, line


def collect(d: Derived, fold: DigestFold, held: Any = None) -> dict[str, Any]:
    """Everything the digest may show, before the bound is applied: the entries of `d`,
    and the calls as `fold` holds them. `held(obs_id)`: whether the journal holds an
    observation an anchor cites (by default, whether `d` does)."""
    objectives: list[dict[str, Any]] = []
    constraints: list[dict[str, Any]] = []
    live = Section("liveEntries", "Live decisions and findings", "entries")
    retracted = Section("retracted", "Retracted entries", "retracted entries", RETRACTED_NOTE)
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
    # Only the newest of each are rendered (their anchors looked up); all are counted.
    retracted.fill(retracted_ids, lambda i: _retracted_entry(d, i))
    live.fill(live_ids, lambda i: _live_entry(d, i, held))

    goal = fold.goal
    asked = Section("asked", "What the user asked since", "prompts")
    for p in fold.asked.items:
        asked.add(_said_item(p), f"- {hhmm(p.ts)} {one_line(p.text, PROMPT_CHARS)}\n")
    for f_call in fold.rejections.items:
        asked.add({"id": f_call.id, "kind": "rejection", "ts": f_call.ts,
                   "text": f_call.get("words")},
                  f"- {hhmm(f_call.ts)} (rejecting {f_call.tool}) "
                  f"{one_line(f_call.get('words'), PROMPT_CHARS)}\n")
    asked.md[:] = [md for _, md in sorted(zip([i["ts"] for i in asked.items], asked.md,
                                              strict=True), key=lambda t: t[0])]
    asked.items.sort(key=lambda i: i["ts"])
    asked.total = fold.asked.total + fold.rejections.total

    rules = Section("standingInstructions", "Standing instructions from the user",
                    "instructions", INSTRUCTIONS_NOTE)
    rules.fill(fold.instructions.result(), lambda r: (
        {"text": r.text, "ts": r.ts, "promptId": r.prompt_id},
        f"- {hhmm(r.ts)} {one_line(r.text, PROMPT_CHARS)}\n"))

    stopped = Section("stopped", "Where it stopped", "items")
    last = fold.assistant.items[-1] if fold.assistant.items else None
    # Claude Code's own messages to the agent (hook feedback, command output) are not
    # where the work stopped: they get their own section, below the work, each text once.
    session_messages = Section("sessionMessages", "Session messages", "session messages")
    session_messages.fill(list(fold.meta.values()), lambda meta: (
        _said_item(meta), f"- {hhmm(meta.ts)} {one_line(meta.text, META_CHARS)}\n"))
    session_messages.total = len(fold.meta_texts)
    # Items in the order the bound drops them (the first first): the last assistant message,
    # what the agent itself said about where it stopped, is kept longest.
    for c, _ in fold.last_actions.items:
        stopped.add({"id": c.id, "kind": "lastAction", "ts": c.ts, "line": _call_line(c)},
                    "- last action:" + _call_line(c)[1:])
    if fold.plan is not None:
        plan = fold.plan[0]
        verdict = "approved" if plan.succeeded else "not approved"
        stopped.add({"kind": "plan", "id": plan.id, "ts": plan.ts, "approved": plan.succeeded,
                     "plan": plan.get("plan")},
                    f"- latest plan ({hhmm(plan.ts)}, {verdict}):\n"
                    + quote(plan.get("plan"), PLAN_CHARS))
    summaries_kept = fold.summaries.items
    recap = summaries_kept[-1] if summaries_kept else None
    if recap is not None and recap.source == "away_summary" and (
            last is None or (recap.ts, recap.id) > (last.ts, last.id)):
        # Claude Code's recap, written after the last message: where it says things stand.
        stopped.add(_said_item(recap), f"- recap ({hhmm(recap.ts)}): "
                                       f"{one_line(recap.text, RECAP_CHARS)}\n")
    if fold.todo is not None:
        todo = fold.todo[0]
        stopped.add({"kind": "todos", "id": todo.id, "ts": todo.ts,
                     "todos": [{"status": t[0], "content": t[1]} for t in todo.get("todos")]},
                    _todo_line(todo.ts, todo.get("todos")))
    if last is not None:
        head = f"- last assistant message ({hhmm(last.ts)}):\n"
        stopped.add(_said_item(last), head + quote(last.text, LAST_MESSAGE_CHARS),
                    shrink=lambda room, text=last.text, head=head: _quote_within(head, text,
                                                                                room))

    unfinished = Section("unfinishedToolCalls", "Unfinished tool calls",
                         "unfinished tool calls", WATERMARK)
    for c in fold.unfinished:
        unfinished.add(_call_item(c), _call_line(c, with_id=True))

    runs = fold.runs.result()
    open_ = Section("openProblems", "Open problems", "open problems")
    resolved = Section("resolvedProblems", "Resolved problems", "resolved problems",
                       "Failed, then a later run of the same call succeeded.")
    for r in runs:
        if r.unresolved:
            latest = r.latest
            line = f"- failing: {code(one_line(r.command, TARGET_CHARS))} -> {latest.summary}"
            if latest.failing:
                line += "; failing: " + ", ".join(latest.failing[:8])
            if latest.first_failure:
                line += f"; first failure: {one_line(latest.first_failure, REASON_CHARS)}"
            said = fold.failures.diagnosis_of(r.call_id)
            line += f" [{r.call_id}]\n" + (
                f"  - the agent then: {one_line(said, DIAGNOSIS_CHARS)}\n" if said else "")
            open_.add({"kind": "testRun", "command": r.command, "callId": r.call_id,
                       "ts": r.ts, **latest.as_dict(), "diagnosis": said}, line)
    open_runs = open_.total
    # A lookup that failed (a file not there, no match) answered a question; it is listed
    # apart, after what the work changed, and is the first thing a tight bound drops.
    kept_open = fold.open_failures()
    problems = [f for f in kept_open if not is_lookup(f.tool, f.target)]
    misses = [f for f in kept_open if is_lookup(f.tool, f.target)]
    open_.fill(problems, lambda f: (_failure_item(f), _failure_line(f, with_id=True)))
    lookups = Section("failedLookups", "Failed lookups", "failed lookups",
                      "Reads, searches and listings that found nothing; not problems.")
    lookups.fill(misses, lambda f: (_failure_item(f), _failure_line(f, with_id=True)))
    lookups.total = len(misses) + fold.failures.lookups_dropped()
    open_.total = fold.failures.visible_open + open_runs - lookups.total
    resolved.fill(fold.failures.resolved_failures(),
                  lambda f: (_failure_item(f), _failure_line(f, with_id=False)))
    resolved.total = fold.failures.resolved_total

    tests = Section("testRuns", "Test and check runs", "commands")
    for r in runs:
        tests.add(*run_item(r))

    git = fold.git.result()
    commit_section = Section("commits", "Commits", "commits")
    for cm in git.commits:
        who = f", by agent {cm.agent}" if cm.agent else ""
        commit_section.add({"hash": cm.hash, "subject": cm.subject, "branch": cm.branch,
                            "callId": cm.call_id, "ts": cm.ts, "agent": cm.agent},
                           f"- {hhmm(cm.ts)} {cm.hash or '(no hash printed)'} "
                           f"{one_line(cm.subject, 160)} "
                           f"(on {cm.branch}{who})\n")
    for push in git.pushes:
        commit_section.add({"push": push.destination, "remote": push.remote,
                            "source": push.source, "callId": push.call_id, "ts": push.ts},
                           f"- {hhmm(push.ts)} pushed {push.source} -> {push.destination} "
                           f"to {push.remote}\n")
    for rej in git.rejected:
        to = f" to {rej.remote}" if rej.remote else ""
        commit_section.add({"pushRejected": rej.destination, "remote": rej.remote,
                            "source": rej.source, "why": rej.why, "callId": rej.call_id,
                            "ts": rej.ts},
                           f"- {hhmm(rej.ts)} push of {rej.source} -> {rej.destination}{to} "
                           f"rejected ({one_line(rej.why, 80)})\n")
    operations = git.operations[-GIT_OPERATIONS:]
    for operation, call_id, ts in operations:
        commit_section.add({"gitOperation": operation, "callId": call_id, "ts": ts},
                           f"- {hhmm(ts)} ran {code(one_line(operation, TARGET_CHARS + 40))}\n")
    if git.log:
        listing = "; ".join(f"{h} {one_line(s, 70)}" for h, s in git.log[:10])
        commit_section.add({"log": [list(x) for x in git.log], "callId": git.log_call},
                           f"- latest `git log` listed: {listing}\n")
    commit_section.total = sum(fold.git.counts) + len(operations) + (1 if git.log else 0)

    cwd = fold.cwd
    files = Section("files", "Files changed", "files")
    touched = fold.files.result()
    # What the latest edit did, for the files changed last (where a resuming agent looks).
    with_change = {f.path for f in touched[-CHANGED_LINES:]}
    read = fold.reads.result(fold.files.files)
    # Paths are shown relative to where the work is (the session's folder, or the one
    # folder every file lies in: a worktree elsewhere).
    base = path_base(cwd, [f.path for f in touched] + [f.path for f in read])
    files.intro = f"Paths relative to {code(base)}." if base else None
    files.fill(touched, lambda f: (
        {"path": f.path, "state": f.state, "changes": f.changes, "lastTs": f.last_ts,
         "lastChange": ({"added": f.last_change[0], "removed": f.last_change[1]}
                        if f.last_change else None), "defines": list(f.defines)},
        f"- {code(_relative(f.path, base))}: {f.state}"
        f"{f' to {code(_relative(f.moved_to, base))}' if f.moved_to else ''} "
        f"({f.changes} change(s), last {hhmm(f.last_ts)})"
        + (f"; defines {', '.join(f.defines)}" if f.defines else "")
        + (_change_md(f.last_change) if f.path in with_change else "") + "\n"))

    read_only = Section("filesRead", "Files read, not changed", "lines of files", files.intro)
    read_only.fill(_read_lines(read, base), lambda group: (
        {"files": [f.path for f in group], "lastTs": group[-1].last_ts},
        "- " + ", ".join(_relative(f.path, base) for f in group) + "\n"))

    shown = fold.shown_elsewhere()
    subagents = Section("subagents", "Subagent results", "subagent results")
    for res in fold.subagent_results.items:
        who = res.agent or "subagent"
        text = one_line(res.text, RESULT_CHARS)
        subagents.add(_said_item(res), f"- {hhmm(res.ts)} {who}: {text}\n", same=text)
    tasks, tasks_total = fold.candidates(TASK, shown)
    for c in tasks:
        label = code(one_line(c.target or "", 80))
        text = one_line(c.get("result"), RESULT_CHARS)
        # Added after the subagents' own messages: the Task line, naming what was asked,
        # is the one kept of the two when they say the same.
        subagents.add(_call_item(c), f"- {hhmm(c.ts)} {c.tool} {label}: {text}\n", same=text)
    subagents.total = fold.subagent_results.total + tasks_total

    summaries = Section("summaries", "Compaction summaries", "summaries")
    for n, sm in enumerate(summaries_kept):
        since = ""
        if n == len(summaries_kept) - 1:
            # The latest summary is a snapshot: say how much work came after it.
            since = (f" (the latest; after it: {fold.calls_since} tool call(s), "
                     f"{fold.prompts_since} prompt(s))")
        summaries.add(_said_item(sm), f"- {hhmm(sm.ts)}{since}:\n"
                                      + quote(sm.text, SUMMARY_CHARS))
    if fold.titles:
        titles = "; ".join(one_line(t.text, 60) for t in fold.titles[-20:])
        summaries.add({"kind": "titles", "titles": [t.text for t in fold.titles]},
                      f"- conversation titles: {titles}\n")
    summaries.total = fold.summaries.total + (1 if fold.titles else 0)

    outcomes = Section("outcomes", "What each request came to", "turns",
                       "The agent's last message before the user's next prompt.")
    for msg in fold.outcomes.items:
        outcomes.add(_said_item(msg), f"- {hhmm(msg.ts)} {one_line(msg.text, OUTCOME_CHARS)}\n")
    outcomes.total = fold.outcomes.total
    # The earlier messages leave out the outcomes shown (the last message is elsewhere).
    told = {m.id for m in fold.outcomes.items[-CAPS["outcomes"]:]} - {last.id if last else ""}
    earlier = Section("earlierMessages", "Earlier assistant messages", "assistant messages")
    for msg in fold.assistant.items[:-1]:
        if msg.id not in told:
            earlier.add(_said_item(msg),
                        f"- {hhmm(msg.ts)} {one_line(msg.text, MESSAGE_CHARS)}\n")
    earlier.total = max(fold.assistant.total - 1 - len(told), 0)

    rewound = Section("rewound", "Rewound prompts", "rewound prompts", REWOUND_NOTE)
    for p in fold.rewound.items:
        rewound.add(_said_item(p), f"- {hhmm(p.ts)} {one_line(p.text, PROMPT_CHARS)}\n")
    rewound.total = fold.rewound.total

    recent = Section("recentActivity", "Recent activity", "calls")
    candidates, recent_total = fold.candidates(RECENT, shown)
    recent.fill(candidates, lambda c: ({"id": c.id, "ts": c.ts, "tool": c.tool,
                                        "target": c.target, "result": _result_of(c)},
                                       _call_line(c)))
    recent.total = recent_total

    # Priority order, most important first: trimming starts from the end.
    sections = [rules, asked, stopped, unfinished, open_, tests, commit_section, files,
                live, outcomes, retracted, resolved, subagents, summaries, read_only,
                session_messages, earlier, rewound, recent, lookups]
    for section in sections:
        section.keep_latest()
    where = {"cwd": cwd, "branch": git.branch}
    return {"objectives": objectives, "liveConstraints": constraints, "sections": sections,
            "goal": _said_item(goal) if goal else None, "where": where,
            "sessions": sorted(fold.sessions)}


def _change_md(change: list[str | None] | None) -> str:
    if not change:
        return ""
    added, removed = change
    parts = ([f"+ {code(one_line(added, 100))}"] if added else []) + (
        [f"- {code(one_line(removed, 100))}"] if removed else [])
    return "; last edit: " + " ".join(parts)


def _quote_within(head: str, text: str, room: int) -> str:
    """`head` and `text` quoted, clipped so that the whole fits `room` characters."""
    limit = room - len(head)
    md = head + quote(text, max(limit, 1))
    while len(md) > room and limit > 1:
        limit -= len(md) - room + 1
        md = head + quote(text, max(limit, 1))
    return md


def _todo_line(ts: str, todos: list[list[str]]) -> str:
    """The latest todo list, what remains first (it is what is left to do)."""
    left = [t for t in todos if t[0] != "completed"]
    done = [t for t in todos if t[0] == "completed"]
    text = "; ".join(f"[{status}] {content}" for status, content in left) or "nothing"
    if done:
        text += "; done: " + "; ".join(f"[{status}] {content}" for status, content in done)
    return f"- latest todo list ({hhmm(ts)}), remaining: {clip(text, 900)}\n"


def path_base(cwd: str | None, paths: list[str]) -> str | None:
    """The folder the file lists are shown relative to: the session's folder when at least
    half the absolute paths lie under it, else the deepest folder all of them lie in (a
    worktree beside the checkout), when there are two or more and that folder is deeper
    than one level below the file system's root."""
    import posixpath

    absolute = [p for p in paths if p.startswith("/")]
    if len(absolute) < 2:
        return cwd
    if cwd and 2 * sum(p.startswith(cwd.rstrip("/") + "/") for p in absolute) >= len(absolute):
        return cwd
    common = posixpath.commonpath(absolute)
    if common in absolute:
        common = posixpath.dirname(common)
    return common if common.count("/") >= 2 else cwd


def _relative(path: str, cwd: str | None) -> str:
    if cwd and path.startswith(cwd.rstrip("/") + "/"):
        return path[len(cwd.rstrip("/")) + 1:]
    return path


def _read_lines(read: list[Any], cwd: str | None) -> list[list[Any]]:
    """The files read, in order of their last read, cut into lines of at most FOLDER_CHARS
    characters (so the bound drops the oldest reads first)."""
    lines: list[list[Any]] = []
    size = 0
    for f in read:
        width = len(_relative(f.path, cwd)) + 2
        if not lines or size + width > FOLDER_CHARS:
            lines.append([])
            size = 0
        lines[-1].append(f)
        size += width
    return lines


def _call_item(c: Call) -> dict[str, Any]:
    return {"id": c.id, "tool": c.tool, "target": c.target, "status": c.status,
            "exitCode": c.get("exit"), "ts": c.ts, "session": c.session}


def _failure_item(f: Failure) -> dict[str, Any]:
    return {"id": f.call_id, "tool": f.tool, "target": f.target, "kind": f.kind,
            "reason": f.reason, "exitCode": f.exit_code, "ts": f.ts, "words": f.words,
            "resolvedBy": f.resolved_by, "failing": list(f.failing), "diagnosis": f.diagnosis}


def _failure_line(f: Failure, *, with_id: bool) -> str:
    tool = f.tool or "call"
    what = f"{tool} {code(one_line(f.target, TARGET_CHARS))}" if f.target else tool
    if f.description and f.tool == "Bash":
        what += f" ({one_line(f.description, 80)})"
    head = {"denied": "permission denied", "rejected": "rejected by the user",
            "traceback": "exited 0 but printed a traceback"}.get(f.kind, "failed")
    if f.exit_code is not None:
        head += f" (exit {f.exit_code})"
    why = f.words if f.kind == "rejected" and f.words else f.reason
    reason = f": {one_line(why, REASON_CHARS)}" if why else ""
    if f.summary:
        reason += f" ({one_line(f.summary, REASON_CHARS)})"
    if f.failing and with_id is False:
        reason += "; failing: " + one_line(", ".join(f.failing[:6]), REASON_CHARS)
    if f.first_failure and f.first_failure != f.reason:
        reason += f"; first failure: {one_line(f.first_failure, REASON_CHARS)}"
    ident = f" [{f.call_id}]" if with_id else ""
    said = f"\n  - the agent then: {one_line(f.diagnosis, DIAGNOSIS_CHARS)}" if f.diagnosis \
        else ""
    return f"- {hhmm(f.ts)} {what} -> {head}{reason}{ident}{said}\n"


# -- rendering ----------------------------------------------------------------------------

def _fixed_md(workspace: str, session: str | None, collected: dict[str, Any],
              damage: dict[str, Any], goal_chars: int = GOAL_CHARS) -> str:
    scope = f"session {session}" if session is not None else "all sessions"
    out = [f"# Journal digest: workspace {workspace}\n",
           f"Observations: {scope}. Entries: all sessions.\n"]
    where = collected["where"]
    bits = [f"cwd {code(where['cwd'])}" if where["cwd"] else "",
            f"branch {code(where['branch'])}" if where["branch"] else ""]
    if any(bits):
        out.append("Where: " + ", ".join(b for b in bits if b) + ".\n")
    unreadable, malformed = damage["unreadable"], damage["malformed"]
    if unreadable or malformed:
        out.append(f"WARNING: {len(unreadable)} unreadable segment(s), {len(malformed)} "
                   "malformed row(s): this digest is a floor, not a total.\n")
    out.append("\n## Goal\n")
    goal = collected["goal"]
    if goal is not None:
        out.append(f"First prompt ({goal['ts'][:16].replace('T', ' ')}):\n")
        # Head and tail: a first prompt that pastes a log ends with what to do about it.
        out.append(quote(clip_middle(goal["text"], goal_chars), goal_chars))
    out.append("Objectives:" + (" (none recorded)\n" if not collected["objectives"] else "\n"))
    for item in collected["objectives"]:
        out.append(f"- {item['id']} ({item['author']}): {item['text']}\n")
    out.append("Live constraints:" + (" (none)\n" if not collected["liveConstraints"]
                                      else "\n"))
    for item in collected["liveConstraints"]:
        out.append(f"- {item['id']} ({item['author']}): {item['text']}\n")
    out.append("\n")
    return "".join(out)


def _assemble(fixed: str, body: str, note: str, max_chars: int) -> str:
    """The digest's parts put together within `max_chars`: with the note saying what was
    left out, or a short one, or none when even that does not fit."""
    short = (f"_More was left out to fit --max-chars {max_chars}: `agent-journal digest` "
             "prints more._\n")
    markdown = ""
    for tail in (note, short if note else "", ""):
        markdown = (fixed + body + tail).rstrip("\n") + "\n"
        if len(markdown) <= max_chars:
            break
    return markdown


def _cut_lines(text: str, max_chars: int) -> str:
    """`text`'s whole lines that fit in `max_chars` (at least its first line, cut)."""
    kept = ""
    for line in text.splitlines(keepends=True):
        if len(kept) + len(line) > max_chars:
            break
        kept += line
    return kept or text[:max_chars]


def _trim_note(sections: list[Section], shown: list[int], max_chars: int,
               workspace: str = "") -> str:
    """What was left out to fit the bound, and, whenever anything is not shown, the
    commands that print it."""
    parts = [f"{s.title} ({len(s.md) - n} of {len(s.md)})"
             for s, n in zip(sections, shown, strict=True) if n < len(s.md)]
    note = ""
    if parts:
        note = (f"_Left out to fit --max-chars {max_chars}, least important first: "
                + "; ".join(parts) + "._\n")
    if parts or any(s.total > n for s, n in zip(sections, shown, strict=True)):
        ws = f" --workspace {workspace}" if workspace else ""
        note += (f"_More: `agent-journal timeline{ws} --failures-only` (every failed call "
                 f"with its output), `agent-journal timeline{ws} --last 60` (the latest "
                 f"events), `agent-journal get{ws} ID` (a call's whole output; ids in "
                 f"[brackets])._\n")
    return note


def fit(fixed: str, sections: list[Section], max_chars: int, workspace: str = ""
        ) -> list[int]:
    """How many items of each section to show: drop the least important section's
    oldest items first until the whole document fits (or nothing is left to drop)."""
    shown = [len(s.md) for s in sections]
    suffix: list[list[int]] = []
    for s in sections:
        sums = [0]
        for md in reversed(s.md):
            sums.append(sums[-1] + len(md))
        suffix.append(sums)
    heads = [len(s.head()) for s in sections]

    def lean() -> None:
        """Drop every item's detail that goes before any item (run lines' earlier runs)."""
        for i, s in enumerate(sections):
            if s.lean:
                for index, md in s.lean.items():
                    s.md[index] = md
                s.lean = {}
                sums = [0]
                for md in reversed(s.md):
                    sums.append(sums[-1] + len(md))
                suffix[i] = sums

    def size() -> int:
        total = len(fixed)
        for i, s in enumerate(sections):
            if shown[i]:
                total += heads[i] + suffix[i][shown[i]] + len(s.footer(shown[i])) + 1
        return total + len(_trim_note(sections, shown, max_chars, workspace))

    if size() > max_chars:
        lean()
    # First every section down to its floor (the least important first), then below the
    # floors in the same order: one long section never starves all the sections after it.
    for floors in ({s.key: FLOORS.get(s.key, 0) for s in sections}, {}):
        i = len(sections) - 1
        while i >= 0 and size() > max_chars:
            if shown[i] <= floors.get(sections[i].key, 0):
                i -= 1
                continue
            s = sections[i]
            oldest = len(s.md) - shown[i]
            if shown[i] == 1 and oldest in s.shrink:
                # The section's last item is worth a clipped rendering rather than none.
                room = len(s.md[oldest]) - (size() - max_chars)
                if room >= SHRINK_MIN:
                    s.md[oldest] = s.shrink.pop(oldest)(room)
                    suffix[i] = [0, len(s.md[oldest])]
                    continue
            shown[i] -= 1
    return shown


def build(d: Derived, *, workspace: str, session: str | None, max_chars: int,
          damage: dict[str, Any], fold: DigestFold | None = None, held: Any = None
          ) -> tuple[str, dict[str, Any]]:
    """(markdown, json) for one digest: the entries of `d`, and the calls as `fold` holds
    them (by default, every visible call of `d`)."""
    if fold is None:
        fold = whole_fold(d, session)
    collected = collect(d, fold, held)
    sections: list[Section] = collected["sections"]
    # The first prompt's quote takes at most a fifth of a tight bound: a pasted log in it
    # must not push out where the work stopped and what it changed.
    goal_chars = max(300, min(GOAL_CHARS, max_chars // 5))
    fixed = _fixed_md(workspace, session, collected, damage, goal_chars)
    if len(fixed) > max_chars and collected["goal"] is not None:
        # The first prompt is clipped, never the objectives and constraints.
        collected["goal"] = dict(collected["goal"])
        over = len(fixed) - max_chars
        collected["goal"]["text"] = clip(collected["goal"]["text"],
                                         max(20, len(collected["goal"]["text"]) - over - 80))
        fixed = _fixed_md(workspace, session, collected, damage, goal_chars)
    shown = fit(fixed, sections, max_chars, workspace)
    body = "".join(s.render(n) for s, n in zip(sections, shown, strict=True))
    note = _trim_note(sections, shown, max_chars, workspace)
    markdown = _assemble(fixed, body, note, max_chars)
    if len(markdown) > max_chars and collected["goal"] is not None and not (
            collected["objectives"] or collected["liveConstraints"]):
        # Under a bound this tight the first prompt goes too: the bound is hard.
        collected["goal"] = None
        fixed = _fixed_md(workspace, session, collected, damage, goal_chars)
        markdown = _assemble(fixed, body, note, max_chars)
    over = len(markdown) > max_chars
    if over and len(fixed) > max_chars and (
            collected["objectives"] or collected["liveConstraints"]):
        markdown += (f"_The objectives and live constraints alone exceed --max-chars "
                     f"{max_chars}; they are printed whole._\n")
    elif over:
        # (Only the digest's own header is left: it is cut, a line at a time.)
        markdown = _cut_lines(markdown, max_chars)
        over = len(markdown) > max_chars
    report: dict[str, Any] = {
        "workspace": workspace,
        "session": session,
        "sessions": collected["sessions"],
        "where": collected["where"],
        "goal": collected["goal"],
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

def _read(ws: Workspace, *, cached: bool, as_of: str | None = None
          ) -> tuple[ReadResult, Derived, bool]:
    """The workspace as the digest reads it, and whether that was through the digest cache
    (used when it can be); as of a checkpoint or instant, the events up to it (never
    cached)."""
    from agent_journal.core.derive import derive
    from agent_journal.storage import digest_cache

    if as_of is not None:
        from agent_journal.ops.checkpoints import read_as_of, resolve_as_of

        resolved = resolve_as_of(ws, as_of)
        assert resolved is not None
        cut_result = read_as_of(ws, resolved)
        return cut_result, derive(cut_result.events), False

    result = digest_cache.read(ws, event_facts) if cached else None
    used = result is not None
    if result is None:
        result = ws.read(lazy=True)
    return result, derive(result.events), used


# Calls this close to the newest are folded into the state kept only up to the first one
# still unfinished: its outcome usually lands before the next digest, and a call folded
# already cannot take it (the next digest would fold everything again).
SETTLE = 64


class Abandoned(Exception):
    """A digest given up on by its caller (session_markdown's deadline passed)."""


def _fold_on(source: Any, d: Derived, fold: DigestFold, cursor: tuple[str, str] | None,
             stop: Any = None) -> DigestFold:
    """`fold` (folded up to `cursor`) with every visible call after it folded in; the
    fold up to the calls settled kept in `source` at the way. Raises Abandoned once
    `stop` (a threading.Event) is set."""
    from collections import deque

    tombstoned = d.tombstones
    pending: deque[Call] = deque()
    settled = cursor or ("", "")
    for n, (obs, span) in enumerate(source.spans(cursor)):
        if stop is not None and not n & 1023 and stop.is_set():
            raise Abandoned
        if obs in tombstoned:
            continue
        pending.append(Call(obs, span[4], span[5], span[0], span[2], span[6]))
        if len(pending) > SETTLE:
            call = pending.popleft()
            fold.step(call)
            settled = (call.ts, call.id)
    while pending and not pending[0].unfinished:
        call = pending.popleft()
        fold.step(call)
        settled = (call.ts, call.id)
    if settled != cursor:
        source.keep(settled, fold.packed())
    for call in pending:
        fold.step(call)
    return fold


def _cached_digest(ws: Workspace, *, max_chars: int, strict: bool = True, stop: Any = None
                   ) -> tuple[str, dict[str, Any], ReadResult] | None:
    """The digest of every session through the digest cache: the calls folded on from
    the fold kept at a verified point (or from nothing), one stream of spans in order,
    never all of them held. None when the cache cannot serve."""
    from agent_journal.core.derive import derive
    from agent_journal.ops.context import damage_lists
    from agent_journal.storage import digest_cache

    with digest_cache.FoldRead(ws, event_facts, strict=strict) as source:
        if source is None:
            return None
        d = derive(source.result.events)  # every event but the observations
        try:
            fold = None
            state = source.state
            if state is not None:
                try:
                    kept = DigestFold.unpacked(state[1])
                except (ValueError, TypeError, KeyError, IndexError, AttributeError):
                    kept = None  # not a fold this version kept: fold everything again
                try:
                    fold = None if kept is None else _fold_on(source, d, kept, state[0],
                                                              stop)
                except digest_cache.Stale:
                    fold = None
            if fold is None:
                fold = _fold_on(source, d, DigestFold(), None, stop)
            if not fold.sufficient():
                return None
            markdown, report = build(d, workspace=ws.name, session=None,
                                     max_chars=max_chars, damage=damage_lists(source.result),
                                     fold=fold, held=source.held)
        except digest_cache.Interleaved:
            return None  # the caller reads the segments
        return markdown, report, source.result


def _markdown_and_report(ws: Workspace, *, session: str | None, max_chars: int,
                         as_of: str | None = None, strict: bool = True, stop: Any = None
                         ) -> tuple[str, dict[str, Any], ReadResult]:
    from agent_journal.ops.context import damage_lists
    from agent_journal.storage.segment_reader import PausedGC

    with PausedGC():
        if session is None and as_of is None:
            done = _cached_digest(ws, max_chars=max_chars, strict=strict, stop=stop)
            if done is not None:
                return done
        result, d, _ = _read(ws, cached=as_of is None, as_of=as_of)
        markdown, report = build(d, workspace=ws.name, session=session,
                                 max_chars=max_chars, damage=damage_lists(result))
        return markdown, report, result


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


# How long the session-start digest may take before one of the newest work is given
# instead (Claude Code gives up on a hook after 60 s; the agent would start with nothing).
SESSION_BUDGET_S = 20.0
ENV_SESSION_BUDGET = "AGENT_JOURNAL_SESSION_BUDGET_S"
NEWEST_SEGMENTS = 2  # what the digest of the newest work reads whole


def session_markdown(ws: Workspace, max_chars: int) -> str:
    """The digest the Claude Code hook prints at session start and after compaction.

    The objectives and constraints are never trimmed, so the result can exceed
    `max_chars`; the hook cuts it to Claude Code's limit. The live segment the hooks
    append to is taken on the census rule (storage/digest_cache.py): the session starts
    without re-verifying its older rows, which the next `digest` a person runs does.
    It answers within SESSION_BUDGET_S ($AGENT_JOURNAL_SESSION_BUDGET_S): when the
    whole digest is not ready by then, it is abandoned and a digest of the newest work
    (`newest_markdown`) is given, saying what it left out.
    """
    import threading

    budget = _session_budget()
    if budget == 0:
        return newest_markdown(ws, max_chars, budget)  # (no wait at all: what tests use)
    done: list[str] = []
    failed: list[BaseException] = []
    stop = threading.Event()

    def whole() -> None:
        try:
            done.append(_markdown_and_report(ws, session=None, max_chars=max_chars,
                                             strict=False, stop=stop)[0])
        except Abandoned:
            pass
        except BaseException as exc:  # handed to the caller, as if run here
            failed.append(exc)

    worker = threading.Thread(target=whole, name="digest", daemon=True)
    worker.start()
    worker.join(budget)
    if done:
        return done[0]
    if failed:
        raise failed[0]
    stop.set()
    return newest_markdown(ws, max_chars, budget)


def _session_budget() -> float:
    import os

    raw = os.environ.get(ENV_SESSION_BUDGET)
    try:
        return max(0.0, float(raw)) if raw else SESSION_BUDGET_S
    except ValueError:
        return SESSION_BUDGET_S


def newest_markdown(ws: Workspace, max_chars: int, budget: float) -> str:
    """A digest of the newest work alone: the NEWEST_SEGMENTS most recently written
    segments whole, and every entry, invalidation and tombstone of the others (so
    nothing erased or retracted shows), with a first line saying what it left out."""
    from agent_journal.core.derive import derive
    from agent_journal.ops.context import damage_lists

    result = ws.read_newest(NEWEST_SEGMENTS)
    note = (f"_Built from the newest work only ({NEWEST_SEGMENTS} most recently written "
            f"segment(s) of {len(result.segments)}, and every entry): the whole digest was "
            f"not ready within {budget:g} s. Older calls, prompts and runs are left out; "
            f"`agent-journal digest` prints the whole one._\n\n")
    markdown, _ = build(derive(result.events), workspace=ws.name, session=None,
                        max_chars=max(1, max_chars - len(note)),
                        damage=damage_lists(result))
    return note + markdown
