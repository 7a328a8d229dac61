"""The digest's sections: what it may show of the entries and the calls, before the bound.

Invariants:
- Ordered by what a resuming agent needs: the goal (the first prompt, objectives and live
  constraints), the user's standing instructions, what the user asked since, where the
  work stopped (with the latest plan and task list), unfinished calls, open problems
  before resolved ones, test runs, commits, files, live entries, what each request came
  to, ..., files only read, then recent activity and failed lookups. The derivations are
  the pure ones of core/recovery (the calls as one DigestFold); this module picks.
- Tombstoned content never renders at all: no tombstoned entry or observation
  contributes a single field. Invalidated and suppressed entries never appear as live;
  they are listed only under "Retracted", with the reason.
- Each section is built by one short function of the fold (and the entries), so the
  fold's laws (tests/test_digest_fold.py) hold section by section.
"""

from __future__ import annotations

from agent_journal.core.codec import PeekOnlyEvent
from agent_journal.core.derive import Derived
from agent_journal.core.observation_fold import merge_spans, span_order
from agent_journal.core.recovery.calls import Call, ordered
from agent_journal.core.recovery.condense import condense
from agent_journal.core.recovery.digest_fold import RECENT, TAIL, TASK, DigestFold
from agent_journal.core.recovery.facts import event_facts
from agent_journal.core.recovery.failures import is_lookup
from agent_journal.core.recovery.git_output import DELETED_REF
from agent_journal.core.recovery.text import clip_log
from agent_journal.ops import digest_lines as lines
from agent_journal.ops.digest_lines import (
    CHANGED_LINES,
    DIAGNOSIS_CHARS,
    INSTRUCTIONS_NOTE,
    LAST_MESSAGE_CHARS,
    MESSAGE_CHARS,
    META_CHARS,
    OUTCOME_CHARS,
    PLAN_CHARS,
    PROMPT_CHARS,
    REASON_CHARS,
    RECAP_CHARS,
    RESULT_CHARS,
    RETRACTED_NOTE,
    REWOUND_NOTE,
    TARGET_CHARS,
    WATERMARK,
    _call_item,
    _call_line,
    _change_md,
    _entry_item,
    _failure_item,
    _failure_line,
    _fields_text,
    _live_entry,
    _quote_within,
    _read_lines,
    _relative,
    _result_of,
    _retracted_entry,
    _said_item,
    _todo_line,
    failure_said,
    installed_item,
    list_bases,
    run_item,
)
from agent_journal.ops.digest_md import code, hhmm, one_line, quote
from agent_journal.ops.digest_page import CAPS, Section

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any

    from agent_journal.core.model import Event
    from agent_journal.core.observation_fold import Span


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


def fold_calls(calls: list[Call], tail: int | None = TAIL) -> DigestFold:
    """The digest's fold of `calls` (in (ts, id) order)."""
    fold = DigestFold(tail)
    for call in calls:
        fold.step(call)
    return fold


def collect(d: Derived, fold: DigestFold, held: Any = None) -> dict[str, Any]:
    """Everything the digest may show, before the bound is applied: the entries of `d`,
    and the calls as `fold` holds them. `held(obs_id)`: whether the journal holds an
    observation an anchor cites (by default, whether `d` does)."""
    objectives, constraints, live, retracted = _entries(d, held)
    runs = fold.runs.result()
    open_, resolved, lookups = _problems(fold, runs)
    files, read_only = _files(fold)
    shown = fold.shown_elsewhere()
    outcomes, earlier = _said_by_the_agent(fold)
    session_messages = Section("sessionMessages", "Session messages", "session messages")
    session_messages.fill(list(fold.meta.values()), lambda meta: (
        _said_item(meta), f"- {hhmm(meta.ts)} {one_line(meta.text, META_CHARS)}\n"))
    session_messages.total = len(fold.meta_texts)
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
    commits, branch = _commits(fold)
    # Priority order, most important first: trimming starts from the end.
    sections = [_rules(fold), _asked(fold), _stopped(fold), _unfinished(fold), open_,
                commits, outcomes, _tests(fold, runs), files, live, retracted, resolved,
                _subagents(fold, shown), _summaries(fold), earlier, read_only,
                session_messages, rewound, recent, lookups]
    for section in sections:
        section.keep_latest()
    goal = fold.goal
    return {"objectives": objectives, "liveConstraints": constraints, "sections": sections,
            "goal": _said_item(goal) if goal else None,
            "where": {"cwd": fold.cwd, "branch": branch, "pullRequests": [
                {"number": int(n), "url": u} for n, u in fold.pulls.named.items()]},
            "sessions": sorted(fold.sessions)}


