"""The plan of one source segment's rows (core/merge_rows.py), pure: laws over random rows.

Every row is placed once (copied as stored, or skipped, rebuilt ones inserted
instead); what is written is what the planner imports and never a tombstoned
subject's bytes, an id held here, or a malformed row; the counts do not depend
on the order of the rows; a sealed export's rows, decided from their columns
or by sets, are decided as a root's rows are.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_journal.core import codec
from agent_journal.core import merge_plan as mp
from agent_journal.core import merge_rows as mr
from agent_journal.core.errors import DamagedJournalError
from agent_journal.core.model import Event

TYPES = ["entry", "observation", "invalidation", "tombstone", "hologram"]
SUBJECTS = ["a", "b", "c"]
ART = {"ref": "sha256:" + "ab" * 32, "bytes": 3, "checksum": "xxh3-64:00ff"}


def _event(n: int, type_: str, subject: str, purged: bool, artifact: bool) -> Event:
    data = {"entry": {"fields": {"text": "t"}, "anchors": [], "dependsOn": [],
                      "subject": None},
            "observation": {"tool": "Bash", "status": "ok",
                            **({"artifact": dict(ART)} if artifact else {})},
            "invalidation": {"reason": "wrong"},
            "tombstone": {"reason": "leak", "purged": purged}}.get(type_, {"x": 1})
    return Event(event_id=f"00000000-0000-4000-8000-{n:012d}", type=type_, kind=type_,
                 id=subject,
                 ts="2026-01-01T00:00:00.000Z", author="human", session=None,
                 replica="r1", data=data)


# One row: its event, and how it is stored: as written, with a text body, with lookup
# columns that disagree with its bytes, or malformed (a checksum that does not match).
STORED = ["plain", "plain", "plain", "text", "columns", "malformed"]
rows_strategy = st.lists(
    st.tuples(st.integers(0, 30), st.sampled_from(TYPES), st.sampled_from(SUBJECTS),
              st.booleans(), st.booleans(), st.sampled_from(STORED)),
    max_size=14, unique_by=lambda t: t[0])


def _rows(specs, *, sealed: bool = False) -> tuple[list[tuple], dict[int, Event]]:
    """Rows as ImportSource.rows gives them: (seq, event_id, type, subject, ts,
    checksum, body); for a sealed source, bodies of tombstone rows only."""
    rows, events = [], {}
    for seq, (n, type_, subject, purged, artifact, stored) in enumerate(specs, 1):
        ev = _event(n, type_, subject, purged, artifact)
        events[seq] = ev
        body, digest = codec.encode(ev)
        col_type, col_subject = ev.type, ev.id
        if stored == "text":
            body = body.decode()
        elif stored == "columns":
            col_type, col_subject = ("entry", "zz") if ev.type != "entry" else ("hologram", "a")
        elif stored == "malformed":
            digest = "xxh3-64:0000000000000000"
        if sealed and col_type != "tombstone":
            body = None
        rows.append((seq, ev.event_id, col_type, col_subject, ev.ts, digest, body))
    return rows, events


def _segment(rows, *, sealed: bool = False, sealed_bad=None, allow_damaged: bool = False):
    return mr.SourceSegment("r9-000001.sqlite", "src/r9-000001.sqlite", sealed,
                            sealed_bad or {}, ("r9", "r9-000001.sqlite"), {}, set(),
                            allow_damaged)


def _plan(rows, seg, local=frozenset(), tombstoned=frozenset(), removed=frozenset()):
    planner = mp.Planner(set(local), set(tombstoned), set(removed))
    slots = mp.SlotIndex("rme", planner.tombstoned)
    wanted: mr.Wanted = {}
    plan = mr.plan_segment(rows, seg, planner, slots, wanted)
    return plan, planner, wanted


def _prescan(rows, events) -> set[str]:
    """The tombstoned ids a merge knows before the rows (its pass 1)."""
    return {events[r[0]].id for r in rows if events[r[0]].type == "tombstone"
            and r[2] == "tombstone"}


@settings(max_examples=200)
@given(rows_strategy, st.sets(st.integers(0, 30)), st.sets(st.sampled_from(["a", "b"])))
def test_every_row_is_placed_once_and_only_what_is_taken_is_written(specs, held, known):
    rows, events = _rows(specs)
    local = {f"00000000-0000-4000-8000-{n:012d}" for n in held}
    tombstoned = _prescan(rows, events) | known
    plan, planner, _ = _plan(rows, _segment(rows), local, tombstoned)
    ids = [r[1] for r in rows]
    assert sorted(plan.copied + plan.skip) == sorted(ids)
    assert not set(plan.copied) & set(plan.skip)
    rebuilt = {r.event_id for r in plan.rebuilt}
    assert rebuilt <= set(plan.skip)
    assert planner.imported == len(plan.copied) + len(plan.rebuilt)
    written = set(plan.copied) | rebuilt
    bad = {r[1] for r in rows if specs[r[0] - 1][5] == "malformed"}
    assert {m["row"] for m in plan.malformed} == {r[0] for r in rows if r[1] in bad}
    by_id = {ev.event_id: ev for ev in events.values()}
    for event_id in written:
        ev = by_id[event_id]
        assert event_id not in local and event_id not in bad
        # (A tombstone the pre-scan missed, its type column lying, is met late:
        # the merge then drops what it wrote about its target, writer.drop.)
        assert not mp.withheld(ev.type, ev.id, tombstoned)
    for row in plan.rebuilt:  # stored as this replica would write it
        again = codec.decode(row.body, row.checksum)
        assert (again.event_id, again.type, again.id, again.ts) == row[:4]
        assert again.type != "tombstone" or again.data["purged"] is False
    assert plan.tombstones == {by_id[e].id for e in written if by_id[e].type == "tombstone"}


@settings(max_examples=200)
@given(rows_strategy, st.sets(st.integers(0, 30)), st.randoms(use_true_random=False))
def test_the_counts_do_not_depend_on_the_order_of_the_rows(specs, held, rnd):
    rows, events = _rows(specs)
    local = {f"00000000-0000-4000-8000-{n:012d}" for n in held}
    # Every tombstone known before the first row (Planner's condition for order-freedom).
    tombstoned = {events[r[0]].id for r in rows if events[r[0]].type == "tombstone"
                  and specs[r[0] - 1][5] != "malformed"}
    shuffled = list(rows)
    rnd.shuffle(shuffled)
    runs = []
    for order in (rows, shuffled):
        plan, planner, wanted = _plan(order, _segment(order), local, tombstoned)
        runs.append((planner.report(), sorted(plan.copied), sorted(plan.rebuilt),
                     sorted(plan.malformed, key=lambda m: m["row"]), wanted))
    assert runs[0] == runs[1]


@settings(max_examples=200)
@given(rows_strategy, st.sets(st.integers(0, 30)))
def test_a_sealed_segment_is_decided_as_its_root_rows_are(specs, held):
    """An export's rows (checked by the exporter: well-formed, columns agreeing
    with bytes) decided from their columns, and by sets, as a root's rows are."""
    specs = [s[:5] + ("plain",) for s in specs]
    rows, events = _rows(specs)
    sealed_rows, _ = _rows(specs, sealed=True)
    local = {f"00000000-0000-4000-8000-{n:012d}" for n in held}
    tombstoned = _prescan(rows, events)
    root, root_planner, _ = _plan(rows, _segment(rows), local, tombstoned)
    sealed, sealed_planner, _ = _plan(sealed_rows, _segment(sealed_rows, sealed=True),
                                      local, tombstoned)
    assert (sealed.copied, sealed.skip, sealed.rebuilt, sealed.tombstones) == \
        (root.copied, root.skip, root.rebuilt, root.tombstones)
    assert sealed_planner.report() == root_planner.report()
    # By sets: the tombstones verified, the rows about tombstoned ids found by subject.
    planner = mp.Planner(set(local), set(tombstoned))
    tombstones = mr.verified_tombstones([r for r in sealed_rows if r[2] == "tombstone"])
    assert tombstones is not None
    planner.tombstoned.update(obj["id"] for *_, obj in tombstones)
    about = {(r[0], r[1], r[2], r[3]) for r in rows if r[3] in planner.tombstoned}
    bulk = mr.plan_sealed(tombstones, about, frozenset(r[1] for r in rows), planner,
                          ("r9", "r9-000001.sqlite"), dict)
    assert sorted(r[1] for r in rows if r[1] not in bulk.decisions) == sorted(root.copied)
    assert bulk.rebuilt == root.rebuilt and bulk.tombstones == root.tombstones
    assert planner.report() == root_planner.report()
    assert bulk.origins == [mr.Origin(r.event_id, "r9", "r9-000001.sqlite", seq)
                            for r in root.rebuilt for seq, e, *_ in rows if e == r.event_id]


def test_a_malformed_row_that_could_be_a_tombstone_refuses_an_allowed_damaged_merge():
    rows, _ = _rows([(1, "tombstone", "a", False, False, "malformed"),
                     (2, "entry", "b", False, False, "malformed")])
    plan, _, _ = _plan(rows[1:], _segment(rows, allow_damaged=True))
    assert [m["row"] for m in plan.malformed] == [2]  # an entry's bytes: skipped, reported
    with pytest.raises(DamagedJournalError, match="could be a tombstone"):
        _plan(rows, _segment(rows, allow_damaged=True))


def test_watched_slots_and_tombstone_targets():
    own, prov, local = {("r1", "a")}, {("r1", "a"), ("r2", "b")}, {("r2", "b"), ("r3", "c")}
    assert mr.watched_slots(own, prov, local) == {("r1", "a"), ("r2", "b")}
    assert mr.watched_slots(set(), set(), local) == set()
    tomb = _event(1, "tombstone", "x", False, False)
    body, digest = codec.encode(tomb)
    rows = [(1, tomb.event_id, "tombstone", "x", tomb.ts, body, digest),
            (2, "other-id", "tombstone", "y", tomb.ts, body, digest)]  # id column lies
    assert mr.tombstone_targets(rows) == {"x"}
