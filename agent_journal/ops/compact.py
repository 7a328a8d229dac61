"""compact: the one operation that destroys journal content.

Invariants:
- The plan is made from a read of the whole workspace. Any unreadable segment
  or malformed row refuses the run (DamagedJournalError) before anything is
  touched: a segment that did not load may hold the tombstone that protects
  something, or the content a tombstone names.
- A dry run changes no byte of the journal (it may bring the read projection
  under cache/ up to date, storage/read_projection.py); `--apply` carries out
  exactly the plan a dry run prints, and reports what it actually did.
- The read comes from the read projection where its marks hold, and is the
  read a direct one gives (compaction_read.read_projected).
- A segment losing rows is replaced whole by a copy of the rows that stay
  (storage/segment_copy.py; a live segment's appends meanwhile go into the
  copy), or, where a copy cannot safely replace it, changed in place in
  short transactions (an item's events in one, a segment's tombstone
  rewrites after its deletes); each change only when the
  segment's highest seq is still what the read (or the previous transaction)
  saw, or every row appended since is one the plan does not depend on
  (`CompactionPlan.unaffected_by`, checked under the segment's write lock).
  Any other growth skips the rest of the segment; rows are deleted by event
  id, so no acknowledged append is ever lost.
- Order between segments: a tombstone reads purged only once every event
  about its target is gone, so a run stopped anywhere (killed, skipped) never
  claims more than it did. (A dependent never turns live: a tombstoned entry
  counts in derivation only through the graph its tombstone carries.) The
  transactions of one pass are prepared from what earlier passes committed,
  so they may run at once (on threads).
- After the segments, artifact blobs that only removed events referenced and
  the workspace's cache projections are deleted (and those of workspaces whose
  folder is gone: a rename by hand), and so are killed merges' temporary
  imports when no merge is running. The digest's cache only loses the rows of
  the segments this run (or a killed one) may have changed, and is written
  afresh from the rest. A blob is deleted only while
  locked against writers about to cite it, after a last look at every row
  appended since the read (storage/artifacts.py `erase_blobs`).
- One applied compaction per workspace at a time (a flock on the workspace
  folder); a second waits a few seconds, then refuses, changing nothing.
- An intent file written before the first segment is touched (blobs, cache,
  tombstones to flip, the segments it may change) lets the next run finish the
  job if this one dies anywhere in between; a run that completes removes it.
  The copies of segments a killed run left are deleted first.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from agent_journal.core import clock, codec
from agent_journal.core.compaction_plan import (
    CompactionPlan,
    check_ttl,
    observation_ages,
    plan_compaction,
)
from agent_journal.core.errors import CompactionRunningError, DamagedJournalError
from agent_journal.core.model import OBSERVATION, Event
from agent_journal.ops.context import Context, damage_summary
from agent_journal.storage import compaction_read, spool
from agent_journal.storage.artifacts import artifact_files, erase_blobs, uncited_blobs
from agent_journal.storage.compaction_read import CompactionRead, refs_in_rows_since
from agent_journal.storage.erasure import (
    APPLY_THREADS,
    CompactIntent,
    apply_to_segment,
    clear_orphan_caches,
    clear_workspace_cache,
    drop_compact_intent,
    read_compact_intent,
    rebuild_marked,
    write_compact_intent,
)
from agent_journal.storage.locks import compaction_lock, remove_import_leftovers
from agent_journal.storage.segment_copy import remove_leftovers
from agent_journal.storage.segment_edit import Applied, SegmentGrew, TombstoneRewrite
from agent_journal.storage.segment_reader import PausedGC, ReadResult
from agent_journal.storage.workspace import Workspace


@dataclass
class Prepared:
    """A plan together with the read it was made from."""

    ws: Workspace
    read: CompactionRead
    plan: CompactionPlan


@dataclass
class Outcome:
    """What `compact` returns: the report, and what the CLI must say besides it."""

    report: dict[str, Any]  # the JSON report (spec/cli-json.md)
    skipped: list[str]  # segments left alone because they grew
    warnings: list[str]


def refusal(read: ReadResult) -> str:
    return (f"refusing to compact: {damage_summary(read.unreadable, read.malformed)}; "
            "nothing was changed. A compaction "
            "planned from a partial read could erase content whose tombstone status it "
            "never saw, and erased bytes cannot be brought back")


def busy_message(count: int) -> str:
    return (f"{count} segment(s) gained events while compaction ran that could change "
            "its plan (a tombstone, an invalidation, an entry citing or depending on what "
            "it removes, a row that does not decode) and were left untouched; nothing was "
            "lost. Re-run compact --apply to finish them")


def prepare(ws: Workspace, *, entry_ttl_days: int | None, observation_ttl_days: int | None,
            now: datetime | None = None, dry_run: bool = False) -> Prepared:
    # Without an observation TTL a plan looks only at observations that a
    # tombstone names (and the run at those holding an artifact); with one,
    # at the ages of the rest, folded segment by segment as they are read.
    now = now or clock.now()
    ages = observation_ages(now, observation_ttl_days)
    # A dry run writes nothing under the root: it reads the projection a run kept, and
    # keeps none itself.
    read = compaction_read.read_projected(ws, ages=ages, keep=not dry_run)
    if read.damaged:
        raise DamagedJournalError(refusal(read))
    pending = read_compact_intent(ws)
    plan = plan_compaction(read.events, now, entry_ttl_days, observation_ttl_days,
                           pending.flips if pending is not None else {}, ages=ages)
    if not dry_run and ages is not None and read.plain:
        # What is deleted is read from the segments themselves first, and
        # must agree with the ages the plan was made from. (A dry run
        # deletes nothing, and lists ids only.)
        plan.delete_expired(compaction_read.read_expired(
            ws, read, plan.expired_observations, ages.passes))
    return Prepared(ws, read, plan)


def compact(ctx: Context, *, entry_ttl_days: int | None, observation_ttl_days: int | None,
            apply: bool) -> Outcome:
    check_ttl(entry_ttl_days, "--entry-ttl-days")
    check_ttl(observation_ttl_days, "--observation-ttl-days")
    ws = ctx.open(create=False)
    # A plan is made from every event of the workspace, none of which forms a
    # cycle: the cyclic collector's passes over them cost as much as the read.
    with PausedGC():
        if not apply:
            prepared = prepare(ws, entry_ttl_days=entry_ttl_days,
                               observation_ttl_days=observation_ttl_days, dry_run=True)
            return Outcome(prepared.plan.report(apply=False), [], [])
        from contextlib import ExitStack

        with ExitStack() as held:
            try:
                held.enter_context(compaction_lock(ws))
            except BlockingIOError:
                raise CompactionRunningError(
                    "another compact --apply or an import is running on this workspace; "
                    "nothing was changed. Re-run when it has finished") from None
            # Events a hook spooled are journaled first (those a tombstone names are
            # dropped), so no spool file outlives the erasure of what it holds.
            spool.drain(ws)
            return carry_out(prepare(ws, entry_ttl_days=entry_ttl_days,
                                     observation_ttl_days=observation_ttl_days),
                             release_read=True)


# -- applying ---------------------------------------------------------------------------

def _artifact_digest(ev: Event) -> str | None:
    if ev.type != OBSERVATION or not ev.data:
        return None
    artifact = ev.data.get("artifact")
    if not isinstance(artifact, dict):
        return None
    ref = artifact.get("ref")
    if not isinstance(ref, str) or ":" not in ref:
        return None
    return ref.partition(":")[2].lower() or None


@dataclass
class _Job:
    """One segment's work in a pass: rows to delete, tombstones to rewrite."""

    seg: str
    deletes: list[str]
    rewrites: list[TombstoneRewrite] = field(default_factory=list)
    planned: dict[str, str] = field(default_factory=dict)  # tombstone event id -> new checksum


