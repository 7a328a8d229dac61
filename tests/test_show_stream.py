"""`show --observations` streamed (ops/show.StreamedShowItems) against the plain read.

Law: for any events spread over any segments (observations of one or several
events, ties in time, duplicate copies of an event in two segments,
tombstones, entries), the streamed items are exactly the items of a read that
holds every event, in the same order.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_journal.core.derive import derive
from agent_journal.core.model import Event
from agent_journal.ops import show
from agent_journal.ops.context import Context
from agent_journal.storage.connection import connect
from agent_journal.storage.files import create_private_file, make_private_dirs
from agent_journal.storage.root import Root
from agent_journal.storage.segment import init_segment, insert_events

TS = [f"2026-01-01T00:00:0{n}.000Z" for n in range(4)]

EVENT = st.tuples(st.sampled_from(["observation", "observation", "entry", "tombstone"]),
                  st.sampled_from(["o1", "o2", "o3", "f1"]), st.sampled_from(TS),
                  st.sampled_from([None, "started", "ok"]), st.integers(0, 2),
                  st.booleans())


def _event(n: int, spec: tuple[Any, ...]) -> Event:
    type_, subject, ts, status, _, _ = spec
    if type_ == "entry":
        return Event(event_id=f"e{n}", type="entry", kind="finding", id=subject, ts=ts,
                     author="agent", session="s", replica="r",
                     data={"fields": {"claim": f"c{n}"}, "anchors": [], "dependsOn": []})
    if type_ == "tombstone":
        return Event(event_id=f"e{n}", type="tombstone", kind="tombstone", id=subject, ts=ts,
                     author="human", session=None, replica="r",
                     data={"reason": "x", "purged": False})
    return Event(event_id=f"e{n}", type="observation", kind="tool_call", id=subject, ts=ts,
                 author="agent", session="s", replica="r",
                 data={"tool": "Bash", "status": status, "output": None if n % 2 else f"{n}",
                       "extra": n})


def _write(root: Path, placed: list[tuple[int, Event]]) -> Context:
    ws = Root.open(str(root), create=True).workspace("ws")
    make_private_dirs(ws.segments_dir)
    for seg in range(3):
        path = os.path.join(ws.segments_dir, f"r-{seg + 1:06d}.sqlite")
        create_private_file(path)
        conn = connect(path)
        init_segment(conn, workspace="ws", replica="r")
        conn.execute("BEGIN")
        insert_events(conn, [ev for where, ev in placed if where == seg])
        conn.execute("COMMIT")
        conn.close()
    return Context(str(root), "ws", session="s")


@settings(max_examples=80, deadline=None)
@given(specs=st.lists(EVENT, max_size=14))
def test_streamed_items_are_the_plain_reads_items(tmp_path_factory: Any,
                                                  specs: list[tuple[Any, ...]]) -> None:
    placed: list[tuple[int, Event]] = []
    for n, spec in enumerate(specs):
        ev = _event(n, spec)
        placed.append((spec[4], ev))
        if spec[5]:  # the same event copied into another segment, as a merge may leave it
            placed.append(((spec[4] + 1) % 3, ev))
    ctx = _write(tmp_path_factory.mktemp("stream"), placed)
    report, result = show.show_stream(ctx, observations=True)
    assert not result.damaged
    assert isinstance(report["entries"], show.StreamedShowItems)
    plain = derive(ctx.open(create=False).read(lazy=True).events)
    expected = show.ShowItems(plain, None, True)
    streamed = report["entries"]
    assert (streamed.entries, streamed.live, streamed.observations) == (
        expected.entries, expected.live, expected.observations)
    assert list(streamed) == list(expected)


def test_a_view_waits_for_its_later_events_in_another_segment(tmp_path: Path) -> None:
    start = _event(0, ("observation", "o1", TS[0], "started", 0, False))
    other = _event(1, ("observation", "o2", TS[1], "ok", 0, False))
    finish = _event(2, ("observation", "o1", TS[2], "ok", 1, False))
    ctx = _write(tmp_path, [(0, start), (0, other), (1, finish)])
    report, _ = show.show_stream(ctx, observations=True)
    assert isinstance(report["entries"], show.StreamedShowItems)
    items = list(report["entries"])
    assert [(i["id"], i["status"], i["eventIds"]) for i in items] == [
        ("o1", "ok", ["e0", "e2"]), ("o2", "ok", ["e1"])]
