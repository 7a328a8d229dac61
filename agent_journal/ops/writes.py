"""The write commands: record, observe, invalidate, tombstone.

Invariant: every function here validates all of its input before it writes
anything, appends exactly one event through the workspace, and returns a
plain value for the CLI to render. Every text a write stores passes the
root's redactor first (see redaction_config.py): entry fields, subjects and
non-id anchors, observation input and output, retraction reasons. Ids are
keys and are stored as given, so a new entry or observation whose id (or an
observation's kind, a cited or depended-on id, the writing session) the redactor
would change is refused: a tombstone names its target's id for ever, and a
secret there could never be erased. An id a
tombstone names is never written again:
record, observe and invalidate of it are refused (TombstonedError) before
anything, a blob included, is written.
"""

from __future__ import annotations

from agent_journal.core import clock
from agent_journal.core.derive import derive
from agent_journal.core.errors import TombstonedError, UsageError
from agent_journal.core.model import (
    ENTRY,
    ENTRY_FIELDS,
    ENTRY_KINDS,
    INVALIDATION,
    OBSERVATION,
    OBSERVATION_STATUSES,
    TOMBSTONE,
    Event,
    new_event_id,
    parse_anchor,
    validate_id,
)
from agent_journal.ops.context import Context
from agent_journal.ops.evidence import FAILED, capture_output
from agent_journal.ops.redaction_config import redactor_for
from agent_journal.ops.secret_ids import refuse_secret_ids
from agent_journal.storage.artifacts import BlobHolds
from agent_journal.storage.workspace import Workspace

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any




class WriteResult:
    def __init__(self, subject: str, event_id: str, warning: str | None = None) -> None:
        self.id = subject
        self.event_id = event_id
        self.warning = warning

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "eventId": self.event_id}


def _event(ctx: Context, ws: Workspace, *, type: str, kind: str, subject: str,
           data: dict[str, Any]) -> Event:
    return Event(event_id=new_event_id(), type=type, kind=kind, id=subject, ts=clock.now_ts(),
                 author=ctx.author, session=ctx.session, replica=ws.root.replica_id, data=data)


def refuse_tombstoned(ws: Workspace, subject: str, what: str) -> None:
    """A tombstoned id is never written again: its content was meant to be gone."""
    if ws.tombstoned_among([subject]):
        raise TombstonedError(f"{what} {subject} is tombstoned in workspace {ws.name}: "
                              "what a tombstone names is never recorded again; nothing "
                              "was written")


def _require_text(value: str | None, flag: str) -> str:
    if value is None or not value.strip():
        raise UsageError(f"{flag} is required and must not be blank")
    return value


# -- writes -----------------------------------------------------------------------------

def record(ctx: Context, *, kind: str, entry_id: str, fields: dict[str, str | None],
           anchors: list[str], depends_on: list[str], subject: str | None) -> WriteResult:
    if kind not in ENTRY_KINDS:
        raise UsageError(f"--kind must be one of {', '.join(ENTRY_KINDS)}")
    validate_id(entry_id, "entry id")
    wanted = ENTRY_FIELDS[kind]
    for name, value in fields.items():
        if value is not None and name not in wanted:
            raise UsageError(f"--{name} does not apply to a {kind}; it takes "
                             + ", ".join(f"--{w}" for w in wanted))
    clean = {name: _require_text(fields.get(name), f"--{name}") for name in wanted}
    anchors = [parse_anchor(a) for a in anchors]
    depends_on = [validate_id(d, "--depends-on id") for d in depends_on]
    refuse_secret_ids(ctx, (entry_id, "entry id"),
                      *((d, "--depends-on id") for d in depends_on),
                      *((a[len("tool_use:"):], "tool_use anchor id") for a in anchors
                        if a.startswith("tool_use:")))
    ws = ctx.open(create=True)
    refuse_tombstoned(ws, entry_id, "entry")
    redactor = redactor_for(ws.root.path)
    # Ids (dependsOn, tool_use anchors) are keys, not text: they are never rewritten.
    ev = _event(ctx, ws, type=ENTRY, kind=kind, subject=entry_id, data={
        "fields": redactor.redact_value(clean),
        "anchors": [a if a.startswith("tool_use:") else redactor.redact_text(a)
                    for a in anchors],
        "dependsOn": depends_on,
        "subject": None if subject is None else redactor.redact_text(subject),
    })
    ws.append([ev], unique_subject=entry_id, subject_type=ENTRY)
    return WriteResult(entry_id, ev.event_id)