class _Run:
    """Book-keeping for one applied plan across segments and passes."""

    def __init__(self, prepared: Prepared) -> None:
        self.plan = plan = prepared.plan
        self.ws = prepared.ws
        self.expected = dict(prepared.read.high_water)
        self._locate(prepared.read)
        # segment -> tombstone event id -> checksum currently stored, for the
        # tombstones the run flips there
        self.tombs: dict[str, dict[str, str]] = {}
        flips = plan.flips
        for seg, stored in prepared.read.tombstone_checksums.items():
            here = {t: digest for t, digest in stored.items() if t in flips}  # in read order
            if here:
                self.tombs[seg] = here
        self.rewrites = prepared.read.tombstone_rewrites
        # segment -> event ids whose rows there are deleted / rewritten
        self.gone: dict[str, set[str]] = {}
        self.flipped: dict[str, set[str]] = {}
        self.skipped: set[str] = set()
        self.unclean: set[str] = set()
        self.meanwhile: Callable[[], None] | None = None

    def _locate(self, read: CompactionRead) -> None:
        """Where each wanted event is stored: one segment (nearly always), or
        several (the same event imported twice), and each segment's deletions.
        Set operations keep this off the per-event Python path: a large run
        wants every tenth event."""
        plan = self.plan
        wanted = plan.deletions.keys() | plan.tombstone_events.keys()
        self.segment_of: dict[str, str] = {}
        self.also_in: dict[str, list[str]] = {}
        self.todo: dict[str, set[str]] = {}
        for seg, ids in read.located.items():
            hits = wanted.intersection(ids)
            if not hits:
                continue
            # (A dict's key view meets a set from the smaller side; a set's
            # intersection with a dict would walk the whole dict.)
            for event_id in self.segment_of.keys() & hits:
                self.also_in.setdefault(event_id, [self.segment_of[event_id]]).append(seg)
            self.segment_of.update(dict.fromkeys(hits, seg))
            doomed = plan.deletions.keys() & hits
            if doomed:
                self.todo[seg] = doomed

    def segments_of(self, event_id: str) -> Iterable[str]:
        more = self.also_in.get(event_id)
        if more is not None:
            return more
        seg = self.segment_of.get(event_id)
        return () if seg is None else (seg,)

    def is_gone(self, seg: str, event_id: str) -> bool:
        return event_id in self.gone.get(seg, ())

    def has_work(self) -> bool:
        return bool(self.todo) or bool(self.tombs)

    def _flip_ready(self, event_id: str, seg_now: str, deleting: set[str]) -> bool:
        """Every row of the events the tombstone waits for is gone, or goes in
        the transaction now being made on `seg_now` (deleting those ids)."""
        gone = self.gone
        for e in self.plan.flips[event_id]:
            for seg in self.segments_of(e):
                if e not in gone.get(seg, ()) and (seg != seg_now or e not in deleting):
                    return False
        return True

    def prepare(self, seg: str) -> _Job | None:
        """Whatever of a segment's work may run now, as one job."""
        if seg in self.skipped:
            return None
        plan = self.plan
        deleting = self.todo.get(seg, set())
        # An item's events side by side: the segment's work is cut into short
        # transactions, never between two events of one item.
        item = plan.deletions.__getitem__
        job = _Job(seg, sorted(deleting, key=lambda e: (item(e), e)))
        flipped = self.flipped.get(seg, ())
        rewrites = self.rewrites.get(seg, {})
        flips, also_in = plan.flips, self.also_in
        append, planned = job.rewrites.append, job.planned
        for t, current in self.tombs.get(seg, {}).items():
            if t in flipped:
                continue
            # Nearly always a tombstone waits for one event, stored only in
            # this segment: it is ready when this job deletes it.
            waits = flips[t]
            if not (len(waits) == 1 and waits[0] in deleting and waits[0] not in also_in) \
                    and not self._flip_ready(t, seg, deleting):
                continue
            # The read made the rewrite of the row it read (unless the row
            # was already purged: then it is encoded here).
            body, digest = rewrites.get(t) or codec.encode(plan.rewritten(t))
            append(TombstoneRewrite(t, current, body, digest))
            planned[t] = digest
        if not job.deletes and not job.rewrites:
            return None
        return job

    def finish(self, job: _Job, outcome: Applied | SegmentGrew) -> None:
        """Book what a job's transactions did (SegmentGrew: the segment grew
        after the deletions it lists had committed, and is left alone now)."""
        seg = job.seg
        if isinstance(outcome, SegmentGrew):
            self.skipped.add(seg)
            if outcome.deleted:
                self.gone.setdefault(seg, set()).update(outcome.deleted)
                if not outcome.clean:
                    self.unclean.add(seg)
            return
        high, done, clean = outcome
        self.expected[seg] = high
        if not clean:
            self.unclean.add(seg)
        self.gone.setdefault(seg, set()).update(job.deletes)
        self.todo.pop(seg, None)
        tombs = self.tombs.get(seg, {})
        flipped = self.flipped.setdefault(seg, set())
        for t in job.planned:
            # One not done was rewritten meanwhile by someone else (another
            # compaction): it is left alone too.
            del tombs[t]
            if t in done:
                flipped.add(t)
        if not tombs:
            self.tombs.pop(seg, None)

    def _apply(self, job: _Job) -> Applied | SegmentGrew:
        path = os.path.join(self.ws.root.path, job.seg)
        try:
            return apply_to_segment(path, self.expected[job.seg], job.deletes,
                                    job.rewrites, tolerate=self.plan.unaffected_by,
                                    together=self.plan.deletions.__getitem__)
        except SegmentGrew as grew:
            return grew

    def run(self) -> None:
        """Passes over the segments with work. Within a pass each segment is one
        job (see `apply_to_segment`), prepared from what earlier passes
        finished, so a pass's jobs are independent and run on a few threads
        (SQLite works without the GIL). A tombstone whose targets sit in
        another segment flips in the pass after their deletion commits."""
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=APPLY_THREADS) as pool:
            for _ in range(4):
                # Each job starts as soon as it is prepared: its statements
                # run inside SQLite while this thread prepares the next.
                running = [(job, pool.submit(self._apply, job))
                           for seg in sorted(set(self.todo) | set(self.tombs))
                           if (job := self.prepare(seg)) is not None]
                if self.meanwhile is not None:
                    self.meanwhile()  # while the transactions run
                    self.meanwhile = None
                for job, future in running:
                    self.finish(job, future.result())
                if not running:
                    break

    def removed(self) -> set[str]:
        """The ids of which at least one event was deleted."""
        deletions = self.plan.deletions
        # With no segment skipped every planned deletion was made.
        if not self.skipped:
            return set(deletions.values())
        return {deletions[e] for ids in self.gone.values() for e in ids}


