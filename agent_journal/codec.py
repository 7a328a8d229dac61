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

from agent_journal.model import Event

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


def decode(body: bytes, stored_checksum: str | None) -> Event:
    """Verify and parse one stored body. Raises MalformedEvent."""
    if isinstance(body, str):
        # A hand edit through SQL string functions turns the blob into text;
        # judge it by its bytes like any other body.
        body = body.encode("utf-8")
    if not isinstance(body, bytes | bytearray | memoryview):
        raise MalformedEvent("body is not a blob")
    body = bytes(body)
    if stored_checksum != checksum(body):
        raise MalformedEvent("checksum mismatch")
    try:
        obj = json.loads(body, parse_constant=_reject_constant)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedEvent(f"body does not parse: {exc.__class__.__name__}") from None
    return from_dict(obj)


def from_dict(obj: Any) -> Event:
    if not isinstance(obj, dict):
        raise MalformedEvent("body is not a JSON object")
    missing = [k for k in REQUIRED_FIELDS if k not in obj]
    if missing:
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
    return Event(
        event_id=obj["eventId"], type=obj["type"], kind=obj["kind"], id=obj["id"],
        ts=obj["ts"], author=obj["author"], session=obj["session"],
        replica=obj["replica"], data=obj["data"], schema=obj["schema"],
    )


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


# -- bulk verification (merge) -----------------------------------------------------------
# Merge checks every row it imports from a journal root but needs only a few
# of its fields: the same verdicts as `decode`, returned as the parsed object.

_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def as_bytes(body: Any) -> bytes:
    """A stored body as bytes, the way `decode` judges it. Raises MalformedEvent."""
    if isinstance(body, str):
        return body.encode("utf-8")
    if not isinstance(body, bytes | bytearray | memoryview):
        raise MalformedEvent("body is not a blob")
    return bytes(body)


def verify(body: Any, stored_checksum: str | None) -> dict[str, Any]:
    """Exactly the checks of `decode`; returns the parsed object. Raises MalformedEvent."""
    body = as_bytes(body)
    if stored_checksum != checksum(body):
        raise MalformedEvent("checksum mismatch")
    try:
        try:
            # json.loads with parse_constant builds a decoder per call; plain
            # UTF-8 JSON goes through one shared decoder, anything else through
            # json.loads itself, so the verdicts are the same.
            obj = _DECODER.decode(body.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            obj = json.loads(body, parse_constant=_reject_constant)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedEvent(f"body does not parse: {exc.__class__.__name__}") from None
    from_dict(obj)  # the shape checks
    return obj  # type: ignore[no-any-return]
