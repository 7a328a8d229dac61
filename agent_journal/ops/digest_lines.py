"""The digest's lines: how each thing it shows reads, one item at a time.

Invariants:
- Objectives and live constraints are rendered verbatim (a human wrote them): never
  trimmed, never redacted, never rewritten. Every other text is clipped at a word boundary
  and marked `…` (digest_md).
- An anchor is `present` only when the observation it cites is held here and not
  tombstoned; evidence that is gone reads `unknown`, and anchors outside the journal
  read `external` (not checked), never `present`. An entry whose cited evidence is all
  gone says so.
- Each renderer is a function of its item alone: the same item renders the same line in
  the Markdown, and its dict is what `--json` carries.
"""

from __future__ import annotations

from agent_journal.core.anchors import EXTERNAL, PURGED, TOMBSTONED, UNKNOWN, anchor_report
from agent_journal.core.derive import INVALIDATED, Derived
from agent_journal.core.model import ENTRY_FIELDS
from agent_journal.core.recovery.commits import DELETED_BRANCHES
from agent_journal.core.recovery.condense import condense
from agent_journal.core.recovery.test_runs import test_title
from agent_journal.ops.digest_md import clip, code, hhmm, one_line, quote

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any

    from agent_journal.core.recovery.calls import Call
    from agent_journal.core.recovery.failures import Failure
    from agent_journal.core.recovery.test_runs import TestRun


# Claude Code shows additional context above 10,000 characters only as a short preview.
DEFAULT_MAX_CHARS = 10_000


GOAL_CHARS = 1500


PLAN_CHARS = 800


RECAP_CHARS = 800


PROMPT_CHARS = 500


LAST_MESSAGE_CHARS = 2500


MESSAGE_CHARS = 300


DIAGNOSIS_CHARS = 300  # of the agent's words after a failure, on the failure's line
OPERATION_CHARS = 90  # of a git operation's command (a reset, a stash, a rebase)
EARLIER_CHARS = 120  # of how each earlier failing run of a fixed run failed
FIXED_CHARS = 160  # of them on a fixed run's line, where the run's own line says the rest


OUTCOME_CHARS = 450


SUMMARY_CHARS = 1200


META_CHARS = 300


TARGET_CHARS = 120


REASON_CHARS = 200


RESULT_CHARS = 300


HISTORY_CHARS = 120  # an earlier run's summary on a run line


WATERMARK = ("These tool calls started but never recorded an outcome: the session may "
             "have crashed or been compacted mid-call, so their effects are unknown. "
             "Verify the workspace before acting; do not repeat them blindly.")


INSTRUCTIONS_NOTE = ("Rules the user set in prompts, quoted; they hold until the user "
                     "says otherwise.")


FOLDER_CHARS = 400


GIT_OPERATIONS = 8  # the latest git operations (rebase, reset, submodule add, ...) shown


CHANGED_LINES = 12  # files whose latest edit's lines are shown


RETRACTED_NOTE = "Not live: their reasoning was retracted. Do not rely on them."


REWOUND_NOTE = ("Said on a branch of the conversation that was later rewound: not the "
                "current request.")


GONE_NOTE = "its only evidence was erased (tombstoned or purged): it stands unsupported"


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


def run_item(r: TestRun, then: list[str] | None = None
             ) -> tuple[dict[str, Any], str, Any, str]:
    """A command's run line (item, Markdown, no shrink, the line without earlier runs):
    its latest run, then the earlier runs it keeps (test_runs.earlier_runs); a run fixed
    since it failed says how it failed, what was done after, and what the agent said."""
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
    lean = line
    if r.fixed and r.last_failed is not None:
        # How it failed stays when earlier runs go; what was done and said after does not.
        lean += _fixed_md(r, None, brief=True)
        line += _fixed_md(r, then)
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
            "lastFailed": None if r.last_failed is None else {
                **r.last_failed.as_dict(), "then": list(then or ())},
            "maybeCoveredBy": None if maybe is None else {
                "command": maybe.summary, "ts": maybe.ts, "callId": maybe.call_id}}
    return item, line + earlier, None, lean


