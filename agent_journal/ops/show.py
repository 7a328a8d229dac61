"""`show`: entries (and with --observations, observations) as the events derive them.

Invariant: tombstoned ids never appear; invalidated and suppressed entries
appear with their outcome and `live: false`; live constraints are always
listed; damage met by the read is reported beside the answer.
"""

from __future__ import annotations

from collections.abc import Iterator
from heapq import merge
from typing import Any

from agent_journal.core.derive import Derived
from agent_journal.core.model import validate_id
from agent_journal.ops.context import Context, damage_lists, read_workspace
from agent_journal.storage.segment_reader import ReadResult


def show(ctx: Context, *, only_id: str | None = None, observations: bool = False,
         as_of: str | None = None) -> tuple[dict[str, Any], ReadResult]:
    """The whole report, every item built (for callers that keep it)."""
    report, result = show_stream(ctx, only_id=only_id, observations=observations, as_of=as_of)
    report["entries"] = list(report["entries"])
    return report, result


def show_stream(ctx: Context, *, only_id: str | None = None, observations: bool = False,
                as_of: str | None = None) -> tuple[dict[str, Any], ReadResult]:
    """The report with `entries` as a ShowItems: each view is built when it is
    rendered, so a read of a million events never holds every view at once."""
    from agent_journal.ops.checkpoints import parse_as_of

    if only_id is not None:
        validate_id(only_id, "--id")
    parse_as_of(as_of)
    from agent_journal.storage.segment_reader import PausedGC

    with PausedGC():
        return _show(ctx, only_id, observations, as_of)


class ShowItems:
    """The items of a show report in their order, built one at a time.

    Single pass: an observation's events are let go once its view is built,
    so memory does not grow with what has been rendered. The counts a
    summary needs are known before the first item.
    """

    def __init__(self, d: Derived, only_id: str | None, observations: bool) -> None:
        self._d = d
        self._entry_ids = [i for i in d.visible_entry_ids() if only_id is None or i == only_id]
        self._obs_ids: list[str] = []
        if observations or only_id is not None:
            self._obs_ids = [i for i in d.visible_observation_ids()
                             if only_id is None or i == only_id]
        self._merged = observations and only_id is None
        self.entries = len(self._entry_ids)
        self.live = sum(1 for i in self._entry_ids if d.is_live(i))
        self.observations = len(self._obs_ids)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        d = self._d
        entry_ids, obs_ids = self._entry_ids, self._obs_ids
        self._entry_ids, self._obs_ids = [], []
        events = d.observation_events
        if not self._merged:
            for entry_id in entry_ids:
                yield d.entry_view(entry_id)
            for obs_id in obs_ids:
                yield d.observation_view(obs_id)
            return
        # Both id lists are already in (ts, id) order: merging them is the sort
        # of the whole list (entries first on a tie, as a stable sort put them).
        entry_keyed = ((d.entry_events[i].ts, i, True) for i in entry_ids)
        obs_keyed = ((events[i][0].ts, i, False) for i in obs_ids)
        for _, some_id, is_entry in merge(entry_keyed, obs_keyed, key=_ts_id):
            if is_entry:
                yield d.entry_view(some_id)
            else:
                yield d.observation_view(some_id)
                del events[some_id]


def _ts_id(keyed: tuple[str, str, bool]) -> tuple[str, str]:
    return keyed[0], keyed[1]


def _show(ctx: Context, only_id: str | None, observations: bool, as_of: str | None
          ) -> tuple[dict[str, Any], ReadResult]:
    # Observations are verified but not kept when nothing shown can name one.
    keep = observations or only_id is not None
    result, d = read_workspace(ctx, as_of=as_of, observations=keep)
    # The derivation holds what the report needs; the read's own list of every
    # event would keep each one alive until the last item was written.
    result.events = []
    constraints = [d.entry_view(i) for i in d.visible_entry_ids()
                   if d.entry_events[i].kind == "constraint" and d.is_live(i)]
    report = {"entries": ShowItems(d, only_id, observations), "liveConstraints": constraints}
    report.update(damage_lists(result))
    return report, result
