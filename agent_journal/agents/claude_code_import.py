"""`import claude-code`: a session transcript's tool calls and what it said, as observations.

Invariants:
- All or nothing on input: the transcript is read, planned and written BATCH calls at a
  time, every batch in the one transaction of the import (storage/import_transaction.py),
  so memory holds one batch, and a file that is not a Claude Code transcript, even at its
  last line, or a refused import, writes no event at all. (Blobs of large outputs written
  before such a failure are cited by nothing, and the next `compact --apply` deletes
  them, as it does those of a writer killed before its event.)
- Re-importing adds nothing. Each call becomes at most two events, its start and its end,
  whose event ids are derived from (replica, session, observation id, phase); and a phase
  the journal already holds for that observation id (captured live by the hook, or by an
  earlier import) is recognised by its status and skipped. What the session said (prompts,
  assistant messages, summaries) is one event each (phase `said`), under the id the hook
  derives from the same text (capture.claude_code.said_id), skipped when the id is held.
- Events carry the transcript's ids, session and times (not the time of the import), are
  authored `agent`, and pass the same redactor and artifact rules as the hook.
- No compaction runs while the import's transaction is open (it holds the workspace's
  compaction lock), so none can delete a blob an uncommitted event cites.
- A call whose observation id a tombstone names is skipped whole, events and blob, and
  counted (`tombstoned`): erased content is never written back, even by re-importing
  the transcript it came from.
- A re-import of a file the import memory (storage/import_memory.py) is sure holds
  nothing new returns the report a full re-run would give, without reading the file.
- One project per workspace unless told otherwise: the transcript's project (its first
  cwd, with the branch and repository it names) is reported, and a workspace whose latest
  observations come from another project (a cwd neither the same folder nor inside or
  above it) refuses the import, writing nothing, unless `other_project` accepts it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, BinaryIO, NamedTuple

import xxhash

from agent_journal.capture.claude_code_transcript import NotATranscriptError, read_transcript
from agent_journal.capture.observation import safe_id
from agent_journal.core import clock
from agent_journal.core.errors import ConflictError, JournalError, UsageError
from agent_journal.core.model import (
    AUTHOR_AGENT,
    OBSERVATION,
    SCHEMA_VERSION,
    events_from_values,
)
from agent_journal.ops.context import Context
from agent_journal.ops.evidence import capture_output
from agent_journal.ops.redaction_config import redactor_for
from agent_journal.storage import import_memory
from agent_journal.storage.import_transaction import ImportTransaction
from agent_journal.storage.root import Root
from agent_journal.storage.segment_reader import PausedGC
from agent_journal.storage.workspace import Workspace, latest_cwds

Progress = Callable[[int, int, str], None]

# Items (calls, things said) read, planned and written at a time: large enough that the
# journal's look-ups and the inserts cost little per item, small enough that memory holds
# little but the batch.
BATCH = 5_000
STARTED = "started"
SAID = "said"
_UNKNOWN: tuple[frozenset[Any], str] = (frozenset(), "")  # no phase of the call is held


def import_claude_code(ctx: Context, path: str, *, progress: Progress | None = None,
                       other_project: bool = False) -> dict[str, Any]:
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise UsageError(f"cannot read transcript {path}: {exc.strerror}") from None
    root = Root.open(ctx.root_arg, create=False)
    redactor = redactor_for(root.path)
    # A transcript becomes millions of objects, none in a cycle: the cyclic collector's
    # passes over them all cost as much as the parse itself (PausedGC says more).
    with fh, PausedGC():
        key, known = recalled(ctx, path, fh, "claude-code")
        if known is not None:
            return known
        size = os.fstat(fh.fileno()).st_size
        replayed = read_transcript(reading(fh, size, progress), redactor, conversation=True)
        return write_calls(ctx, path, refusing(path, replayed, NotATranscriptError),
                           progress=progress, memory_key=key, other_project=other_project)


def refusing(path: str, calls: Iterator[dict[str, Any]], refused: type[Exception]
             ) -> Iterator[dict[str, Any]]:
    """`calls` as they are read, an input refused (`refused`) as a JournalError naming
    it: raised inside the import's transaction, it leaves nothing imported."""
    try:
        yield from calls
    except refused as exc:
        raise JournalError(f"{path}: {exc}; nothing imported") from None


