"""The read a compaction plans from: every segment, every row verified.

Invariant: the read gives exactly the events, damage, high-water marks and
tombstone rewrites that a one-process read through the exact decoder gives
(`codec.decode_checked`, the verdict every reader gives), whichever rows a fast
path judged, and however the segments were shared with worker processes. It
only reads; applying the plan is `store.apply_to_segment`.
"""

from __future__ import annotations

import os
import re
import sqlite3

from xxhash import xxh3_64_hexdigest as _xxh3_hex

from agent_journal.core import codec
from agent_journal.core.errors import UsageError
from agent_journal.core.model import Event, event_values, events_from_values
from agent_journal.storage.connection import describe_sqlite_error
from agent_journal.storage.erasure import text_is_utf8
from agent_journal.storage.segment import never_initialised, open_segment_for_read
from agent_journal.storage.segment_reader import (
    PausedGC,
    ReadResult,
    json_check,
    quick_check,
    strict_json_check,
)
from agent_journal.storage.workspace import Workspace

TYPE_CHECKING = False  # as elsewhere in the package: mypy reads this as True
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any


class CompactionRead(ReadResult):
    """A whole-workspace read made for planning a compaction.

    Damage is found exactly as `Workspace.read` finds it. Besides the events it
    keeps, per segment, the ids of the events read there and the stored
    checksum of every tombstone (so a rewrite can check the row is still the
    one read).
    Observation events carry only `data.artifact` of their data: nothing else
    of an observation's data takes part in a plan, and most of a journal is
    observations, so a body in canonical layout is judged without parsing it
    in Python (see `_fast_observation`); any other goes to the exact decoder.
    """

    def __init__(self) -> None:
        super().__init__()
        # segment -> the event ids of the events read from it
        self.located: dict[str, list[str]] = {}
        # segment -> tombstone event id -> checksum stored there
        self.tombstone_checksums: dict[str, dict[str, str]] = {}
        # segment -> tombstone event id -> body and checksum of the row's purged
        # rewrite (`Rewrite`), for each tombstone not yet purged: made during
        # the read, which worker processes share, instead of one by one as the
        # run applies.
        self.tombstone_rewrites: dict[str, dict[str, Rewrite]] = {}


# Observation rows are most of a journal, and parsing each body in Python cost
# more than all the rest of a compaction. A row laid out the way `codec` writes
# it is instead shown, cheaply, to be one the exact decoder accepts with the
# values read here; anything unusual gets `codec.decode_checked`, the verdict
# every reader gives. What shows it (`_fast_observation`):
# - SQLite finds the whole body valid JSON by a test no looser than Python's
#   json (`strict_json_check`), and the body holds no NUL (SQLite's text ends
#   at one, so it would have judged only what comes before);
# - Python finds the body's checksum right and the body strict UTF-8; it
#   begins `{"author":"A","data":{` and, from the last place where
#   `,"eventId":"E","id":"S","kind":"` (the row's own event id and subject)
#   occurs, ends with the other fields in canonical order, `ts` the row's own
#   time, each a plain string (no quote, backslash or control character, so
#   the text is the value) or a small integer.
# In valid JSON those last fields hold no bracket, so they are members of the
# outer object, its last ones: a later duplicate of any of them cannot follow.
# Between `data`'s value and them, the text may still hold more members; those
# are harmless (the exact decoder ignores unknown keys, and takes the last of
# duplicates, which are these) except a second `author` or `data`: so the text
# from `data`'s value to `,"eventId"` must hold neither `"author"` nor
# `"data"` (a nested key of either name only costs the exact path), nor an
# escape that could spell a letter of a key. Where SQLite's parser still
# accepts what Python's refuses, the row takes the exact path too: nesting
# deeper than Python's recursion limit, and integers longer than Python
# converts. Observation data is not parsed at all unless it may hold an
# `artifact` key, the one part a plan reads: a text with `"artifact"`
# anywhere has that stretch parsed (which fails unless it is one value), and
# a text without has data `{}`.

