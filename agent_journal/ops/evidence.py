"""Exact evidence: large tool outputs kept whole as artifacts, and `get` handing them back.

Invariants:
- An output above the threshold is stored whole, byte for byte, as a content-addressed blob
  (write_artifact); the event keeps a preview and `artifact = {ref, bytes, checksum,
  status}`. `status` is `complete` only when every byte of the output reached the blob:
  a capture the source reported as cut short is `partial`, a blob that could not be written
  is `failed`. Nothing here ever upgrades a status.
- A structured output (a JSON object or array) is stored as its canonical JSON text, so the
  bytes `get` prints for it are the same whether or not it was large enough to be a blob.
- `get` returns nothing it has not verified: byte count, checksum and content address must
  all match the event, or it refuses (IntegrityError) and says what is wrong. It never
  rebuilds an output from the preview.
- Callers redact before calling `capture_output`: what is hashed here is already clean.
"""

from __future__ import annotations

import os

from agent_journal.core import codec
from agent_journal.core.errors import IntegrityError, JournalError, NotFoundError
from agent_journal.core.model import OBSERVATION, validate_id

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any

    from agent_journal.core.derive import Derived
    from agent_journal.core.model import Event
    from agent_journal.ops.context import Context
    from agent_journal.storage.artifacts import BlobHolds
    from agent_journal.storage.workspace import Workspace

ENV_THRESHOLD = "AGENT_JOURNAL_ARTIFACT_THRESHOLD"
THRESHOLD_BYTES = 16 * 1024
PREVIEW_CHARS = 2000

COMPLETE = "complete"
PARTIAL = "partial"
FAILED = "failed"


def threshold() -> int:
    raw = os.environ.get(ENV_THRESHOLD)
    if not raw:
        return THRESHOLD_BYTES
    try:
        value = int(raw, 10)
    except ValueError:
        value = -1
    if value < 0:
        raise JournalError(f"${ENV_THRESHOLD} must be a whole number of bytes, not {raw!r}")
    return value


def canonical_text(value: Any) -> str:
    """A structured output as the JSON text that is stored and printed for it (the
    canonical encoding of event bodies: sorted keys, no blanks, UTF-8 kept)."""
    return codec.canonical_text(value)


def _summary_lines(text: str) -> str:
    if not text:
        return ""
    from agent_journal.core.recovery.run_output import summary_context

    return summary_context(text)


def _encoded(value: Any) -> tuple[str, bytes]:
    text = value if isinstance(value, str) else canonical_text(value)
    return text, text.encode("utf-8", errors="surrogatepass")


def kept_whole(value: Any) -> bool:
    """Whether `capture_output` stores `value` as a blob (it is above the threshold)."""
    return value is not None and len(_encoded(value)[1]) > threshold()


def capture_output(ws: Workspace, value: Any, *, partial: bool = False,
                   holds: BlobHolds | None = None) -> tuple[Any, dict[str, Any] | None]:
    """(the `output` to store in the event, the `artifact` record or None).

    Small outputs are returned as they are. A large one is written as a blob and
    replaced in the event by its first PREVIEW_CHARS characters; its last PREVIEW_CHARS
    characters go in the artifact record as `tail`, because runners print their summary
    (counts, the failing tests) at the end, and the digest reads events, never blobs; the
    lines between them that may make a runner's summary go as `middle` (a monorepo's
    runner prints one per package).
    The caller keeps `holds` until the event citing the blob has committed, so a
    compaction running meanwhile cannot delete it (see storage/artifacts.py).
    """
    if value is None:
        return None, None
    text, data = _encoded(value)
    if len(data) <= threshold():
        return value, None
    from agent_journal.storage.artifacts import artifact_ref, write_artifact

    artifact: dict[str, Any] = {
        "ref": artifact_ref(data),
        "bytes": len(data),
        "checksum": codec.checksum(data),
        "status": PARTIAL if partial else COMPLETE,
        "tail": text[-PREVIEW_CHARS:],
    }
    middle = _summary_lines(text[PREVIEW_CHARS:-PREVIEW_CHARS])
    if middle:
        artifact["middle"] = middle
    try:
        write_artifact(ws, data, holds)
    except OSError as exc:
        artifact["status"] = FAILED
        artifact["error"] = exc.strerror or exc.__class__.__name__
    return text[:PREVIEW_CHARS], artifact


# -- get --------------------------------------------------------------------------------

class Evidence:
    """What `get` prints: exact bytes, or an entry's record; plus warnings for stderr."""

    def __init__(self, *, raw: bytes | None = None, record: dict[str, Any] | None = None,
                 warnings: list[str] | None = None, event: bool = False) -> None:
        self.raw = raw
        self.record = record
        # True when `record` is a stored event object (`get EVENT_ID`), not an entry view.
        self.event = event
        self.warnings = warnings or []
        # What the read could not trust, for the floor warning every read gives.
        self.unreadable: list[dict[str, Any]] = []
        self.malformed: list[dict[str, Any]] = []