def _entries(d: Derived, held: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]],
                                             Section, Section]:
    """Objectives and live constraints (verbatim, whole), live entries, retracted ones."""
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
    return objectives, constraints, live, retracted


def _asked(fold: DigestFold) -> Section:
    """The prompts after the first, and the user's words rejecting a call, in time order."""
    asked = Section("asked", "What the user asked since", "prompts")
    for p in fold.asked.items:
        asked.add(_said_item(p), f"- {hhmm(p.ts)} {clip_log(p.text, PROMPT_CHARS)}\n")
    for f_call in fold.rejections.items:
        asked.add({"id": f_call.id, "kind": "rejection", "ts": f_call.ts,
                   "text": f_call.get("words")},
                  f"- {hhmm(f_call.ts)} (rejecting {f_call.tool}) "
                  f"{one_line(f_call.get('words'), PROMPT_CHARS)}\n")
    asked.md[:] = [md for _, md in sorted(zip([i["ts"] for i in asked.items], asked.md,
                                              strict=True), key=lambda t: t[0])]
    asked.items.sort(key=lambda i: i["ts"])
    asked.total = fold.asked.total + fold.rejections.total
    return asked


def _rules(fold: DigestFold) -> Section:
    rules = Section("standingInstructions", "Standing instructions from the user",
                    "instructions", INSTRUCTIONS_NOTE)
    rules.fill(fold.instructions.result(), lambda r: (
        {"text": r.text, "ts": r.ts, "promptId": r.prompt_id},
        f"- {hhmm(r.ts)} {one_line(r.text, PROMPT_CHARS)}\n"))
    return rules


def _stopped(fold: DigestFold) -> Section:
    """Where the work stopped: items in the order the bound drops them (the first first);
    the last assistant message, what the agent itself said about it, is kept longest."""
    stopped = Section("stopped", "Where it stopped", "items")
    last = fold.assistant.items[-1] if fold.assistant.items else None
    for c, _ in fold.last_actions.items:
        stopped.add({"id": c.id, "kind": "lastAction", "ts": c.ts, "line": _call_line(c)},
                    "- last action:" + _call_line(c)[1:])
    # No git command changed them since (a commit, a rebase, a stash...): what the
    # latest `git status` of each checkout listed; edits since are under Files changed.
    for tree in reversed(fold.tree.standing()):
        stopped.add(*lines.tree_item(tree, fold.cwd))
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
    return stopped


def _unfinished(fold: DigestFold) -> Section:
    unfinished = Section("unfinishedToolCalls", "Unfinished tool calls",
                         "unfinished tool calls", WATERMARK)
    for c in fold.unfinished:
        unfinished.add(_call_item(c), _call_line(c, with_id=True))
    return unfinished


def _problems(fold: DigestFold, runs: list[Any]) -> tuple[Section, Section, Section]:
    """Open problems (failing runs nothing covers, then open failed calls), resolved ones,
    and the failed lookups, listed apart: a read that found nothing answered a question."""
    open_ = Section("openProblems", "Open problems", "open problems")
    resolved = Section("resolvedProblems", "Resolved problems", "resolved problems",
                       "Failed, then a later run of the same call succeeded.")
    for r in runs:
        if r.unresolved:
            open_.add(*_open_run(fold, r))
    open_runs = open_.total
    kept_open = fold.open_failures()
    problems = [f for f in kept_open if not is_lookup(f.tool, f.target)]
    misses = [f for f in kept_open if is_lookup(f.tool, f.target)]
    then = fold.remedies.of
    # A call that failed again the same way shows once, as its latest failure.
    open_.fill(problems, lambda f: (_failure_item(f), _failure_line(f, with_id=True)),
               same=failure_said)
    lookups = Section("failedLookups", "Failed lookups", "failed lookups",
                      "Reads, searches and listings that found nothing; not problems.")
    lookups.fill(misses, lambda f: (_failure_item(f), _failure_line(f, with_id=True)))
    lookups.total = len(misses) + fold.failures.lookups_dropped()
    open_.total = fold.failures.visible_open + open_runs - lookups.total
    kept = fold.failures.resolved_failures()[-CAPS["resolvedProblems"]:]
    groups = lines.same_way_groups(kept)
    resolved.fill(groups, lambda g: lines.resolved_item(g, then(g[-1].call_id)))
    resolved.total = fold.failures.resolved_total - (len(kept) - len(groups))
    return open_, resolved, lookups