def compaction_rows_sql(version: tuple[int, int, int]) -> str:
    """Every row of a segment in seq order; the last column is 1 for an
    observation body that passed the JSON check (NULL for every other row,
    and for every row where there is no check)."""
    check = strict_json_check(version)
    checked = ("NULL" if check is None else
               f"CASE WHEN type = 'observation' AND {check} THEN 1 END")
    return (f"SELECT seq, event_id, type, body, checksum, subject, ts, {checked} "
            "FROM (SELECT seq, event_id, type, body, checksum, subject, ts, "
            "CAST(body AS TEXT) AS t FROM events) ORDER BY seq")


_COMPACTION_ROWS = compaction_rows_sql(sqlite3.sqlite_version_info)
_EXACT_ROWS = compaction_rows_sql((0, 0, 0))
_PLAIN = r'[^"\\\x00-\x1f]+'
# What lies between the row's `"kind":"` and `","ts":"`: kind, replica, schema
# (an integer Python converts whatever its digit limit) and session.
_OBSERVATION_MIDDLE = re.compile(
    rf'({_PLAIN})","replica":"({_PLAIN})","schema":(-?(?:0|[1-9][0-9]{{0,17}})),'
    rf'"session":(?:null|"([^"\\\x00-\x1f]*)")')
# An escape that could spell a letter of a key (`"\u0061rtifact"`, `"\u0061uthor"`).
_ESCAPED_LETTER = re.compile(r"\\u00[4-7][0-9A-Fa-f]")
# Deeper data is left to the exact decoder, whose recursion limit decides it.
_FAST_NESTING = 200
_checksum = codec.checksum
_CHECKSUM_PREFIX = codec.CHECKSUM_PREFIX


class _FastPath:
    """What the fast path remembers across one read: the fields between kind and
    ts it has already judged (a journal repeats a few), the last good one of
    them (rows in a row mostly share it), and Python's limit on the digits of
    an integer it converts (a longer one fails json.loads)."""

    def __init__(self) -> None:
        import sys

        self.middles: dict[str, tuple[str, str, int, str | None] | None] = {}
        # (A NUL never ends a body the fast path reads: nothing matches it.)
        self.last: tuple[str, tuple[str, str, int, str | None]] = ("\x00", ("", "", 0, None))
        limit = sys.get_int_max_str_digits()
        self.digit_limit = limit
        self.long_number = re.compile(f"[0-9]{{{limit + 1}}}") if limit else None

    def middle(self, text: str) -> tuple[str, str, int, str | None] | None:
        m = _OBSERVATION_MIDDLE.fullmatch(text)
        found = None if m is None else (m[1], m[2], int(m[3]), m[4])
        self.middles[text] = found
        return found


def _checked_text(body: Any, digest: Any) -> str | None:
    """A blob body whose checksum is right, as strict UTF-8 text; else None."""
    if type(body) is not bytes or digest != _checksum(body):
        return None
    try:
        return body.decode()
    except UnicodeDecodeError:
        return None


def _fast_observation(fast: _FastPath, body: Any, digest: Any, event_id: Any, subject: Any,
                      ts: Any) -> tuple[Any, ...] | None:
    """The observation row as the exact decoder reads it (data reduced to its
    artifact), as `model.event_values`; None when only the exact decoder may
    judge it. Only for a body that passed `strict_json_check`.

    Written for speed: a million rows pass here, so operators stand in for
    method calls wherever they say the same (`_checked_text` is inlined).
    """
    if type(body) is not bytes or digest != _CHECKSUM_PREFIX + _xxh3_hex(body):
        return None
    try:
        text = body.decode()
    except UnicodeDecodeError:
        return None
    # The column values must be plain strings for the text matches below to
    # mean the values match.
    if type(event_id) is not str or type(subject) is not str or type(ts) is not str:
        return None
    columns = event_id + subject + ts
    if '"' in columns or "\\" in columns or "\x00" in text:
        return None
    quote = text.find('","data":{', 11)
    author = text[11:quote]
    if quote <= 11 or text[:11] != '{"author":"' or '"' in author or "\\" in author:
        return None
    start = quote + 9  # the data object's "{"
    # The fields after data as they would read with the last row's middle
    # fields: one test, where finding them afresh takes a search and a lookup.
    middle, fields = fast.last
    suffix = f',"eventId":"{event_id}","id":"{subject}","kind":"{middle},"ts":"{ts}",' \
        '"type":"observation"}'
    if text.endswith(suffix):
        end = len(text) - len(suffix)
    else:
        ids = f',"eventId":"{event_id}","id":"{subject}","kind":"'
        end = text.rfind(ids)  # just past the data object, unless more members follow it
        tail = f',"ts":"{ts}","type":"observation"}}'
        if end < 0 or not text.endswith(tail):
            return None
        middle = text[end + len(ids):len(text) - len(tail)]
        found = fast.middles[middle] if middle in fast.middles else fast.middle(middle)
        if found is None:
            return None
        fields = found
        fast.last = (middle, found)
    if end <= start or text.find('"author"', start, end) >= 0 \
            or text.find('"data"', start, end) >= 0:
        return None
    if end - start > 2 * _FAST_NESTING and \
            text.count("{", start, end) + text.count("[", start, end) > _FAST_NESTING:
        return None
    if fast.long_number is not None and end - start > fast.digit_limit \
            and fast.long_number.search(text, start, end):
        return None
    data: dict[str, Any] = {}
    # The fields around data are plain strings: `"artifact"` found outside data
    # (as a whole value) only costs a parse, and they hold no backslash.
    if '"artifact"' in text:
        try:
            parsed = codec.parse_json_text(text[start:end])
        except codec.MalformedEvent:
            return None
        artifact = parsed.get("artifact")
        if artifact is not None:
            data = {"artifact": artifact}
    elif "\\u00" in text and _ESCAPED_LETTER.search(text, start, end):
        return None  # a key may be spelt with escapes; the exact decoder reads it
    kind, replica, schema, session = fields  # type: ignore[misc]
    return (event_id, "observation", kind, subject, ts, author, session, replica, data,
            schema)


