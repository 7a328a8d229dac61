"""Events and ids: the vocabulary every other module speaks.

Invariant: an Event is an immutable value. Its identity is `event_id`; two
replicas holding the same event id hold the same fact. Nothing in the package
mutates an Event after construction (compaction writes a *new* tombstone value
with `purged` flipped, never edits one in place).

Kept free of dataclasses/typing imports at run time because the hook path
imports this module on every agent tool call.
"""

from __future__ import annotations

import os

from agent_journal.core.errors import UsageError

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any


SCHEMA_VERSION = 1

# Event types. A reader meeting any other type keeps it (it may come from a
# newer replica) but derives nothing from it.
OBSERVATION = "observation"
ENTRY = "entry"
INVALIDATION = "invalidation"
TOMBSTONE = "tombstone"
# A named mark of where each segment stood (ops/checkpoints.py). Readers older
# than it keep it as an unclassified event, and compaction never removes it.
CHECKPOINT = "checkpoint"
KNOWN_TYPES = frozenset({OBSERVATION, ENTRY, INVALIDATION, TOMBSTONE, CHECKPOINT})

ENTRY_KINDS = ("finding", "decision", "constraint", "objective", "assumption", "note")
# The text fields each entry kind carries, all required.
ENTRY_FIELDS: dict[str, tuple[str, ...]] = {
    "finding": ("claim",),
    "decision": ("question", "chosen"),
    "constraint": ("text",),
    "objective": ("text",),
    "assumption": ("text",),
    "note": ("text",),
}
OBSERVATION_STATUSES = ("started", "ok", "error", "partial", "cancelled")
ANCHOR_SCHEMES = ("tool_use", "file", "commit", "url")

AUTHOR_AGENT = "agent"
AUTHOR_HUMAN = "human"

MAX_ID_LEN = 128
# Ids name files (a workspace folder, `cache/<area>/<ws>.sqlite.tmp`, lock files), and
# most filesystems refuse a name over 255 bytes: 128 bytes of UTF-8 leave room for every
# suffix the journal adds. An ASCII id meets both bounds at 128 characters.
MAX_ID_BYTES = 128


def validate_id(value: str | None, what: str) -> str:
    """Return `value` if it is a usable id, else raise UsageError.

    Ids become parts of file names and lookup keys, so they must not be able
    to escape a folder, hide control characters, or read as a flag (an unset
    shell variable before `--json` must not become a workspace called --json).
    """
    if value is None or value == "":
        raise UsageError(f"{what} must not be empty")
    if len(value) > MAX_ID_LEN:
        raise UsageError(f"{what} is longer than {MAX_ID_LEN} characters")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate: undecodable bytes from the shell
        raise UsageError(f"{what} is not valid UTF-8: {value!r}") from None
    if size > MAX_ID_BYTES:
        raise UsageError(f"{what} is longer than {MAX_ID_BYTES} bytes of UTF-8 ({size})")
    if value in (".", ".."):
        raise UsageError(f"{what} must not be {value!r}")
    if value.startswith("-"):
        raise UsageError(f"{what} must not start with '-': {value!r}")
    for ch in value:
        # C0 and C1 controls and DEL: U+0085 and U+009B can end a line or start a
        # terminal escape sequence.
        if ch in "/\\" or ord(ch) < 32 or 127 <= ord(ch) <= 159:
            raise UsageError(f"{what} must not contain path separators or control characters")
    if value.strip() != value:
        raise UsageError(f"{what} must not start or end with whitespace")
    return value


def parse_anchor(text: str) -> str:
    """Validate `SCHEME:REF`; the anchor is stored verbatim."""
    scheme, sep, ref = text.partition(":")
    if not sep or scheme not in ANCHOR_SCHEMES or not ref:
        raise UsageError(
            f"anchor must be SCHEME:REF with SCHEME one of {', '.join(ANCHOR_SCHEMES)}: {text!r}"
        )
    if scheme == "tool_use":
        validate_id(ref, "tool_use anchor id")
    return text


def anchor_ref(anchor: str) -> tuple[str, str]:
    scheme, _, ref = anchor.partition(":")
    return scheme, ref


def derived_event_id(*parts: str) -> str:
    """A UUID-shaped event id that is the same whenever `parts` are: for an event a
    hook may derive more than once (from the same file), so the copies are one event."""
    import hashlib

    b = bytearray(hashlib.sha256("\x1f".join(parts).encode("utf-8", "surrogatepass"))
                  .digest()[:16])
    b[6] = (b[6] & 0x0F) | 0x50
    b[8] = (b[8] & 0x3F) | 0x80
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def new_event_id() -> str:
    """A random (version 4) UUID, formatted by hand: `import uuid` pulls in
    `platform` and costs the hook path several milliseconds."""
    b = bytearray(os.urandom(16))
    b[6] = (b[6] & 0x0F) | 0x40
    b[8] = (b[8] & 0x3F) | 0x80
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


