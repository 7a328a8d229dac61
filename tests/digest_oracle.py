"""The digest's collect as it was before its calls became one bounded fold: the oracle the
fold's laws are checked against (tests/test_digest_fold.py). Kept verbatim but for its
signature; do not change it to follow the digest.

Rules stated since: a passing run that provably holds a failing run's selection
(run_coverage.covers) is a passing run of it too; the oracle gets it from test_runs and
failures, which the fold's TestRunsFold and FailuresFold (fed TestRunsFold.covered) apply
one call at a time. Of the subagent results kept, a subagent's own last message and a
Task answer that say the same show once, as the Task line (Section `same`, applied by
keep_latest in both). Retracted entries come right after the live ones: they are what
not to believe again, trimmed after the history of resolved problems.

A command's run line shows, of its earlier runs, the latest passing one when its latest
run failed, and its first run when that reported a figure neither the latest run nor the
passing one shown reports (test_runs.earlier_runs); the oracle finds those two runs among
every call of the command's history (a passing run is one with no summary or a passing
one), where the fold keeps only them. A latest run that is a passing run of the command
itself, right after its failing run with only quiet calls (test_runs.quiet) between the
two among all the calls, passed on a re-run. A failed lookup (failures.is_lookup: a read,
a search, a listing) is listed apart, last. A failing run that a later passing wrapper
(wrappers.py) may cover is not an open problem (TestRun.unresolved); its line says so.
Each turn's outcome (the last assistant message before a prompt after it) has its own
section, and the earlier messages leave those out. A file's line names what its changes
defined (files_touched `defines`). A failure's line (and an open run's) carries the first
thing the agent said after it, before its next tool call (its diagnosis). The latest task
list is a TodoWrite's or the one TaskCreate/TaskUpdate calls build (task_list.step).
A resolved failure's line, and a fixed run's, say what was done after it until the call
that resolved it (remedies.action_of: the first ACTIONS distinct actions); a fixed run's
line says how its latest failing run failed and what the agent said right after it. The
agent's messages, outcomes and diagnoses are condensed (condense.py), not clipped.
"""

from __future__ import annotations

from typing import Any

from agent_journal.core.derive import Derived
from agent_journal.core.recovery import task_list
from agent_journal.core.recovery.calls import Call, Ordered
from agent_journal.core.recovery.commits import commits
from agent_journal.core.recovery.condense import condense
from agent_journal.core.recovery.conversation import conversation
from agent_journal.core.recovery.failures import Failure, failures, is_lookup
from agent_journal.core.recovery.files_touched import (
    MAX_INSTALLED,
    files_read,
    files_touched,
)
from agent_journal.core.recovery.instructions import standing_instructions
from agent_journal.core.recovery.pull_requests import pull_requests
from agent_journal.core.recovery.remedies import ACTIONS, action_of
from agent_journal.core.recovery.test_runs import (
    FAILURES_KEPT,
    SILENT_PASS,
    FailedRun,
    RunMark,
    check_key,
    command_key,
    earlier_runs,
    failure_text,
    quiet,
    test_runs,
)
from agent_journal.core.recovery.text import clip_log, clip_middle
from agent_journal.core.recovery.working_tree import working_tree
from agent_journal.ops.digest_lines import (
    CHANGED_LINES,
    DIAGNOSIS_CHARS,
    GIT_OPERATIONS,
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
    operation_items,
    resolved_item,
    run_item,
    same_way_groups,
    summary_quote,
    tree_item,
)
from agent_journal.ops.digest_md import code, hhmm, one_line, quote
from agent_journal.ops.digest_page import CAPS, Section


