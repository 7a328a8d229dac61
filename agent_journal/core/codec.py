"""Canonical bytes and checksums.

Invariant: an event's stored body is its canonical bytes, and its checksum is
`xxh3-64:` + the hex xxh3_64 digest of exactly those bytes. Canonical bytes are
UTF-8 JSON of the event object with sorted keys, no insignificant whitespace,
and non-ASCII kept as UTF-8. Decoding re-checks the checksum and the required
fields, so a damaged or hand-edited row is reported as malformed, never trusted.
"""

from __future__ import annotations

import xxhash

from agent_journal.core import cjson
from agent_journal.core.model import Event, event_from_stored

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any

CHECKSUM_PREFIX = "xxh3-64:"

REQUIRED_FIELDS = ("eventId", "type", "kind", "id", "ts", "author", "session", "replica",
                   "data", "schema")


class MalformedEvent(ValueError):
    """A stored row that cannot be trusted as an event; the message says why."""


# json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
# allow_nan=False).encode, calling the C encoder it would build directly: `encode` first
# sets up, in Python, what its C encoder is made from, which cost as much as a third of
# encoding an observation (and importing json costs the hook milliseconds).
canonical_text = cjson.encoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                               allow_nan=False)
_canonical_text = canonical_text


def canonical_bytes(event: Event) -> bytes:
    text = _direct_canonical(event)
    if text is None:
        text = _canonical_text(event.as_dict())
    return text.encode("utf-8")


# Whether the canonical encoder writes a string escaped (a quote, a backslash, a control
# character); one with none of these is written as itself between quotes.
_escaped = cjson.needs_escape
# The types of the data values _flat_data writes itself.
_FLAT_TYPES = frozenset({str, int, bool, type(None)})


def _direct_canonical(ev: Event) -> str | None:
    """The canonical text of an event, its fields written out directly; None for an
    event with a field besides `data` that is not a plain string (or null, for `id`
    and `session`) needing no escape, or whose schema is not an integer.

    The fields sort as they are written here. `data` is written directly too when it
    holds only strings needing no escape, integers, booleans and nulls (a merge rebuilds
    every purged tombstone that arrives, a hundred thousand in a large one), else by the
    canonical encoder: that spares every write a dict of the event's fields for the
    encoder to sort, and the encoder's pass over them (an import writes a few hundred
    thousand events).
    """
    subject, session, schema = ev.id, ev.session, ev.schema
    strings = [ev.author, ev.event_id, ev.kind, ev.replica, ev.ts, ev.type]
    if subject is not None:
        strings.append(subject)
    if session is not None:
        strings.append(session)
    if type(schema) is not int or not (
            str is type(ev.author) is type(ev.event_id) is type(ev.kind) is type(ev.replica)
            is type(ev.ts) is type(ev.type) is (str if subject is None else type(subject))
            is (str if session is None else type(session))) \
            or _escaped("".join(strings)):
        return None
    data = _flat_data(ev.data)
    if data is None:
        data = _canonical_text(ev.data)
    subject_text = "null" if subject is None else '"' + subject + '"'
    session_text = "null" if session is None else '"' + session + '"'
    return (f'{{"author":"{ev.author}","data":{data},'
            f'"eventId":"{ev.event_id}","id":{subject_text},'
            f'"kind":"{ev.kind}","replica":"{ev.replica}","schema":{schema},'
            f'"session":{session_text},"ts":"{ev.ts}","type":"{ev.type}"}}')


def _flat_data(data: dict[str, Any]) -> str | None:
    """The canonical text of data holding only strings, integers, booleans and nulls,
    under string keys, none needing escaping; None for any other data."""
    for value in data.values():
        # Most observations hold an object (their input): give up before sorting.
        if type(value) not in _FLAT_TYPES:
            return None
    strings = []
    items = []
    for key in sorted(data) if len(data) > 1 else data:
        value = data[key]
        kind = type(value)
        if kind is str:
            strings.append(value)
            text = f'"{value}"'
        elif value is None:
            text = "null"
        elif value is True:
            text = "true"
        elif value is False:
            text = "false"
        elif kind is int:
            text = str(value)
        else:
            return None
        if type(key) is not str:
            return None
        strings.append(key)
        items.append(f'"{key}":{text}')
    if _escaped("".join(strings)):
        return None
    return "{" + ",".join(items) + "}"


def checksum(body: bytes) -> str:
    return CHECKSUM_PREFIX + xxhash.xxh3_64_hexdigest(body)


def encode(event: Event) -> tuple[bytes, str]:
    body = canonical_bytes(event)
    return body, checksum(body)


def _reject_constant(name: str) -> Any:
    raise MalformedEvent(f"non-finite number {name} in body")