def recalled(ctx: Context, path: str, fh: BinaryIO, importer: str
             ) -> tuple[str | None, dict[str, Any] | None]:
    """(the file's key in the import memory, the report of re-importing it if the memory
    is sure nothing in it is new). Taken before the file is read, so a file that changes
    while it is read no longer matches what is remembered of it."""
    key = import_memory.fingerprint(fh.fileno())
    if key is None:
        return None, None
    key = f"{importer}:{key}"
    try:
        ws = ctx.open(create=False)  # a refused file must leave no root or workspace behind
    except JournalError:
        return key, None
    report = import_memory.recall(ws, key)
    if report is not None:
        report["transcript"] = os.path.abspath(path)
    return key, report


class Planned(NamedTuple):
    """An event to write, as its values in slot order (model.event_values), and
    the data field a capture fills when its batch is written ("output" of a
    call's end, "text" of what was said; None for none), which holds the value
    to capture until then. The events themselves are made batch by batch,
    each once, just before they are stored."""

    values: tuple[Any, ...]
    fill: str | None


@dataclass
class ImportPlan:
    """What an import writes, and what it counts of what it leaves."""

    events: list[Planned] = field(default_factory=list)  # the batch's, to write
    queued: int = 0  # events planned in every batch so far
    calls: int = 0
    messages: int = 0
    recognised: int = 0  # a phase (or a thing said) the journal already holds
    unfinished: int = 0
    tombstoned: int = 0
    # What a re-run will find already present once this one has committed: each
    # call's start, its end unless it never finished, and each thing said.
    present_after: int = 0
    sessions: set[str] = field(default_factory=set)


def write_calls(ctx: Context, path: str, replayed: Iterable[dict[str, Any]], *,
                progress: Progress | None = None, memory_key: str | None = None,
                other_project: bool = False) -> dict[str, Any]:
    """Write replayed calls, and what the session said, (each agent's capture shape,
    redacted) as they are read, and report what came of it; shared by every agent's
    import.

    The input is taken BATCH items at a time, each planned against the journal and
    written in the one transaction of the import (storage/import_transaction.py), so
    memory holds a batch and a failure anywhere, the input's last line included,
    writes nothing. With `memory_key`, what a re-import of the same file would report
    is remembered once the transaction has committed (storage/import_memory.py). A
    workspace holding another project refuses the import, writing nothing, unless
    `other_project` (then the report names that project in `otherProject`)."""
    calls = iter(replayed)
    first = next(calls, None)  # an input refused at its first line leaves no workspace
    found = _workspace_cwds(ctx)
    ws = ctx.open(create=True)
    replica = ws.root.replica_id
    plan = ImportPlan()
    fold = ProjectFold()
    ids: list[str] = []
    tombstoned: set[str] = set()
    written = artifacts = 0
    with ImportTransaction(ws) as tx:
        for batch in _batches(first, calls):
            for item in batch:
                fold.add(item)
            batch_ids = [safe_id(c["id"]) for c in batch]
            ids += batch_ids
            known = tx.observation_phases(batch_ids)
            here = tx.tombstoned_among(batch_ids)
            tombstoned |= here
            items = list(zip(batch, batch_ids, strict=True))
            plan.events = []
            _plan_calls(plan, [(c, i) for c, i in items if c["kind"] == "tool_call"], known,
                        here, replica)
            _plan_said(plan, [(c, i) for c, i in items if c["kind"] != "tool_call"], known,
                       here, replica)
            done, captured = _write_batch(ws, tx, plan.events)
            plan.queued += len(plan.events)
            written += done
            artifacts += captured
            if progress is not None:  # a count: how many the input holds is not known yet
                progress(written, written, "writing events")
        project = fold.project()
        other = _other_of(found, project)
        if other is not None and not other_project:
            raise ConflictError(
                f"{path} is from project {_project_name(project)} but workspace "
                f"{ctx.workspace_name} holds observations from {other}; nothing "
                "imported (pass --other-project to import it anyway)")
    report = {
        "transcript": os.path.abspath(path),
        "workspace": ws.name,
        "sessions": sorted(plan.sessions),
        "calls": plan.calls,
        "messages": plan.messages,
        "unfinished": plan.unfinished,
        "eventsWritten": written,
        "alreadyPresent": plan.recognised + plan.queued - written,
        "tombstoned": plan.tombstoned,
        "artifacts": artifacts,
        "project": project,
        "otherProject": other,
    }
    if memory_key is not None:
        import_memory.remember(ws, memory_key, ids, tombstoned, {
            **report, "messages": 0, "eventsWritten": 0, "alreadyPresent": plan.present_after,
            "artifacts": 0, "otherProject": None})
    return report