def _fixed_md(r: TestRun, then: list[str] | None, *, brief: bool = False) -> str:
    """How a fixed run last failed (its first failure line, else its summary), what was
    done after, and the agent's words right after it (`brief`: how it failed alone)."""
    failed = r.last_failed
    assert failed is not None
    # The tests it named failing, and its first failure line (else its summary).
    what = failed.failures[-1] if failed.failures else (failed.first_failure or failed.summary)
    line = f"  - was failing ({hhmm(failed.ts)}): {one_line(what, REASON_CHARS)}"
    if failed.fixed_by and failed.fixed_by != r.command:
        line += f"; fixed by {code(one_line(failed.fixed_by, TARGET_CHARS))}"
    if failed.earlier and not brief:
        line += "; earlier failing runs: " + "; ".join(
            one_line(w, EARLIER_CHARS) for w in failed.earlier)
    if then:
        line += "; then: " + "; ".join(then)
    if failed.diagnosis and not brief:
        line += f"; the agent said: {condense(failed.diagnosis, FIXED_CHARS)}"
    return line + "\n"


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


def summary_quote(summary: Any, goal: Any) -> str:
    """A compaction summary quoted in SUMMARY_CHARS; the one the Goal shows (the journal
    begins with it) without the part the Goal quotes, its head and tail."""
    if goal is None or goal.id != summary.id:
        return quote(summary.text, SUMMARY_CHARS)
    from agent_journal.core.recovery.conversation import summary_parts
    from agent_journal.core.recovery.text import clip_middle

    rest = summary_parts(summary.text)[1] or summary.text
    return quote(clip_middle(rest, SUMMARY_CHARS), SUMMARY_CHARS)


def failure_said(f: Any) -> str:
    """What a failure's line says but for its time and id: two failures saying the same
    are one problem."""
    return f"{f.tool}\x00{f.target}\x00{f.kind}\x00{f.reason}\x00{f.exit_code}"


def operation_items(operations: list[tuple[str, str, str]]
                    ) -> list[tuple[dict[str, Any], str]]:
    """The git operations (command, call id, ts) as commit-section items: a run of the same
    command one after another is one line with its count, dated by its last run."""
    grouped: list[list[Any]] = []
    for operation, call_id, ts in operations:
        if grouped and grouped[-1][0] == operation:
            grouped[-1][1:] = [call_id, ts, grouped[-1][3] + 1]
        else:
            grouped.append([operation, call_id, ts, 1])
    return [({"gitOperation": op, "callId": call_id, "ts": ts, "times": times},
             (f"- {hhmm(ts)} {one_line(op, 2 * OPERATION_CHARS)}"
              if op.startswith(DELETED_BRANCHES) else
              f"- {hhmm(ts)} ran {code(one_line(op, OPERATION_CHARS))}")
             + (f" ({times} times)" if times > 1 else "") + "\n")
            for op, call_id, ts, times in grouped]


def installed_item(installed: dict[str, str]) -> tuple[dict[str, Any], str]:
    """The packages installed (package -> when, the latest last) as one line of the files
    changed, the last of them (kept longest under the bound)."""
    last = max(installed.values())
    return ({"installed": list(installed), "lastTs": last},
            f"- packages installed: {', '.join(installed)} (last {hhmm(last)})\n")


def list_bases(cwd: str | None, changed: list[str], read: list[str]
               ) -> tuple[str | None, str | None]:
    """The folders the files changed and the files only read are shown relative to: each
    list's own (path_base) when it holds two absolute paths or more, else both lists'
    together; the read ones share the changed ones' folder when they all lie in it."""
    joint = path_base(cwd, changed + read)

    def own(paths: list[str]) -> str | None:
        return path_base(cwd, paths) if sum(p.startswith("/") for p in paths) >= 2 else joint

    base = own(changed)
    if base and all(p.startswith(base.rstrip("/") + "/") for p in read):
        return base, base
    return base, own(read)


def _relative(path: str, cwd: str | None) -> str:
    """`path` below `cwd` without it (a Windows folder's backslash too), else as it is."""
    if not cwd:
        return path
    for sep in ("/", "\\"):
        base = cwd.rstrip(sep) + sep
        if path.startswith(base):
            return path[len(base):]
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


