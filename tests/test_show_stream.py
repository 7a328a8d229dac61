"""`show --observations` streamed (ops/show.StreamedShowItems) against the plain read,
and the timeline's streamed lines against lines made from a whole read.

Laws: for any events spread over any segments of several replicas
(observations of one or several events, ties in time, duplicate copies of an
event in two segments, tombstones, invalidations, entries), the streamed
items are exactly the items of a read that holds every event, in the same
order, and print the same JSON and text; the timeline, with any filter and
`--as-of` instant, gives the lines a whole read put in (ts, eventId) order
gives.
"""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_journal.cli import output
from agent_journal.cli.render_reads import show_lines
from agent_journal.core.derive import derive
from agent_journal.core.model import Event
from agent_journal.ops import show
from agent_journal.ops.context import Context
from agent_journal.storage.connection import connect
from agent_journal.storage.files import create_private_file, make_private_dirs
from agent_journal.storage.root import Root
from agent_journal.storage.segment import init_segment, insert_events

TS = [f"2026-01-01T00:00:0{n}.000Z" for n in range(4)]

EVENT = st.tuples(st.sampled_from(["observation", "observation", "entry", "tombstone",
                                   "invalidation"]),
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
    if type_ == "invalidation":
        return Event(event_id=f"e{n}", type="invalidation", kind="invalidation", id="f1",
                     ts=ts, author="human", session=None, replica="r",
                     data={"reason": f"wrong {n}"})
    return Event(event_id=f"e{n}", type="observation", kind="tool_call", id=subject, ts=ts,
                 author="agent", session="s", replica="r",
                 data={"tool": "Bash", "status": status, "output": None if n % 2 else f"{n}",
                       "extra": n})


def _write(root: Path, placed: list[tuple[int, Event]]) -> Context:
    ws = Root.open(str(root), create=True).workspace("ws")
    make_private_dirs(ws.segments_dir)
    for seg in range(3):
        # Two replicas' segments: the third is another replica's, as a merge leaves it.
        path = os.path.join(ws.segments_dir, f"{'r' if seg < 2 else 's'}-{seg + 1:06d}.sqlite")
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
    # What is printed: the streamed report against the plain one, JSON and text.
    def whole_read() -> show.ShowItems:  # its views are let go as they are handed out
        return show.ShowItems(derive(ctx.open(create=False).read(lazy=True).events), None,
                              True)

    again, _ = show.show_stream(ctx, observations=True)
    assert _printed(again) == _printed(dict(again, entries=whole_read()))
    again, _ = show.show_stream(ctx, observations=True)
    assert list(show_lines(again)) == list(show_lines(dict(again, entries=whole_read())))


def _printed(report: dict[str, Any]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        output.emit_json(report)
    return out.getvalue()


TL_EVENT = st.tuples(st.sampled_from(["observation", "observation", "entry", "tombstone"]),
                     st.sampled_from(["o1", "o2", "f1"]), st.sampled_from(TS),
                     st.sampled_from(["started", "ok", "error"]), st.integers(0, 2),
                     st.booleans())


@settings(max_examples=60, deadline=None)
@given(specs=st.lists(TL_EVENT, max_size=12), as_of=st.sampled_from([None, *TS]),
       failures=st.booleans(), tool=st.sampled_from([None, "Bash", "Edit"]),
       since=st.sampled_from([None, TS[1]]))
def test_streamed_timeline_is_the_lines_of_a_whole_read(
        tmp_path_factory: Any, specs: list[tuple[Any, ...]], as_of: str | None,
        failures: bool, tool: str | None, since: str | None) -> None:
    from agent_journal.core.timeline import lines
    from agent_journal.ops.checkpoints import resolve_as_of
    from agent_journal.ops.timeline import Filters, Timeline

    placed: list[tuple[int, Event]] = []
    for n, spec in enumerate(specs):
        type_, subject, ts, status, where, copied = spec
        if type_ == "observation":  # each event names its call, so no finish needs its start
            ev = Event(event_id=f"e{n}", type="observation", kind="tool_call", id=subject,
                       ts=ts, author="agent", session="s", replica="r",
                       data={"tool": "Bash" if n % 3 else "Edit", "status": status,
                             "input": {"command": f"run {subject}"},
                             "exitCode": 1 if status == "error" else 0})
        else:
            ev = _event(n, spec)
        placed.append((where, ev))
        if copied:
            placed.append(((where + 1) % 3, ev))
    ctx = _write(tmp_path_factory.mktemp("timeline"), placed)
    filters = Filters(failures_only=failures, tool=tool, since=since)
    with Timeline(ctx, filters, as_of=as_of) as timeline:
        streamed = [line.as_json() for line in timeline.lines()]
    ws = ctx.open(create=False)
    cut = resolve_as_of(ws, as_of)
    # A copy of an event in two segments is two events to both (as to derive).
    inside = sorted(ws.read(cut=None if cut is None else cut.cut).events,
                    key=lambda ev: ev.sort_key)
    hidden = {str(ev.id) for ev in ws.read().events if ev.type == "tombstone"}
    expected = [line.as_json() for line in lines(inside, hidden) if filters.match(line)]
    assert streamed == expected


def test_one_event_view_is_the_fold_of_its_event() -> None:
    """The one-event view built in one go (core/derive.py) is the general fold's."""
    from agent_journal.core import derive as derive_mod
    from agent_journal.core.derive import OBSERVATION_FIELDS, Derived
    from agent_journal.core.observation_fold import latest_wins

    values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=3),
                          lambda inner: st.lists(inner, max_size=2)
                          | st.dictionaries(st.text(max_size=2), inner, max_size=2),
                          max_leaves=4)
    keys = st.sampled_from([*OBSERVATION_FIELDS, "type", "id", "ts", "eventIds", "text", "zz"])

    @settings(max_examples=300, deadline=None)
    @given(data=st.dictionaries(keys, values, max_size=6))
    def check(data: dict[str, Any]) -> None:
        ev = Event(event_id="e1", type="observation", kind="tool_call", id="o1",
                   ts=TS[0], author="a", session=None, replica="r", data=data)
        d = Derived()
        d.observation_events["o1"] = [ev]
        folded = latest_wins([data], dict.fromkeys(OBSERVATION_FIELDS),
                             skip=derive_mod._VIEW_HEADER)
        want = {"type": "observation", "id": "o1", "kind": "tool_call", **folded,
                "author": "a", "session": None, "ts": TS[0], "lastTs": TS[0],
                "eventIds": ["e1"]}
        assert list(d.observation_view("o1").items()) == list(want.items())

    check()


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


