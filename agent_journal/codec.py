"""Canonical bytes and checksums.

Invariant: an event's stored body is its canonical bytes, and its checksum is
`xxh3-64:` + the hex xxh3_64 digest of exactly those bytes. Canonical bytes are
UTF-8 JSON of the event object with sorted keys, no insignificant whitespace,
and non-ASCII kept as UTF-8. Decoding re-checks the checksum and the required
fields, so a damaged or hand-edited row is reported as malformed, never trusted.
"""

from __future__ import annotations

import json

import xxhash

from agent_journal.model import Event, event_from_stored

TYPE_CHECKING = False  # `typing` costs ~5 ms to import; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any

CHECKSUM_PREFIX = "xxh3-64:"

REQUIRED_FIELDS = ("eventId", "type", "kind", "id", "ts", "author", "session", "replica",
                   "data", "schema")


class MalformedEvent(ValueError):
    """A stored row that cannot be trusted as an event; the message says why."""


def canonical_bytes(event: Event) -> bytes:
    return json.dumps(
        event.as_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False,
        allow_nan=False,
    ).encode("utf-8")


def checksum(body: bytes) -> str:
    return CHECKSUM_PREFIX + xxhash.xxh3_64_hexdigest(body)


def encode(event: Event) -> tuple[bytes, str]:
    body = canonical_bytes(event)
    return body, checksum(body)


def _reject_constant(name: str) -> Any:
    raise MalformedEvent(f"non-finite number {name} in body")


# One decoder for every row: json.loads(..., parse_constant=...) builds a new
# decoder per call, which was a third of the cost of reading a large journal.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
_BLOB_TYPES = (bytes, bytearray, memoryview)
_REQUIRED = frozenset(REQUIRED_FIELDS)


def _parse(body: bytes) -> Any:
    """Exactly json.loads(body, parse_constant=_reject_constant), with fast paths.

    A body that starts `{` plus a non-NUL byte is UTF-8 by json's own encoding
    detection; a canonical body has no surrounding whitespace, so raw_decode
    consuming all of it is the whole answer. Anything else takes json's full
    path, which raises exactly what json.loads would.
    """
    if body[:1] == b"{" and body[1:2] not in (b"", b"\x00"):
        text = body.decode("utf-8", "surrogatepass")
    else:
        text = body.decode(json.detect_encoding(body), "surrogatepass")
    try:
        obj, end = _DECODER.raw_decode(text)
        if end == len(text):
            return obj
    except ValueError:
        pass
    return _DECODER.decode(text)


def decode(body: bytes, stored_checksum: str | None) -> Event:
    """Verify and parse one stored body. Raises MalformedEvent."""
    if not isinstance(body, _BLOB_TYPES):
        raise MalformedEvent("body is not a blob")
    body = bytes(body)
    if stored_checksum != checksum(body):
        raise MalformedEvent("checksum mismatch")
    try:
        obj = _parse(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedEvent(f"body does not parse: {exc.__class__.__name__}") from None
    return from_dict(obj)


def from_dict(obj: Any) -> Event:
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
    return event_from_stored(obj)


def _check_type_fields(obj: dict[str, Any]) -> None:
    """The per-type shape readers rely on; unknown types are left to newer code."""
    kind, data, subject = obj["type"], obj["data"], obj["id"]
    if kind in ("entry", "observation", "invalidation", "tombstone"):
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
