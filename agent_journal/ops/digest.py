"""digest: what an agent needs to resume work, ready to put in front of a prompt.

The operation: reading the workspace (through the digest's cache where it can), folding
its calls, and building the page. What each section holds is digest_collect's, how an item
reads digest_lines', how the page fits its bound digest_page's.

Invariants:
- The output is a function of the event set (every order is (ts, id)), whether the
  events were read from the segments or through the digest's cache (digest_cache.py):
  both give each observation event's recovery facts (core.recovery.facts), computed by
  the same function, and fold the visible calls through the same DigestFold, in order;
  through the cache, on from the fold it kept at a verified point, over one stream of
  spans, never all calls held at once.
- `downgradedAnchors` is null: only a retention pass (compact) assesses it.
- SessionStart answers within SESSION_BUDGET_S: past it, a digest of the newest work,
  saying on its first line what it left out.
"""

from __future__ import annotations

from agent_journal.core.derive import Derived
from agent_journal.core.recovery.calls import Call
from agent_journal.core.recovery.digest_fold import DigestFold
from agent_journal.core.recovery.facts import event_facts
from agent_journal.ops.digest_collect import calls_of, collect, fold_calls, whole_fold
from agent_journal.ops.digest_lines import (  # noqa: F401 (the digest's names, for callers)
    DEFAULT_MAX_CHARS,
    GIT_OPERATIONS,
    GOAL_CHARS,
    GONE_NOTE,
    WATERMARK,
    run_item,
)
from agent_journal.ops.digest_md import clip, code  # noqa: F401
from agent_journal.ops.digest_page import (  # noqa: F401
    CAPS,
    FLOORS,
    Section,
    _assemble,
    _cut_lines,
    _fixed_md,
    _trim_note,
    fit,
)

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any

    from agent_journal.ops.context import Context
    from agent_journal.storage.segment_reader import ReadResult
    from agent_journal.storage.workspace import Workspace

__all__ = ["CAPS", "DEFAULT_MAX_CHARS", "FLOORS", "Section", "build", "calls_of",
           "census_note", "collect", "digest", "fit", "fold_calls", "newest_markdown",
           "run_item", "session_markdown", "whole_fold"]


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
    from agent_journal.storage import digest_point

    with digest_point.FoldRead(ws, event_facts, strict=strict) as source:
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
                except digest_point.Stale:
                    fold = None
            if fold is None:
                fold = _fold_on(source, d, DigestFold(), None, stop)
            if not fold.sufficient():
                return None
            note = census_note(source.result)
            markdown, report = build(d, workspace=ws.name, session=None,
                                     max_chars=max(1, max_chars - len(note)),
                                     damage=damage_lists(source.result), fold=fold,
                                     held=source.held)
        except digest_point.Interleaved:
            return None  # the caller reads the segments
        if note:
            report["maxChars"], report["chars"] = max_chars, len(note) + len(markdown)
        return note + markdown, report, source.result


def census_note(result: ReadResult) -> str:
    """What a digest says when it trusted less than a full verification: the segments whose
    older rows it took on the census alone (only the session-start digest does; any other
    digest verifies every row), or nothing."""
    if not result.census:
        return ""
    return (f"_Older rows of {len(result.census)} segment(s) counted, not re-verified "
            "(`agent-journal digest` verifies all)._\n\n")


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
    if ctx.root_arg is None:
        import os

        from agent_journal.storage.root import resolve_root

        default = resolve_root(None)
        if not os.path.exists(default):
            return _nothing_yet(default, ctx.workspace_name, session, max_chars)
    return _markdown_and_report(ctx.open(create=False), session=session, max_chars=max_chars,
                                as_of=as_of)


def _nothing_yet(root: str, workspace: str, session: str | None, max_chars: int
                 ) -> tuple[str, dict[str, Any], ReadResult]:
    """The digest before anything was journaled: no root was named, and the default one
    is not there yet (a fresh install; the hooks make it at the first tool call). Nothing
    is created; a root named by --root, $AGENT_JOURNAL_ROOT or a project file that is not
    there is still refused (a typo)."""
    from agent_journal.core.derive import derive
    from agent_journal.storage.segment_reader import ReadResult

    note = (f"_Nothing journaled yet: {root} does not exist. The hooks create it at the "
            "agent's first tool call (`agent-journal doctor` checks them)._\n\n")
    markdown, report = build(derive([]), workspace=workspace, session=session,
                             max_chars=max(1, max_chars - len(note)),
                             damage={"unreadable": [], "malformed": []})
    return note + markdown, report, ReadResult()