# A tombstone exactly as codec writes one whose data is a reason and the
# purged flag: every field a plain string (the text is the value), the
# schema a small integer, nothing else anywhere. The whole body is matched,
# so it is exactly the JSON the exact decoder parses to these values.
_TOMBSTONE = re.compile(
    rf'\{{"author":"({_PLAIN})","data":\{{"purged":(false|true),"reason":"({_PLAIN})"\}},'
    rf'"eventId":"({_PLAIN})","id":"({_PLAIN})","kind":"({_PLAIN})","replica":"({_PLAIN})",'
    rf'"schema":(-?(?:0|[1-9][0-9]{{0,17}})),"session":(?:null|"([^"\\\x00-\x1f]*)"),'
    rf'"ts":"({_PLAIN})","type":"tombstone"\}}')
_UNPURGED = b'"data":{"purged":false,'
_PURGED = b'"data":{"purged":true,'
# A tombstone's purged rewrite: the new body and its checksum. The body is
# None when the row read matched `_TOMBSTONE` in a UTF-8 segment: there the
# flag's text occurs once, so SQLite's replace() of it in the stored body is
# exactly the new body, and only the checksum is sent (the row is updated
# only while its checksum is still the one read). Sending each body as JSON
# text was a third of a transaction's work, under the GIL.
Rewrite = tuple[bytes | None, str]


def _fast_tombstone(body: Any, digest: Any, event_id: Any, subject: Any, ts: Any,
                    in_place: bool) -> tuple[tuple[Any, ...], Rewrite | None] | None:
    """The tombstone row as the exact decoder reads it (`model.event_values`),
    with its purged rewrite when it is not purged yet; None when only the
    exact decoder may judge it. A matched body is in canonical layout, so its
    rewrite is the same bytes with the flag turned; `in_place`, the rewrite
    leaves that to SQLite (see `Rewrite`)."""
    text = _checked_text(body, digest)
    if text is None:
        return None
    m = _TOMBSTONE.fullmatch(text)
    if m is None:
        return None
    author, purged, reason, body_id, body_subject, kind, replica, schema, session, body_ts \
        = m.groups()
    if body_id != event_id or body_subject != subject or body_ts != ts or not reason.strip():
        return None
    rewrite = None
    if purged == "false":
        new = body.replace(_UNPURGED, _PURGED, 1)
        rewrite = (None if in_place else new, _checksum(new))
    return ((event_id, "tombstone", kind, subject, ts, author, session, replica,
             {"purged": purged == "true", "reason": reason}, int(schema)), rewrite)


