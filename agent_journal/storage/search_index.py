"""The search index: a disposable projection of the segments under <root>/cache/search/.

Invariants:
- The index (<root>/cache/search/<ws>.sqlite) is a projection of the segments
  and never a source of truth: deleting it loses nothing, and a rebuild from
  scratch answers every query exactly as the incrementally kept index does
  (every fold below is order-free: sets, a minimum by `Event.sort_key`, parts
  sorted by sort key).
- A row is folded in only when it verifies as every read verifies it (checksum,
  shape, and lookup columns that agree with its body, `codec.decode_checked`);
  any other row is listed as malformed and folded into nothing, so an edited
  column neither hides nor shows content otherwise than `show` does.
- Tombstoned content is never in the searchable tables: a document is deleted
  the moment its tombstone is indexed, and a target whose tombstone came first
  is never inserted. So it is never returned and never counts in N or in a
  document frequency.
- Invalidated and suppressed entries stay indexed and counted; they are
  returned only on request and marked. Their outcome follows the rules of
  `derive` (core/outcomes.py, shared by both).
- A segment that lost rows or vanished, and an index file that fails to open,
  carries another format, or raises any SQLite error, is thrown away and
  rebuilt from scratch: removals are never patched in place, so no byte of
  purged content outlives the next search in the index file. So is one whose
  file changed without gaining rows (rows edited in place), one whose last
  indexed row now holds other content (its event id and checksum, compared on
  every change), and one whose file was replaced (another inode) even when it
  also grew (the census rule, cache.not_appended, which the digest's cache
  follows too): the rebuild reads every row again and reports what no longer
  verifies, as `show` does. An older row edited in place, in the same file, by
  a write that also appends is not seen until the next rebuild: telling it
  from an append would take reading every row's checksum on every append
  (0.6 s per 200,000 rows). Our own in-place writer, compact --apply, clears
  the index afterwards.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from typing import Any

from agent_journal.core.derive import tombstone_graph
from agent_journal.core.errors import JournalError
from agent_journal.core.model import (
    ENTRY,
    INVALIDATION,
    OBSERVATION,
    TOMBSTONE,
    Event,
)
from agent_journal.core.outcomes import LIVE
from agent_journal.core.ranking import (
    UNINDEXED_KINDS,
    entry_text,
    observation_text,
    outcomes,
    split_parts,
    ts_millis,
    words,
)
from agent_journal.storage import erasure_generation
from agent_journal.storage.cache import (
    cache_lock_path,
    cache_path,
    iter_segment_after,
    not_appended,
    open_cache,
    publish_cache,
    remove_cache_files,
    segment_signature,
)
from agent_journal.storage.connection import run_write
from agent_journal.storage.locks import FileLock
from agent_journal.storage.verified_mark import vouches
from agent_journal.storage.workspace import Workspace

INDEX_AREA = "search"


# Bump when the schema, the text extraction or the tokenisation changes: an
# index of another format is rebuilt, never read.
INDEX_FORMAT = "agent-journal-search/6"


APPLY_BATCH = 5000


REBUILD_ATTEMPTS = 3
SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE segments (
    name TEXT PRIMARY KEY,
    high INTEGER NOT NULL,
    last_mark TEXT,
    rows INTEGER NOT NULL,
    signature TEXT,
    trusted INTEGER NOT NULL,
    unreadable TEXT
);
CREATE TABLE malformed (
    segment TEXT NOT NULL,
    seq INTEGER NOT NULL,
    reason TEXT NOT NULL,
    PRIMARY KEY (segment, seq)
);
CREATE TABLE entries (
    subject TEXT PRIMARY KEY,
    ts TEXT NOT NULL,
    event_id TEXT NOT NULL,
    deps TEXT NOT NULL
);
CREATE TABLE invalidated (subject TEXT PRIMARY KEY);
CREATE TABLE tombstoned (subject TEXT PRIMARY KEY);
CREATE TABLE graphs (
    event_id TEXT PRIMARY KEY,
    subject TEXT NOT NULL,
    deps TEXT NOT NULL,
    invalidated INTEGER NOT NULL
);
CREATE TABLE docs (
    id INTEGER PRIMARY KEY,
    type TEXT NOT NULL,
    subject TEXT NOT NULL,
    kind TEXT NOT NULL,
    ts TEXT NOT NULL,
    ts_ms INTEGER NOT NULL,
    outcome TEXT,
    tool TEXT,
    UNIQUE (type, subject)
);
CREATE TABLE texts (id INTEGER PRIMARY KEY, parts TEXT NOT NULL, text TEXT NOT NULL);
CREATE VIRTUAL TABLE wordindex USING fts5(
    words, content='', detail=none, columnsize=0, tokenize="ascii tokenchars '_'"
);
"""


