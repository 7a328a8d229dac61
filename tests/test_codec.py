import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_journal.core import codec
from agent_journal.core.model import Event

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


# -- the fast parse path must accept and refuse exactly what json.loads does --


def reference(body: bytes):
    try:
        return ("ok", json.loads(body, parse_constant=codec._reject_constant))
    except (ValueError, UnicodeDecodeError) as exc:
        return ("error", exc.__class__.__name__)


def fast(body: bytes):
    try:
        return ("ok", codec._parse_json(body))
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
    from agent_journal.core.model import Event

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


def test_a_column_with_a_quote_cannot_line_up_with_a_crafted_body():
    """A body with a repeated key, written so that a column holding quotes reads
    as its header, is judged by the strict decoder (whose columns disagree)."""
    body = (b'{"author":"a","data":{},"eventId":"E","id":"X","id":"S","kind":"tool_call",'
            b'"replica":"r","schema":1,"session":null,"ts":"2026-01-01T00:00:00.000Z",'
            b'"type":"observation"}')
    with pytest.raises(codec.MalformedEvent, match="indexed columns"):
        codec.decode_lazy(body, codec.checksum(body), 'E","id":"X', "observation", "S",
                          "2026-01-01T00:00:00.000Z")


def test_a_column_with_a_backslash_is_read_strictly():
    body = (b'{"author":"a","data":{},"eventId":"E\\\\","id":"S","kind":"tool_call",'
            b'"replica":"r","schema":1,"session":null,"ts":"2026-01-01T00:00:00.000Z",'
            b'"type":"observation"}')
    ev = codec.decode_lazy(body, codec.checksum(body), "E\\", "observation", "S",
                           "2026-01-01T00:00:00.000Z")
    assert type(ev) is not codec.LazyEvent and ev.event_id == "E\\"


def test_columns_of_other_types_are_read_strictly():
    body = (b'{"author":"a","data":{},"eventId":"E","id":"S","kind":"tool_call",'
            b'"replica":"r","schema":1,"session":null,"ts":"2026-01-01T00:00:00.000Z",'
            b'"type":"observation"}')
    with pytest.raises(codec.MalformedEvent, match="indexed columns"):
        codec.decode_lazy(body, codec.checksum(body), b"E", "observation", "S",
                          "2026-01-01T00:00:00.000Z")


_json_like_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6) | st.sampled_from(['q"uote', "back\\slash", "nl\n", "\x7f", "😀"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                max_size=3),
    max_leaves=10)
_SCALARS = (st.none() | st.booleans() | st.integers(min_value=-10**20, max_value=10**20)
            | st.text(max_size=6) | st.sampled_from(["plain", 'q"uote', "back\\slash",
                                                     "nl\n", "tab\t", "\x7f", "é", "😀"]))
_STRINGS = st.text(max_size=6) | st.sampled_from(["plain", 'a"b', "a\\b", "\x1f", "ü"])


@settings(max_examples=400, deadline=None)
@given(data=st.dictionaries(_STRINGS, _SCALARS | st.floats(allow_nan=False, allow_infinity=False)
                            | st.lists(st.integers(), max_size=2)
                            | st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
                            max_size=4),
       author=_STRINGS, subject=st.none() | _STRINGS, session=st.none() | _STRINGS,
       schema=st.integers(min_value=-5, max_value=10**6))
def test_flat_events_are_written_exactly_as_the_json_encoder_writes_them(
        data, author, subject, session, schema):
    ev = Event(event_id="e-1", type="tombstone", kind="tombstone", id=subject,
               ts="2025-01-01T00:00:00.000Z", author=author, session=session, replica="r",
               data=data, schema=schema)
    expected = json.dumps(ev.as_dict(), sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False, allow_nan=False)
    direct = codec._direct_canonical(ev)
    assert direct is None or direct == expected
    assert codec.canonical_bytes(ev) == expected.encode("utf-8")


@settings(max_examples=200, deadline=None)
@given(data=st.dictionaries(_STRINGS, _json_like_values, max_size=4),
       kind=_STRINGS, subject=st.none() | _STRINGS, session=st.none() | _STRINGS)
def test_events_with_any_data_are_written_exactly_as_the_json_encoder_writes_them(
        data, kind, subject, session):
    ev = Event(event_id="e-1", type="observation", kind=kind, id=subject,
               ts="2025-01-01T00:00:00.000Z", author="agent", session=session, replica="r",
               data=data)
    expected = json.dumps(ev.as_dict(), sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False, allow_nan=False)
    assert codec.canonical_bytes(ev) == expected.encode("utf-8")


def test_the_direct_writer_takes_plain_fields_and_leaves_the_rest():
    tomb = Event(event_id="e-1", type="tombstone", kind="tombstone", id="x",
                 ts="2025-01-01T00:00:00.000Z", author="human", session=None, replica="r",
                 data={"reason": "leaked key", "purged": False})
    assert codec._flat_data(tomb.data) is not None
    for other in ({"reason": 'a "quoted" reason', "purged": False},
                  {"reason": "r", "purged": False, "extra": {"nested": True}},
                  {"reason": "r", "purged": False, "ratio": 0.5},
                  {1: "non-string key"}):
        # Data the flat writer leaves is written by the encoder, in the same envelope.
        assert codec._flat_data(other) is None
        assert codec._direct_canonical(tomb.replace(data=other)) == json.dumps(
            tomb.replace(data=other).as_dict(), sort_keys=True, separators=(",", ":"),
            ensure_ascii=False)

    class Text(str):
        def __format__(self, spec: str) -> str:
            return "changed"

    assert codec._direct_canonical(tomb.replace(author=Text("human"))) is None
    assert codec._direct_canonical(tomb.replace(schema=True)) is None
    assert codec._direct_canonical(tomb.replace(kind='a "quoted" kind')) is None


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20)


@given(st.dictionaries(st.text(), _json_values, max_size=6))
def test_canonical_text_is_the_canonical_encoders_text(obj: dict) -> None:
    # The direct call to the C encoder must write exactly what json's own encode writes.
    canonical = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                                 allow_nan=False)
    assert codec._canonical_text(obj) == canonical.encode(obj)


def test_canonical_text_refuses_what_the_encoder_refuses() -> None:
    for bad in ({"x": float("nan")}, {"x": object()}):
        with pytest.raises((ValueError, TypeError)):
            codec._canonical_text(bad)
    looped: dict = {}
    looped["self"] = looped
    with pytest.raises(ValueError):
        codec._canonical_text(looped)
    assert codec._canonical_text({"b": 1, "a": [1.5, "é"]}) == '{"a":[1.5,"é"],"b":1}'
