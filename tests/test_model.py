import re

import pytest

from agent_journal.core.errors import UsageError
from agent_journal.core.model import Event, new_event_id, parse_anchor, validate_id


@pytest.mark.parametrize("value", ["ws", "a.b", "x" * 128, "f-1", "ÜNICODE", "a b"])
def test_valid_ids(value):
    assert validate_id(value, "id") == value


@pytest.mark.parametrize("value", [None, "", ".", "..", "a/b", "a\\b", "x" * 129, "-x",
                                   "--json", "a\nb", "a\x00b", "a\x7fb", " a", "a "])
def test_invalid_ids(value):
    with pytest.raises(UsageError):
        validate_id(value, "id")


def test_event_ids_are_v4_uuids_and_unique():
    ids = {new_event_id() for _ in range(1000)}
    assert len(ids) == 1000
    pattern = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
    assert all(pattern.match(i) for i in ids)


def test_event_is_immutable():
    ev = Event(event_id="e", type="entry", kind="note", id="n", ts="t", author="human",
               session=None, replica="r", data={})
    with pytest.raises(AttributeError):
        ev.kind = "x"  # type: ignore[misc]
    assert ev.replace(kind="finding").kind == "finding" and ev.kind == "note"


@pytest.mark.parametrize("anchor", ["tool_use:obs1", "file:src/a.py", "commit:abc123",
                                    "url:https://example.com/x"])
def test_anchor_schemes(anchor):
    assert parse_anchor(anchor) == anchor


@pytest.mark.parametrize("anchor", ["obs1", "ftp:x", "file:", "tool_use:a/b", ":x"])
def test_bad_anchors(anchor):
    with pytest.raises(UsageError):
        parse_anchor(anchor)


def test_with_data_changes_only_the_data():
    from agent_journal.core.model import Event

    ev = Event(event_id="e1", type="tombstone", kind="tombstone", id="x",
               ts="2025-01-01T00:00:00.000Z", author="human", session="s", replica="r",
               data={"reason": "r", "purged": False}, schema=1)
    other = ev.with_data({"reason": "r", "purged": True})
    assert other.as_dict() == {**ev.as_dict(), "data": {"reason": "r", "purged": True}}
    assert ev.data == {"reason": "r", "purged": False}


def test_events_survive_the_trip_through_values():
    from agent_journal.core.model import Event, event_values, events_from_values

    evs = [Event(event_id=f"e{i}", type="observation", kind="tool_call", id=f"o{i}",
                 ts="2025-01-01T00:00:00.000Z", author="agent", session=None if i else "s",
                 replica="r", data={"n": i}, schema=1) for i in range(3)]
    rows = [event_values(ev) for ev in evs]
    assert all(len(row) == len(Event.__slots__) for row in rows)
    assert [e.as_dict() for e in events_from_values(rows)] == [e.as_dict() for e in evs]
    assert events_from_values([]) == []
