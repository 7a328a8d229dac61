"""compact: the one operation that destroys journal content.

Invariants:
- The plan is made from a read of the whole workspace. Any unreadable segment
  or malformed row refuses the run (DamagedJournalError) before anything is
  touched: a segment that did not load may hold the tombstone that protects
  something, or the content a tombstone names.
- A dry run changes no byte; `--apply` carries out exactly the plan a dry run
  prints, and reports what it actually did.
- Segments are changed in place, one transaction each, and only when their
  highest seq is still what the read saw. A segment that grew is skipped,
  never rewritten from a stale read, so no acknowledged append is lost.
- Order between segments: a tombstone's kept graph is committed before its
  target's record or invalidations go, and a tombstone reads purged only once
  every event about its target is gone, so a run stopped anywhere (killed,
  skipped) never claims more than it did and never turns a dependent live.
- After the segments, artifact blobs that only removed events referenced and
  the workspace's cache projections are deleted.
- An intent file written before the first segment is touched (blobs, cache,
  tombstones to flip) lets the next run finish the job if this one dies
  anywhere in between; a run that completes removes it.
"""

from __future__ import annotations

import os

from agent_journal import clock, codec, store
from agent_journal.errors import DamagedJournalError
from agent_journal.model import OBSERVATION, Event
from agent_journal.plan import CompactionPlan, check_ttl, plan_compaction

TYPE_CHECKING = False  # `typing` costs ~5 ms to import; mypy reads this as True
if TYPE_CHECKING:
    from datetime import datetime
    from typing import Any

    from agent_journal.journal import Context
    from agent_journal.store import ReadResult, Workspace


class Prepared:
    """A plan together with the read it was made from."""

    def __init__(self, ws: Workspace, read: ReadResult, located: dict[str, list[str]],
                 plan: CompactionPlan) -> None:
        self.ws = ws
        self.read = read
        self.located = located
        self.plan = plan


class Outcome:
    """What `compact` returns: the report, and what the CLI must say besides it."""

    def __init__(self, report: dict[str, Any], skipped: list[str],
                 warnings: list[str]) -> None:
        self.report = report
        self.skipped = skipped
        self.warnings = warnings


def refusal(read: ReadResult) -> str:
    return (f"refusing to compact: {len(read.unreadable)} unreadable segment(s), "
            f"{len(read.malformed)} malformed row(s); nothing was changed. A compaction "
            "planned from a partial read could erase content whose tombstone status it "
            "never saw, and erased bytes cannot be brought back")


def busy_message(count: int) -> str:
    return (f"{count} segment(s) gained events while compaction ran and were left "
            "untouched; nothing was lost. Re-run when writers are idle")


def prepare(ws: Workspace, *, entry_ttl_days: int | None, observation_ttl_days: int | None,
            now: datetime | None = None) -> Prepared:
    read, located = store.read_located(ws)
    if read.damaged:
        raise DamagedJournalError(refusal(read))
    pending = store.read_compact_intent(ws) or {}
    flips = pending.get("flips")
    unfinished = {str(k): str(v) for k, v in flips.items()} if isinstance(flips, dict) else {}
    plan = plan_compaction(read.events, now or clock.now(), entry_ttl_days,
                           observation_ttl_days, unfinished)
    return Prepared(ws, read, located, plan)


def compact(ctx: Context, *, entry_ttl_days: int | None, observation_ttl_days: int | None,
            apply: bool) -> Outcome:
    check_ttl(entry_ttl_days, "--entry-ttl-days")
    check_ttl(observation_ttl_days, "--observation-ttl-days")
    ws = ctx.open(create=False)
    prepared = prepare(ws, entry_ttl_days=entry_ttl_days,
                       observation_ttl_days=observation_ttl_days)
    if not apply:
        return Outcome(prepared.plan.report(apply=False), [], [])
    return carry_out(prepared)


# -- applying ---------------------------------------------------------------------------

def _artifact_digest(ev: Event) -> str | None:
    if ev.type != OBSERVATION:
        return None
    artifact = ev.data.get("artifact")
    if not isinstance(artifact, dict):
        return None
    ref = artifact.get("ref")
    if not isinstance(ref, str) or ":" not in ref:
        return None
    return ref.partition(":")[2].lower() or None


