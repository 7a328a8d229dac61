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
