"""`show`: entries (and with --observations, observations) as the events derive them.

Invariant: tombstoned ids never appear; invalidated and suppressed entries
appear with their outcome and `live: false`; live constraints are always
listed; damage met by the read is reported beside the answer.
"""

from __future__ import annotations

from typing import Any

from agent_journal.core.model import (
    validate_id,
)
from agent_journal.ops.context import Context, damage_lists, read_workspace
from agent_journal.storage.segment_reader import ReadResult


def show(ctx: Context, *, only_id: str | None = None, observations: bool = False,
         as_of: str | None = None) -> tuple[dict[str, Any], ReadResult]:
    from agent_journal.ops.checkpoints import parse_as_of

    if only_id is not None:
        validate_id(only_id, "--id")
    parse_as_of(as_of)
    from agent_journal.storage.segment_reader import PausedGC

    with PausedGC():
        return _show(ctx, only_id, observations, as_of)


def _show(ctx: Context, only_id: str | None, observations: bool, as_of: str | None
          ) -> tuple[dict[str, Any], ReadResult]:
    result, d = read_workspace(ctx, as_of=as_of)
    items: list[dict[str, Any]] = []
    for entry_id in d.visible_entry_ids():
        if only_id is None or entry_id == only_id:
            items.append(d.entry_view(entry_id))
    if observations or only_id is not None:
        for obs_id in d.visible_observation_ids():
            if only_id is None or obs_id == only_id:
                items.append(d.observation_view(obs_id))
    if observations and only_id is None:
        items.sort(key=lambda item: (item["ts"], item["id"]))
    constraints = [d.entry_view(i) for i in d.visible_entry_ids()
                   if d.entry_events[i].kind == "constraint" and d.is_live(i)]
    report = {"entries": items, "liveConstraints": constraints}
    report.update(damage_lists(result))
    return report, result