def _open_run(fold: DigestFold, r: Any) -> tuple[dict[str, Any], str]:
    latest = r.latest
    line = f"- failing: {code(one_line(r.command, TARGET_CHARS))} -> {latest.summary}"
    if latest.failing:
        line += "; failing: " + ", ".join(latest.failing[:8])
    if latest.first_failure:
        line += f"; first failure: {one_line(latest.first_failure, REASON_CHARS)}"
    said = fold.failures.diagnosis_of(r.call_id) or (
        r.last_failed.diagnosis if r.last_failed is not None else None)
    line += f" [{r.call_id}]\n" + (
        f"  - the agent then: {condense(said, DIAGNOSIS_CHARS)}\n" if said else "")
    return ({"kind": "testRun", "command": r.command, "callId": r.call_id, "ts": r.ts,
             **latest.as_dict(), "diagnosis": said}, line)


def _tests(fold: DigestFold, runs: list[Any]) -> Section:
    tests = Section("testRuns", "Test and check runs", "commands")
    for r in runs:
        failed = r.last_failed
        tests.add(*run_item(r, fold.remedies.of(failed.call_id) if failed else None))
    return tests


def _commits(fold: DigestFold) -> tuple[Section, str | None]:
    """Commits, pushes, rejected pushes, the latest git operations and `git log` listing;
    and the branch."""
    git = fold.git.result()
    section = Section("commits", "Commits", "commits")
    # The git operations first: the bound drops a section's first items first, and a
    # commit says more than a reset or a stash that came before or after it.
    operations = lines.operation_items(git.operations[-lines.GIT_OPERATIONS:])
    for item in operations:
        section.add(*item)
    for cm in git.commits:
        who = f", by agent {cm.agent}" if cm.agent else ""
        section.add({"hash": cm.hash, "subject": cm.subject, "branch": cm.branch,
                     "callId": cm.call_id, "ts": cm.ts, "agent": cm.agent},
                    f"- {hhmm(cm.ts)} {cm.hash or '(no hash printed)'} "
                    f"{one_line(cm.subject, 160)} (on {cm.branch}{who})\n")
    for push in git.pushes:
        section.add({"push": push.destination, "remote": push.remote,
                     "source": push.source, "callId": push.call_id, "ts": push.ts},
                    f"- {hhmm(push.ts)} deleted {push.destination} on {push.remote}\n"
                    if push.source == DELETED_REF else
                    f"- {hhmm(push.ts)} pushed {push.source} -> {push.destination} "
                    f"to {push.remote}\n")
    for rej in git.rejected:
        to = f" to {rej.remote}" if rej.remote else ""
        section.add({"pushRejected": rej.destination, "remote": rej.remote,
                     "source": rej.source, "why": rej.why, "callId": rej.call_id,
                     "ts": rej.ts},
                    f"- {hhmm(rej.ts)} push of {rej.source} -> {rej.destination}{to} "
                    f"rejected ({one_line(rej.why, 80)})\n")
    if git.log:
        listing = "; ".join(f"{h} {one_line(s, 70)}" for h, s in git.log[:10])
        section.add({"log": [list(x) for x in git.log], "callId": git.log_call},
                    f"- latest `git log` listed: {listing}\n")
    section.total = sum(fold.git.counts) + len(operations) + (1 if git.log else 0)
    return section, git.branch


