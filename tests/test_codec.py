import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_journal import codec
from agent_journal.model import Event

GOLDEN = Event(event_id="00000000-0000-4000-8000-000000000001", type="entry", kind="finding",
               id="f1", ts="2026-01-02T03:04:05.678Z", author="human", session=None,
               replica="r0123456789abcde",
               data={"fields": {"claim": "café ☕"}, "anchors": ["tool_use:o1"],
                     "dependsOn": [], "subject": None})


def test_canonical_bytes_are_pinned():
    # Changing this string is a format change: see spec/FORMAT.md.
    assert codec.canonical_bytes(GOLDEN) == (
        '{"author":"human","data":{"anchors":["tool_use:o1"],"dependsOn":[],'
        '"fields":{"claim":"café ☕"},"subject":null},'
        '"eventId":"00000000-0000-4000-8000-000000000001","id":"f1","kind":"finding",'
        '"replica":"r0123456789abcde","schema":1,"session":null,'
        '"ts":"2026-01-02T03:04:05.678Z","type":"entry"}').encode()
    assert codec.checksum(codec.canonical_bytes(GOLDEN)) == "xxh3-64:" + __import__(
        "xxhash").xxh3_64_hexdigest(codec.canonical_bytes(GOLDEN))


def test_roundtrip():
    body, digest = codec.encode(GOLDEN)
    assert codec.decode(body, digest) == GOLDEN


def test_bit_flip_is_malformed():
    body, digest = codec.encode(GOLDEN)
    flipped = bytearray(body)
    flipped[40] ^= 0x01
    with pytest.raises(codec.MalformedEvent, match="checksum"):
        codec.decode(bytes(flipped), digest)


@pytest.mark.parametrize("mutate, reason", [
    (lambda o: o.pop("ts"), "missing field"),
    (lambda o: o.__setitem__("data", []), "data is not an object"),
    (lambda o: o.__setitem__("id", None), "has no id"),
    (lambda o: o["data"].__setitem__("anchors", "x"), "anchors"),
    (lambda o: o.__setitem__("schema", "1"), "schema"),
])
def test_structurally_bad_bodies_are_malformed(mutate, reason):
    obj = GOLDEN.as_dict()
    obj["data"] = dict(obj["data"])
    mutate(obj)
    body = json.dumps(obj).encode()
    with pytest.raises(codec.MalformedEvent, match=reason):
        codec.decode(body, codec.checksum(body))


def test_tombstone_needs_reason_and_purged_flag():
    obj = GOLDEN.as_dict() | {"type": "tombstone", "kind": "tombstone", "data": {"reason": " "}}
    body = json.dumps(obj).encode()
    with pytest.raises(codec.MalformedEvent, match="reason"):
        codec.decode(body, codec.checksum(body))
    obj["data"] = {"reason": "leak"}
    body = json.dumps(obj).encode()
    with pytest.raises(codec.MalformedEvent, match="purged"):
        codec.decode(body, codec.checksum(body))


def test_unknown_types_decode_untouched():
    obj = GOLDEN.as_dict() | {"type": "future-thing", "id": None, "data": {"x": 1}}
    body = json.dumps(obj).encode()
    assert codec.decode(body, codec.checksum(body)).type == "future-thing"


def test_non_finite_numbers_are_malformed():
    body = b'{"x": NaN}'
    with pytest.raises(codec.MalformedEvent):
        codec.decode(body, codec.checksum(body))


@given(st.dictionaries(st.text(max_size=5), st.one_of(st.text(), st.integers(), st.none()),
                       max_size=5))
def test_any_data_roundtrips(data):
    ev = GOLDEN.replace(type="observation", kind="tool_call", data=data)
    assert codec.decode(*codec.encode(ev)) == ev
