"""`show`: entries (and with --observations, observations) as the events derive them.

Invariants:
- Tombstoned ids never appear; invalidated and suppressed entries appear
  with their outcome and `live: false`; live constraints are always listed;
  damage met by the read is reported beside the answer.
- `only_id` names one thing: an id that is not an entry or observation here
  (unknown or tombstoned) is refused (NotFoundError), never an empty answer.
- Memory does not grow with the observations shown: `show --observations`
  reads each observation row once, in time order (storage/time_order.py),
  and builds each view as its events arrive, holding only the views whose
  later events are still to come. The entries are derived first from the
  other rows alone, and SQLite's count of each observation's rows (lookup
  columns only) says when a view is whole; every pass takes the rows each
  segment held when the read began. Damage met before the first view (an
  unreadable segment, a malformed entry) sends the read the plain way, all
  at once; a malformed observation row met later is reported after the
  views, its observation's view (if any event of it is sound) keeping its
  place, and the text summary counts observations by the lookup columns.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from heapq import heappop, heappush, merge
from typing import TYPE_CHECKING, Any

from agent_journal.core.derive import Derived
from agent_journal.core.model import OBSERVATION, validate_id
from agent_journal.ops.context import Context, damage_lists, read_workspace
from agent_journal.storage.segment_reader import ReadResult
from agent_journal.storage.workspace import Workspace

if TYPE_CHECKING:
    from agent_journal.storage.time_order import TimeOrder


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


class StreamedShowItems:
    """ShowItems of `show --observations` without holding the observations.

    `open` derives the entries from every row but the observations' and
    counts each observation's rows; iterating reads the observations in
    (ts, eventId) order and hands out each view once it has all its events
    and no view can still sort before it. The reader's damage lists are the
    report's: they are complete (and in a whole read's order) once the
    items have been iterated.
    """

    @classmethod
    def open(cls, ws: Workspace) -> tuple[Derived, StreamedShowItems] | None:
        """The derivation and the items, or None when damage was met first."""
        from agent_journal.core.derive import derive
        from agent_journal.storage.time_order import TimeOrder

        reader = TimeOrder(ws, types=(OBSERVATION,), lazy=True, pinned=True).__enter__()
        try:
            others = reader.others(OBSERVATION)
            d = derive(others)
            # The subject index counts every row about an id; the other rows are
            # all in hand, so what is left are the observation's own.
            other_rows = Counter(ev.id for ev in others)
            del others
            more: dict[str, int] = {}
            shown = 0
            hidden = d.tombstones
            for subject, n in reader.subject_counts(every_type=True):
                n -= other_rows.get(subject, 0)
                if n > 0 and subject not in hidden:
                    shown += 1
                    if n > 1:
                        more[subject] = n
        except BaseException:
            reader.__exit__()
            raise
        if reader.unreadable or reader.malformed:
            reader.__exit__()
            return None
        return d, cls(d, reader, more, shown)

    def __init__(self, d: Derived, reader: TimeOrder, more: dict[str, int],
                 shown: int) -> None:
        self._d = d
        self._reader = reader
        self._entry_ids = d.visible_entry_ids()
        self.entries = len(self._entry_ids)
        self.live = sum(1 for i in self._entry_ids if d.is_live(i))
        # An id's rows: how many events its view folds (most ids have one or two).
        self._more = more
        self.observations = shown
        self.result = ReadResult()
        self.result.segments = reader.segments
        self.result.unreadable = reader.unreadable
        self.result.malformed = reader.malformed

    def __iter__(self) -> Iterator[dict[str, Any]]:
        d = self._d
        entry_ids, self._entry_ids = self._entry_ids, []
        entry_keyed = ((d.entry_events[i].ts, i, True) for i in entry_ids)
        for _, some_id, is_entry in merge(entry_keyed, self._observations(), key=_ts_id):
            if is_entry:
                yield d.entry_view(some_id)
            else:
                yield d.observation_view(some_id)
                del d.observation_events[some_id]

    def _observations(self) -> Iterator[tuple[str, str, bool]]:
        """(first ts, id, False) of each visible observation in (ts, id) order,
        its events put in d.observation_events for its view."""
        hidden, more = self._d.tombstones, self._more
        held = self._d.observation_events
        waiting: dict[str, int] = {}  # id -> events still to come
        ready: list[tuple[str, str]] = []  # heap of (first ts, id)
        try:
            for ev in self._reader.forward():
                obs_id: str = ev.id  # type: ignore[assignment]  # an observation's is a str
                if obs_id in hidden:
                    continue
                if obs_id in waiting:
                    held[obs_id].append(ev)
                    waiting[obs_id] -= 1
                else:
                    held[obs_id] = [ev]
                    waiting[obs_id] = more.get(obs_id, 1) - 1
                    heappush(ready, (ev.ts, obs_id))
                # Views sort by (first ts, id): one whose events are all in, with a
                # first ts before this event's, has nothing left to wait for.
                while ready and ready[0][0] < ev.ts and waiting[ready[0][1]] <= 0:
                    first_ts, done = heappop(ready)
                    del waiting[done]
                    yield first_ts, done, False
            while ready:
                first_ts, done = heappop(ready)
                yield first_ts, done, False
        finally:
            self._reader.__exit__()
            self._reader.damage_in_order()


def _ts_id(keyed: tuple[str, str, bool]) -> tuple[str, str]:
    return keyed[0], keyed[1]


def _show(ctx: Context, only_id: str | None, observations: bool, as_of: str | None
          ) -> tuple[dict[str, Any], ReadResult]:
    if observations and only_id is None and as_of is None:
        opened = StreamedShowItems.open(ctx.open(create=False))
        if opened is not None:
            d, streamed = opened
            return _report(d, streamed, streamed.result)
    # Observations are verified but not kept when nothing shown can name one.
    keep = observations or only_id is not None
    result, d = read_workspace(ctx, as_of=as_of, observations=keep)
    # The derivation holds what the report needs; the read's own list of every
    # event would keep each one alive until the last item was written.
    result.events = []
    items = ShowItems(d, only_id, observations)
    if only_id is not None and not items.entries + items.observations:
        from agent_journal.ops.context import not_found

        raise not_found(only_id, ctx.workspace_name, result)
    return _report(d, items, result)


def _report(d: Derived, items: ShowItems | StreamedShowItems, result: ReadResult
            ) -> tuple[dict[str, Any], ReadResult]:
    constraints = [d.entry_view(i) for i in d.visible_entry_ids()
                   if d.entry_events[i].kind == "constraint" and d.is_live(i)]
    report = {"entries": items, "liveConstraints": constraints}
    report.update(damage_lists(result))
    return report, result