class SegmentRead:
    """One segment's share of a CompactionRead. Its events are read as tuples
    of field values (`model.event_values`), and made Events in the process
    that plans."""

    __slots__ = ("rel", "rows", "events", "tombstones", "rewrites", "high", "malformed",
                 "unreadable")

    def __init__(self, rel: str) -> None:
        self.rel = rel
        self.rows: list[tuple[Any, ...]] = []
        self.events: list[Event] = []  # `rows` made Events, once `made_events`
        self.tombstones: dict[str, str] = {}  # tombstone event id -> stored checksum
        # tombstone event id -> its purged rewrite (see read_located)
        self.rewrites: dict[str, Rewrite] = {}
        self.high: int | None = 0  # None: the segment could not be read to the end
        self.malformed: list[dict[str, Any]] = []
        self.unreadable: str | None = None

    def packed(self, rows: list[Any] | None = None) -> tuple[Any, ...]:
        """The share as plain values, cheap to send from a worker process;
        `rows` in place of its rows, if given."""
        return (self.rel, self.rows if rows is None else rows, self.tombstones,
                self.rewrites, self.high, self.malformed, self.unreadable)

    @classmethod
    def unpacked(cls, packed: tuple[Any, ...]) -> SegmentRead:
        part = cls(packed[0])
        (_, part.rows, part.tombstones, part.rewrites, part.high, part.malformed,
         part.unreadable) = packed
        return part

    def made_events(self, named: set[str] | None = None) -> SegmentRead:
        """Make Events of the rows: all of them, or, given the ids tombstones
        name, only those `kept_rows` keeps."""
        self.events = events_from_values(self.rows if named is None
                                         else kept_rows(self.rows, named))
        self.rows = []
        return self


def tombstone_subjects(rows: list[tuple[Any, ...]]) -> list[str]:
    """The ids the tombstones among these rows (as `event_values`) name."""
    return [row[3] for row in rows if row[1] == "tombstone"]


def kept_rows(rows: list[tuple[Any, ...]], named: set[str]) -> list[tuple[Any, ...]]:
    """What a plan without an observation TTL reads of these rows: all but the
    observations no tombstone names and that hold no artifact."""
    return [row for row in rows if row[1] != "observation" or row[3] in named or row[8]]


class _KeptSoFar:
    """Parts cut down by `kept_rows` as they are read, with the ids named by
    the tombstones read so far. A tombstone read later (here or elsewhere)
    may name an observation of an earlier part: `grown` finds the parts that
    then keep more rows. Their rows are held until then."""

    def __init__(self) -> None:
        self.named: set[str] = set()
        self.held: list[tuple[list[tuple[Any, ...]], list[str]]] = []  # rows, their ids named

    def keep(self, rows: list[tuple[Any, ...]]) -> tuple[list[tuple[Any, ...]], list[str]]:
        """The rows a part keeps so far, and the ids its own tombstones name."""
        subjects = tombstone_subjects(rows)
        self.named.update(subjects)
        self.held.append((rows, subjects))
        return kept_rows(rows, self.named), subjects

    def grown(self, elsewhere: set[str]) -> dict[int, list[tuple[Any, ...]]]:
        """Part number (in the order kept) -> the rows it keeps now, for each
        part that may keep more, given the ids tombstones elsewhere name.

        Named since a part was kept: by tombstones of later parts, or
        elsewhere. A part whose rows meet none of those ids is complete (a set
        test in C, where refiltering every row was a tenth of a second).
        """
        import operator

        later = set(elsewhere)
        everything = self.named | later
        grown = {}
        row_subject = operator.itemgetter(3)
        for n in range(len(self.held) - 1, -1, -1):
            rows, subjects = self.held[n]
            if not later.isdisjoint(map(row_subject, rows)):
                grown[n] = kept_rows(rows, everything)
            later.update(subjects)
        return grown


def read_located(ws: Workspace, *, every_observation: bool = True) -> CompactionRead:
    """Read every segment for a compaction plan.

    Without `every_observation`, `events` holds only the observations a
    tombstone names or that hold an artifact (all a plan with no observation
    TTL looks at, and the blobs the run must account for); every row still
    counts for damage and `high_water`. Making Events of a million
    observations nobody looks at was a second of the read. `located` names
    the segments of the events read: a plan only removes events it read.
    """
    result = CompactionRead()
    paths = ws.segment_paths()
    rels = [ws.rel(path) for path in paths]
    parts = _read_for_compaction(paths, rels, every_observation=every_observation)
    for part in parts:
        result.segments.append(part.rel)
        result.located[part.rel] = [ev.event_id for ev in part.events]
        result.events.extend(part.events)
        result.malformed.extend(part.malformed)
        if part.tombstones:
            result.tombstone_checksums[part.rel] = part.tombstones
        if part.rewrites:
            result.tombstone_rewrites[part.rel] = part.rewrites
        if part.unreadable is not None:
            result.unreadable.append({"path": part.rel, "reason": part.unreadable})
        if part.high is not None:
            result.high_water[part.rel] = part.high
    return result