def get(ctx: Context, some_id: str) -> Evidence:
    from agent_journal.ops.context import read_workspace

    validate_id(some_id, "id")
    # Every row is verified (damage is reported as by any read), but only the
    # observation asked for is kept: its events come by the subject index.
    result, d = read_workspace(ctx, observations=False)
    _observation_events(ctx, d, some_id)
    if d.is_tombstoned(some_id) or not d.holds(some_id):
        # Any event by its own id (a conflicting record, an invalidation, a
        # checkpoint), unless it is about tombstoned content.
        event = d.find_event(some_id) or _observation_event(ctx, d, some_id)
        if event is not None:
            by_id = Evidence(record=event.as_dict(), event=True)
            by_id.unreadable, by_id.malformed = result.unreadable, result.malformed
            return by_id
        floor = "" if not result.damaged else (
            f" (the read met {len(result.unreadable)} unreadable segment(s) and "
            f"{len(result.malformed)} malformed row(s): it may be among them)")
        raise NotFoundError(f"no entry or observation with id {some_id} in workspace "
                            f"{ctx.workspace_name}{floor}")
    found = _get(ctx, some_id, d)
    found.unreadable, found.malformed = result.unreadable, result.malformed
    return found


def _observation_events(ctx: Context, d: Derived, obs_id: str) -> None:
    """Put the events of observation `obs_id` into `d`, as a read that kept them would."""
    from agent_journal.storage.time_order import TimeOrder

    with TimeOrder(ctx.open(create=False), lazy=True) as reader:
        events = reader.about(obs_id, OBSERVATION)
    if events:
        d.observation_events[obs_id] = events


def _observation_event(ctx: Context, d: Derived, event_id: str) -> Event | None:
    """An observation's event by its event id, unless its observation is tombstoned."""
    from agent_journal.storage.time_order import TimeOrder

    with TimeOrder(ctx.open(create=False), lazy=True) as reader:
        found = reader.with_event_id(event_id, OBSERVATION)
    if not found or d.is_tombstoned(str(found[0].id)):
        return None
    return found[0]


def _get(ctx: Context, some_id: str, d: Derived) -> Evidence:
    if some_id in d.entry_events:
        return Evidence(record=d.entry_view(some_id))
    ws = ctx.open(create=False)
    # The latest event that says anything about the output decides what the output is:
    # output and artifact describe one capture and must not be folded separately.
    for ev in reversed(d.observation_events[some_id]):
        # An observation of what the session said keeps its words in `text`.
        output, artifact = ev.data.get("output"), ev.data.get("artifact")
        if output is None:
            output = ev.data.get("text")
        if artifact is not None:
            return _from_artifact(ws, some_id, artifact)
        if output is not None:
            text = output if isinstance(output, str) else canonical_text(output)
            return Evidence(raw=text.encode("utf-8", errors="surrogatepass"))
    status = d.observation_view(some_id).get("status")
    return Evidence(raw=b"", warnings=[f"observation {some_id} has no recorded output "
                                       f"(status {status})"])


def _from_artifact(ws: Workspace, obs_id: str, artifact: Any) -> Evidence:
    if not isinstance(artifact, dict):
        raise IntegrityError(f"observation {obs_id}: its artifact record is not an object")
    ref, size, digest = artifact.get("ref"), artifact.get("bytes"), artifact.get("checksum")
    status = artifact.get("status")
    what = f"observation {obs_id}: artifact {ref}"
    if status == FAILED:
        raise IntegrityError(f"{what} was never stored (capture failed: "
                             f"{artifact.get('error', 'unknown error')}); only its preview "
                             "is in the journal")
    if not isinstance(size, int) or not isinstance(digest, str) or not isinstance(ref, str):
        raise IntegrityError(f"{what}: the event does not record bytes, checksum and ref")
    from agent_journal.storage.artifacts import artifact_path, artifact_ref, read_artifact

    try:
        path = artifact_path(ws, ref)
        data = read_artifact(ws, ref)
    except FileNotFoundError:
        raise IntegrityError(f"{what} is missing: no file at {ws.rel(path)}") from None
    except OSError as exc:
        raise IntegrityError(f"{what} cannot be read: {exc.strerror}") from None
    except JournalError as exc:
        raise IntegrityError(f"{what}: {exc.message}") from None
    if len(data) != size:
        raise IntegrityError(f"{what} has {len(data)} bytes, the journal recorded {size}; "
                             "refusing to return it")
    if codec.checksum(data) != digest or artifact_ref(data) != ref:
        raise IntegrityError(f"{what} does not match its recorded checksum; refusing to "
                             "return it")
    warnings = []
    if status != COMPLETE:
        warnings.append(f"{what} is a {status} capture: the tool's output was cut short "
                        "before it was recorded")
    return Evidence(raw=data, warnings=warnings)