def _files(fold: DigestFold) -> tuple[Section, Section]:
    """Files changed and files only read, each list relative to where its files are (the
    session's folder, or the one folder every file of it lies in: a worktree elsewhere)."""
    files = Section("files", "Files changed", "files")
    touched = fold.files.result()
    # What the latest edit did, for the files changed last (where a resuming agent looks).
    with_change = {f.path for f in touched[-CHANGED_LINES:]}
    read = fold.reads.result(fold.files.files)
    base, read_base = list_bases(fold.cwd, [f.path for f in touched], [f.path for f in read])
    files.intro = f"Paths relative to {code(base)}." if base else None
    files.fill(touched, lambda f: (
        {"path": f.path, "state": f.state, "changes": f.changes, "lastTs": f.last_ts,
         "lastChange": ({"added": f.last_change[0], "removed": f.last_change[1]}
                        if f.last_change else None), "defines": list(f.defines),
         "removes": list(f.removes)},
        f"- {code(_relative(f.path, base))}: {f.state}"
        f"{f' to {code(_relative(f.moved_to, base))}' if f.moved_to else ''} "
        f"({f.changes} change(s), last {hhmm(f.last_ts)})"
        + (f"; defines {', '.join(f.defines)}" if f.defines else "")
        + (f"; removes {', '.join(f.removes)}" if f.removes else "")
        + (_change_md(f.last_change) if f.path in with_change else "") + "\n"))
    if fold.files.installed:
        files.add(*installed_item(fold.files.installed))
    read_only = Section("filesRead", "Files read, not changed", "lines of files",
                        f"Paths relative to {code(read_base)}." if read_base else None)
    read_only.fill(_read_lines(read, read_base), lambda group: (
        {"files": [f.path for f in group], "lastTs": group[-1].last_ts},
        "- " + ", ".join(_relative(f.path, read_base) for f in group) + "\n"))
    return files, read_only


def _subagents(fold: DigestFold, shown: set[str]) -> Section:
    subagents = Section("subagents", "Subagent results", "subagent results")
    for res in fold.subagent_results.items:
        who = res.agent or "subagent"
        # Its densest sentences: a report opens with "Now I have all I need" and ends
        # with what it found.
        text = condense(res.text, RESULT_CHARS)
        subagents.add(_said_item(res), f"- {hhmm(res.ts)} {who}: {text}\n", same=text)
    tasks, tasks_total = fold.candidates(TASK, shown)
    for c in tasks:
        label = code(one_line(c.target or "", 80))
        text = condense(c.get("result") or "", RESULT_CHARS)
        # Added after the subagents' own messages: the Task line, naming what was asked,
        # is the one kept of the two when they say the same.
        subagents.add(_call_item(c), f"- {hhmm(c.ts)} {c.tool} {label}: {text}\n", same=text)
    subagents.total = fold.subagent_results.total + tasks_total
    return subagents


def _summaries(fold: DigestFold) -> Section:
    summaries = Section("summaries", "Compaction summaries", "summaries")
    kept = fold.summaries.items
    for n, sm in enumerate(kept):
        since = ""
        if n == len(kept) - 1:
            # The latest summary is a snapshot: say how much work came after it.
            since = (f" (the latest; after it: {fold.calls_since} tool call(s), "
                     f"{fold.prompts_since} prompt(s))")
        summaries.add(_said_item(sm), f"- {hhmm(sm.ts)}{since}:\n"
                      + lines.summary_quote(sm, fold.goal))
    if fold.titles:
        titles = "; ".join(one_line(t.text, 60) for t in fold.titles[-20:])
        summaries.add({"kind": "titles", "titles": [t.text for t in fold.titles]},
                      f"- conversation titles: {titles}\n")
    summaries.total = fold.summaries.total + (1 if fold.titles else 0)
    return summaries


def _said_by_the_agent(fold: DigestFold) -> tuple[Section, Section]:
    """What each request came to (the last message before each next prompt), and the
    earlier messages, which leave out the outcomes shown (the last message is elsewhere)."""
    last = fold.assistant.items[-1] if fold.assistant.items else None
    outcomes = Section("outcomes", "What each request came to", "turns",
                       "The agent's last message before the user's next prompt.")
    for msg in fold.outcomes.items:
        outcomes.add(_said_item(msg), f"- {hhmm(msg.ts)} {condense(msg.text, OUTCOME_CHARS)}\n")
    outcomes.total = fold.outcomes.total
    told = {m.id for m in fold.outcomes.items[-CAPS["outcomes"]:]} - {last.id if last else ""}
    earlier = Section("earlierMessages", "Earlier assistant messages", "assistant messages")
    for msg in fold.assistant.items[:-1]:
        if msg.id not in told:
            earlier.add(_said_item(msg),
                        f"- {hhmm(msg.ts)} {condense(msg.text, MESSAGE_CHARS)}\n")
    earlier.total = max(fold.assistant.total - 1 - len(told), 0)
    return outcomes, earlier