def observe(ctx: Context, *, kind: str, obs_id: str, tool: str | None, call_id: str | None,
            input_value: Any, output: str | None, status: str | None, exit_code: int | None,
            duration_ms: int | None, extra: dict[str, Any] | None = None) -> WriteResult:
    validate_id(kind, "--kind")
    validate_id(obs_id, "observation id")
    status = status or "ok"
    if status not in OBSERVATION_STATUSES:
        raise UsageError(f"--status must be one of {', '.join(OBSERVATION_STATUSES)}")
    refuse_secret_ids(ctx, (obs_id, "observation id"), (kind, "--kind"))
    ws = ctx.open(create=True)
    refuse_tombstoned(ws, obs_id, "observation")
    redactor = redactor_for(ws.root.path)
    data: dict[str, Any] = {
        "tool": tool, "callId": call_id, "input": input_value, "output": output,
        "status": status, "exitCode": exit_code, "durationMs": duration_ms,
    }
    if extra:
        data.update(extra)
    data = redactor.redact_value(data)
    # The blob stays locked until the event citing it has committed (BlobHolds).
    with BlobHolds() as holds:
        data["output"], data["artifact"] = capture_output(
            ws, data["output"], partial=status in ("partial", "cancelled"), holds=holds)
        ev = _event(ctx, ws, type=OBSERVATION, kind=kind, subject=obs_id, data=data)
        ws.append([ev])
    art = data["artifact"]
    warning = None
    if art is not None and art["status"] == FAILED:
        # The call is journaled, its output is not: an acknowledgement alone would say
        # it was kept.
        warning = (f"the output ({art['bytes']} bytes) could not be stored ({art['error']}); "
                   "the journal holds only its beginning and end")
    return WriteResult(obs_id, ev.event_id, warning)


def _retraction(ctx: Context, type_: str, target: str, reason: str | None) -> WriteResult:
    validate_id(target, "target id")
    reason = _require_text(reason, "--reason")
    # The target may be an old id holding a secret (it must stay possible to hide it);
    # the session is this write's own.
    refuse_secret_ids(ctx)
    ws = ctx.open(create=True)
    if type_ == INVALIDATION:
        # Its reason is content about the target, erased with it.
        refuse_tombstoned(ws, target, "entry")
    data: dict[str, Any] = {"reason": redactor_for(ws.root.path).redact_text(reason)}
    if type_ == TOMBSTONE:
        data["purged"] = False
        graph = _graph_of(ws, target)
        if graph is not None:
            data["graph"] = graph
    ev = _event(ctx, ws, type=type_, kind=type_, subject=target, data=data)
    ws.append([ev])
    warning = None
    if not ws.holds_subject(target, (ENTRY, OBSERVATION)):
        # Not an error: the target may live on a replica not merged here yet.
        warning = f"no entry with id {target} is present in this workspace"
    return WriteResult(target, ev.event_id, warning)


def _graph_of(ws: Workspace, target: str) -> dict[str, Any] | None:
    """The target's place in the dependency graph, as this replica knows it now.

    A tombstone carries it so that the entry's dependents keep their outcome on
    every replica, whether that replica still holds the entry's bytes, has
    erased them, or never had them (derive.py reads only this for tombstoned
    ids). None when the entry neither depends on anything nor was invalidated.
    """
    about = [e for e in ws.events_about(target) if e.type in (ENTRY, INVALIDATION)]
    if not about:
        return None
    d = derive(about)
    record = d.entry_events.get(target)
    deps = list(record.data.get("dependsOn", [])) if record is not None else []
    invalidated = record is not None and target in d.invalidations
    if not deps and not invalidated:
        return None
    return {"dependsOn": deps, "invalidated": invalidated}


def invalidate(ctx: Context, target: str, reason: str | None) -> WriteResult:
    return _retraction(ctx, INVALIDATION, target, reason)


def tombstone(ctx: Context, target: str, reason: str | None) -> WriteResult:
    return _retraction(ctx, TOMBSTONE, target, reason)


