"""trace: which entries cite an id, and what was built on them.

Invariants:
- A tombstoned entry never appears, in `matched` or in `chain`, by any route:
  its id, subject, anchors and dependsOn are its content, and none of it may
  render. Dependency walks do not pass through it either.
- An entry that cites a tombstoned, purged or absent id still matches: trace
  searches the strings entries wrote down, never whether the cited thing
  survives (that is how a reader finds evidence that is gone).
- Matching is exact, never a substring: an anchor matches when its whole text
  equals ID or its reference part (after `SCHEME:`) equals ID, so tracing `f1`
  never drags in `tool_use:f10`.
- The output is a function of the event set; every order is settled by
  (ts, id).
- With `must_name`, an ID that no entry cites and that names no entry or
  observation here (unknown or tombstoned) is refused (NotFoundError), not
  answered with an empty chain.

`trace_derived` is pure; `trace` is the operation the CLI calls.
"""

from __future__ import annotations

from typing import Any

from agent_journal.core.derive import Derived
from agent_journal.core.model import anchor_ref
from agent_journal.ops.context import Context
from agent_journal.storage.segment_reader import ReadResult

VIA_ID = "id"
VIA_SUBJECT = "subject"
VIA_ANCHOR = "anchor"
VIA_DEPENDS_ON = "dependsOn"


def match_via(d: Derived, entry_id: str, target: str) -> str | None:
    """How entry `entry_id` matches `target`, strongest route first, or None."""
    if entry_id == target:
        return VIA_ID
    data = d.entry_events[entry_id].data
    if data.get("subject") == target:
        return VIA_SUBJECT
    for anchor in data.get("anchors", ()):
        if anchor == target or anchor_ref(anchor)[1] == target:
            return VIA_ANCHOR
    if target in data.get("dependsOn", ()):
        return VIA_DEPENDS_ON
    return None


def _row(d: Derived, entry_id: str, via: str | None) -> dict[str, Any]:
    outcome = d.outcome.get(entry_id)
    return {"id": entry_id, "via": via, "kind": d.entry_events[entry_id].kind,
            "live": d.is_live(entry_id), "outcome": outcome}


def trace_derived(d: Derived, target: str) -> dict[str, Any]:
    """{matched, chain} for `target` over derived state.

    Chain order: breadth first by dependency depth. Depth 0 is the matched
    entries; depth k+1 is every entry not yet listed that depends on an entry
    at depth k. Within a depth, entries are in (ts, id) order, and `via` names
    the earliest (ts, id) entry of the previous depth it depends on.
    """
    visible = d.visible_entry_ids()  # (ts, id) order, tombstoned ids already gone
    order = {entry_id: i for i, entry_id in enumerate(visible)}
    matched: list[dict[str, Any]] = []
    for entry_id in visible:
        via = match_via(d, entry_id, target)
        if via is not None:
            matched.append(_row(d, entry_id, via))

    dependents: dict[str, list[str]] = {}
    for entry_id in visible:
        for dep in d.entry_events[entry_id].data.get("dependsOn", ()):
            if dep in order:
                dependents.setdefault(dep, []).append(entry_id)

    chain: list[dict[str, Any]] = []
    level = [row["id"] for row in matched]
    seen = set(level)
    depth = 0
    for entry_id in level:
        chain.append(dict(_row(d, entry_id, None), depth=depth))
    while level:
        depth += 1
        parent_of: dict[str, str] = {}
        for parent in level:  # already in (ts, id) order: the first parent seen wins
            for child in dependents.get(parent, ()):
                if child not in seen and child not in parent_of:
                    parent_of[child] = parent
        level = sorted(parent_of, key=order.__getitem__)
        seen.update(level)
        for entry_id in level:
            chain.append(dict(_row(d, entry_id, parent_of[entry_id]), depth=depth))
    return {"matched": matched, "chain": chain}


def trace(ctx: Context, target: str, *, as_of: str | None = None, must_name: bool = False
          ) -> tuple[dict[str, Any], ReadResult]:
    from agent_journal.core.model import validate_id
    from agent_journal.ops.checkpoints import parse_as_of
    from agent_journal.ops.context import damage_lists, read_workspace
    from agent_journal.storage.segment_reader import PausedGC

    validate_id(target, "ID")
    parse_as_of(as_of)
    with PausedGC():
        # A chain is entries only: observations are verified (damage is still
        # reported) but none is kept.
        result, d = read_workspace(ctx, as_of=as_of, observations=False)
        report = trace_derived(d, target)
        if must_name and not report["matched"] and not _names(ctx, d, target, as_of):
            from agent_journal.ops.context import not_found

            raise not_found(target, ctx.workspace_name, result, ", and no entry cites it")
    report.update(damage_lists(result))
    return report, result


def _names(ctx: Context, d: Derived, target: str, as_of: str | None) -> bool:
    """Whether `target` is an entry or observation here that is not tombstoned. (A visible
    entry always matches itself, so only an observation can name it without a match.)"""
    if d.is_tombstoned(target):
        return False
    if as_of is not None:  # an as-of read keeps the observations inside its cut
        return target in d.observation_events
    from agent_journal.core.model import OBSERVATION

    return next(ctx.open(create=False).events_with_subjects([target], OBSERVATION),
                None) is not None