def oracle_collect(d: Derived, calls: list[Call]) -> dict[str, Any]:
    """The digest's collect as it was before the fold: every derivation over every call."""
    objectives: list[dict[str, Any]] = []
    constraints: list[dict[str, Any]] = []
    live = Section("liveEntries", "Live decisions and findings", "entries")
    retracted = Section("retracted", "Retracted entries", "retracted entries", RETRACTED_NOTE)
    for entry_id in d.visible_entry_ids():
        if not d.is_live(entry_id):
            retracted.add(*_retracted_entry(d, entry_id))
            continue
        kind = d.entry_events[entry_id].kind
        if kind in ("objective", "constraint"):
            item = _entry_item(d, entry_id)
            item["text"] = _fields_text(kind, item["fields"])
            (objectives if kind == "objective" else constraints).append(item)
        else:
            live.add(*_live_entry(d, entry_id))

    tool_calls = Ordered(c for c in calls if c.is_tool_call)
    said = conversation(calls)
    shown: set[str] = set()  # call ids already rendered above recent activity

    goal = said.prompts[0] if said.prompts else None
    if said.summaries and (goal is None or (said.summaries[0].ts, said.summaries[0].id)
                           < (goal.ts, goal.id)):
        goal = said.summaries[0]  # the journal begins with the client's summary
    asked = Section("asked", "What the user asked since", "prompts")
    for p in said.prompts[1:] if goal is not None and goal.kind == "prompt" else said.prompts:
        asked.add(_said_item(p), f"- {hhmm(p.ts)} {clip_log(p.text, PROMPT_CHARS)}\n")
    for f_call in tool_calls:
        words = f_call.get("words")
        if f_call.get("refusal") == "rejected" and words:
            asked.add({"id": f_call.id, "kind": "rejection", "ts": f_call.ts, "text": words},
                      f"- {hhmm(f_call.ts)} (rejecting {f_call.tool}) "
                      f"{one_line(words, PROMPT_CHARS)}\n")
    asked.md[:] = [md for _, md in sorted(zip([i["ts"] for i in asked.items], asked.md,
                                              strict=True), key=lambda t: t[0])]
    asked.items.sort(key=lambda i: i["ts"])

    rules = Section("standingInstructions", "Standing instructions from the user",
                    "instructions", INSTRUCTIONS_NOTE)
    rules.fill(standing_instructions(said.prompts), lambda r: (
        {"text": r.text, "ts": r.ts, "promptId": r.prompt_id},
        f"- {hhmm(r.ts)} {one_line(r.text, PROMPT_CHARS)}\n"))

    stopped = Section("stopped", "Where it stopped", "items")
    last = said.assistant[-1] if said.assistant else None
    # Claude Code's own messages to the agent (hook feedback, command output) are not
    # where the work stopped: they get their own section, below the work, each text once.
    session_messages = Section("sessionMessages", "Session messages", "session messages")
    latest_meta: dict[str, Any] = {}
    for meta in said.meta:
        latest_meta.pop(meta.text, None)
        latest_meta[meta.text] = meta
    session_messages.fill(list(latest_meta.values()), lambda meta: (
        _said_item(meta), f"- {hhmm(meta.ts)} {one_line(meta.text, META_CHARS)}\n"))
    # Items in the order the bound drops them (the first first): the last assistant message,
    # what the agent itself said about where it stopped, is kept longest.
    for c in tool_calls[-1:]:
        stopped.add({"id": c.id, "kind": "lastAction", "ts": c.ts, "line": _call_line(c)},
                    "- last action:" + _call_line(c)[1:])
        shown.add(c.id)
    session_cwd = next((c.get("cwd") for c in reversed(calls) if c.get("cwd")), None)
    for tree in reversed(working_tree(tool_calls)):
        stopped.add(*tree_item(tree, session_cwd))
    plan = next((c for c in reversed(tool_calls) if c.get("plan") and not c.unfinished), None)
    if plan is not None:
        verdict = "approved" if plan.succeeded else "not approved"
        stopped.add({"kind": "plan", "id": plan.id, "ts": plan.ts, "approved": plan.succeeded,
                     "plan": plan.get("plan")},
                    f"- latest plan ({hhmm(plan.ts)}, {verdict}):\n"
                    + quote(plan.get("plan"), PLAN_CHARS))
        shown.add(plan.id)
    recap = said.summaries[-1] if said.summaries else None
    if recap is not None and recap.source == "away_summary" and (
            last is None or (recap.ts, recap.id) > (last.ts, last.id)):
        # Claude Code's recap, written after the last message: where it says things stand.
        stopped.add(_said_item(recap), f"- recap ({hhmm(recap.ts)}): "
                                       f"{one_line(recap.text, RECAP_CHARS)}\n")
    # The latest task list: a TodoWrite's, or the TaskCreate/TaskUpdate table's after a call.
    todo = None
    table: dict[str, list[str]] = {}
    for c in tool_calls:
        if c.get("todos") and c.succeeded:
            todo = c
        elif c.get("taskId"):
            todos = task_list.step(table, c)
            if todos is not None:
                todo = Call(c.id, c.kind, c.session, c.ts, c.last_ts, dict(c.facts, todos=todos))
    if todo is not None:
        stopped.add({"kind": "todos", "id": todo.id, "ts": todo.ts,
                     "todos": [{"status": t[0], "content": t[1]} for t in todo.get("todos")]},
                    _todo_line(todo.ts, todo.get("todos")))
        shown.add(todo.id)
    if last is not None:
        head = f"- last assistant message ({hhmm(last.ts)}):\n"
        stopped.add(_said_item(last), head + quote(last.text, LAST_MESSAGE_CHARS),
                    shrink=lambda room, text=last.text, head=head: _quote_within(head, text,
                                                                                room))

    unfinished = Section("unfinishedToolCalls", "Unfinished tool calls",
                         "unfinished tool calls", WATERMARK)
    for c in tool_calls:
        if c.unfinished:
            unfinished.add(_call_item(c), _call_line(c, with_id=True))
            shown.add(c.id)

    runs = test_runs(tool_calls)
    failed_runs = {cid for r in runs for cid in r.call_ids}
    problems = failures(tool_calls)
    # A failure's diagnosis: the first assistant message after it with no tool call between.
    by_id = {f.call_id: f for f in problems}
    latest_call: str | None = None
    said_after: dict[str, str] = {}  # a tool call -> the first message right after it
    steps = sorted([(c.ts, c.id, None) for c in tool_calls]
                   + [(m.ts, m.id, m.text) for m in said.assistant])
    for _, step_id, text in steps:
        if text is None:
            latest_call = step_id
        elif latest_call in by_id:
            if by_id[latest_call].diagnosis is None:
                by_id[latest_call].diagnosis = clip_middle(text, 600)
        if text is not None and latest_call is not None:
            said_after.setdefault(latest_call, clip_middle(text, 600))
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
            told = by_id[r.call_id].diagnosis if r.call_id in by_id else None
            line += f" [{r.call_id}]\n" + (
                f"  - the agent then: {condense(told, DIAGNOSIS_CHARS)}\n" if told else "")
            open_.add({"kind": "testRun", "command": r.command, "callId": r.call_id,
                       "ts": r.ts, **latest.as_dict(), "diagnosis": told}, line)
    open_fails: list[Failure] = []
    resolved_fails: list[Failure] = []
    for fail in problems:
        if fail.call_id in failed_runs and fail.resolved_by is None:
            continue  # shown with its test run
        (resolved_fails if fail.resolved else open_fails).append(fail)
    open_runs = open_.total
    problems = [f for f in open_fails if not is_lookup(f.tool, f.target)]
    misses = [f for f in open_fails if is_lookup(f.tool, f.target)]
    # A call that failed again the same way shows once, as its latest failure.
    open_.fill(problems, lambda f: (_failure_item(f), _failure_line(f, with_id=True)),
               same=failure_said)
    open_.total += open_runs
    lookups = Section("failedLookups", "Failed lookups", "failed lookups",
                      "Reads, searches and listings that found nothing; not problems.")
    lookups.fill(misses, lambda f: (_failure_item(f), _failure_line(f, with_id=True)))
    order = {c.id: i for i, c in enumerate(tool_calls)}

    def remedies(failed_id: str, until: str | None) -> list[str]:
        """What was done after call `failed_id`, up to the call `until` (the end: None)."""
        end = order[until] if until is not None else len(tool_calls)
        actions: list[str] = []
        for c in tool_calls[order[failed_id] + 1:end]:
            action = action_of(c)
            if action is not None and action not in actions and len(actions) < ACTIONS:
                actions.append(action)
        return actions

    newest = resolved_fails[-CAPS["resolvedProblems"]:]
    groups = same_way_groups(newest)
    resolved.fill(groups, lambda g: resolved_item(
        g, remedies(g[-1].call_id, g[-1].resolved_by)))
    resolved.total = len(resolved_fails) - (len(newest) - len(groups))
    shown.update(f.call_id for f in open_fails[-CAPS["openProblems"]:])
    shown.update(f.call_id for f in resolved_fails[-CAPS["resolvedProblems"]:])

    tests = Section("testRuns", "Test and check runs", "commands")
    by_id = {c.id: c for c in tool_calls}
    everything = sorted(calls, key=lambda c: (c.ts, c.id))
    position = {c.id: i for i, c in enumerate(everything)}
    for r in runs:
        own = [by_id[i] for i in r.call_ids]
        passes = [c for c in own if c.check is None or c.check.ok]
        r.last_passed, r.first = earlier_runs(r.latest, r.call_id, _run_mark(own[0]),
                                              _run_mark(passes[-1]) if passes else None)
        latest = own[-1]
        before = own[-2] if len(own) > 1 else None
        failing = [c for c in own if c.check is not None and not c.check.ok]
        then = None
        if failing:
            last = failing[-1]
            fixed_by = next((c for c in own if order[c.id] > order[last.id]), None)
            # How each failing run failed, distinct, by the order of its latest run.
            texts = [failure_text(c.check.as_dict()) for c in failing]
            last_at = {t: i for i, t in enumerate(texts)}
            failed_texts = sorted(last_at, key=last_at.__getitem__)[-FAILURES_KEPT:]
            r.last_failed = FailedRun(last.check.summary, last.check.first_failure, last.ts,
                                      last.id, said_after.get(last.id),
                                      None if fixed_by is None else
                                      command_key(fixed_by.target or fixed_by.tool or ""),
                                      failed_texts)
            then = remedies(last.id, None if fixed_by is None else fixed_by.id)
        r.passed_on_rerun = (
            before is not None and (latest.check is None or latest.check.ok)
            and check_key(command_key(latest.target or "")) == check_key(r.command)
            and before.check is not None and not before.check.ok
            and all(quiet(c) for c in everything[position[before.id] + 1:position[latest.id]]))
        tests.add(*run_item(r, then))
        shown.update(r.call_ids)

    git = commits(calls)
    commit_section = Section("commits", "Commits", "commits")
    pushed = {p.destination for p in git.pushes}
    for item in operation_items(git.operations[-GIT_OPERATIONS:]):
        commit_section.add(*item)
    for cm in git.commits:
        who = f", by agent {cm.agent}" if cm.agent else ""
        commit_section.add({"hash": cm.hash, "subject": cm.subject, "branch": cm.branch,
                            "callId": cm.call_id, "ts": cm.ts, "agent": cm.agent},
                           f"- {hhmm(cm.ts)} {cm.hash or '(no hash printed)'} "
                           f"{one_line(cm.subject, 160)} "
                           f"(on {cm.branch}{who})\n")
        shown.add(cm.call_id)
    for push in git.pushes:
        commit_section.add({"push": push.destination, "remote": push.remote,
                            "source": push.source, "callId": push.call_id, "ts": push.ts},
                           f"- {hhmm(push.ts)} deleted {push.destination} on {push.remote}\n"
                           if push.source == "(delete)" else
                           f"- {hhmm(push.ts)} pushed {push.source} -> {push.destination} "
                           f"to {push.remote}\n")
        shown.add(push.call_id)
    for rej in git.rejected:
        to = f" to {rej.remote}" if rej.remote else ""
        commit_section.add({"pushRejected": rej.destination, "remote": rej.remote,
                            "source": rej.source, "why": rej.why, "callId": rej.call_id,
                            "ts": rej.ts},
                           f"- {hhmm(rej.ts)} push of {rej.source} -> {rej.destination}{to} "
                           f"rejected ({one_line(rej.why, 80)})\n")
    if git.log:
        listing = "; ".join(f"{h} {one_line(s, 70)}" for h, s in git.log[:10])
        commit_section.add({"log": [list(x) for x in git.log], "callId": git.log_call},
                           f"- latest `git log` listed: {listing}\n")
    del pushed

    cwd = next((c.get("cwd") for c in reversed(calls) if c.get("cwd")), None)
    files = Section("files", "Files changed", "files")
    touched = files_touched(tool_calls)
    # What the latest edit did, for the files changed last (where a resuming agent looks).
    with_change = {f.path for f in touched[-CHANGED_LINES:]}
    read = files_read(tool_calls, touched)
    # Paths are shown relative to where the work is (the session's folder, or the one
    # folder every file lies in: a worktree elsewhere).
    base, read_base = list_bases(cwd, [f.path for f in touched], [f.path for f in read])
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

    installed: dict[str, str] = {}
    for c in tool_calls:
        if c.succeeded:
            for package in c.get("installs") or ():
                installed.pop(package, None)
                installed[package] = c.ts
    if installed:
        files.add(*installed_item(dict(list(installed.items())[-MAX_INSTALLED:])))
    read_only = Section("filesRead", "Files read, not changed", "lines of files",
                        f"Paths relative to {code(read_base)}." if read_base else None)
    read_only.fill(_read_lines(read, read_base), lambda group: (
        {"files": [f.path for f in group], "lastTs": group[-1].last_ts},
        "- " + ", ".join(_relative(f.path, read_base) for f in group) + "\n"))

    subagents = Section("subagents", "Subagent results", "subagent results")
    for res in said.subagent_results:
        who = res.agent or "subagent"
        text = one_line(res.text, RESULT_CHARS)
        subagents.add(_said_item(res), f"- {hhmm(res.ts)} {who}: {text}\n", same=text)
    for c in tool_calls:
        if c.tool in ("Task", "Agent") and c.get("result") and c.id not in shown:
            label = code(one_line(c.target or "", 80))
            text = one_line(c.get("result"), RESULT_CHARS)
            subagents.add(_call_item(c), f"- {hhmm(c.ts)} {c.tool} {label}: {text}\n",
                          same=text)
            shown.add(c.id)

    summaries = Section("summaries", "Compaction summaries", "summaries")
    for n, sm in enumerate(said.summaries):
        since = ""
        if n == len(said.summaries) - 1:
            # The latest summary is a snapshot: say how much work came after it.
            later_calls = sum(1 for c in tool_calls if (c.ts, c.id) > (sm.ts, sm.id))
            later_prompts = sum(1 for p in said.prompts if (p.ts, p.id) > (sm.ts, sm.id))
            since = (f" (the latest; after it: {later_calls} tool call(s), "
                     f"{later_prompts} prompt(s))")
        summaries.add(_said_item(sm), f"- {hhmm(sm.ts)}{since}:\n"
                      + summary_quote(sm, goal))
    if said.titles:
        titles = "; ".join(one_line(t.text, 60) for t in said.titles[-20:])
        summaries.add({"kind": "titles", "titles": [t.text for t in said.titles]},
                      f"- conversation titles: {titles}\n")

    # A turn's outcome: the last assistant message before each prompt after it.
    turn_ends = []
    for p in said.prompts:
        before = [m for m in said.assistant if (m.ts, m.id) < (p.ts, p.id)]
        if before and before[-1] not in turn_ends and all(
                (q.ts, q.id) <= (before[-1].ts, before[-1].id) or (q.ts, q.id) >= (p.ts, p.id)
                for q in said.prompts):
            turn_ends.append(before[-1])
    outcomes = Section("outcomes", "What each request came to", "turns",
                       "The agent's last message before the user's next prompt.")
    for msg in turn_ends:
        outcomes.add(_said_item(msg), f"- {hhmm(msg.ts)} {condense(msg.text, OUTCOME_CHARS)}\n")
    told = {m.id for m in turn_ends[-CAPS["outcomes"]:]}
    earlier = Section("earlierMessages", "Earlier assistant messages", "assistant messages")
    for msg in said.assistant[:-1]:
        if msg.id not in told:
            earlier.add(_said_item(msg),
                        f"- {hhmm(msg.ts)} {condense(msg.text, MESSAGE_CHARS)}\n")

    rewound = Section("rewound", "Rewound prompts", "rewound prompts", REWOUND_NOTE)
    for p in said.abandoned_prompts:
        rewound.add(_said_item(p), f"- {hhmm(p.ts)} {one_line(p.text, PROMPT_CHARS)}\n")

    recent = Section("recentActivity", "Recent activity", "calls")
    recent.fill([c for c in tool_calls if c.id not in shown],
                lambda c: ({"id": c.id, "ts": c.ts, "tool": c.tool, "target": c.target,
                            "result": _result_of(c)}, _call_line(c)))

    # Priority order, most important first: trimming starts from the end.
    sections = [rules, asked, stopped, unfinished, open_, commit_section, outcomes, tests,
                files, live, retracted, resolved, subagents, summaries, earlier, read_only,
                session_messages, rewound, recent, lookups]
    for section in sections:
        section.keep_latest()
    where = {"cwd": cwd, "branch": git.branch, "pullRequests": [
        {"number": int(n), "url": u} for n, u in pull_requests(tool_calls).items()]}
    return {"objectives": objectives, "liveConstraints": constraints, "sections": sections,
            "goal": _said_item(goal) if goal else None, "where": where,
            "sessions": sorted({c.session for c in calls if c.session})}


def _run_mark(call: Call) -> RunMark:
    run = call.check
    if run is None:
        return RunMark(SILENT_PASS, call.ts, call.id, True)
    return RunMark(run.summary, call.ts, call.id, run.ok)
