"""Checkpoints: `checkpoint NAME`, `checkpoints`, and what `--as-of` means.

Invariants:
- A checkpoint is one appended event (type `checkpoint`, id NAME) recording
  where every segment stood just before it was written
  (storage/cut.py): nothing is copied, archived or rewritten, and it merges
  like any other event. One replica refuses a name it already holds; when
  replicas chose the same name independently, the earliest (ts, eventId)
  record is what the name means, as for entries.
- `--as-of NAME|INSTANT` derives from the events inside the cut, as if no
  later event existed, with one exception that never bends: every
  tombstone, whenever it was written, is read too, so content tombstoned at
  any time stays hidden in every as-of view.
- An as-of in the future, an instant that does not parse, or a name that
  reads as an instant is a usage error (exit 2); a name no checkpoint has is
  refused (exit 1). Both before anything is derived.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_journal.core import clock
from agent_journal.core.errors import NotFoundError, UsageError
from agent_journal.core.model import CHECKPOINT, TOMBSTONE, Event, new_event_id, validate_id
from agent_journal.ops.instants import looks_like_instant, parse_when, ts_of
from agent_journal.storage.cut import Cut
from agent_journal.storage.segment_reader import ReadResult
from agent_journal.storage.workspace import Workspace

if TYPE_CHECKING:
    from agent_journal.ops.context import Context


class Recorded:
    def __init__(self, name: str, event_id: str, events: int, warning: str | None) -> None:
        self.id = name
        self.event_id = event_id
        self.events = events
        self.warning = warning

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "eventId": self.event_id, "events": self.events}


def check_name(name: str) -> str:
    validate_id(name, "checkpoint name")
    if looks_like_instant(name):
        raise UsageError(f"checkpoint name {name!r} reads as an instant, which --as-of would "
                         "take it for; choose another name")
    return name


def checkpoint(ctx: Context, name: str, note: str | None) -> Recorded:
    from agent_journal.ops.redaction_config import redactor_for
    from agent_journal.ops.secret_ids import refuse_secret_ids
    from agent_journal.storage.cut import segment_positions

    check_name(name)
    if note is not None and not note.strip():
        raise UsageError("--note must not be blank")
    refuse_secret_ids(ctx, (name, "checkpoint name"))
    ws = ctx.open(create=True)
    redactor = redactor_for(ws.root.path)
    positions, rows, unreadable = segment_positions(ws)
    ev = Event(event_id=new_event_id(), type=CHECKPOINT, kind=CHECKPOINT, id=name,
               ts=clock.now_ts(), author=ctx.author, session=ctx.session,
               replica=ws.root.replica_id,
               data={"note": None if note is None else redactor.redact_text(note),
                     "positions": positions, "events": rows})
    ws.append([ev], unique_subject=name, subject_type=CHECKPOINT)
    warning = None
    if unreadable:
        warning = (f"{len(unreadable)} unreadable segment(s) are not part of checkpoint "
                   f"{name}: an --as-of view of it leaves them out")
    return Recorded(name, ev.event_id, rows, warning)


def list_checkpoints(ctx: Context) -> dict[str, Any]:
    from agent_journal.storage.time_order import TimeOrder

    ws = ctx.open(create=False)
    with TimeOrder(ws) as reader:
        found = reader.of_types((CHECKPOINT,))
    by_name: dict[str, list[Event]] = {}
    for ev in found:
        by_name.setdefault(str(ev.id), []).append(ev)
    items = []
    for name, evs in by_name.items():
        first = evs[0]
        items.append({"name": name, "ts": first.ts, "eventId": first.event_id,
                      "author": first.author, "session": first.session,
                      "replica": first.replica, "note": first.data.get("note"),
                      "events": first.data.get("events"),
                      "segments": len(first.data.get("positions", {})),
                      "conflicts": [e.event_id for e in evs[1:]]})
    items.sort(key=lambda item: (item["ts"], item["eventId"]))
    return {"checkpoints": items, "unreadable": reader.unreadable,
            "malformed": reader.malformed}


class AsOf:
    """A resolved --as-of: the cut, and what to call it."""

    def __init__(self, cut: Cut, label: str, checkpoint: Event | None = None) -> None:
        self.cut = cut
        self.label = label
        self.checkpoint = checkpoint

    def as_json(self) -> dict[str, Any]:
        return {"asOf": self.label,
                "checkpoint": None if self.checkpoint is None else self.checkpoint.event_id,
                "until": self.cut.until_ts}


def parse_as_of(text: str | None) -> str | None:
    """Check an --as-of value's spelling (usage errors first, before any read)."""
    if text is None:
        return None
    if looks_like_instant(text.strip()):
        when = parse_when(text, "--as-of")
        if when > clock.now():
            raise UsageError(f"--as-of {text} is in the future")
    else:
        validate_id(text, "--as-of")
    return text


def resolve_as_of(ws: Workspace, text: str | None) -> AsOf | None:
    if text is None:
        return None
    parse_as_of(text)
    if looks_like_instant(text.strip()):
        until = ts_of(parse_when(text, "--as-of"))
        return AsOf(Cut(until_ts=until), until)
    found = sorted(ws.events_with_subjects([text], CHECKPOINT), key=lambda e: e.sort_key)
    if not found:
        raise NotFoundError(f"no checkpoint named {text} in workspace {ws.name} (--as-of "
                            "takes a checkpoint name or an instant: ISO 8601, or 2h, 3d)")
    first = found[0]
    positions = first.data.get("positions")
    return AsOf(Cut(positions=dict(positions) if isinstance(positions, dict) else {}),
                f"{text} ({first.ts})", first)


def read_as_of(ws: Workspace, as_of: AsOf, *, lazy: bool = True) -> ReadResult:
    """The events inside the cut, plus every tombstone ever written."""
    from agent_journal.storage.time_order import TimeOrder

    result = ws.read(lazy=lazy, cut=as_of.cut)
    held = {ev.event_id for ev in result.events if ev.type == TOMBSTONE}
    with TimeOrder(ws) as reader:
        tombstones = reader.of_types((TOMBSTONE,), whole=True)
    result.events.extend(t for t in tombstones if t.event_id not in held)
    return result