class _Run:
    """Book-keeping for one applied plan across segments and passes."""

    def __init__(self, prepared: Prepared) -> None:
        self.p = prepared
        self.plan = prepared.plan
        self.ws = prepared.ws
        self.expected = dict(prepared.read.high_water)
        self.segments_of: dict[str, list[str]] = {}
        for seg, ids in prepared.located.items():
            for event_id in ids:
                self.segments_of.setdefault(event_id, []).append(seg)
        plan = self.plan
        self.todo: dict[str, set[str]] = {}
        for event_id in plan.deletions:
            for seg in self.segments_of.get(event_id, []):
                self.todo.setdefault(seg, set()).add(event_id)
        # (segment, tombstone event id) -> checksum currently stored
        self.tombs: dict[tuple[str, str], str] = {}
        for event_id, ev in plan.tombstone_events.items():
            if event_id not in plan.flips and not plan.needs_graph(event_id):
                continue
            digest = codec.encode(ev)[1]
            for seg in self.segments_of.get(event_id, []):
                self.tombs[(seg, event_id)] = digest
        self.graph_done: set[tuple[str, str]] = set()
        self.graph_stored: set[str] = set(plan.graph_ready)
        self.flipped: set[tuple[str, str]] = set()
        self.gone: set[tuple[str, str]] = set()
        self.skipped: set[str] = set()
        self.unclean: set[str] = set()

    def has_work(self) -> bool:
        return bool(self.todo) or bool(self.tombs)

    def _graph_pending(self, seg: str, event_id: str) -> bool:
        return self.plan.needs_graph(event_id) and (seg, event_id) not in self.graph_done

    def _flip_ready(self, event_id: str, gone: set[tuple[str, str]]) -> bool:
        return all((seg, e) in gone
                   for e in self.plan.flips[event_id] for seg in self.segments_of.get(e, []))

    def step(self, seg: str) -> bool:
        """One transaction on one segment: whatever of its work may run now."""
        if seg in self.skipped:
            return False
        plan = self.plan
        graphs_here = {str(plan.tombstone_events[t].id) for (s, t) in self.tombs
                       if s == seg and self._graph_pending(s, t)}
        deletes = sorted(
            e for e in self.todo.get(seg, ())
            if e not in plan.guards or plan.guards[e] in self.graph_stored
            or plan.guards[e] in graphs_here)
        gone_after = self.gone | {(seg, e) for e in deletes}
        rewrites: list[tuple[str, str, bytes, str]] = []
        planned: dict[str, tuple[bool, bool, str]] = {}
        for (s, t), current in self.tombs.items():
            if s != seg:
                continue
            graph = self._graph_pending(s, t)
            flip = t in plan.flips and (s, t) not in self.flipped \
                and self._flip_ready(t, gone_after)
            if not graph and not flip:
                continue
            new = plan.rewritten(t, graph=plan.needs_graph(t),
                                 flip=flip or (s, t) in self.flipped)
            body, digest = codec.encode(new)
            rewrites.append((t, current, body, digest))
            planned[t] = (graph, flip, digest)
        if not deletes and not rewrites:
            return False
        path = os.path.join(self.ws.root.path, seg)
        try:
            high, done, clean = store.apply_to_segment(path, self.expected[seg], deletes,
                                                       rewrites)
        except store.SegmentGrew:
            self.skipped.add(seg)
            return False
        self.expected[seg] = high
        if not clean:
            self.unclean.add(seg)
        self.gone = gone_after
        remaining = self.todo.get(seg, set()) - set(deletes)
        if remaining:
            self.todo[seg] = remaining
        else:
            self.todo.pop(seg, None)
        for t, (graph, flip, digest) in planned.items():
            if t not in done:
                # Someone else rewrote it meanwhile (another compaction); leave it.
                self.tombs.pop((seg, t), None)
                continue
            self.tombs[(seg, t)] = digest
            if graph:
                self.graph_done.add((seg, t))
                self.graph_stored.add(str(plan.tombstone_events[t].id))
            if flip:
                self.flipped.add((seg, t))
        for (s, t) in list(self.tombs):
            if s == seg and not self._graph_pending(s, t) \
                    and (t not in plan.flips or (s, t) in self.flipped):
                del self.tombs[(s, t)]
        return True

    def run(self) -> None:
        for _ in range(4):
            segs = sorted(set(self.todo) | {s for s, _ in self.tombs})
            # Segments that store a graph go first so the records it guards can go.
            segs.sort(key=lambda s: not any(
                ss == s and self._graph_pending(ss, t) for ss, t in self.tombs))
            progress = False
            for seg in segs:
                progress = self.step(seg) or progress
            if not progress:
                break


def carry_out(prepared: Prepared) -> Outcome:
    plan, read, ws = prepared.plan, prepared.read, prepared.ws
    run = _Run(prepared)
    pending = store.read_compact_intent(ws)
    by_id = {ev.event_id: ev for ev in read.events}
    purged_digests = {d for e in plan.deletions if (d := _artifact_digest(by_id[e]))}
    if not run.has_work() and pending is None:
        return Outcome(plan.report(apply=True, removed=set(), marked_purged=[]), [], [])
    earlier = [d for d in (pending or {}).get("digests", []) if isinstance(d, str)]
    flips = {t: str(plan.tombstone_events[t].id) for t in plan.flips}
    store.write_compact_intent(ws, {"digests": sorted(purged_digests | set(earlier)),
                                    "cache": True, "flips": flips})
    run.run()

    # Artifact blobs: only those no event still held (or newly written) references.
    still_there = {e for e in by_id
                   if any((s, e) not in run.gone for s in run.segments_of.get(e, []))}
    referenced = {d for e in still_there if (d := _artifact_digest(by_id[e]))}
    candidates = (purged_digests | set(earlier)) - referenced
    since = {seg: (0 if seg in run.skipped else high) for seg, high in run.expected.items()}
    candidates -= store.refs_in_rows_since(ws, since, candidates)
    files = store.artifact_files(ws, candidates)
    store.remove_files(sorted(p for paths in files.values() for p in paths))
    store.clear_workspace_cache(ws)
    store.drop_compact_intent(ws)

    removed = {plan.deletions[e] for (_, e) in run.gone}
    marked = sorted({t for (_, t) in run.flipped})
    skipped = sorted(run.skipped)
    warnings = [f"{seg}: its write-ahead log could not be truncated while other processes "
                "held it; old page images may remain in it until the next compaction"
                for seg in sorted(run.unclean)]
    report = plan.report(apply=True, removed=removed, marked_purged=marked, skipped=skipped)
    return Outcome(report, skipped, warnings)