@dataclass
class _Blobs:
    """The artifact blobs a run accounts for, by digest."""

    cited: dict[str, str]  # event id -> the blob its observation cites (of the events read)
    purged: set[str]  # those the removed events cite
    uncited: set[str]  # files no event read cites (a writer killed before its event)
    earlier: set[str]  # those a killed run's intent names

    @classmethod
    def of(cls, ws: Workspace, read: CompactionRead, plan: CompactionPlan,
           pending: CompactIntent | None) -> _Blobs:
        # Most events have no artifact: the cheap tests come first (an
        # observation's data here is its artifact or nothing).
        cited = {ev.event_id: d for ev in read.events
                 if ev.type == OBSERVATION and ev.data and (d := _artifact_digest(ev))}
        # Blobs no event in the read cites: a writer killed between its blob and its
        # event left them (those of writers still at work are too new to be listed).
        # (A spooled event's blob is cited: its event is on its way into the journal.)
        uncited = uncited_blobs(ws, set(cited.values()) | spool.cited_digests(ws))
        return cls(cited, {d for e, d in cited.items() if e in plan.deletions}, uncited,
                   set(pending.digests) if pending is not None else set())

    @property
    def candidates(self) -> set[str]:
        return self.purged | self.earlier | self.uncited


def _changed_by(pending: CompactIntent | None, run: _Run) -> set[str] | None:
    """The segments this run may change, and those a killed run named: only their
    rows leave the digest's cache. None when an intent names none (torn, or from an
    older version): it could have changed any, and the whole cache goes."""
    if pending is None:
        return set(run.todo) | set(run.tombs)
    if pending.segments is None:
        return None
    return set(pending.segments) | set(run.todo) | set(run.tombs)


