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


OBS = GOLDEN.replace(type="observation", kind="tool_call", id="o1",
                     data={"tool": "Bash", "input": {"id": "x", "kind": "y"}, "status": "ok"})


def test_lazy_decode_defers_parsing_but_checks_header():
    body, digest = codec.encode(OBS)
    lazy = codec.decode_lazy(body, digest, OBS.event_id, "observation", "o1", OBS.ts)
    assert isinstance(lazy, codec.LazyEvent)
    assert lazy == OBS and lazy.data["tool"] == "Bash" and lazy.kind == "tool_call"


@pytest.mark.parametrize("field, value", [("event_id", "other"), ("type", "entry"),
                                          ("subject", "o2"), ("ts", "2026-01-01T00:00:00.000Z")])
def test_lazy_decode_rejects_columns_that_disagree_with_the_body(field, value):
    body, digest = codec.encode(OBS)
    cols = {"event_id": OBS.event_id, "type": "observation", "subject": "o1", "ts": OBS.ts}
    cols[field] = value
    with pytest.raises(codec.MalformedEvent):
        codec.decode_lazy(body, digest, cols["event_id"], cols["type"], cols["subject"],
                          cols["ts"])


def test_lazy_decode_still_checks_the_checksum():
    body, digest = codec.encode(OBS)
    with pytest.raises(codec.MalformedEvent, match="checksum"):
        codec.decode_lazy(body.replace(b"Bash", b"Bosh"), digest, OBS.event_id,
                          "observation", "o1", OBS.ts)


def test_lazy_decode_is_not_fooled_by_nested_header_lookalikes():
    nested = OBS.replace(data={"input": {"eventId": "fake", "id": "o9", "kind": "k"}})
    body, digest = codec.encode(nested)
    with pytest.raises(codec.MalformedEvent, match="columns"):
        codec.decode_lazy(body, digest, "fake", "observation", "o9", OBS.ts)