class _Rebuild(Exception):
    """The index cannot be brought up to date in place; start from scratch."""


def _words_of(text: str) -> str:
    return " ".join(words(text))


class _Index:
    """One open index connection and the incremental fold of events into it."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.tombstoned: set[str] = set()
        self.next_id = 1
        self.n_docs = 0
        self.outcomes_dirty = False
        # Set only while building from empty: keys of everything inserted so far.
        self.known: set[str] | None = None

    # -- format -------------------------------------------------------------------------

    def create(self, workspace: str) -> None:
        c = self.conn
        for statement in SCHEMA.strip().split(";\n"):
            if statement.strip():
                c.execute(statement)
        c.executemany("INSERT INTO meta(key, value) VALUES (?, ?)", [
            ("format", INDEX_FORMAT), ("workspace", workspace), ("docs", "0"),
        ])

    def valid(self, workspace: str) -> bool:
        try:
            meta = dict(self.conn.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.Error:
            return False
        return meta.get("format") == INDEX_FORMAT and meta.get("workspace") == workspace

    def load(self) -> None:
        c = self.conn
        self.tombstoned = {r[0] for r in c.execute("SELECT subject FROM tombstoned")}
        self.next_id = (c.execute("SELECT max(id) FROM docs").fetchone()[0] or 0) + 1
        self.n_docs = int(c.execute("SELECT value FROM meta WHERE key = 'docs'").fetchone()[0])
        self.outcomes_dirty = False

    def save_counts(self) -> None:
        self.conn.execute("UPDATE meta SET value = ? WHERE key = 'docs'", (str(self.n_docs),))

    # -- folding events -----------------------------------------------------------------

    def apply(self, events: list[Event]) -> None:
        tombs: set[str] = set()
        graphs: list[tuple[str, str, str, int]] = []
        invals: set[str] = set()
        entries: dict[str, Event] = {}
        observations: dict[str, dict[str, Event]] = {}
        for ev in events:
            t, subject = ev.type, ev.id
            if subject is None:
                continue
            if t == OBSERVATION:
                if ev.kind in UNINDEXED_KINDS:
                    continue  # the search log itself: a logged query must not find itself
                observations.setdefault(subject, {})[ev.event_id] = ev
            elif t == ENTRY:
                best = entries.get(subject)
                if best is None or ev.sort_key < best.sort_key:
                    entries[subject] = ev
            elif t == TOMBSTONE:
                tombs.add(subject)
                kept = tombstone_graph(ev)
                if kept is not None:
                    graphs.append((ev.event_id, subject, json.dumps(kept[0]), int(kept[1])))
            elif t == INVALIDATION:
                invals.add(subject)
        if tombs:
            new = tombs - self.tombstoned
            if new:
                # A tombstoned entry leaves the graph but for what its
                # tombstone carries (derive.py): outcomes may change.
                self.outcomes_dirty = True
            self._tombstone(new)
        if graphs:
            before = self.conn.total_changes
            self.conn.executemany("INSERT OR IGNORE INTO graphs(event_id, subject, deps, "
                                  "invalidated) VALUES (?, ?, ?, ?)", graphs)
            if self.conn.total_changes != before:
                self.outcomes_dirty = True
        if invals:
            before = self.conn.total_changes
            self.conn.executemany("INSERT OR IGNORE INTO invalidated(subject) VALUES (?)",
                                  [(s,) for s in invals])
            if self.conn.total_changes != before:
                self.outcomes_dirty = True
        inserts: list[tuple[Any, ...]] = []
        for subject, ev in entries.items():
            self._entry(subject, ev, inserts)
        for subject, by_id in observations.items():
            if subject not in self.tombstoned:
                self._observation(subject, by_id, inserts)
        if inserts:
            c = self.conn
            c.executemany("INSERT INTO docs(id, type, subject, kind, ts, ts_ms, outcome, tool) "
                          "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", [row[:8] for row in inserts])
            c.executemany("INSERT INTO texts(id, parts, text) VALUES (?, ?, ?)",
                          [(row[0], row[8], row[9]) for row in inserts])
            c.executemany("INSERT INTO wordindex(rowid, words) VALUES (?, ?)",
                          [(row[0], _words_of(row[9])) for row in inserts])
            self.n_docs += len(inserts)

    def _tombstone(self, subjects: set[str]) -> None:
        if not subjects:
            return
        c = self.conn
        c.executemany("INSERT OR IGNORE INTO tombstoned(subject) VALUES (?)",
                      [(s,) for s in subjects])
        self.tombstoned |= subjects
        for subject in subjects:
            rows = c.execute("SELECT d.id, t.text FROM docs AS d JOIN texts AS t ON t.id = d.id "
                             "WHERE d.type IN (?, ?) AND d.subject = ?",
                             (ENTRY, OBSERVATION, subject)).fetchall()
            for doc_id, text in rows:
                self._drop_words(doc_id, text)
                c.execute("DELETE FROM docs WHERE id = ?", (doc_id,))
                c.execute("DELETE FROM texts WHERE id = ?", (doc_id,))
                self.n_docs -= 1

    def _drop_words(self, doc_id: int, text: str) -> None:
        # A contentless FTS5 table forgets a row only when handed the exact
        # words it was given; they are derived from the stored text again.
        self.conn.execute(
            "INSERT INTO wordindex(wordindex, rowid, words) VALUES ('delete', ?, ?)",
            (doc_id, _words_of(text)))

    def _seen(self, key: str) -> bool:
        """False only when `key` is certainly not in the index yet (a build from
        empty remembers what it inserted, sparing a lookup per document)."""
        if self.known is None:
            return True
        if key in self.known:
            return True
        self.known.add(key)
        return False

    def _entry(self, subject: str, ev: Event, inserts: list[tuple[Any, ...]]) -> None:
        c = self.conn
        if self._seen("E" + subject):
            row = c.execute("SELECT ts, event_id FROM entries WHERE subject = ?",
                            (subject,)).fetchone()
            if row is not None and (row[0], row[1]) <= ev.sort_key:
                return  # the record already indexed sorts first and wins (see derive)
        deps = ev.data.get("dependsOn")
        deps = [d for d in deps if isinstance(d, str)] if isinstance(deps, list) else []
        c.execute("INSERT OR REPLACE INTO entries(subject, ts, event_id, deps) "
                  "VALUES (?, ?, ?, ?)", (subject, ev.ts, ev.event_id, json.dumps(deps)))
        self.outcomes_dirty = True
        if subject in self.tombstoned:
            return
        text = entry_text(ev)
        parts = json.dumps([[ev.ts, ev.event_id, ev.kind, len(text)]])
        self._put(ENTRY, subject, ev.kind, ev.ts, parts, text, LIVE, None, inserts,
                  self._doc(ENTRY, subject))

    def _doc(self, type_: str, subject: str) -> tuple[int, str, str] | None:
        """(id, parts, text) of the indexed document, if there is one."""
        if not self._seen(type_[0] + subject):
            return None
        row = self.conn.execute(
            "SELECT d.id, t.parts, t.text FROM docs AS d JOIN texts AS t ON t.id = d.id "
            "WHERE d.type = ? AND d.subject = ?", (type_, subject)).fetchone()
        return None if row is None else (row[0], row[1], row[2])

    def _observation(self, subject: str, by_id: dict[str, Event],
                     inserts: list[tuple[Any, ...]]) -> None:
        existing = self._doc(OBSERVATION, subject)
        pieces: dict[str, tuple[list[Any], str]] = {}
        if existing is not None:
            old_parts = json.loads(existing[1])
            for part, piece in zip(old_parts, split_parts(old_parts, existing[2]), strict=True):
                pieces[part[1]] = (part, piece)
        changed = False
        for event_id, ev in by_id.items():
            if event_id in pieces:
                continue
            text = observation_text(ev)
            tool = ev.data.get("tool")
            pieces[event_id] = ([ev.ts, event_id, ev.kind, len(text),
                                 tool if isinstance(tool, str) else None], text)
            changed = True
        if not changed:
            return
        ordered = sorted(pieces.values(), key=lambda item: (item[0][0], item[0][1]))
        parts = [p for p, _ in ordered]
        text = "\n".join(piece for _, piece in ordered)
        first = parts[0]
        # The call's tool: the first its events name, in sort order (order-free, as parts are).
        tool = next((p[4] for p in parts if len(p) > 4 and p[4] is not None), None)
        self._put(OBSERVATION, subject, first[2], first[0], json.dumps(parts), text, None,
                  tool, inserts, existing)

    def _put(self, type_: str, subject: str, kind: str, ts: str, parts: str, text: str,
             outcome: str | None, tool: str | None, inserts: list[tuple[Any, ...]],
             existing: tuple[int, str, str] | None) -> None:
        if existing is None:
            inserts.append((self.next_id, type_, subject, kind, ts, ts_millis(ts), outcome,
                            tool, parts, text))
            self.next_id += 1
            return
        c = self.conn
        doc_id, _, old_text = existing
        self._drop_words(doc_id, old_text)
        c.execute("UPDATE docs SET kind = ?, ts = ?, ts_ms = ?, tool = ? WHERE id = ?",
                  (kind, ts, ts_millis(ts), tool, doc_id))
        c.execute("UPDATE texts SET parts = ?, text = ? WHERE id = ?", (parts, text, doc_id))
        c.execute("INSERT INTO wordindex(rowid, words) VALUES (?, ?)", (doc_id, _words_of(text)))

    def settle_outcomes(self) -> None:
        """Recompute entry outcomes after invalidations or entries arrived."""
        if not self.outcomes_dirty:
            return
        c = self.conn
        tombstoned = self.tombstoned
        deps = {s: json.loads(d) for s, d in c.execute("SELECT subject, deps FROM entries")
                if s not in tombstoned}
        invalidated = {r[0] for r in c.execute("SELECT subject FROM invalidated")
                       if r[0] in deps}
        # Tombstoned entries count only through their tombstones' graphs, as in derive.
        for subject, graph_deps, graph_invalidated in c.execute(
                "SELECT subject, deps, invalidated FROM graphs ORDER BY event_id"):
            edges = deps.setdefault(subject, [])
            edges.extend(x for x in json.loads(graph_deps) if x not in edges)
            if graph_invalidated:
                invalidated.add(subject)
        wanted = outcomes(deps, invalidated)
        changes = [(wanted.get(s, LIVE), s) for s, current in
                   c.execute("SELECT subject, outcome FROM docs WHERE type = ?", (ENTRY,))
                   if wanted.get(s, LIVE) != current]
        c.executemany("UPDATE docs SET outcome = ? WHERE type = 'entry' AND subject = ?",
                      changes)
        self.outcomes_dirty = False

    # -- following the segments ---------------------------------------------------------

    def current(self, ws: Workspace) -> bool:
        """True when no segment changed since it was indexed: nothing to write.

        This is the whole cost of an up-to-date search: one stat and a 28-byte
        header read per segment.
        """
        stored = {row[0]: (row[1], row[2]) for row in self.conn.execute(
            "SELECT name, signature, trusted FROM segments")}
        paths = ws.segment_paths()
        if len(paths) != len(stored):
            return False
        for path in paths:
            row = stored.get(os.path.basename(path))
            sig = segment_signature(path)
            if row is None or sig is None or row[0] != sig[0] or not row[1]:
                return False
        return True

    def sync(self, ws: Workspace) -> None:
        """Fold every event the segments hold beyond what was indexed.

        Raises _Rebuild when a segment lost rows or vanished (compaction, or any
        other deletion), or became unreadable after content of it was indexed.
        """
        c = self.conn
        stored = {row[0]: row for row in c.execute(
            "SELECT name, high, rows, signature, trusted, unreadable, last_mark FROM segments")}
        paths = ws.segment_paths()
        present = {os.path.basename(p) for p in paths}
        for name, row in stored.items():
            if name not in present:
                if row[2] or row[1]:
                    raise _Rebuild(f"segment {name} vanished")
                c.execute("DELETE FROM segments WHERE name = ?", (name,))
                c.execute("DELETE FROM malformed WHERE segment = ?", (name,))
        for path in paths:
            name = os.path.basename(path)
            self._sync_segment(path, name, stored.get(name))
        self.settle_outcomes()
        self.save_counts()

    def _sync_segment(self, path: str, name: str, row: tuple[Any, ...] | None) -> None:
        c = self.conn
        taken_ns = time.time_ns()
        sig = segment_signature(path)
        signature = sig[0] if sig else None
        trusted = int(vouches(sig, taken_ns))  # (else checked again next time)
        high, rows, last = (row[1], row[2], row[6]) if row else (0, 0, None)
        if row is not None and signature is not None and row[3] == signature and row[4]:
            return  # unchanged since it was indexed
        try:
            why, _ = not_appended(path, high, rows, last, row[3] if row else None, signature)
        except sqlite3.Error as exc:
            if rows:
                raise _Rebuild(f"segment {name} became unreadable") from None
            self._record_segment(name, 0, None, 0, signature, trusted, describe(exc))
            return
        if why is not None:
            # (A change that also appends is read as an append unless it touched the
            # last indexed row or replaced the file: see the module's invariants.)
            raise _Rebuild(f"segment {name} {why}")
        unreadable = None
        batch: list[Event] = []
        bad: list[tuple[str, int, str]] = []
        for tag, seq, item, mark in iter_segment_after(path, high):
            if tag == "unreadable":
                unreadable = item
                break
            high, last = seq, mark
            rows += 1
            if tag == "event":
                batch.append(item)
                if len(batch) >= APPLY_BATCH:
                    self.apply(batch)
                    batch = []
            else:
                bad.append((name, seq, item))
        if batch:
            self.apply(batch)
        if bad:
            c.executemany("INSERT OR REPLACE INTO malformed(segment, seq, reason) "
                          "VALUES (?, ?, ?)", bad)
        self._record_segment(name, high, last, rows, signature, trusted, unreadable)

    def _record_segment(self, name: str, high: int, last: str | None, rows: int,
                        signature: str | None, trusted: int, unreadable: str | None) -> None:
        self.conn.execute(
            "INSERT OR REPLACE INTO segments(name, high, last_mark, rows, signature, trusted, "
            "unreadable) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (name, high, last, rows, signature, trusted, unreadable))

    def damage(self, ws: Workspace) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        def rel(name: str) -> str:
            return ws.rel(os.path.join(ws.segments_dir, name))

        unreadable = [{"path": rel(name), "reason": reason} for name, reason in self.conn.execute(
            "SELECT name, unreadable FROM segments WHERE unreadable IS NOT NULL ORDER BY name")]
        malformed = [{"segment": rel(name), "row": seq, "reason": reason}
                     for name, seq, reason in self.conn.execute(
                         "SELECT segment, seq, reason FROM malformed ORDER BY segment, seq")]
        return unreadable, malformed


def describe(exc: Exception) -> str:
    return f"{exc.__class__.__name__}: {exc}".splitlines()[0]


def index_path(ws: Workspace) -> str:
    return cache_path(ws.root, INDEX_AREA, ws.name)


def _build(ws: Workspace, path: str) -> None:
    """Build the whole index into a temporary file and rename it into place
    (unless a compaction moved the erasure generation since the build began)."""
    generation = erasure_generation.noted(ws)
    tmp = path + ".tmp"  # never an index name itself: those end in .sqlite
    remove_cache_files(tmp)
    conn = open_cache(tmp, bulk=True)
    try:
        index = _Index(conn)

        def work(c: sqlite3.Connection) -> None:
            index.create(ws.name)
            index.load()
            index.known = set()
            index.outcomes_dirty = True
            index.sync(ws)

        run_write(conn, work)
    except BaseException:
        conn.close()
        remove_cache_files(tmp)
        raise
    with erasure_generation.Storing(ws, generation) as unchanged:
        if unchanged:
            publish_cache(conn, tmp, path)
            return
    conn.close()
    remove_cache_files(tmp)
    raise _Rebuild("a compaction erased rows while the index was built")


def refresh(ws: Workspace) -> _Index:
    """An open index, up to date with the segments (rebuilt when in doubt)."""
    path = index_path(ws)
    lock = cache_lock_path(ws.root, INDEX_AREA, ws.name)
    last: BaseException | None = None
    try:
        with FileLock(lock):
            for _ in range(REBUILD_ATTEMPTS):
                conn = None
                generation = erasure_generation.noted(ws)
                try:
                    if not os.path.exists(path):
                        _build(ws, path)
                    conn = open_cache(path)
                    index = _Index(conn)
                    if not index.valid(ws.name):
                        raise _Rebuild("index format differs")

                    if index.current(ws):
                        return index

                    def work(c: sqlite3.Connection, index: _Index = index) -> None:
                        index.load()
                        index.sync(ws)

                    with erasure_generation.Storing(ws, generation) as unchanged:
                        if not unchanged:
                            raise _Rebuild("a compaction erased rows meanwhile")
                        run_write(conn, work)
                    return index
                except (_Rebuild, sqlite3.Error, FileNotFoundError) as exc:
                    # FileNotFoundError: a sweep of the cache (compact --apply)
                    # took the file being built; build again from what is there now.
                    last = exc
                    if conn is not None:
                        conn.close()
                    remove_cache_files(path)
    except OSError as exc:
        raise JournalError(f"cannot keep the search index at {path}: {exc.strerror}") from None
    if isinstance(last, sqlite3.Error):
        # The same failure each time (a full disk, a read-only cache folder), not a race.
        raise JournalError(f"cannot keep the search index at {path}: {describe(last)}")
    raise JournalError("the segments kept changing while the search index was rebuilt; retry")


def discard(ws: Workspace) -> None:
    """Delete the workspace's index (under the lock): the next search rebuilds it."""
    with FileLock(cache_lock_path(ws.root, INDEX_AREA, ws.name)):
        remove_cache_files(index_path(ws))
