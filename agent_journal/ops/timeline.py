"""`timeline`: what happened, one line per event, in time order.

Invariants:
- Streams: events are read in time order through storage/time_order.py and
  turned into lines as they arrive (core/timeline.py), so memory stays flat
  however large the journal; `--last N` reads the order backward and fetches
  only the bodies of the lines it may show.
- Tombstoned content never renders: every tombstone (whenever written, also
  in an --as-of view) hides the events about its target; the tombstone
  itself is a line naming the target and its reason.
- `--as-of` cuts the events as ops/checkpoints.py defines.
- A failed call's whole output comes from its artifact when it has one, and
  only after the checks `get` makes (ops/evidence.py); a blob that fails
  them is reported in its place, never shown.
- The header's files changed and latest test results are folds over the
  selected lines (core/timeline.py: the seam the digest's derivations plug
  into); its counts come from the lookup columns alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from agent_journal.core.errors import IntegrityError, UsageError
from agent_journal.core.model import OBSERVATION, TOMBSTONE, validate_id
from agent_journal.core.timeline import (
    MERGE_WINDOW,
    STARTED,
    Header,
    Line,
    lines,
    session_matches,
)
from agent_journal.ops.checkpoints import AsOf
from agent_journal.ops.context import Context
from agent_journal.storage.time_order import TimeOrder
from agent_journal.storage.workspace import Workspace


class Filters:
    """Which lines a timeline shows; every value checked before anything is read."""

    def __init__(self, *, session: str | None = None, tool: str | None = None,
                 kind: str | None = None, failures_only: bool = False,
                 since: str | None = None, until: str | None = None) -> None:
        from agent_journal.ops.instants import parse_when, ts_of

        self.session = None if session is None else validate_id(session, "--session")
        self.tool = None if tool is None else validate_id(tool, "--tool")
        self.kind = None if kind is None else validate_id(kind, "--kind")
        self.failures_only = failures_only
        self.since = None if since is None else ts_of(parse_when(since, "--since"))
        self.until = None if until is None else ts_of(parse_when(until, "--until"))
        if self.since is not None and self.until is not None and self.since > self.until:
            raise UsageError(f"--since ({self.since}) is after --until ({self.until})")

    def match(self, line: Line) -> bool:
        if self.failures_only and not line.failed:
            return False
        if self.session is not None and not session_matches(line.session, self.session):
            return False
        if self.tool is not None and line.tool != self.tool:
            return False
        if self.kind is not None and self.kind not in (line.kind, line.type):
            return False
        if self.since is not None and line.ts < self.since:
            return False
        return self.until is None or line.ts <= self.until


class Timeline:
    """An open timeline read: `header()`, `lines()`, `whole_output(line)`, damage."""

    def __init__(self, ctx: Context, filters: Filters, *, last: int | None = None,
                 as_of: str | None = None) -> None:
        from agent_journal.ops.checkpoints import parse_as_of

        if last is not None and last < 1:
            raise UsageError("--last must be at least 1")
        parse_as_of(as_of)
        self.ctx = ctx
        self.filters = filters
        self.last = last
        self.as_of_text = as_of
        self.as_of: AsOf | None = None
        self.ws: Workspace | None = None
        self._reader: TimeOrder | None = None
        self.hidden: set[str] = set()
        self._shown: list[Line] | None = None

    def __enter__(self) -> Timeline:
        from agent_journal.ops.checkpoints import resolve_as_of
        from agent_journal.storage.time_order import TimeOrder

        self.ws = self.ctx.open(create=False)
        self.as_of = resolve_as_of(self.ws, self.as_of_text)
        reader = TimeOrder(self.ws, None if self.as_of is None else self.as_of.cut)
        self._reader = reader.__enter__()
        self.hidden = {str(t.id) for t in reader.of_types((TOMBSTONE,), whole=True)}
        return self

    def __exit__(self, *exc: object) -> None:
        if self._reader is not None:
            self._reader.__exit__()

    @property
    def reader(self) -> TimeOrder:
        assert self._reader is not None
        return self._reader

    @property
    def unreadable(self) -> list[dict[str, str]]:
        return self.reader.unreadable

    @property
    def malformed(self) -> list[dict[str, Any]]:
        seen: set[tuple[Any, Any]] = set()
        out = []
        for row in self.reader.malformed:
            key = (row["segment"], row["row"])
            if key not in seen:
                seen.add(key)
                out.append(row)
        return out

    # -- lines ----------------------------------------------------------------------------

    def _complete(self, line: Line) -> Line:
        """A finish read apart from its start gets the start's tool and target."""
        if line.type == OBSERVATION and line.target is None and line.status != STARTED:
            for ev in self.reader.about(str(line.id), OBSERVATION):
                if ev.event_id in line.event_ids or ev.sort_key > (line.ts, line.event_ids[0]):
                    continue
                probe = lines([ev])
                for earlier in probe:
                    line.tool = line.tool or earlier.tool
                    line.target = line.target or earlier.target
        return line

    def _forward(self) -> Iterator[Line]:
        match = self.filters.match
        for line in lines(self.reader.forward(), self.hidden):
            if match(line):
                yield self._complete(line)

    def _last(self) -> list[Line]:
        """The last N matching lines, reading backward only as far as needed.

        The backward order is taken in chunks, each made into lines with the
        chunks after it that the lines may reach into, so memory holds a chunk
        and N lines however far back the matches lie. A line is decided by the
        events within MERGE_WINDOW of its first (core/timeline.py), so of the
        lines a chunk makes only those whose first event lies more than twice
        that far from the chunk's older end are taken (unless the chunk reaches
        the first event); the older lines are made again with the next, older
        chunk, which keeps the events they may reach: no call is split.
        """
        assert self.last is not None
        want = self.last
        match = self.filters.match
        found: list[Line] = []
        margin = 2 * MERGE_WINDOW + 2
        chunk: list[Any] = []  # in time order
        bound: int | None = None  # lines starting at or after it are taken already
        backward = self.reader.backward()
        size = 2 * want + 2
        exhausted = False
        while len(found) < want and not exhausted:
            older: list[Any] = []
            while len(older) < size:
                ev = next(backward, None)
                if ev is None:
                    exhausted = True
                    break
                older.append(ev)
            older.reverse()
            chunk = older + chunk
            bound = len(chunk) if bound is None else bound + len(older)
            low = 0 if exhausted else margin
            if low < bound:
                found = [ln for ln in lines(chunk, self.hidden)
                         if low <= ln.pos < bound and match(ln)] + found
                del chunk[low + MERGE_WINDOW:]
                bound = low
            size = min(size * 2, 8192)
        return [self._complete(ln) for ln in found[-want:]]

    def lines(self) -> Iterator[Line]:
        if self.last is None:
            return self._forward()
        if self._shown is None:
            self._shown = self._last()
        return iter(self._shown)

    def header(self) -> dict[str, Any]:
        """Counts of the whole cut (lookup columns), and the folds over the
        selected lines (a pass of its own unless --last bounds them; a caller
        that goes over the lines anyway folds them itself, see header_of)."""
        head = Header()
        for line in self.lines():
            head.add(line)
        return self.header_of(head)

    def header_of(self, head: Header) -> dict[str, Any]:
        """The header, given the fold of every selected line into `head`."""
        out = head.as_json()
        out["journal"] = {t: {"events": n, "first": a, "last": b}
                          for t, (n, a, b) in sorted(self.reader.counts().items())}
        out["asOf"] = None if self.as_of is None else self.as_of.label
        return out

    # -- evidence -------------------------------------------------------------------------

    def whole_output(self, line: Line) -> tuple[str | None, str | None]:
        """(the call's whole output, why it cannot be shown), verified like `get`."""
        from agent_journal.ops.evidence import _from_artifact, canonical_text

        if line.artifact is not None:
            assert self.ws is not None
            try:
                found = _from_artifact(self.ws, str(line.id), line.artifact)
            except IntegrityError as exc:
                return None, exc.message
            return found.raw.decode("utf-8", errors="replace") if found.raw else "", None
        if line.output is None:
            return None, None
        return (line.output if isinstance(line.output, str)
                else canonical_text(line.output)), None