def carry_out(prepared: Prepared, *, release_read: bool = False) -> Outcome:
    """Apply the plan. `release_read`: the caller is done with the read's
    events, which are then freed while the first pass's transactions run
    (a million events take a third of a second to free)."""
    plan, read, ws = prepared.plan, prepared.read, prepared.ws
    remove_leftovers(ws)  # the copies of segments a killed run was making
    run = _Run(prepared)
    read_high_water = dict(read.high_water)
    pending = read_compact_intent(ws)
    blobs = _Blobs.of(ws, read, plan, pending)
    if release_read:
        def release() -> None:
            read.events.clear()
            read.located.clear()

        run.meanwhile = release
    if not run.has_work() and pending is None and not blobs.uncited:
        # A file a pull published as fetched carries the rebuild mark too, with no
        # row to delete: it is rebuilt whatever else this run has to do.
        rebuild_marked(ws)
        return Outcome(plan.report(apply=True, removed=set(), marked_purged=[]), [], [])
    changed = _changed_by(pending, run)
    write_compact_intent(ws, CompactIntent(
        sorted(blobs.candidates), {t: str(plan.tombstone_events[t].id) for t in plan.flips},
        None if changed is None else sorted(changed)))
    run.run()
    # Every segment rows were deleted from in place (by this run or a killed one)
    # is rebuilt, so no page keeps a stale copy of a row (erasure.rebuild_marked).
    unrebuilt = rebuild_marked(ws)
    busy = _erase_blobs(ws, run, blobs, read_high_water)
    _sweep(ws, changed)
    if busy or unrebuilt:
        # Blobs writers kept locked: the intent keeps them for the next run,
        # which deletes them unless an event by then cites them (and which
        # rebuilds the segments still marked).
        write_compact_intent(ws, CompactIntent(sorted(set(busy.values())), {}, []))
    else:
        drop_compact_intent(ws)
    return _outcome(run, unrebuilt, len(busy))


