"""Merge planning, pure: decisions, tombstone handling, names, slots, manifests."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_journal.core import codec
from agent_journal.core import merge_plan as mp
from agent_journal.core.model import Event


def ev(type_, subject, n, *, data=None, kind=None):
    default = {"entry": {"fields": {"text": "t"}, "anchors": [], "dependsOn": [],
                         "subject": None},
               "observation": {"tool": "Bash", "status": "ok"},
               "invalidation": {"reason": "wrong"},
               "tombstone": {"reason": "leak", "purged": False}}.get(type_, {"x": 1})
    return Event(event_id=f"00000000-0000-4000-8000-{n:012d}", type=type_,
                 kind=kind or type_, id=subject, ts="2026-01-01T00:00:00.000Z",
                 author="human", session=None, replica="r1", data=data or default)


# -- decisions ----------------------------------------------------------------------------

@pytest.mark.parametrize("type_, expected", [
    ("entry", mp.TOMBSTONED), ("observation", mp.TOMBSTONED), ("invalidation", mp.TOMBSTONED),
    ("tombstone", mp.IMPORT),   # the tombstone itself always travels
    ("hologram", mp.IMPORT),    # unknown types: never held back, never purged
])
def test_what_a_tombstone_holds_back(type_, expected):
    assert mp.Planner(set(), {"x"}).take("e1", type_, "x") == expected
    assert mp.Planner(set(), {"x"}).take("e1", type_, "y") == mp.IMPORT


def test_present_and_duplicate_come_first():
    # Already held: a merge adds nothing, tombstoned or not (compaction erases).
    p = mp.Planner({"e1"}, {"x"})
    assert p.take("e1", "entry", "x") == mp.PRESENT
    assert p.take("e1", "entry", "x") == mp.DUPLICATE
    assert p.report()["alreadyPresent"] == 1


def test_arriving_tombstone_is_not_purged_here():
    purged = ev("tombstone", "x", 1, data={"reason": "leak", "purged": True})
    fresh = mp.arriving(purged)
    assert fresh is not None and fresh.data == {"reason": "leak", "purged": False}
    assert fresh.event_id == purged.event_id
    body, digest = codec.encode(fresh)
    assert codec.decode(body, digest) == fresh
    assert mp.arriving(ev("tombstone", "x", 2)) is None
    assert mp.arriving(ev("entry", "x", 3)) is None


def test_planner_counts_each_event_once():
    local = {ev("entry", "a", 1).event_id}
    p = mp.Planner(local, {"secret"})
    events = [ev("entry", "a", 1), ev("entry", "b", 2), ev("entry", "b", 2),
              ev("entry", "secret", 3), ev("tombstone", "secret", 4)]
    decisions = [p.take(e.event_id, e.type, e.id) for e in events]
    assert decisions == [mp.PRESENT, mp.IMPORT, mp.DUPLICATE, mp.TOMBSTONED, mp.IMPORT]
    assert p.report() == {"imported": 2, "alreadyPresent": 1, "notImported": [
        {"eventId": events[3].event_id, "reason": "tombstoned"}]}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["entry", "observation", "invalidation",
                                           "tombstone", "hologram"]),
                          st.sampled_from(["a", "b", "c"]), st.integers(0, 12)),
                max_size=25),
       st.sets(st.integers(0, 12)), st.randoms(use_true_random=False))
def test_planner_is_order_free(specs, local_ns, rnd):
    by_id = {}
    for type_, subject, n in specs:
        by_id.setdefault(n, ev(type_, subject, n))
    source = [by_id[n] for _, _, n in specs]  # with repeats
    local = {by_id[n].event_id for n in local_ns if n in by_id}
    tombstoned = {e.id for e in source if e.type == "tombstone"}

    def run(order):
        p = mp.Planner(local, set(tombstoned))
        taken = {e.event_id for e in order if p.take(e.event_id, e.type, e.id) == mp.IMPORT}
        return taken, p.report()

    shuffled = list(source)
    rnd.shuffle(shuffled)
    assert run(source) == run(shuffled)
    taken, report = run(source)
    assert report["imported"] + report["alreadyPresent"] + len(report["notImported"]) == \
        len({e.event_id for e in source})
    assert not any(e.event_id in taken and mp.withheld(e.type, e.id, tombstoned)
                   for e in source)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.tuples(st.sampled_from(["entry", "observation", "invalidation",
                                                    "tombstone", "hologram"]),
                                   st.sampled_from(["a", "b", "c", "d", None]),
                                   st.integers(0, 20)),
                         max_size=10, unique_by=lambda t: t[2]), max_size=3),
       st.sets(st.integers(0, 20)), st.sets(st.sampled_from(["a", "b", "c"])),
       st.data())
def test_bulk_take_equals_one_by_one(segments, local_ns, tombstoned, data):
    local = {f"e{n}" for n in local_ns}
    one, bulk = mp.Planner(local, set(tombstoned)), mp.Planner(local, set(tombstoned))
    for rows in segments:  # one segment: unique ids, seq = position
        expected = {}
        for t, s, n in rows:
            d = one.take(f"e{n}", t, s)
            if d != mp.IMPORT:
                expected[f"e{n}"] = d
        marked = bulk.tombstoned | {s for t, s, _ in rows if t == "tombstone"}
        special = [(i, f"e{n}", t, s) for i, (t, s, n) in enumerate(rows)
                   if t == "tombstone" or s in marked]
        # Listing more rows as special than needed changes nothing.
        extra = data.draw(st.sets(st.integers(0, max(len(rows) - 1, 0))))
        special += [(i, f"e{rows[i][2]}", rows[i][0], rows[i][1]) for i in extra
                    if i < len(rows) and (i, f"e{rows[i][2]}", rows[i][0], rows[i][1])
                    not in special]
        ids = [f"e{n}" for _, _, n in rows]
        # The ids as a list or as the frozen set a pull reads ahead: same answer.
        given_ids = frozenset(ids) if data.draw(st.booleans()) else ids
        got = bulk.take_bulk(given_ids, special)
        assert got == expected
        assert given_ids == (frozenset(ids) if isinstance(given_ids, frozenset) else ids)
    assert bulk.report() == one.report()
    assert (bulk.seen, bulk.tombstoned) == (one.seen, one.tombstoned)


# -- cheap byte tests ---------------------------------------------------------------------

@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["tombstone", "entry", "observation"]),
       st.dictionaries(st.text(max_size=6), st.text(max_size=12), max_size=3),
       st.booleans(), st.sampled_from(["utf-8", "utf-16", "utf-32", "utf-8-sig"]))
def test_tombstone_candidate_never_misses_a_tombstone(type_, extra, ascii_only, encoding):
    obj = {"type": type_, "id": "x", "data": extra}
    body = json.dumps(obj, ensure_ascii=ascii_only).encode(encoding)
    if json.loads(body)["type"] == "tombstone":
        # Caught by its bytes alone, whatever its type column says.
        assert mp.tombstone_candidate("entry", body)


def test_tombstone_candidate_catches_escapes_and_skips_plain_rows():
    assert mp.tombstone_candidate("entry", b'{"type":"\\u0074ombstone"}')
    assert mp.tombstone_candidate("entry", codec.canonical_bytes(ev("tombstone", "x", 1)))
    assert not mp.tombstone_candidate("entry", codec.canonical_bytes(ev("entry", "x", 1)))
    # The type column, and a body not stored as bytes, are enough on their own.
    assert mp.tombstone_candidate("tombstone", codec.canonical_bytes(ev("entry", "x", 1)))
    assert mp.tombstone_candidate("entry", codec.canonical_bytes(ev("entry", "x", 1)).decode())


def test_id_in_body_on_canonical_bytes():
    e = ev("entry", "x", 7)
    body = codec.canonical_bytes(e)
    assert mp.id_in_body(e.event_id, body)
    assert not mp.id_in_body(ev("entry", "x", 8).event_id, body)


# -- names ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name, expected", [
    ("r0123456789abcde-000001.sqlite", ("r0123456789abcde", 1)),
    ("zzzzforeign-000009.sqlite", ("zzzzforeign", 9)),
    ("a-b-000123.sqlite", ("a-b", 123)),
    ("import-r0123456789abcde-0011223344556677.sqlite", None),
    (".r0123456789abcde-000001.sqlite", None),
    ("r0123456789abcde-1.sqlite", None),
    ("junk.sqlite", None),
])
def test_own_segment_names(name, expected):
    assert mp.own_segment(name) == expected


def test_import_names_are_content_names():
    a = mp.import_segment_name("rabc", ["e2", "e1"])
    assert a == mp.import_segment_name("rabc", ["e1", "e2"])
    assert a != mp.import_segment_name("rabc", ["e1"])
    assert a.startswith("import-rabc-") and a.endswith(".sqlite")
    assert mp.own_segment(a) is None
    assert mp.import_segment_name("../../etc", ["e"]).startswith("import-unknown-")
    assert mp.import_segment_name(None, ["e"]).startswith("import-unknown-")


def test_refs():
    assert mp.parse_ref("sha256:" + "ab" * 32) == ("sha256", "ab" * 32)
    for bad in ("sha256:../x", "sha256:AB12CD34", "x", None, "SHA:abcdef12", ":abcdef12"):
        assert mp.parse_ref(bad) is None
    assert mp.export_artifact_path("xxh3-64:0123456789abcdef") == \
        "artifacts/xxh3-64/0123456789abcdef"


# -- slots -----------------------------------------------------------------------------------

def test_slot_index_sees_two_events_in_one_slot():
    idx = mp.SlotIndex("rme", tombstoned={"gone"})
    idx.add("ra", "ra-000001.sqlite", 1, "e1", "entry", "x")
    idx.add("ra", "ra-000001.sqlite", 1, "e1", "entry", "x")   # the same event again
    idx.add("ra", "ra-000001.sqlite", 2, "e2", "entry", "y")
    assert idx.collisions == set()
    # A slot freed by purging tombstoned content and reused is not a clash.
    idx.add("ra", "ra-000001.sqlite", 3, "e3", "entry", "gone")
    idx.add("ra", "ra-000001.sqlite", 3, "e4", "entry", "z")
    assert idx.collisions == set()
    idx.add("ra", "ra-000001.sqlite", 2, "e9", "observation", "o")
    assert idx.collisions == {"ra"}


# -- manifests ------------------------------------------------------------------------------

def good_manifest():
    return {
        "format": 1, "workspace": "ws", "sourceReplica": "rabc", "createdTs": "t",
        "files": [{"name": "rabc-000001.sqlite", "bytes": 10, "checksum": "xxh3-64:00",
                   "events": 2, "replica": "rabc",
                   "malformed": [{"row": 2, "reason": "checksum mismatch"}]}],
        "artifacts": [{"ref": "sha256:" + "ab" * 32, "path": "artifacts/sha256/" + "ab" * 32,
                       "bytes": 3, "checksum": "xxh3-64:01", "observations": ["o1"]}],
        "tombstoned": ["gone"],
    }


def test_good_manifest_passes():
    assert mp.check_manifest(good_manifest(), workspace="ws")["format"] == 1


@pytest.mark.parametrize("mutate, message", [
    (lambda m: m.update(format=2), "format"),
    (lambda m: m.update(workspace="other"), "not 'ws'"),
    (lambda m: m["files"][0].update(name="../evil.sqlite"), "unsafe segment name"),
    (lambda m: m["files"][0].update(name=".hidden.sqlite"), "unsafe segment name"),
    (lambda m: m["files"][0].update(name="a/b.sqlite"), "unsafe segment name"),
    (lambda m: m["files"][0].update(name="x.db"), "unsafe segment name"),
    (lambda m: m["files"].append(dict(m["files"][0])), "listed twice"),
    (lambda m: m["files"][0].update(bytes=-1), "counts"),
    (lambda m: m["files"][0].update(events=True), "counts"),
    (lambda m: m["artifacts"][0].update(path="../../x"), "unexpected path"),
    (lambda m: m["artifacts"][0].update(ref="sha256:../../x"), "bad artifact ref"),
    (lambda m: m.update(files={}), "must be lists"),
    (lambda m: m["files"][0].pop("malformed"), "malformed must list"),
    (lambda m: m.update(tombstoned="gone"), "tombstoned must list"),
    (lambda m: m["artifacts"][0].update(observations=[1]), "observations must list"),
    (lambda m: m["files"][0].update(malformed=[{"row": "2"}]), "malformed must list"),
])
def test_bad_manifests_are_refused(mutate, message):
    m = good_manifest()
    mutate(m)
    with pytest.raises(mp.ManifestError, match=message):
        mp.check_manifest(m, workspace="ws")
    with pytest.raises(mp.ManifestError):
        mp.check_manifest([], workspace="ws")