# One decoder for every row: json.loads(..., parse_constant=...) builds a new
# decoder per call, which was a third of the cost of reading a large journal.
_DECODER = cjson.Decoder(parse_constant=_reject_constant)
_BLOB_TYPES = (bytes, bytearray, memoryview)
_REQUIRED = frozenset(REQUIRED_FIELDS)


def _parse_json(body: bytes) -> Any:
    """Exactly json.loads(body, parse_constant=_reject_constant), with fast paths.

    A body that starts `{` plus a non-NUL byte is UTF-8 by json's own encoding
    detection; a canonical body has no surrounding whitespace, so raw_decode
    consuming all of it is the whole answer. Anything else takes json's full
    path, which raises exactly what json.loads would.
    """
    if body[:1] == b"{" and body[1:2] not in (b"", b"\x00"):
        text = body.decode("utf-8", "surrogatepass")
    else:
        from json import detect_encoding

        text = body.decode(detect_encoding(body), "surrogatepass")
    try:
        obj, end = _DECODER.raw_decode(text)
        if end == len(text):
            return obj
    except ValueError:
        pass
    return _DECODER.decode(text)


def as_bytes(body: Any) -> bytes:
    """A stored body as bytes. Raises MalformedEvent for anything else."""
    if isinstance(body, str):
        # A hand edit through SQL string functions turns the blob into text;
        # judge it by its bytes like any other body.
        return body.encode("utf-8")
    if not isinstance(body, _BLOB_TYPES):
        raise MalformedEvent("body is not a blob")
    return bytes(body)


def verify(body: Any, stored_checksum: str | None) -> dict[str, Any]:
    """Verify one stored body and return its parsed, shape-checked JSON object.

    The same checks as `decode` without building an Event, for bulk paths
    (merge) that need only a few fields of most rows. Raises MalformedEvent.
    """
    body = as_bytes(body)
    if stored_checksum != checksum(body):
        raise MalformedEvent("checksum mismatch")
    obj = _parse(body)
    check_dict(obj)
    return obj  # type: ignore[no-any-return]


def decode(body: bytes, stored_checksum: str | None) -> Event:
    """Verify and parse one stored body. Raises MalformedEvent."""
    return event_from_stored(verify(body, stored_checksum))


