"""The read projections (cache/reads, cache/counts): a run from them is a full run.

Laws: for random journals appended to in random places between runs (tombstones
and invalidations among what arrives later), `compact`'s read and plan,
`coverage` and `decay` from the projections equal the same from a direct read
of the segments. A projection that lies (a segment rewritten under it with as
many rows, edited in place with its mtime put back, truncated; the projection
file itself damaged or cut short) is caught and rebuilt; `compact --apply`
deletes it, and leaves no tombstoned content in any file under cache/.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_journal.core import codec
from agent_journal.core.compaction_plan import observation_ages, plan_compaction
from agent_journal.core.derive import derive
from agent_journal.core.model import Event
from agent_journal.ops import context
from agent_journal.ops.compact import compact
from agent_journal.ops.coverage import coverage, coverage_derived
from agent_journal.ops.decay import decay, decay_derived
from agent_journal.storage import compaction_read, parallel, read_projection, verified_mark
from agent_journal.storage.connection import connect, run_write
from agent_journal.storage.files import create_private_file, make_private_dirs
from agent_journal.storage.root import Root
from agent_journal.storage.segment import init_segment, insert_events
from agent_journal.storage.segment_reader import structure_damage

NOW = datetime(2026, 3, 1, tzinfo=UTC)
OBS = [f"o{i}" for i in range(6)]
ENTRIES = [f"e{i}" for i in range(4)]


def _event(n: int, spec: tuple[Any, ...]) -> Event:
    kind, target, extra = spec
    ts = f"2026-0{1 + n % 2}-{1 + n % 27:02d}T00:00:{n % 60:02d}.000Z"
    if n % 9 == 4:  # another spelling of an instant: parsed, not compared as text
        ts = ts.replace(".000Z", "+00:00")
    elif n % 13 == 6:  # no such day: never old enough
        ts = "2026-02-30T00:00:00.000Z"
    base = {"event_id": f"ev{n:05d}", "ts": ts, "author": "a", "session": "s",
            "replica": "r1", "id": target}
    if kind == "observation":
        data: dict[str, Any] = {"tool": "Bash", "output": f"secret-{target}-{n}"}
        if extra:
            data["artifact"] = {"ref": f"sha256:{n:064x}", "bytes": 3}
        return Event(type="observation", kind="tool_call", data=data, **base)
    if kind == "entry":
        anchors = [f"tool_use:{OBS[extra % len(OBS)]}"] if extra % 3 else []
        deps = [ENTRIES[extra % len(ENTRIES)]] if extra % 4 == 1 and \
            ENTRIES[extra % len(ENTRIES)] != target else []
        return Event(type="entry", kind="finding", data={
            "fields": {"claim": f"secret-{target}-{n}"}, "anchors": anchors,
            "dependsOn": deps, "subject": None}, **base)
    if kind == "invalidation":
        return Event(type="invalidation", kind="invalidation",
                     data={"reason": f"secret-{target}-{n}"}, **base)
    return Event(type="tombstone", kind="tombstone",
                 data={"reason": "gone", "purged": bool(extra % 5 == 4)}, **base)


_SPECS = st.one_of(
    st.tuples(st.just("observation"), st.sampled_from(OBS),
              st.integers(0, 6).map(lambda x: x == 0)),
    st.tuples(st.just("entry"), st.sampled_from(ENTRIES), st.integers(0, 11)),
    st.tuples(st.just("invalidation"), st.sampled_from(ENTRIES), st.just(0)),
    st.tuples(st.just("tombstone"), st.sampled_from(OBS + ENTRIES), st.integers(0, 9)),
)


def _segment(root: Path, k: int) -> str:
    ws = Root.open(str(root), create=True).workspace("ws")
    make_private_dirs(ws.segments_dir)
    return os.path.join(ws.segments_dir, f"r1-{k + 1:06d}.sqlite")


def _append(root: Path, k: int, events: list[Event]) -> None:
    path = _segment(root, k)
    fresh = not os.path.exists(path)
    if fresh:
        create_private_file(path)
    conn = connect(path)
    try:
        if fresh:
            init_segment(conn, workspace="ws", replica="r1")
        run_write(conn, lambda c: insert_events(c, events))
    finally:
        conn.close()


def _ws(root: Path) -> Any:
    return Root.open(str(root), create=False).workspace("ws")


def _state(read: compaction_read.CompactionRead) -> tuple[Any, ...]:
    """The read, order within a segment aside (a plan does not depend on it)."""
    return (sorted((e.as_dict() for e in read.events), key=lambda d: d["eventId"]),
            sorted(read.malformed, key=lambda m: (m["segment"], m["row"])), read.unreadable,
            read.segments, read.high_water, {k: sorted(v) for k, v in read.located.items()},
            read.tombstone_checksums, read.tombstone_rewrites)


def _direct_coverage(root: Path) -> dict[str, Any]:
    """coverage as it was made before the projections: one direct read."""
    ws = _ws(root)
    result = ws.read(lazy=True)
    report: dict[str, Any] = coverage_derived(result.events, derive(result.events))
    unreadable = list(result.unreadable)
    seen = {u["path"] for u in unreadable}
    unreadable += [u for u in ws.structure_damage() if u["path"] not in seen]
    failed = {u["path"] for u in unreadable}
    return {"segments": list(result.segments),
            "segmentsRead": sum(1 for s in result.segments if s not in failed),
            **report, "unreadable": unreadable, "malformed": result.malformed}


def _direct_decay(root: Path) -> dict[str, Any]:
    result = _ws(root).read(lazy=True)
    return {**decay_derived(derive(result.events)), "unreadable": result.unreadable,
            "malformed": result.malformed}


TTLS = (None, 0, 10, 25)


def _plan_state(plan: Any) -> tuple[Any, ...]:
    # (What a tombstone waits for is a set: read order within a segment aside.)
    return (plan.report(apply=False), plan.deletions, plan.reasons, plan.citations, plan.held,
            {t: sorted(ids) for t, ids in plan.flips.items()}, plan.tombstone_events.keys(),
            plan.tombstone_targets)


def _plain_ids(read: compaction_read.CompactionRead) -> dict[str, set[str]]:
    """segment -> the ids of its observations holding no artifact (of a read of
    every observation)."""
    by_id = {ev.event_id: ev for ev in read.events}
    out = {}
    for seg, ids in read.located.items():
        plain = {by_id[e].id for e in ids if by_id[e].type == "observation"
                 and not by_id[e].data.get("artifact")}
        if plain:
            out[seg] = plain
    return out


def _same_plans(ws: Any, *, afresh: bool = False) -> None:
    """For each TTL, the plan from the projection's ages (and, as --apply
    takes them, the expired rows read back from the segments) is the plan
    from every event of a direct read; nothing a surviving live entry cites
    is planned for deletion. `afresh`: each from no projection."""
    direct = compaction_read.read_located(ws, every_observation=True)
    named = compaction_read.read_located(ws, every_observation=False)
    for ttl in TTLS:
        if afresh:
            read_projection.discard(ws)
        want = plan_compaction(direct.events, NOW, 30, ttl)
        ages = observation_ages(NOW, ttl)
        projected = compaction_read.read_projected(ws, ages=ages)
        assert _state(projected) == _state(named)
        plan = plan_compaction(projected.events, NOW, 30, ttl, ages=ages)
        if ages is not None:
            assert {k: set(v) for k, v in projected.plain.items() if v} == _plain_ids(direct)
            plan.delete_expired(compaction_read.read_expired(
                ws, projected, plan.expired_observations, ages.passes))
        assert _plan_state(plan) == _plan_state(want)
        d = derive(direct.events)
        cited = {a.partition(":")[2] for e, ev in d.entry_events.items()
                 if d.is_live(e) and e not in plan.reasons
                 for a in ev.data.get("anchors", []) if a.startswith("tool_use:")}
        assert not {r for r in cited if plan.reasons.get(r) == "expired"}
        assert not set(plan.pinned) & plan.reasons.keys()


def _same_as_direct(root: Path) -> None:
    ctx = context.Context(str(root), "ws")
    ws = _ws(root)
    direct = compaction_read.read_located(ws, every_observation=False)
    assert _state(compaction_read.read_projected(ws)) == _state(direct)
    _same_plans(ws)
    _same_plans(ws, afresh=True)  # segments judged whole in the same run as the plan
    assert coverage(ctx)[0] == _direct_coverage(root)
    assert decay(ctx)[0] == _direct_decay(root)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(batches=st.lists(st.tuples(st.integers(0, 2), st.lists(_SPECS, min_size=1, max_size=8)),
                        min_size=1, max_size=5),
       trusted=st.booleans())
def test_a_run_from_the_projections_is_a_full_run(tmp_path_factory, batches, trusted):
    root = tmp_path_factory.mktemp("law") / "journal"
    n = 0
    with pytest.MonkeyPatch.context() as mp:
        if trusted:  # the signature alone vouches: SAME is taken without a look
            mp.setattr(verified_mark, "RACY_NS", -10**18)
        for k, specs in batches:
            _append(root, k, [_event(n + i, spec) for i, spec in enumerate(specs)])
            n += len(specs)
            _same_as_direct(root)


def _journal(root: Path) -> None:
    _append(root, 0, [_event(0, ("observation", "o1", False)),
                      _event(1, ("entry", "e1", 1)),
                      _event(2, ("observation", "o2", False))])
    _append(root, 1, [_event(3, ("entry", "e2", 2)),
                      _event(4, ("observation", "o3", True))])


def _trusting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(verified_mark, "RACY_NS", -10**18)


def test_a_tombstone_appended_later_changes_the_next_run_at_once(tmp_path, monkeypatch):
    _trusting(monkeypatch)
    root = tmp_path / "journal"
    _journal(root)
    ctx = context.Context(str(root), "ws")
    _same_as_direct(root)
    assert [e["id"] for e in coverage(ctx)[0]["entriesWithoutAnchors"]] == []
    _append(root, 1, [_event(10, ("tombstone", "o1", 0)), _event(11, ("invalidation", "e2", 0))])
    report = decay(ctx)[0]
    assert report == _direct_decay(root)
    assert [a["reason"] for e in report["entries"] for a in e["anchors"]] == ["tombstoned"]
    assert compact(ctx, entry_ttl_days=None, observation_ttl_days=None,
                   apply=False).report["tombstoned"] == ["o1"]
    _same_as_direct(root)


def _rewrite_row(path: str, event_id: str, ev: Event) -> None:
    body, digest = codec.encode(ev)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE events SET body = ?, checksum = ?, subject = ? WHERE event_id = ?",
                     (body, digest, ev.id, event_id))
    conn.close()


def test_a_segment_rewritten_under_the_projection_is_read_again(tmp_path, monkeypatch):
    _trusting(monkeypatch)
    root = tmp_path / "journal"
    _journal(root)
    _same_as_direct(root)
    # As many rows as before, one of them another event.
    _rewrite_row(_segment(root, 0), "ev00001", Event(
        event_id="ev00001", type="entry", kind="finding", id="e1",
        ts="2026-02-02T00:00:01.000Z", author="a", session="s", replica="r1",
        data={"fields": {"claim": "rewritten"}, "anchors": ["tool_use:o9"], "dependsOn": [],
              "subject": None}))
    ctx = context.Context(str(root), "ws")
    assert [e["id"] for e in decay(ctx)[0]["entries"]] == ["e1"]
    _same_as_direct(root)


def test_a_segment_edited_in_place_with_its_mtime_put_back_is_caught(tmp_path, monkeypatch):
    _trusting(monkeypatch)
    root = tmp_path / "journal"
    _journal(root)
    _same_as_direct(root)
    path = _segment(root, 0)
    st_before = os.stat(path)
    data = bytearray(Path(path).read_bytes())
    at = data.find(b"secret-o2-2")
    assert at > 0
    data[at:at + 6] = b"SECRET"  # the same size; the body no longer matches its checksum
    Path(path).write_bytes(bytes(data))
    os.utime(path, ns=(st_before.st_atime_ns, st_before.st_mtime_ns))
    ctx = context.Context(str(root), "ws")
    assert [m["row"] for m in coverage(ctx)[0]["malformed"]] == [3]
    _same_as_direct(root)


def test_a_truncated_segment_is_read_again(tmp_path, monkeypatch):
    _trusting(monkeypatch)
    root = tmp_path / "journal"
    _journal(root)
    _same_as_direct(root)
    with sqlite3.connect(_segment(root, 1)) as conn:
        conn.execute("DELETE FROM events WHERE seq = (SELECT max(seq) FROM events)")
    conn.close()
    _same_as_direct(root)
    _append(root, 1, [_event(20, ("observation", "o5", False))])  # as many rows again
    _same_as_direct(root)


@pytest.mark.parametrize("area", ["reads", "counts"])
@pytest.mark.parametrize("how", ["content", "bytes", "truncated", "garbage"])
def test_a_damaged_projection_is_rebuilt(tmp_path, monkeypatch, area, how):
    _trusting(monkeypatch)
    root = tmp_path / "journal"
    _journal(root)
    _same_as_direct(root)
    cached = root / "cache" / area / "ws.sqlite"
    data = bytearray(cached.read_bytes())
    if how == "content":
        # A kept value changed in place: the file and its records still load;
        # only the columns' digests can tell.
        at = data.find(b"secret-e1-1")
        assert at > 0
        data[at:at + 6] = b"SECRET"
        cached.write_bytes(bytes(data))
    elif how == "bytes":
        # Flip bytes inside the kept records (not the file's header): SQLite
        # still opens the file; the columns' digests catch it.
        for at in range(len(data) - 400, len(data) - 40, 7):
            data[at] ^= 0x55
        cached.write_bytes(bytes(data))
    elif how == "truncated":
        cached.write_bytes(bytes(data[:len(data) // 2]))
    else:
        cached.write_bytes(b"not a database at all" * 100)
    _same_as_direct(root)
    _same_as_direct(root)  # and from what was rebuilt


def _scan(folder: Path, needle: bytes) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.is_file() and needle in p.read_bytes()]


def test_compaction_purges_the_projections_and_no_cache_file_keeps_erased_content(
        tmp_path, monkeypatch):
    _trusting(monkeypatch)
    root = tmp_path / "journal"
    _journal(root)
    ctx = context.Context(str(root), "ws")
    # The projections are kept by runs that may write (an apply, decay), not by the
    # reads that promise none (a dry run, coverage), which use them as they are.
    compact(ctx, entry_ttl_days=None, observation_ttl_days=None, apply=True)
    decay(ctx)
    _append(root, 1, [_event(30, ("tombstone", "o2", 0)), _event(31, ("tombstone", "e2", 0))])
    coverage(ctx)
    compact(ctx, entry_ttl_days=None, observation_ttl_days=10, apply=False)
    compact(ctx, entry_ttl_days=None, observation_ttl_days=None, apply=False)
    assert (root / "cache" / "reads" / "ws.sqlite").exists()
    assert (root / "cache" / "counts" / "ws.sqlite").exists()
    erased = [b"secret-o2-2", b"secret-e2-3"]
    # An entry's content is kept (the test can fail); of an observation's data
    # nothing but its artifact is ever kept.
    assert _scan(root / "cache", b"secret-e2-3")
    assert _scan(root / "cache", b"secret-o2-2") == []
    outcome = compact(ctx, entry_ttl_days=None, observation_ttl_days=None, apply=True)
    assert sorted(outcome.report["tombstoned"]) == ["e2", "o2"]
    assert not (root / "cache" / "reads" / "ws.sqlite").exists()
    assert not (root / "cache" / "counts" / "ws.sqlite").exists()
    # Rebuilt from the compacted segments, and still nothing erased anywhere.
    coverage(ctx)
    decay(ctx)
    compact(ctx, entry_ttl_days=None, observation_ttl_days=10, apply=False)
    for needle in erased:
        assert _scan(root / "cache", needle) == []
        assert _scan(root / "workspaces", needle) == []
    _same_as_direct(root)


def test_a_damaged_segment_is_never_kept_and_reads_as_directly(tmp_path, monkeypatch):
    _trusting(monkeypatch)
    root = tmp_path / "journal"
    _journal(root)
    Path(_segment(root, 2)).write_bytes(b"not a database" * 300)
    assert structure_damage(_segment(root, 2)) is not None
    ctx = context.Context(str(root), "ws")
    for _ in range(2):
        report = coverage(ctx)[0]
        assert report == _direct_coverage(root)
        assert [u["path"] for u in report["unreadable"]] == [
            "workspaces/ws/segments/r1-000003.sqlite"]
        assert decay(ctx)[0] == _direct_decay(root)


def test_without_the_projection_the_read_is_the_same(tmp_path, monkeypatch):
    _trusting(monkeypatch)
    root = tmp_path / "journal"
    _journal(root)
    _same_as_direct(root)
    shutil.rmtree(root / "cache")
    _same_as_direct(root)


def test_a_counts_projection_of_another_layout_is_thrown_away(tmp_path, monkeypatch):
    from agent_journal.storage import projection

    _trusting(monkeypatch)
    root = tmp_path / "journal"
    _journal(root)
    _same_as_direct(root)
    with sqlite3.connect(root / "cache" / "counts" / "ws.sqlite") as conn:
        assert conn.execute("UPDATE meta SET value = 'counted/2' WHERE key = 'layout'"
                            ).rowcount == 1
    conn.close()
    counted: list[str] = []
    real = projection.fold_segment
    monkeypatch.setattr(projection, "fold_segment",
                        lambda path, rel, *a: counted.append(rel) or real(path, rel, *a))
    _same_as_direct(root)
    # every segment counted again, none trusted from the old file (by coverage, which
    # keeps nothing, and by decay, which keeps what it counted)
    assert sorted(set(counted)) == sorted(counted[:2]) and len(set(counted)) == 2
    counted.clear()
    _same_as_direct(root)
    assert counted == []


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_projection_built_by_worker_processes_is_the_same(tmp_path, monkeypatch, workers):
    """Segments read whole by worker processes arrive split where they were
    read (plain observations as their ages): the same read, plans and
    projection as one process makes."""
    _trusting(monkeypatch)
    root = tmp_path / "journal"
    _journal(root)
    _append(root, 2, [_event(40 + i, spec) for i, spec in enumerate([
        ("observation", "o4", False), ("observation", "o1", False), ("tombstone", "o4", 0),
        ("entry", "e3", 1), ("observation", "o5", True)])])
    monkeypatch.setenv("AGENT_JOURNAL_COMPACT_WORKERS", workers)
    with pytest.MonkeyPatch.context() as mp:
        # This process claims no segment: the workers read every one.
        mp.setattr(parallel.Pool, "claims", lambda self: iter(()))
        _same_plans(_ws(root), afresh=True)
        _same_as_direct(root)
    monkeypatch.delenv("AGENT_JOURNAL_COMPACT_WORKERS")
    _same_as_direct(root)  # and from what they stored


def test_apply_reads_what_it_expires_back_from_the_segment_and_refuses_a_lie(
        tmp_path, monkeypatch):
    """--apply deletes an expired observation only once its rows, read from
    the segment, are what the ages it planned from said: a projection that
    vouches for a segment rewritten under it (here the check is forced to
    say SAME) refuses the run, changes nothing, and is dropped."""
    from agent_journal.core.errors import IntegrityError
    from agent_journal.storage import read_projection as rp

    monkeypatch.setenv("AGENT_JOURNAL_NOW", "2026-03-01T00:00:00Z")
    root = tmp_path / "journal"
    _journal(root)
    _append(root, 0, [_event(5, ("observation", "o4", False))])
    ctx = context.Context(str(root), "ws")
    # An apply that expires nothing keeps the projection (with the ages); the dry run
    # plans from it.
    compact(ctx, entry_ttl_days=None, observation_ttl_days=100_000, apply=True)
    dry = compact(ctx, entry_ttl_days=None, observation_ttl_days=10, apply=False).report
    assert dry["expired"] == ["o3", "o4"] and dry["pinned"] == ["o1", "o2"]
    old = _event(5, ("observation", "o4", False))
    newer = Event(event_id=old.event_id, type=old.type, kind=old.kind, id=old.id,
                  ts="2026-02-28T00:00:00.000Z", author=old.author, session=old.session,
                  replica=old.replica, data=old.data)
    _rewrite_row(_segment(root, 0), old.event_id, newer)
    with sqlite3.connect(_segment(root, 0)) as conn:
        conn.execute("UPDATE events SET ts = ? WHERE event_id = ?", (newer.ts, old.event_id))
    conn.close()
    monkeypatch.setattr(verified_mark, "check", lambda path, mark, fetch: verified_mark.SAME)
    before = Path(_segment(root, 0)).read_bytes()
    with pytest.raises(IntegrityError, match="no longer holds what it was read to hold"):
        compact(ctx, entry_ttl_days=None, observation_ttl_days=10, apply=True)
    assert Path(_segment(root, 0)).read_bytes() == before
    assert not os.path.exists(rp.path_of(_ws(root)))
    # Read again from the segments: o4 is recent now, and only o3 goes.
    outcome = compact(ctx, entry_ttl_days=None, observation_ttl_days=10, apply=True)
    assert outcome.report["expired"] == ["o3"]
    _same_as_direct(root)