# Reading is most of a large compaction's time, nearly all of it spent
# verifying rows, and segments are independent: past a size where starting a
# process is a small part of the read, this process and one worker process per
# further core share the segments (see `_SegmentQueue`). Each segment is read
# exactly as a serial read would read it, and the parts are put back in
# segment order, so the result is the serial read's. What a worker that cannot
# start or fails claimed is read here instead.
ENV_COMPACT_WORKERS = "AGENT_JOURNAL_COMPACT_WORKERS"
PARALLEL_READ_MIN_BYTES = 64 * 1024 * 1024
MAX_COMPACT_WORKERS = 8


def compaction_workers(sizes: list[int]) -> int:
    """How many worker processes read segments of these sizes beside this one.

    $AGENT_JOURNAL_COMPACT_WORKERS sets the number (0: read here only);
    otherwise one per further available core, once there is enough to read.
    """
    chosen = os.environ.get(ENV_COMPACT_WORKERS, "").strip()
    if chosen:
        if not chosen.isdigit():
            raise UsageError(f"{ENV_COMPACT_WORKERS} must be a whole number of worker "
                             f"processes (0 or more), not {chosen!r}")
        wanted = int(chosen)
    elif sum(sizes) < PARALLEL_READ_MIN_BYTES:
        return 0
    else:
        wanted = available_cores() - 1
    return max(0, min(wanted, MAX_COMPACT_WORKERS, len(sizes) - 1))


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


# Segments are handed out one at a time from a queue that this process and
# the workers all draw on, largest first: a fixed split by size left one side
# idle for a second or more whenever the machine's other load fell on the
# other side.
_CLAIM = 4  # bytes per segment number in the queue


class _SegmentQueue:
    """Segment numbers in an unlinked temporary file that this process and its
    workers read through one shared file offset. A read of one number is one
    claim: POSIX makes a read and its update of a shared offset atomic, and
    should two readers ever see the same number, the part is read twice and
    one kept; one never read is read here at the end."""

    def __init__(self, order: list[int]) -> None:
        import tempfile

        self.file = tempfile.TemporaryFile()
        try:
            self.file.write(b"".join(k.to_bytes(_CLAIM, "big") for k in order))
            self.file.flush()
            self.file.seek(0)
        except OSError:
            self.file.close()
            raise
        self.fd = self.file.fileno()

    def close(self) -> None:
        self.file.close()


def _claims(fd: int) -> Iterator[int]:
    """The segment numbers this reader claims, until the queue is empty."""
    while len(got := os.read(fd, _CLAIM)) == _CLAIM:
        yield int.from_bytes(got, "big")