def _batches(first: dict[str, Any] | None, rest: Iterator[dict[str, Any]]
             ) -> Iterator[list[dict[str, Any]]]:
    """The input BATCH items at a time (none when it is empty)."""
    if first is None:
        return
    batch = [first]
    for item in rest:
        batch.append(item)
        if len(batch) >= BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def _plan_calls(plan: ImportPlan, calls: list[tuple[dict[str, Any], str]],
                known: dict[str, Any], tombstoned: set[str], replica: str) -> None:
    """Each call's start and end, unless the journal holds that phase already."""
    plan.calls += len(calls)
    session_ids: dict[str, str] = {}  # a session id as the journal names it, made once
    for call, obs_id in calls:
        raw_session = call["session"]
        session = None
        if raw_session:
            session = session_ids.get(raw_session)
            if session is None:
                session = session_ids[raw_session] = safe_id(raw_session)
            plan.sessions.add(session)
        if obs_id in tombstoned:
            plan.tombstoned += 1  # erased content is never written again, on any path
            continue
        plan.present_after += 1 if call["status"] == STARTED else 2
        statuses, latest = known.get(obs_id, _UNKNOWN)
        given_end = _ts(call["endTs"])
        start_ts = _ts(call["ts"]) or given_end or clock.now_ts()
        if statuses:
            plan.recognised += 1  # its start is known, from the hook or an earlier import
        else:
            plan.events.append(Planned(_event(replica, session, obs_id, call, STARTED, start_ts, {
                "input": call["input"], "output": None, "status": STARTED, "exitCode": None,
                "durationMs": None, "artifact": None}), None))
        if call["status"] == STARTED:
            plan.unfinished += 1
            continue
        if statuses - {STARTED, None}:
            plan.recognised += 1
            continue
        # The end must fold after every start already held, whatever the clocks said.
        end_ts = max(given_end or start_ts, start_ts)
        if (latest and end_ts <= latest) or end_ts == start_ts:
            end_ts = _later(max(latest, start_ts))
        plan.events.append(Planned(_event(replica, session, obs_id, call, "finished", end_ts, {
            "input": None, "output": call["output"],
            "status": call["status"], "exitCode": call["exitCode"], "durationMs": None,
            "artifact": None}), "output"))


def _plan_said(plan: ImportPlan, said: list[tuple[dict[str, Any], str]],
               known: dict[str, Any], tombstoned: set[str], replica: str) -> None:
    """What the session said, one event each, unless the journal holds it."""
    for item, obs_id in said:
        if obs_id in tombstoned:
            plan.tombstoned += 1
            continue
        plan.present_after += 1
        if obs_id in known:
            plan.recognised += 1  # captured live by the hook, or by an earlier import
            continue
        session = safe_id(item["session"]) if item["session"] else None
        plan.messages += 1
        plan.events.append(Planned((
            _derived_id(replica, session or "", obs_id, SAID), OBSERVATION, item["kind"],
            obs_id, _ts(item["ts"]) or clock.now_ts(), AUTHOR_AGENT, session, replica,
            {"tool": None, "callId": None, "input": None, "output": None, "status": None,
             "exitCode": None, "durationMs": None, "artifact": None, "text": item["text"],
             "transcript": item["data"]}, SCHEMA_VERSION), "text"))


def _write_batch(ws: Workspace, tx: ImportTransaction, planned: list[Planned]
                 ) -> tuple[int, int]:
    """Capture the batch's outputs (large ones as blobs) and write its events in the
    import's transaction; (events written, artifacts captured). No compaction runs
    while the transaction is open (ImportTransaction), so no blob is held besides."""
    artifacts = 0
    for values, fill in planned:
        if fill is not None:
            data = values[8]  # made for this event alone (above): filled in place
            data[fill], data["artifact"] = capture_output(ws, data[fill])
            artifacts += data["artifact"] is not None
    return tx.append(events_from_values([v for v, _ in planned])), artifacts


# How many of a segment's newest events are looked at for the project it holds: an
# indexed walk back from the newest row, never a read of the whole segment.
PROJECT_WINDOW = 1_000


class ProjectFold:
    """The session's project, folded as the input is read: the cwd it started in (the
    earliest item naming one), with the git branch and repository the transcript names
    there; None when none is named."""

    def __init__(self) -> None:
        self.first: tuple[str, dict[str, Any]] | None = None

    def add(self, item: dict[str, Any]) -> None:
        data = item.get("data")
        if not isinstance(data, dict) or not isinstance(data.get("cwd"), str) \
                or not data["cwd"]:
            return
        ts = item["ts"] if isinstance(item.get("ts"), str) else ""
        if self.first is None or (ts and (not self.first[0] or ts < self.first[0])):
            self.first = (ts, data)

    def project(self) -> dict[str, Any] | None:
        if self.first is None:
            return None
        data = self.first[1]
        return {"cwd": data["cwd"],
                "branch": data.get("gitBranch") if isinstance(data.get("gitBranch"), str)
                and data.get("gitBranch") else None,
                "repository": data.get("gitRepository")
                if isinstance(data.get("gitRepository"), str) and data.get("gitRepository")
                else None}