def test_views_stamped_alike_come_in_id_order(tmp_path: Path) -> None:
    """Two views with one first time: the smaller id first, though its event sorts after."""
    later_id = _event(0, ("observation", "o2", TS[0], "ok", 0, False))
    earlier_id = _event(1, ("observation", "o1", TS[0], "ok", 0, False))
    ctx = _write(tmp_path, [(0, later_id), (0, earlier_id)])
    report, _ = show.show_stream(ctx, observations=True)
    assert isinstance(report["entries"], show.StreamedShowItems)
    assert [i["id"] for i in report["entries"]] == ["o1", "o2"]


def test_a_malformed_observation_row_met_mid_stream(tmp_path: Path) -> None:
    """Damage only the stream meets: the document equals the plain read's, views,
    damage lists and their order; the view missing an event keeps its place."""
    events = [_event(n, ("observation", subject, ts, status, 0, False)) for n, (subject, ts, status)
              in enumerate([("o1", TS[0], "started"), ("o2", TS[1], "ok"), ("o3", TS[1], "ok"),
                            ("o1", TS[2], "ok"), ("o3", TS[3], "ok")])]
    # o2's only row is in the second segment, stamped before o1's finish in the first.
    ctx = _write(tmp_path, [(1 if n == 1 else 0, ev) for n, ev in enumerate(events)])
    ws = ctx.open(create=False)
    for path in ws.segment_paths():  # o2's row and o1's finish fail their checksums
        conn = connect(path)
        conn.execute("UPDATE events SET checksum = 'xxh3:0' WHERE event_id IN ('e1', 'e3')")
        conn.commit()
        conn.close()
    report, result = show.show_stream(ctx, observations=True)
    assert isinstance(report["entries"], show.StreamedShowItems)
    printed = _printed(report)
    plain = ws.read(lazy=True)
    expected = {"entries": show.ShowItems(derive(plain.events), None, True),
                "liveConstraints": [], "unreadable": plain.unreadable,
                "malformed": plain.malformed}
    assert printed == _printed(expected)
    assert [(m["segment"][-8:], m["row"]) for m in result.malformed] == [
        ("1.sqlite", 3), ("2.sqlite", 1)]
