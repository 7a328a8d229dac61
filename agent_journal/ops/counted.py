"""The counting read of coverage and decay, through the projection engine.

Invariant: `read_counted` gives the counts, observation ids, events and damage a direct
lazy read gives: every segment's core.counts.CountFold state as storage/projection.py keeps
it (so a run after a few new rows reads only those rows). A segment the engine could not
read to the end, or that fails SQLite's structural check, is never kept: it is read
directly every time (`Counted.loose`, uncounted), as `Workspace.read` reads it, and the
check's verdict on it is in `Counted.structure`.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from agent_journal.core.counts import CountFold
from agent_journal.core.model import events_from_values
from agent_journal.storage.projection import project
from agent_journal.storage.segment_reader import ReadResult, read_segment, structure_damage
from agent_journal.storage.workspace import Workspace


class Counted:
    """`result` holds every event but the observations, and the damage as a direct read
    reports it; `counts` the events by (type, kind), `observed` every observation id;
    `loose` the events of the segments read directly, `structure` their check's verdict."""

    def __init__(self) -> None:
        self.result = ReadResult()
        self.counts: Counter[tuple[str, str]] = Counter()
        self.observed: set[str] = set()
        self.loose: list[Any] = []
        self.structure: list[dict[str, str]] = []


def read_counted(ws: Workspace, *, keep: bool = True) -> Counted:
    """Every segment counted, from what the projection kept where its marks hold (`keep`
    False: a read that promises no writes keeps nothing)."""
    got = Counted()
    result = got.result
    for part in project(ws, CountFold(), keep=keep):
        rel = part.rel
        result.segments.append(rel)
        if part.unreadable is not None:  # damaged: read directly, as every time
            got.loose.extend(result.take(rel, read_segment(part.path, lazy=True)))
            reason = structure_damage(part.path)
            if reason is not None:
                got.structure.append({"path": rel, "reason": reason})
            continue
        counts, subjects, others = part.state
        got.counts.update(counts)
        got.observed.update(subjects)
        result.events.extend(events_from_values(others))
        result.malformed.extend({"segment": rel, "row": seq, "reason": why}
                                for seq, why in part.malformed)
        result.high_water[rel] = part.high
    return got