def _erase_blobs(ws: Workspace, run: _Run, blobs: _Blobs, since: dict[str, int]
                 ) -> dict[str, str]:
    """Delete the blobs no event still holding (or newly written) references;
    returns the files writers kept locked, and their digests."""
    referenced = {d for e, d in blobs.cited.items()
                  if e not in run.plan.deletions
                  or any(not run.is_gone(s, e) for s in run.segments_of(e))}
    candidates = blobs.candidates - referenced
    # Rows appended since the read may cite a candidate (a new capture of the
    # same bytes): looked for once here, and once more with each blob locked
    # against writers that have not committed yet (erase_blobs).
    candidates -= refs_in_rows_since(ws, since, candidates)
    files = {path: digest for digest, paths in artifact_files(ws, candidates).items()
             for path in paths}
    _removed, busy = erase_blobs(files, lambda: refs_in_rows_since(ws, since, candidates))
    return {p: files[p] for p in busy}


def _sweep(ws: Workspace, changed: set[str] | None) -> None:
    """Delete every other file that may hold what the run removed."""
    clear_workspace_cache(ws, changed)
    # A workspace renamed by hand leaves its old name's projections, full of its content.
    clear_orphan_caches(ws.root.path)
    # So does a merge killed mid-import, beside the segments (unless one is running now),
    # and a push, pull or `remote status` killed with its stage under the workspace.
    remove_import_leftovers(ws)
    from agent_journal.ops.sync import remove_dead_stages

    remove_dead_stages(ws)


def _outcome(run: _Run, unrebuilt: list[str], busy: int) -> Outcome:
    """The report of what the run actually did, and what to warn about."""
    marked = sorted(set().union(*run.flipped.values()))
    skipped = sorted(run.skipped)
    warnings = [f"{seg}: its write-ahead log could not be truncated while other processes "
                "held it; old page images may remain in it until the next compaction"
                for seg in sorted(run.unclean)]
    warnings += [f"{seg}: other processes kept it busy, so it was not rebuilt; stale page "
                 "copies of rows may remain in it until the next compact --apply"
                 for seg in unrebuilt]
    if busy:
        warnings.append(f"{busy} artifact blob(s) stayed in use by writers and were "
                        "left for the next compact --apply, which deletes them unless an "
                        "event cites them by then")
    report = run.plan.report(apply=True, removed=run.removed(), marked_purged=marked,
                             skipped=skipped)
    return Outcome(report, skipped, warnings)