def _parse(body: bytes) -> Any:
    try:
        return _parse_json(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedEvent(f"body does not parse: {exc.__class__.__name__}") from None
    except RecursionError:
        # Nesting deeper than Python's json can follow: damage to report, not a crash.
        raise MalformedEvent("body nests too deeply to parse") from None


def decode_lazy(body: bytes, stored_checksum: str | None, event_id: str, type_: str,
                subject: str | None, ts: str) -> Event:
    """Verify a row's bytes and header without parsing its JSON.

    For bulk reads that need only an event's id, type, subject and time (an
    observation, for most read commands), parsing every body dominated the
    cost. The checksum still covers every byte, and canonical form puts
    `eventId, id` and `ts, type` side by side at fixed places, so the indexed
    columns can be confirmed against the body exactly with byte searches:
    the last `"eventId"` key reads `"eventId":E,"id":S,"kind":`, and the body ends with
    `"ts":T,"type":Y}` (a quote inside any string is escaped, so these
    patterns cannot occur inside a value). The rest is parsed on first use;
    a body that then fails the shape check reads as empty data (only a
    writer computing valid checksums over invalid shapes can cause that,
    and `compact` reads strictly and refuses it).
    """
    if not _header_end(body, stored_checksum, event_id, type_, subject, ts):
        return decode_checked(body, stored_checksum, event_id, type_, subject, ts)
    return _lazy(LazyEvent, body, event_id, type_, subject, ts)


def decode_peeked(body: bytes, stored_checksum: str | None, event_id: str, type_: str,
                  subject: str | None, ts: str, peek: tuple[Any, ...]) -> Event:
    """`decode_lazy`, keeping `peek` (values SQLite read from this body) beside it.

    The caller reads `peek` instead of parsing the body; it must come from
    the same bytes whose checksum is verified here.
    """
    if not _header_end(body, stored_checksum, event_id, type_, subject, ts):
        return decode_checked(body, stored_checksum, event_id, type_, subject, ts)
    ev = _lazy(PeekedEvent, body, event_id, type_, subject, ts)
    _set_peek(ev, peek)
    return ev


def _lazy(cls: type[LazyEvent], body: bytes, event_id: str, type_: str, subject: str | None,
          ts: str) -> LazyEvent:
    ev: LazyEvent = _new_event(cls)
    _set_body(ev, body)
    _set_event_id(ev, event_id)
    _set_type(ev, type_)
    _set_id(ev, subject)
    _set_ts(ev, ts)
    return ev


def _header_end(body: Any, stored_checksum: str | None, event_id: str, type_: str,
                subject: str | None, ts: str) -> int:
    """Where the value of the header's `kind` starts in `body` when the body
    verifies and its header is the indexed columns (see decode_lazy); 0 when not.

    0 sends the row to the strict decoder, which gives the exact verdict;
    a checksum mismatch is raised here.
    """
    if type(body) is not bytes or type(subject) is not str or type(event_id) is not str \
            or type(ts) is not str:
        return 0
    if stored_checksum != _PREFIX + _xxh3(body):
        raise MalformedEvent("checksum mismatch")
    # Plain f-strings are exact for strings with nothing to escape. A column
    # holding a quote or a backslash could line up with other keys of a body
    # written to match it, so such a row takes the strict path. (The type is
    # "observation": callers decide on it before asking.)
    # The last `,"eventId":"` is the top-level key: data (which may nest such
    # keys) sorts before it, and the keys after it hold only escaped strings.
    columns = event_id + subject + ts
    if '"' in columns or "\\" in columns:
        return 0
    at = body.rfind(b',"eventId":"') + 1
    if not at or not body.endswith(f'"ts":"{ts}","type":"{type_}"}}'.encode()):
        return 0
    head = f'"eventId":"{event_id}","id":"{subject}","kind":'.encode()
    return at + len(head) if body.startswith(head, at) else 0


def _plain_kind(body: bytes, at: int) -> str | None:
    """The string at `at` when it holds no escape (its text is then its bytes), else None."""
    if not at or body[at:at + 1] != b'"':
        return None
    end = body.find(b'"', at + 1)
    raw = body[at + 1:end]
    if end < 0 or b"\\" in raw:
        return None
    try:
        return raw.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return None


def count_lazy(rows: list[tuple[Any, ...]], kinds: dict[str, int], ids: list[str]
               ) -> list[tuple[Any, ...]]:
    """`decode_lazy`'s verdict on the observations among stored rows (seq,
    event_id, body, checksum, type, subject, ts), with no event built.

    An observation whose body verifies with the indexed columns as its header
    (as decode_lazy verifies it) and a plain string as its kind (as
    `lazy_kind` reads it) is counted under that kind in `kinds`, and its id
    put in `ids`. Every other row (another type, a body decode_lazy would
    decode some other way or refuse, a kind to parse for) is given back, in
    order, for the caller to decode one by one.
    """
    header_end, plain_kind, bad = _header_end, _plain_kind, MalformedEvent
    rest = []
    for row in rows:
        _seq, event_id, body, digest, type_, subject, ts = row
        kind = None
        if type_ == "observation":
            try:
                kind = plain_kind(body, header_end(body, digest, event_id, type_, subject, ts))
            except bad:  # the caller's own decode gives the verdict
                pass
        if kind is None:
            rest.append(row)
            continue
        kinds[kind] = kinds.get(kind, 0) + 1
        ids.append(subject)
    return rest


def lazy_kind(ev: Event) -> str:
    """An event's kind; for a lazy one, as its header reads it, without parsing.

    The kind follows `"eventId":E,"id":S,` in the canonical header decode_lazy
    confirmed byte for byte, so a plain string there is the kind (a body
    built to say otherwise elsewhere already has its id and time read the
    same way). Any other value, and every decoded event, gives `ev.kind`.
    """
    body = getattr(ev, "_body", None)
    if type(body) is bytes:
        # Only decode_lazy makes lazy events, once `_header_end` has found this.
        at = body.rfind(b',"eventId":"') + 1
        kind = _plain_kind(body, at + len(f'"eventId":"{ev.event_id}","id":"{ev.id}","kind":'
                                            .encode()))
        if kind is not None:
            return kind
    return str(ev.kind)


def decode_checked(body: Any, stored_checksum: str | None, event_id: str, type_: str,
                   subject: str | None, ts: str) -> Event:
    """Strict decode of a stored row, also checking its indexed columns against the body."""
    ev = decode(body, stored_checksum)
    if (ev.event_id, ev.type, ev.id, ev.ts) != (event_id, type_, subject, ts):
        raise MalformedEvent("indexed columns do not match body")
    return ev


_PREFIX = CHECKSUM_PREFIX
_xxh3 = xxhash.xxh3_64_hexdigest


class LazyEvent(Event):
    """An Event whose body is parsed the first time anything beyond its header is read."""

    __slots__ = ("_body",)

    def __init__(self, body: bytes, event_id: str, type_: str, subject: str | None,
                 ts: str) -> None:
        _set_body(self, body)
        _set_event_id(self, event_id)
        _set_type(self, type_)
        _set_id(self, subject)
        _set_ts(self, ts)

    def __getattr__(self, name: str) -> Any:
        # Only reached for slots not yet filled: kind, author, session, replica,
        # data, schema.
        body = object.__getattribute__(self, "_body")
        try:
            full = from_dict(_parse(body))
            values = full.as_dict()
        except MalformedEvent:
            values = {"kind": "", "author": "", "session": None, "replica": "", "data": {},
                      "schema": 0}
        setter = object.__setattr__
        for key in ("kind", "author", "session", "replica", "data", "schema"):
            setter(self, key, values[key])
        return object.__getattribute__(self, name)


class PeekedEvent(LazyEvent):
    """A lazy event that also carries `peek`: a few fields of its data, read by
    SQLite from the verified body so a bulk reader need not parse it.

    Which fields, and in what order, is the business of the reader that asked
    for them (see store.read_segment).
    """

    __slots__ = ("peek",)

    peek: tuple[Any, ...]


class PeekOnlyEvent(PeekedEvent):
    """A peeked event read back from a cache that kept only its header and peek.

    Its bytes stay in the segment: reading anything beyond the header and
    `peek` raises, so a reader that needs more must fetch the event itself.
    """

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"{name} of event {self.event_id} was not kept with its peek; "
                             "read the event from its segment")