def _failure_item(f: Failure, then: list[str] | None = None) -> dict[str, Any]:
    return {"id": f.call_id, "tool": f.tool, "target": f.target, "kind": f.kind,
            "reason": f.reason, "exitCode": f.exit_code, "ts": f.ts, "words": f.words,
            "resolvedBy": f.resolved_by, "maybeFixedAt": f.maybe, "failing": list(f.failing),
            "diagnosis": f.diagnosis, "then": list(then or ())}


def same_way_groups(failures: list[Failure]) -> list[list[Failure]]:
    """Failures in time order, those that failed one after another the same way (the
    same tool, kind, reason and exit code; different calls) grouped: a broken build
    fails every command that needs it, and says why once."""
    groups: list[list[Failure]] = []
    for f in failures:
        last = groups[-1][-1] if groups else None
        if last is not None and f.reason and (f.tool, f.kind, f.reason, f.exit_code) == (
                last.tool, last.kind, last.reason, last.exit_code):
            groups[-1].append(f)
        else:
            groups.append([f])
    return groups


def resolved_item(group: list[Failure], then: list[str] | None
                  ) -> tuple[dict[str, Any], str]:
    """A group of resolved failures (same_way_groups) as one item: the latest's, naming
    the calls before it that failed the same way."""
    f = group[-1]
    item = _failure_item(f, then)
    item["sameWay"] = [{"id": e.call_id, "target": e.target, "ts": e.ts} for e in group[:-1]]
    return item, _failure_line(f, with_id=False, then=then,
                               same_way=[e.target or e.tool or "call" for e in group[:-1]])


def _failure_line(f: Failure, *, with_id: bool, then: list[str] | None = None,
                  same_way: list[str] | None = None) -> str:
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
        reason += "; failing: " + one_line(", ".join(test_title(t) for t in f.failing[:6]),
                                           REASON_CHARS)
    if f.first_failure and f.first_failure != f.reason:
        reason += f"; first failure: {one_line(f.first_failure, REASON_CHARS)}"
    if same_way:
        reason += "; " + ", ".join(code(one_line(t, 80)) for t in same_way) + \
            " failed the same way just before"
    if then:
        reason += "; then: " + "; ".join(then)
    if f.maybe:
        # Suggestive evidence only: said in words.
        reason += (f"; the same invocation ran again at {hhmm(f.maybe)} inside a longer "
                   "command that exited 0 (a status perhaps another command's): may be fixed")
    ident = f" [{f.call_id}]" if with_id else ""
    said = f"\n  - the agent then: {condense(f.diagnosis, DIAGNOSIS_CHARS)}" if f.diagnosis \
        else ""
    return f"- {hhmm(f.ts)} {what} -> {head}{reason}{ident}{said}\n"


def tree_item(tree: list[Any], cwd: str | None) -> tuple[dict[str, Any], str]:
    """A checkout's standing listing ([call id, ts, files, folder]) as an item of Where
    it stopped; the folder named when it is not the session's."""
    call_id, ts, files, folder = tree
    other = folder if folder and folder.rstrip("/") != (cwd or "").rstrip("/") else None
    return ({"kind": "workingTree", "id": call_id, "ts": ts, "folder": other,
             "files": [{"state": st, "path": p} for st, p in files]},
            tree_line(ts, files, other))


def tree_line(ts: str, files: list[list[str]], folder: str | None = None) -> str:
    """`- working tree at 09:27 (git status): modified `a.ts`, `b.mdx`; untracked `c``:
    what the latest `git status` listed, shown only while no git command changed it;
    `of `folder`` after "tree" for a checkout other than the session's."""
    where = f" of {code(folder)}" if folder else ""
    if not files:
        return f"- working tree{where} at {hhmm(ts)} (git status): clean, nothing to commit\n"
    by_state: dict[str, list[str]] = {}
    for state, path in files:
        by_state.setdefault(state, []).append(code(one_line(path, 100)))
    said = "; ".join(f"{state} {', '.join(paths[:6])}"
                     + (f" and {len(paths) - 6} more" if len(paths) > 6 else "")
                     for state, paths in by_state.items())
    return f"- working tree{where} at {hhmm(ts)} (git status): {said}\n"