def transcript_project(replayed: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """ProjectFold over a whole input."""
    fold = ProjectFold()
    for item in replayed:
        fold.add(item)
    return fold.project()


def _project_name(project: dict[str, Any] | None) -> str:
    if project is None:
        return "(unknown)"
    extra = [v for v in (project.get("repository"), project.get("branch")) if v]
    return project["cwd"] + (f" ({', '.join(extra)})" if extra else "")


def _folder(cwd: str) -> str:
    return cwd.replace("\\", "/").rstrip("/") or "/"


def related(a: str, b: str) -> bool:
    """Whether two cwds are one project: the same folder, or one inside the other
    (drive paths compared with either separator)."""
    a, b = _folder(a), _folder(b)
    return a == b or a.startswith(b.rstrip("/") + "/") or b.startswith(a.rstrip("/") + "/")


def _workspace_cwds(ctx: Context) -> list[str]:
    """The cwds the workspace's latest observations come from, the most recent first
    (none when there is no workspace yet), read before the import writes."""
    try:
        ws = ctx.open(create=False)  # a refused import must leave nothing behind
    except JournalError:
        return []
    return latest_cwds(ws, PROJECT_WINDOW)


def _other_of(found: list[str], project: dict[str, Any] | None) -> str | None:
    """The cwd of another project among `found`, or None (no project named, none
    found, or every project found is related)."""
    if project is None or not found or any(related(project["cwd"], cwd) for cwd in found):
        return None
    return found[0]


def _event(replica: str, session: str | None, obs_id: str, call: dict[str, Any], phase: str,
           ts: str, data: dict[str, Any]) -> tuple[Any, ...]:
    """A call phase's event values in slot order (model.event_values)."""
    # The input is kept once, on the start; the end adds what the call returned.
    data["tool"] = call["tool"]
    data["callId"] = call["callId"]
    data["transcript"] = call["data"]
    return (_derived_id(replica, session or "", obs_id, phase), OBSERVATION, call["kind"],
            obs_id, ts, AUTHOR_AGENT, session, replica, data, SCHEMA_VERSION)


def reading(fh: BinaryIO, size: int, progress: Progress | None) -> Iterator[bytes]:
    if progress is None:
        yield from fh
        return
    done = step = 0
    for line in fh:
        done += len(line)
        step += len(line)
        if step >= 1 << 20:
            step = 0
            progress(done, size, "reading transcript (bytes)")
        yield line
    progress(size, size, "reading transcript (bytes)")


def _ts(value: Any) -> str | None:
    """A transcript timestamp in the journal's form, or None when there is none."""
    if not isinstance(value, str) or not value:
        return None
    if _JOURNAL_TS.fullmatch(value):
        # Already in the journal's form (Claude Code writes it so): formatting what it
        # parses to gives it back, so checking that it is a real instant is enough.
        try:
            datetime.fromisoformat(value[:-1])
            return value
        except ValueError:
            pass
    try:
        return clock.format_ts(clock.parse_instant(value))
    except UsageError:
        return None


# The journal's form for years 1000-9999 (strftime writes smaller years unpadded).
_JOURNAL_TS = re.compile(r"[1-9]\d{3}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def _later(ts: str) -> str:
    """One millisecond after `ts`, in the journal's form."""
    if _JOURNAL_TS.fullmatch(ts) and ts[20:23] != "999":
        # Only the milliseconds move: written as they are, without a round trip through
        # datetime (an import asks this for nearly every call's end).
        return f"{ts[:20]}{int(ts[20:23]) + 1:03d}Z"
    return clock.format_ts(clock.parse_instant(ts) + timedelta(milliseconds=1))


def _derived_id(*parts: str) -> str:
    """A name-based event id in UUID layout (version 8): the same call phase imported
    again on the same replica gets the same id, which the segment's UNIQUE key drops."""
    text = "\x1f".join(("claude-code-import",) + parts)
    b = bytearray(xxhash.xxh3_128_digest(text.encode("utf-8", errors="surrogatepass")))
    b[6] = (b[6] & 0x0F) | 0x80
    b[8] = (b[8] & 0x3F) | 0x80
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