def _read_for_compaction(paths: list[str], rels: list[str], *, every_observation: bool
                         ) -> list[SegmentRead]:
    """Every segment's part, in order, its Events made: of every row, or
    without `every_observation`, of the rows `kept_rows` keeps."""
    sizes = [_file_size(path) for path in paths]
    workers = compaction_workers(sizes)
    parts: list[SegmentRead | None] = [None] * len(paths)
    started: list[_ReadWorker] = []
    queue = None
    if workers:
        try:
            queue = _SegmentQueue(sorted(range(len(paths)), key=lambda k: -sizes[k]))
        except OSError:
            queue = None  # no temporary file to share: read here alone
    if queue is not None:
        started = [_ReadWorker(paths, rels, queue.fd, every_observation)
                   for _ in range(workers)]
    # Without every_observation, parts read here are cut down and made Events
    # as they come too, like a worker's (see `_ReadWorker`).
    so_far = _KeptSoFar()
    kept_here: list[int] = []  # the segment numbers of so_far's parts
    try:
        fast = _FastPath()
        for k in range(len(paths)) if queue is None else _claims(queue.fd):
            part = _read_segment_for_compaction(paths[k], rels[k], fast)
            if not every_observation:
                part.rows = so_far.keep(part.rows)[0]
                kept_here.append(k)
            parts[k] = part.made_events()
            for worker in started:
                worker.take(parts, block=False)  # what the workers sent meanwhile
        for worker in started:
            worker.take(parts, block=True)
        whole = _read_missing(paths, rels, parts, started, every_observation)
        if not every_observation:
            # Each part holds the observations named by the tombstones its
            # reader had read; a part that others' tombstones add rows to is
            # made again. (Only parts read again after a worker failed still
            # hold rows.)
            named = set().union(so_far.named, *(worker.subjects for worker in started),
                                *(tombstone_subjects(part.rows) for part in whole))
            for worker in started:
                worker.ask_rows(named)
            for n, rows in so_far.grown(named - so_far.named).items():  # while they look
                here = parts[kept_here[n]]
                assert here is not None
                here.rows = rows
                here.made_events()
            for worker in started:
                worker.take_rows(parts)
            whole = _read_missing(paths, rels, parts, started, every_observation)
            for part in whole:
                if part.rows:
                    part.made_events(named)
        return whole
    finally:
        if queue is not None:
            queue.close()
        for worker in started:
            worker.abandon()  # a worker still waiting, if this read stopped early


def _read_missing(paths: list[str], rels: list[str], parts: list[SegmentRead | None],
                  workers: list[_ReadWorker], every_observation: bool) -> list[SegmentRead]:
    """Every part: read here what no worker sent, and all that a failed
    worker sent."""
    for worker in workers:
        if worker.failed():
            for k in worker.claimed:
                parts[k] = None
            worker.claimed.clear()
    fast = _FastPath()
    whole = []
    for k, part in enumerate(parts):
        if part is None:
            part = _read_segment_for_compaction(paths[k], rels[k], fast)
            parts[k] = part = part.made_events() if every_observation else part
        whole.append(part)
    return whole


