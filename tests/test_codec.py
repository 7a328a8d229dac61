"""codec: the fast parse path must accept and refuse exactly what json.loads does."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_journal import codec


def reference(body: bytes):
    try:
        return ("ok", json.loads(body, parse_constant=codec._reject_constant))
    except (ValueError, UnicodeDecodeError) as exc:
        return ("error", exc.__class__.__name__)


def fast(body: bytes):
    try:
        return ("ok", codec._parse(body))
    except (ValueError, UnicodeDecodeError) as exc:
        return ("error", exc.__class__.__name__)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8)


@settings(max_examples=300, deadline=None)
@given(json_values, st.sampled_from(["", " ", "\n", "x", "}", " {}", "\ufeff"]),
       st.sampled_from(["", " ", "\t"]), st.sampled_from(["utf-8", "utf-16", "utf-16-le",
                                                          "utf-32", "utf-8-sig"]))
def test_parse_matches_json_loads(value, suffix, prefix, encoding):
    text = prefix + json.dumps(value, ensure_ascii=False) + suffix
    try:
        body = text.encode(encoding, "surrogatepass")
    except UnicodeEncodeError:
        return
    assert fast(body) == reference(body)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40))
def test_parse_matches_json_loads_on_any_bytes(body):
    assert fast(b"{" + body) == reference(b"{" + body)
    assert fast(body) == reference(body)


@pytest.mark.parametrize("body", [b'{"a":NaN}', b'{"a":Infinity}', b'{"a":1} x', b"{",
                                  b'{"a":"\\ud800"}', b'{"a":1}\n', b'\xef\xbb\xbf{"a":1}',
                                  b'{\x00"', b"{}", b"[]", b'{"\xff":1}'])
def test_edge_bodies(body):
    assert fast(body) == reference(body)


def test_decode_reports_the_same_reasons():
    with pytest.raises(codec.MalformedEvent, match="body does not parse: MalformedEvent"):
        codec.decode(b'{"a":NaN}', codec.checksum(b'{"a":NaN}'))
    with pytest.raises(codec.MalformedEvent, match="body does not parse: JSONDecodeError"):
        codec.decode(b'{"a":1} x', codec.checksum(b'{"a":1} x'))
    with pytest.raises(codec.MalformedEvent, match="missing field\\(s\\): eventId, type"):
        body = json.dumps({"kind": "k", "id": None, "ts": "t", "author": "a",
                           "session": None, "replica": "r", "data": {},
                           "schema": 1}).encode()
        codec.decode(body, codec.checksum(body))


def test_decoded_event_equals_the_constructed_one_and_stays_immutable():
    from agent_journal.model import Event

    original = Event(event_id="e-1", type="entry", kind="finding", id="f1",
                     ts="2026-01-01T00:00:00.000Z", author="agent", session="s1", replica="r1",
                     data={"fields": {"claim": "c"}, "anchors": ["tool_use:o1"],
                           "dependsOn": [], "subject": None})
    body, digest = codec.encode(original)
    decoded = codec.decode(body, digest)
    assert decoded == original and decoded.as_dict() == original.as_dict()
    assert type(decoded) is Event and hash(decoded) == hash(original)
    with pytest.raises(AttributeError):
        decoded.kind = "decision"  # type: ignore[misc]
    obj = json.loads(body)
    from_obj = codec.from_dict(obj)
    obj["data"]["fields"] = "changed later"
    assert from_obj.data["fields"] == {"claim": "c"}  # data is the event's own copy
