"""Push planning, pure (core/push_plan.py): the memory, what is reused, the manifest's
assembly, what is stale. Laws over generated memories, listings and exports."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from agent_journal.core import push_plan as pp
from agent_journal.core.delta_plan import Tip

RID = "r0123456789abcde"
PREFIX = f"ws/{RID}/"

HEX16 = st.text("0123456789abcdef", min_size=16, max_size=16)
HEX64 = st.text("0123456789abcdef", min_size=64, max_size=64)
NAMES = st.integers(1, 12).map(lambda n: f"{RID}-{n:06d}.sqlite")
SIGS = st.tuples(*[st.integers(0, 3)] * 6)
IDS = st.lists(st.sampled_from([f"e{n}" for n in range(8)]), unique=True, max_size=4)


@st.composite
def artifacts(draw: st.DrawFn) -> dict:
    # One blob, one size and checksum; whether a file's entry ships it may differ.
    digest = draw(st.sampled_from(["0" * 64, "1" * 64]) | HEX64)
    shipped = draw(st.booleans())
    return {"ref": f"sha256:{digest}", "path": f"artifacts/sha256/{digest}" if shipped else None,
            "bytes": int(digest[:2], 16), "checksum": f"xxh3-64:{digest[:16]}",
            "observations": sorted(draw(IDS))}


def entry(name: str, digest: str, events: int = 1) -> dict:
    return {"name": name, "bytes": 100, "checksum": f"xxh3-64:{digest}", "events": events,
            "malformed": []}


@st.composite
def remembered(draw: st.DrawFn, name: str) -> pp.Remembered:
    return pp.Remembered(draw(st.none() | SIGS), entry(name, draw(HEX16)),
                         tuple(draw(st.lists(artifacts(), max_size=2))),
                         draw(st.none() | st.integers(0, 99)))


@st.composite
def memories(draw: st.DrawFn) -> pp.PushMemory:
    names = draw(st.lists(NAMES, unique=True, max_size=5))
    return pp.PushMemory(
        url=draw(st.none() | st.just("s3://b/p")),
        tombstones=draw(st.none() | HEX16),
        scans={n: pp.Scanned(draw(SIGS), tuple(draw(IDS))) for n in names},
        owned=frozenset(draw(st.lists(HEX16.map(lambda h: f"segments/{h}.sqlite"),
                                      max_size=3))),
        segments={n: draw(remembered(n)) for n in names},
        manifests=frozenset(draw(st.lists(HEX16, max_size=2))))


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=4),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=12)


# -- the memory ---------------------------------------------------------------------------

@given(memories())
def test_the_memory_reads_back_what_it_wrote(memory):
    assert pp.PushMemory.parse(json.loads(json.dumps(memory.as_json()))) == memory


@given(st.dictionaries(st.sampled_from(["url", "tombstones", "tombstonesBySegment", "owned",
                                        "segments", "manifests"]), JSON) | JSON)
def test_any_json_is_a_memory_or_none(obj):
    memory = pp.PushMemory.parse(obj)
    assert all(isinstance(s.sig, tuple) and all(isinstance(i, str) for i in s.ids)
               for s in memory.scans.values())
    assert all(isinstance(r.entry, dict) for r in memory.segments.values())
    assert all(isinstance(k, str) for k in memory.owned | memory.manifests)
    json.dumps(memory.as_json())


@given(memories(), st.sampled_from(["s3://b/p", "s3://other/p"]))
def test_a_memory_about_another_url_keeps_only_the_scans(memory, url):
    about = memory.about(url)
    assert about == (memory if memory.url == url else pp.PushMemory(scans=memory.scans))


# -- what is reused -----------------------------------------------------------------------

@given(memories(), st.data())
def test_an_entry_is_reused_exactly_when_its_segment_and_objects_are_unchanged(memory, data):
    names = sorted(memory.segments)
    signatures = {n: data.draw(st.sampled_from([memory.segments[n].sig, None, (9,) * 6]))
                  for n in names}
    wanted = {PREFIX + pp.segment_key(n, r.entry["checksum"]) for n, r in
              memory.segments.items()} | {PREFIX + a["path"] for r in memory.segments.values()
                                          for a in r.artifacts or () if a["path"]}
    present = set(data.draw(st.lists(st.sampled_from(sorted(wanted)), unique=True))
                  if wanted else [])
    got = pp.reusable(memory, signatures, PREFIX, present)
    for name, held in memory.segments.items():
        expected = (held.sig is not None and signatures[name] == held.sig
                    and PREFIX + pp.segment_key(name, held.entry["checksum"]) in present
                    and all(PREFIX + a["path"] in present
                            for a in held.artifacts or () if a["path"]))
        assert (name in got) == expected, name
        if expected:
            assert got[name] is held


# -- the manifest -------------------------------------------------------------------------

@st.composite
def pushes(draw: st.DrawFn) -> tuple[dict, dict[str, pp.Remembered], set[str], dict]:
    names = draw(st.lists(NAMES, unique=True, min_size=1, max_size=6))
    cut = draw(st.integers(0, len(names)))
    fresh, old = names[:cut], names[cut:]
    cited = {n: draw(st.lists(artifacts(), max_size=2)) for n in fresh}
    staged = {"files": [entry(n, draw(HEX16)) for n in fresh],
              "artifacts": pp.union_artifacts([], cited.values()),
              "tombstoned": sorted(draw(IDS)), "sourceReplica": RID}
    reused = {n: draw(remembered(n)) for n in old}
    return staged, reused, set(draw(IDS)), cited


@given(pushes())
def test_the_manifest_names_every_file_and_artifact_once_by_its_content(push):
    staged, reused, known, cited = push
    got = pp.assemble(staged, reused, known, cited)
    files = got.export["files"]
    assert [f["name"] for f in files] == sorted({f["name"] for f in files})
    assert {f["name"] for f in files} == {f["name"] for f in staged["files"]} | set(reused)
    shipped = {a["path"] for a in got.export["artifacts"] if a["path"]}
    assert got.objects == {f["name"]: pp.segment_key(f["name"], f["checksum"]) for f in files} \
        | {p: p for p in shipped}
    assert got.fresh == {f["name"] for f in staged["files"]}
    assert got.export["tombstoned"] == sorted(set(staged["tombstoned"]) | known)
    assert got.kept == (set(reused) if set(staged["tombstoned"]) <= known else set())
    # A reused snapshot's artifacts are named again, cited by every observation.
    by_ref = {a["ref"]: a for a in got.export["artifacts"]}
    for r in [*reused.values()]:
        for a in r.artifacts or ():
            assert set(a["observations"]) <= set(by_ref[a["ref"]]["observations"])


@given(st.lists(st.lists(artifacts(), max_size=3), max_size=4), st.randoms())
def test_the_artifact_union_is_one_entry_per_ref_in_any_order(lists, rnd):
    once = pp.union_artifacts([], lists)
    shuffled = list(lists)
    rnd.shuffle(shuffled)
    assert pp.union_artifacts([], shuffled) == once
    assert pp.union_artifacts(once, lists) == once
    assert [a["ref"] for a in once] == sorted({a["ref"] for items in lists for a in items})
    # Named when any file's entry names it: the object is not dropped by the clean-up.
    shipped = {a["ref"] for items in lists for a in items if a["path"]}
    assert {a["ref"] for a in once if a["path"]} == shipped


@given(pushes(), st.sampled_from(["2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z"]))
def test_a_manifest_is_the_same_whenever_it_was_written(push, ts):
    got = pp.assemble(*push)
    first = pp.manifest("ws", RID, "2026-01-01T00:00:00.000Z", got)
    again = pp.manifest("ws", RID, ts, got._replace(
        export=dict(got.export, createdTs=ts)))
    assert pp.same_content(first, again)
    assert not pp.same_content(first, None)
    changed = dict(first, objects=dict(first["objects"], extra="artifacts/sha256/00"))
    assert not pp.same_content(first, changed)


@given(pushes(), st.lists(st.sampled_from(["segments/x.sqlite", "artifacts/sha256/ab", ".lock",
                                           "manifest.json", ".manifest.json.1.tmp"]),
                          unique=True))
def test_stale_keys_are_exactly_the_unnamed_ones_but_locks(push, extra):
    got = pp.assemble(*push)
    keep = {PREFIX + pp.MANIFEST_KEY} | {PREFIX + k for k in got.objects.values()}
    listed = sorted(keep | {PREFIX + k for k in extra})
    stale = pp.stale_keys(listed, PREFIX, got.objects)
    assert stale == sorted(k for k in set(listed) - keep if not k.endswith("/.lock"))


@given(pushes(), st.data())
def test_the_next_memory_reuses_what_it_took(push, data):
    got = pp.assemble(*push)
    names = [f["name"] for f in got.export["files"]]
    signatures = {n: data.draw(SIGS) for n in names}
    highs = {n: data.draw(st.none() | st.integers(0, 99)) for n in names}
    tips = {n: None if h is None else Tip(h, "e", h) for n, h in highs.items()}
    memory = pp.next_memory("s3://b/p", got, signatures, push[1], tips, "g", {},
                            {"segments/a.sqlite"}, {"d1"})
    assert set(memory.segments) == set(got.fresh | got.kept)
    assert all(r.high == highs[n] for n, r in memory.segments.items() if n in got.fresh)
    assert memory.tombstones == pp.tombstones_digest(set(got.export["tombstoned"]))
    present = {PREFIX + k for k in got.objects.values()}
    assert pp.reusable(memory, signatures, PREFIX, present).keys() == memory.segments.keys()
    assert pp.PushMemory.parse(json.loads(json.dumps(memory.as_json()))) == memory


@given(pushes(), st.sampled_from(["2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z"]))
def test_a_push_with_nothing_to_snapshot_is_the_manifest_in_place(push, ts):
    staged, reused, known, _ = push
    base = dict(staged, files=[], artifacts=[], tombstoned=[])
    in_place = pp.manifest("ws", RID, ts, pp.assemble(base, reused, known, {}))
    got = pp.unchanged(in_place, set(reused), reused, known)
    assert got is not None and got.fresh == frozenset() and got.kept == set(reused)
    assert pp.same_content(pp.manifest("ws", RID, "2026-01-03T00:00:00.000Z", got), in_place)
    # Anything to snapshot, a tombstone more, or no manifest in place: the export runs.
    assert pp.unchanged(in_place, set(reused) | {f"{RID}-000099.sqlite"}, reused, known) is None
    assert pp.unchanged(in_place, set(reused), reused, set(known) | {"new"}) is None
    assert pp.unchanged(None, set(reused), reused, known) is None
