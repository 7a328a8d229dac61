"""The observation fold: an observation's events, read in order, folded key by key.

Invariant: for every key the latest event that says anything (a value that is not
None) wins. A finished event's status, exit code and output therefore replace the
started event's, and an event that leaves a key out keeps the earlier value. One
exception: a `started` status never replaces a finished one, so a finish stamped
before its start (the clock stepped back between the two) still finishes the call.
`Derived.observation_view` folds event data and `recovery.calls.fold` folds each
event's recovery facts, both through `latest_wins`.
"""

from __future__ import annotations

TYPE_CHECKING = False  # on the hook's SessionStart path; mypy reads this as True
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any


def latest_wins(parts: Iterable[dict[str, Any] | None], into: dict[str, Any] | None = None,
                *, skip: frozenset[str] = frozenset(), no_nulls: bool = False
                ) -> dict[str, Any]:
    """Fold `parts` (in event order) into `into`: later non-null values win, keys in
    `skip` never enter. `no_nulls` says the parts hold no None value and no key of
    `skip` (recovery facts), so a plain dict update is the same fold, made in C."""
    folded: dict[str, Any] = {} if into is None else into
    for part in parts:
        if not part:
            continue
        before = folded.get("status")
        if no_nulls:
            folded.update(part)
        else:
            for name, value in part.items():
                if value is not None and name not in skip:
                    folded[name] = value
        if before is not None and before != STARTED and folded.get("status") == STARTED:
            folded["status"] = before
    return folded


STARTED = "started"


# A span: the fold of some of one observation's events, as
# (first ts, first event id, last ts, last event id, kind, session, facts), where kind and
# session are the first event's and facts is `latest_wins` of every event's facts in
# (ts, event id) order. A single event is a span whose first and last are itself.
Span = tuple  # (str, str, str, str, str, str | None, dict); a plain tuple stays cheap


def span_order(span: Span) -> tuple[str, str, str, str]:
    """The order merge_spans takes spans in: by first, then last (ts, event id)."""
    return span[0], span[1], span[2], span[3]


def merge_spans(spans: Iterable[Span]) -> Span | None:
    """The span of the union of `spans`, given in span_order.

    The fold is associative: spans that do not interleave (each one's last event at or
    before the next one's first) merge into exactly the fold of all their events, however
    those events were split. Interleaving spans cannot be merged without their events:
    None. An event held twice (a copy in another segment) folds the same either way."""
    merged: Span | None = None
    facts: dict[str, Any] | None = None
    for span in spans:
        if merged is None:
            merged = span
            continue
        if (span[0], span[1]) < (merged[2], merged[3]):
            return None
        if facts is None:
            facts = dict(merged[6])
        latest_wins([span[6]], facts, no_nulls=True)  # the same rule as one fold
        merged = (merged[0], merged[1], span[2], span[3], merged[4], merged[5], facts)
    return merged