class _ReadWorker:
    """A worker process sharing a compaction read: it claims segments from the
    queue and reads each exactly as this process would.

    A fresh interpreter (not fork, not multiprocessing): it shares no SQLite,
    lock or thread state with this process, and never re-imports the caller's
    main script. It reads under this process's recursion and integer-digit
    limits, which decide some verdicts of the exact decoder. It sends each
    segment's part as soon as it is read, and a thread here collects them, so
    this process can unmarshal parts while the worker reads on. A worker that
    cannot start or fails has every segment it claimed read here instead.

    Without `every_observation` a part comes with only the rows `kept_rows`
    keeps given the tombstones the worker has read so far (and with the ids
    its own tombstones name, `subjects`): nine rows in ten of a journal are
    observations that no such plan reads, and unmarshalling them here was a
    tenth of the read. Once every tombstone is known, a second round
    (`ask_rows`, `take_rows`) brings the parts that a tombstone read
    elsewhere or later adds rows to; usually none.
    """

    def __init__(self, paths: list[str], rels: list[str], queue_fd: int,
                 every_observation: bool) -> None:
        import subprocess
        import sys
        import threading

        self.every_observation = every_observation
        self.proc: subprocess.Popen[bytes] | None = None
        self.frames: list[bytes | None] = []  # as the collecting thread reads them
        self.arrived = threading.Condition()
        self.taken = 0  # frames unmarshalled so far
        self.claimed: list[int] = []  # segment numbers it sent parts of, in its order
        self.subjects: set[str] = set()
        self.ended = False  # the stream ended
        self.claimed_all = False  # every part it read has arrived
        self.done = False  # every part and answer arrived (it is then left to exit)
        package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (package_parent, env.get("PYTHONPATH")) if p)
        try:
            if not sys.executable:
                return
            self.proc = subprocess.Popen(
                [sys.executable, "-c", "from agent_journal.storage.compaction_read "
                 "import compaction_read_worker as w; w()"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                env=env, pass_fds=(queue_fd,))
            assert self.proc.stdout is not None
            self._send((paths, rels, queue_fd, sys.getrecursionlimit(),
                        sys.get_int_max_str_digits(), every_observation),
                       last=every_observation)
            _widen_pipe(self.proc.stdout.fileno())
            threading.Thread(target=self._collect, daemon=True).start()
        except (OSError, ValueError, RuntimeError):
            self._stop()

    def _send(self, message: Any, *, last: bool) -> None:
        import marshal

        assert self.proc is not None and self.proc.stdin is not None
        _write_frame(self.proc.stdin, marshal.dumps(message, 2))
        if last:
            self.proc.stdin.close()

    def _collect(self) -> None:
        """Read frames until the pipe ends; None marks the end."""
        assert self.proc is not None and self.proc.stdout is not None
        stream = self.proc.stdout
        try:
            while (frame := _read_frame(stream)) is not None:
                with self.arrived:
                    self.frames.append(frame)
                    self.arrived.notify()
        finally:
            with self.arrived:
                self.frames.append(None)
                self.arrived.notify()

    def _stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def _next(self, *, block: bool) -> Any:
        """The next message; None when none has come yet (or, once `ended`,
        ever)."""
        import marshal

        if self.ended or self.proc is None:
            return None
        with self.arrived:
            while block and len(self.frames) <= self.taken:
                self.arrived.wait()
            if len(self.frames) <= self.taken:
                return None
            frame = self.frames[self.taken]
            self.frames[self.taken] = b""
        self.taken += 1
        if frame is None:
            self.ended = True
            return None
        return marshal.loads(frame)

    def take(self, parts: list[SegmentRead | None], *, block: bool) -> None:
        """Put the parts that have arrived in their places (with `block`, every
        part, up to the worker's message that the queue is empty)."""
        try:
            while not self.claimed_all and (got := self._next(block=block)) is not None:
                if got == "claimed all":
                    self.claimed_all = True
                    if self.every_observation:
                        self._finish()
                    return
                k, packed, subjects = got
                part = SegmentRead.unpacked(packed)
                # Without every_observation these are the rows the worker kept
                # given the tombstones it had read: a later tombstone may add to
                # them (`take_rows`), never take away.
                parts[k] = part.made_events()
                self.claimed.append(k)
                self.subjects.update(subjects)
            if block and not self.claimed_all:
                raise ValueError("the worker stopped early")
        except Exception:
            self._stop()

    def ask_rows(self, named: set[str]) -> None:
        """The second round: send the ids every tombstone names; `take_rows`
        takes the kept rows of every part the worker could not tell in the
        first."""
        if self.proc is None:
            return  # failed, or (with every_observation) done
        try:
            self._send(list(named - self.subjects), last=True)
        except Exception:
            self._stop()

    def take_rows(self, parts: list[SegmentRead | None]) -> None:
        if self.proc is None:
            return
        try:
            redone = self._next(block=True)
            if not isinstance(redone, dict):
                raise ValueError("the worker stopped early")
            for n, rows in redone.items():
                part = parts[self.claimed[n]]
                assert part is not None
                part.rows = rows
                part.made_events()
            self._finish()
        except Exception:
            self._stop()

    def _finish(self) -> None:
        """Its last message has arrived: the worker is done. It is left to end
        on its own (a thread reaps it): a process that read a million rows
        takes the kernel a tenth of a second to tear down."""
        import threading

        threading.Thread(target=self.proc.wait, daemon=True).start()  # type: ignore[union-attr]
        self.proc = None
        self.done = True

    def abandon(self) -> None:
        """End the worker if it is not done (a worker done or failed has ended)."""
        if self.proc is not None and not self.done:
            self._stop()

    def failed(self) -> bool:
        """It could not start, or stopped before its work was done; what it
        sent cannot be trusted to be whole."""
        return self.proc is None and not self.done


def _write_frame(stream: Any, frame: bytes) -> None:
    stream.write(len(frame).to_bytes(8, "big"))
    stream.write(frame)
    stream.flush()


def _read_frame(stream: Any) -> bytes | None:
    """One length-prefixed frame; None at the end of the stream (or a cut one)."""
    header = stream.read(8)
    if len(header) < 8:
        return None
    size = int.from_bytes(header, "big")
    frame = stream.read(size)
    return frame if len(frame) == size else None


def _widen_pipe(fd: int) -> None:
    """Let a pipe hold a megabyte (Linux): a worker blocked on a full 64 KiB
    pipe waits each time for the collecting thread to get the GIL back."""
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
    except (OSError, ImportError):
        pass


def compaction_read_worker() -> None:
    """A `_ReadWorker` process. Frames both ways: 8 bytes of length, then a
    value marshalled in format 2. In: the request (with the number of the
    queue's file descriptor); and, unless it asks for every observation,
    later, the ids tombstones the worker did not read name. Out: the part of
    each segment it claims, as it is read; "claimed all"; and, in the second
    round, the kept rows of the parts that gained some, by the order sent.

    marshal, not pickle: the parts are plain lists, tuples, dicts, strings and
    numbers, and without the shared-object bookkeeping of pickle (or of later
    marshal formats) a million values go over in a fifth of the time.
    """
    import marshal
    import sys

    inp, out = sys.stdin.buffer, sys.stdout.buffer

    def request() -> Any:
        frame = _read_frame(inp)
        if frame is None:
            raise SystemExit(2)
        return marshal.loads(frame)

    paths, rels, queue_fd, recursion_limit, digit_limit, every_observation = request()
    sys.setrecursionlimit(recursion_limit)
    sys.set_int_max_str_digits(digit_limit)
    fast = _FastPath()
    so_far = _KeptSoFar()
    with PausedGC():
        for k in _claims(queue_fd):
            part = _read_segment_for_compaction(paths[k], rels[k], fast)
            message: tuple[int, tuple[Any, ...], list[str]]
            if every_observation:
                message = (k, part.packed(), [])
            else:
                kept, subjects = so_far.keep(part.rows)
                message = (k, part.packed(kept), subjects)
            _write_frame(out, marshal.dumps(message, 2))
        _write_frame(out, marshal.dumps("claimed all", 2))
        if not every_observation:
            _write_frame(out, marshal.dumps(so_far.grown(set(request())), 2))
    # Everything is sent: freeing what was read would only keep the caller
    # waiting for this process to end.
    os._exit(0)


def _file_size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _read_segment_for_compaction(path: str, rel: str, fast: _FastPath) -> SegmentRead:
    part = SegmentRead(rel)
    try:
        conn = open_segment_for_read(path)
    except sqlite3.Error as exc:
        part.high = None
        part.unreadable = describe_sqlite_error(exc)
        return part
    try:
        if never_initialised(conn, path):
            return part
        # A plan that rewrites the file must not start from one SQLite finds
        # corrupt where no row read goes (an index page, the meta table).
        damage = quick_check(conn)
        if damage is not None:
            part.high = None
            part.unreadable = damage
            return part
        utf8 = text_is_utf8(conn)
        _read_rows(conn, part, fast, _COMPACTION_ROWS if json_check() and utf8 else _EXACT_ROWS,
                   in_place=utf8)
    except sqlite3.Error as exc:
        part.high = None
        part.unreadable = describe_sqlite_error(exc)
    finally:
        conn.close()
    return part


def _read_rows(conn: sqlite3.Connection, part: SegmentRead, fast: _FastPath, sql: str, *,
               in_place: bool) -> None:
    append_event = part.rows.append
    malformed = part.malformed
    rel = part.rel
    seq = part.high
    for seq, event_id, type_, body, digest, subject, ts, json_ok in conn.execute(sql):
        values = None
        if json_ok is not None:
            values = _fast_observation(fast, body, digest, event_id, subject, ts)
        elif type_ == "tombstone":
            found = _fast_tombstone(body, digest, event_id, subject, ts, in_place)
            if found is not None:
                values, rewrite = found
                part.tombstones[event_id] = digest
                if rewrite is not None:
                    part.rewrites[event_id] = rewrite
        if values is None:
            # The same strict verdict every other read gives (codec.decode_checked).
            try:
                ev = codec.decode_checked(body, digest, event_id, type_, subject, ts)
            except codec.MalformedEvent as exc:
                malformed.append({"segment": rel, "row": seq, "reason": str(exc)})
                continue
            if ev.type == "tombstone":
                part.tombstones[event_id] = digest
                if ev.data.get("purged") is False:
                    part.rewrites[event_id] = codec.encode(ev.purged())
            values = event_values(ev)
            if ev.type == "observation":
                artifact = ev.data.get("artifact")
                values = (*values[:8], {} if artifact is None else {"artifact": artifact},
                          values[9])
        append_event(values)
    part.high = seq  # the last row's: rows come in seq order