# How long the session-start digest may take before one of the newest work is given
# instead, and the whole one finished in a detached process for the next start
# (digest_warm): issue 27 asks a session start to answer within 5 s whatever the size.
SESSION_BUDGET_S = 2.5


ENV_SESSION_BUDGET = "AGENT_JOURNAL_SESSION_BUDGET_S"


NEWEST_ROWS = 4_000  # the rows whose observations the digest of the newest work reads


def session_markdown(ws: Workspace, max_chars: int) -> str:
    """The digest the Claude Code hook prints at session start and after compaction.

    The objectives and constraints are never trimmed, so the result can exceed
    `max_chars`; the hook cuts it to Claude Code's limit. The live segment the hooks
    append to is taken on the census rule (storage/digest_cache.py): the session starts
    without re-verifying its older rows, which the next `digest` a person runs does; a
    digest that did so says it on its first line (`census_note`).
    It answers within SESSION_BUDGET_S ($AGENT_JOURNAL_SESSION_BUDGET_S): when the
    whole digest is not ready by then, it is abandoned, a digest of the newest work
    (`newest_markdown`) is given, saying what it left out, and the whole one is finished
    in a detached process (digest_warm) so that the next start reads it from the cache.
    When the cache lacks more rows than a first fold reads within the budget
    (`_past_budget`), that digest of the newest work is given at once, without waiting.
    """
    import threading

    budget = _session_budget()
    if budget == 0:
        return newest_markdown(ws, max_chars, budget)  # (no wait at all: what tests use)
    if _past_budget(ws, budget):
        # A first start on a large journal: the whole digest cannot be ready in time, so
        # the budget is not spent finding that out; it is built where nobody waits.
        markdown = newest_markdown(ws, max_chars, budget)
        from agent_journal.ops.digest_warm import warm_later

        warm_later(ws)
        return markdown
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
    from agent_journal.ops.digest_warm import warm_later

    warm_later(ws)  # the next session start gets the whole digest from the cache
    return newest_markdown(ws, max_chars, budget)


# The rows a first digest reads, projects and folds in a second, at the least: about
# 15,000-26,000 on a loaded 2-core machine (make bench BENCH=hooks); a journal the cache
# has more unread rows of than the budget allows at this pace gets the newest digest at
# once (a wrong guess costs only the first start of a journal near the bound).
FIRST_FOLD_ROWS_PER_S = 10_000


def _past_budget(ws: Workspace, budget: float) -> bool:
    """Whether the rows the digest cache has not read yet are more than a first fold gets
    through within `budget`."""
    from agent_journal.storage import digest_cache

    unread = digest_cache.unread_rows(ws)
    return unread is not None and unread > budget * FIRST_FOLD_ROWS_PER_S


def _session_budget() -> float:
    import os

    raw = os.environ.get(ENV_SESSION_BUDGET)
    try:
        return max(0.0, float(raw)) if raw else SESSION_BUDGET_S
    except ValueError:
        return SESSION_BUDGET_S


def newest_markdown(ws: Workspace, max_chars: int, budget: float) -> str:
    """A digest of the newest work alone: the observations among the NEWEST_ROWS newest
    rows, and every entry, invalidation and tombstone (so nothing erased or retracted
    shows), with a first line saying what it left out."""
    from agent_journal.core.derive import derive
    from agent_journal.ops.context import damage_lists

    result = ws.read_newest(NEWEST_ROWS)
    note = (f"_Built from the newest work only (the calls among the newest {NEWEST_ROWS:,} "
            f"rows of {len(result.segments)} segment(s), and every entry): the whole digest "
            f"was not ready within {budget:g} s. Older calls, prompts and runs are left out; "
            f"`agent-journal digest` prints the whole one._\n\n")
    markdown, _ = build(derive(result.events), workspace=ws.name, session=None,
                        max_chars=max(1, max_chars - len(note)),
                        damage=damage_lists(result))
    return note + markdown