class Event:
    """One immutable journal event."""

    __slots__ = ("event_id", "type", "kind", "id", "ts", "author", "session", "replica",
                 "data", "schema")

    event_id: str
    type: str
    kind: str
    id: str | None
    ts: str
    author: str
    session: str | None
    replica: str
    data: dict[str, Any]
    schema: int

    def __init__(self, *, event_id: str, type: str, kind: str, id: str | None, ts: str,
                 author: str, session: str | None, replica: str, data: Mapping[str, Any],
                 schema: int = SCHEMA_VERSION) -> None:
        # The slot setters bound below the class: object.__setattr__ by name
        # cost as much again.
        _set_event_id(self, event_id)
        _set_type(self, type)
        _set_kind(self, kind)
        _set_id(self, id)
        _set_ts(self, ts)
        _set_author(self, author)
        _set_session(self, session)
        _set_replica(self, replica)
        _set_data(self, dict(data))
        _set_schema(self, schema)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Event is immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Event) and self.as_dict() == other.as_dict()

    def __hash__(self) -> int:
        return hash(self.event_id)

    def __repr__(self) -> str:
        return f"Event({self.type}/{self.kind} {self.id!r} {self.event_id})"

    def as_dict(self) -> dict[str, Any]:
        """The event as its stored JSON object (camelCase keys)."""
        return {
            "eventId": self.event_id,
            "type": self.type,
            "kind": self.kind,
            "id": self.id,
            "ts": self.ts,
            "author": self.author,
            "session": self.session,
            "replica": self.replica,
            "data": self.data,
            "schema": self.schema,
        }

    def replace(self, **changes: Any) -> Event:
        values: dict[str, Any] = {
            "event_id": self.event_id, "type": self.type, "kind": self.kind, "id": self.id,
            "ts": self.ts, "author": self.author, "session": self.session,
            "replica": self.replica, "data": self.data, "schema": self.schema,
        }
        values.update(changes)
        return Event(**values)

    def with_data(self, data: dict[str, Any]) -> Event:
        """This event with other data (taken as given, not copied): `replace`
        without its keyword parsing, for bulk rewrites."""
        return events_from_values([(self.event_id, self.type, self.kind, self.id, self.ts,
                                    self.author, self.session, self.replica, data,
                                    self.schema)])[0]

    def purged(self) -> Event:
        """This tombstone as compaction writes it back once its target is
        erased: `data.purged` true, nothing else changed."""
        return self.with_data({**self.data, "purged": True})

    @property
    def sort_key(self) -> tuple[str, str]:
        """Total order used wherever events are folded: time, then event id.

        Clocks differ between machines, so ties and skew are settled by the
        event id, never by which replica merged first.
        """
        return (self.ts, self.event_id)


# Slot setters, bound once: a whole-workspace read builds an Event per stored
# row, and keyword parsing plus object.__setattr__ by name is a large part of it.
_new_event = object.__new__
(_set_event_id, _set_type, _set_kind, _set_id, _set_ts, _set_author, _set_session,
 _set_replica, _set_data, _set_schema) = (Event.__dict__[name].__set__ for name in Event.__slots__)


def event_from_stored(obj: dict[str, Any]) -> Event:
    """The Event `Event(**fields of obj)` would build, from a stored object
    (camelCase keys) whose fields the codec has already checked."""
    ev = _new_event(Event)
    _set_event_id(ev, obj["eventId"])
    _set_type(ev, obj["type"])
    _set_kind(ev, obj["kind"])
    _set_id(ev, obj["id"])
    _set_ts(ev, obj["ts"])
    _set_author(ev, obj["author"])
    _set_session(ev, obj["session"])
    _set_replica(ev, obj["replica"])
    _set_data(ev, dict(obj["data"]))
    _set_schema(ev, obj["schema"])
    return ev


def event_values(ev: Event) -> tuple[Any, ...]:
    """The event's fields as a tuple, in slot order: the form a worker process
    sends events in (an Event cannot be pickled or marshalled, as it refuses
    attribute assignment), and the form a bulk read builds first."""
    return (ev.event_id, ev.type, ev.kind, ev.id, ev.ts, ev.author, ev.session, ev.replica,
            ev.data, ev.schema)


def events_from_values(rows: list[tuple[Any, ...]]) -> list[Event]:
    """The inverse of `event_values`, over a list."""
    out: list[Event] = []
    append = out.append
    for event_id, type_, kind, id_, ts, author, session, replica, data, schema in rows:
        ev = _new_event(Event)
        _set_event_id(ev, event_id)
        _set_type(ev, type_)
        _set_kind(ev, kind)
        _set_id(ev, id_)
        _set_ts(ev, ts)
        _set_author(ev, author)
        _set_session(ev, session)
        _set_replica(ev, replica)
        _set_data(ev, data)
        _set_schema(ev, schema)
        append(ev)
    return out
