"""What coverage and decay read of a journal, as a fold: every event by (type, kind), every
observation id, and every event but the observations whole.

Invariants: `CountFold` is a projection's pure fold (storage/projection.py): its state is
[events by (type, kind), observation ids, every other event as `model.event_values`], so a
segment's state holds exactly what a lazy read of its rows gives coverage and decay (an
observation's kind as `codec.lazy_kind` reads it, no body parsed). `sift` is that same
verdict taken of stored rows without building an event (`codec.count_lazy`): the rows it
takes are the ones `step` would count the same way, and it hands back the rest, in order.
No I/O.
"""

from __future__ import annotations

from agent_journal.core import codec
from agent_journal.core.model import OBSERVATION, event_values

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from agent_journal.core.model import Event


class CountFold:
    """The fold a projection keeps per segment (storage/projection.Reader)."""

    area = "counts"
    layout = "counts/3"  # bumped whenever step or the state changes (2: storage/counted_read)

    @staticmethod
    def start() -> list[Any]:
        return [{}, [], []]  # (type, kind) -> events; observation ids; other events

    @staticmethod
    def step(state: list[Any], ev: Event) -> list[Any]:
        counts: dict[tuple[str, str], int] = state[0]
        if ev.type == OBSERVATION:
            key = (OBSERVATION, codec.lazy_kind(ev))
            state[1].append(ev.id)
        else:
            key = (ev.type, ev.kind)
            state[2].append(event_values(ev))
        counts[key] = counts.get(key, 0) + 1
        return state

    @staticmethod
    def sift(state: list[Any], rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """Count the observations among stored rows that need no event built; the rest
        of the rows, in order, for `step`."""
        kinds: dict[str, int] = {}
        rest = codec.count_lazy(rows, kinds, state[1])
        counts: dict[tuple[str, str], int] = state[0]
        for kind, n in kinds.items():
            counts[(OBSERVATION, kind)] = counts.get((OBSERVATION, kind), 0) + n
        return rest
