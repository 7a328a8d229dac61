"""Export planning (core/export_plan.py), pure: laws over random snapshot rows.

A row travels unless it is erasable and tombstoned; what travels and disagrees
with its bytes is fixed to say what they say; malformed rows are named, never
fixed or withheld; what may be remembered of a snapshot does not depend on the
tombstones; the manifest lists an artifact once, only when a travelling
observation cites it.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_journal.core import codec
from agent_journal.core import export_plan as ep
from agent_journal.core import merge_plan as mp
from agent_journal.core.model import Event

TYPES = ["entry", "observation", "invalidation", "tombstone", "hologram"]
STORED = ["plain", "plain", "plain", "text", "columns", "malformed"]


def _ref(n: int) -> str:
    return "sha256:" + f"{n:02x}" * 32


def _event(n: int, type_: str, subject: str, artifact: int | None) -> Event:
    data = {"entry": {"fields": {"text": "t"}, "anchors": [], "dependsOn": [],
                      "subject": None},
            "observation": {"tool": "Bash", "status": "ok", **(
                {"artifact": {"ref": _ref(artifact), "bytes": artifact, "checksum": "x:0f"}}
                if artifact is not None else {})},
            "invalidation": {"reason": "wrong"},
            "tombstone": {"reason": "leak", "purged": False}}.get(type_, {"x": 1})
    return Event(event_id=f"00000000-0000-4000-8000-{n:012d}", type=type_, kind=type_,
                 id=subject, ts="2026-01-01T00:00:00.000Z", author="human", session=None,
                 replica="r1", data=data)


snapshot = st.lists(
    st.tuples(st.sampled_from(TYPES), st.sampled_from(["a", "b", "c"]),
              st.one_of(st.none(), st.integers(1, 3)), st.sampled_from(STORED)),
    max_size=12)


def _rows(specs, first: int = 0) -> list[tuple]:
    """Rows as a segment read gives them: (seq, event_id, type, subject, ts, body, checksum)."""
    rows = []
    for seq, (type_, subject, artifact, stored) in enumerate(specs, 1):
        ev = _event(first + seq, type_, subject, artifact)
        body, digest = codec.encode(ev)
        col_type, col_subject = ev.type, ev.id
        if stored == "text":
            body = body.decode()
        elif stored == "columns":
            col_type, col_subject = ("hologram", "zz")
        elif stored == "malformed":
            digest = "xxh3-64:0000000000000000"
        rows.append((seq, ev.event_id, col_type, col_subject, ev.ts, body, digest))
    return rows


@settings(max_examples=200)
@given(snapshot, st.sets(st.sampled_from(["a", "b", "c"])), st.sets(st.sampled_from(["a", "b"])))
def test_what_travels_and_what_is_fixed(specs, tombstoned, other):
    rows = _rows(specs)
    v = ep.judge(rows, "r1", tombstoned)
    bad = {seq for seq, (*_, stored) in enumerate(specs, 1) if stored == "malformed"}
    assert {seq for seq, _ in v.malformed} == bad
    for seq, (type_, subject, _, _) in enumerate(specs, 1):
        held_back = seq not in bad and mp.withheld(type_, subject, tombstoned)
        assert (seq in v.withheld) == held_back
    fixed = {fix[4]: fix for fix in v.fixes}
    assert set(fixed) == {seq for seq, (*_, stored) in enumerate(specs, 1)
                          if stored in ("text", "columns") and seq not in v.withheld}
    for seq, (type_, subject, ts, body, _) in fixed.items():
        assert (type_, subject, ts) == (specs[seq - 1][0], specs[seq - 1][1], rows[0][4])
        assert type(body) is bytes
    # What may be remembered of its bytes does not depend on the tombstones.
    w = ep.judge(rows, "r1", other)
    assert (v.rows, v.clean, v.artifacts, v.tombstones, v.malformed) == \
        (w.rows, w.clean, w.artifacts, w.tombstones, w.malformed)
    assert v.clean == (not bad and all(stored == "plain" for *_, stored in specs))
    assert ep.file_entry("r1-000001.sqlite", 10, "x:00", v)["events"] == \
        len(rows) - len(v.withheld)


@settings(max_examples=200)
@given(st.lists(snapshot, max_size=3), st.sets(st.sampled_from(["a", "b", "c"])))
def test_the_manifest_lists_each_cited_artifact_once(files, tombstoned):
    judged = []
    for k, specs in enumerate(files):
        judged.append((f"r1-{k + 1:06d}.sqlite", ep.judge(_rows(specs, 100 * k), "r1",
                                                        tombstoned)))
    cited = ep.cited(judged, tombstoned)
    travelling = {}
    for _, v in judged:
        for ref, _, _, subject in v.artifacts:
            if not mp.withheld("observation", subject, tombstoned):
                travelling.setdefault(ref, set()).add(subject)
    assert {ref: ids for ref, (_, ids) in cited.records.items()} == travelling
    assert list(cited.by_file) == [name for name, _ in judged]
    for refs in cited.by_file.values():
        assert set(refs) <= set(cited.records)
    for ref, (art, ids) in cited.records.items():
        entry = ep.artifact_entry(ref, art, ids, shipped=False)
        assert entry["path"] is None and entry["observations"] == sorted(ids)
        assert ep.artifact_entry(ref, art, ids, shipped=True)["path"] == \
            mp.export_artifact_path(ref)