def peek_only(event_id: str, type_: str, subject: str | None, ts: str,
              peek: tuple[Any, ...]) -> Event:
    ev = _new_event(PeekOnlyEvent)
    _set_event_id(ev, event_id)
    _set_type(ev, type_)
    _set_id(ev, subject)
    _set_ts(ev, ts)
    _set_peek(ev, peek)
    return ev


def parse_json(body: bytes) -> Any:
    """Parse stored bytes the one way every reader does. Raises MalformedEvent."""
    return _parse(body)


def parse_json_text(text: str) -> Any:
    """`parse_json` for bytes already decoded as UTF-8."""
    try:
        return _DECODER.decode(text)
    except ValueError as exc:
        raise MalformedEvent(f"body does not parse: {exc.__class__.__name__}") from None
    except RecursionError:
        raise MalformedEvent("body nests too deeply to parse") from None


def from_dict(obj: Any) -> Event:
    check_dict(obj)
    return event_from_stored(obj)


def check_dict(obj: Any) -> None:
    """The shape every event object must have. Raises MalformedEvent."""
    if not isinstance(obj, dict):
        raise MalformedEvent("body is not a JSON object")
    if not _REQUIRED <= obj.keys():
        missing = [k for k in REQUIRED_FIELDS if k not in obj]
        raise MalformedEvent(f"missing field(s): {', '.join(missing)}")
    for key in ("eventId", "type", "kind", "ts", "author", "replica"):
        if not isinstance(obj[key], str) or not obj[key]:
            raise MalformedEvent(f"field {key} is not a non-empty string")
    if obj["id"] is not None and not isinstance(obj["id"], str):
        raise MalformedEvent("field id is not a string or null")
    if obj["session"] is not None and not isinstance(obj["session"], str):
        raise MalformedEvent("field session is not a string or null")
    if not isinstance(obj["data"], dict):
        raise MalformedEvent("field data is not an object")
    if not isinstance(obj["schema"], int):
        raise MalformedEvent("field schema is not an integer")
    _check_type_fields(obj)


def _check_type_fields(obj: dict[str, Any]) -> None:
    """The per-type shape readers rely on; unknown types are left to newer code."""
    kind, data, subject = obj["type"], obj["data"], obj["id"]
    if kind in ("entry", "observation", "invalidation", "tombstone", "checkpoint"):
        if not isinstance(subject, str) or not subject:
            raise MalformedEvent(f"{kind} event has no id")
    if kind == "entry":
        if not isinstance(data.get("fields"), dict):
            raise MalformedEvent("entry data.fields is not an object")
        for key in ("anchors", "dependsOn"):
            value = data.get(key)
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise MalformedEvent(f"entry data.{key} is not a list of strings")
    elif kind in ("invalidation", "tombstone"):
        reason = data.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            raise MalformedEvent(f"{kind} has no reason")
        if kind == "tombstone" and not isinstance(data.get("purged"), bool):
            raise MalformedEvent("tombstone data.purged is not a boolean")
    elif kind == "checkpoint":
        positions = data.get("positions")
        if not isinstance(positions, dict) or not all(
                isinstance(v, int) and not isinstance(v, bool) for v in positions.values()):
            raise MalformedEvent("checkpoint data.positions is not an object of integers")


# Slot setters bound once: a million lazy events are built per large read, and
# object.__setattr__ by name cost more than the checks that precede it.
_new_event = object.__new__
_set_body = LazyEvent._body.__set__  # type: ignore[attr-defined]
_set_peek = PeekedEvent.__dict__["peek"].__set__
_set_event_id = Event.__dict__["event_id"].__set__
_set_type = Event.__dict__["type"].__set__
_set_id = Event.__dict__["id"].__set__
_set_ts = Event.__dict__["ts"].__set__
