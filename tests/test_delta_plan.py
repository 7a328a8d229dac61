"""Delta planning, pure (core/delta_plan.py, and what push_plan does with chains):
laws over generated chains, memories and listings."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st
from test_push_plan import HEX16, NAMES, PREFIX, SIGS, artifacts, entry

from agent_journal.core import delta_plan as dp
from agent_journal.core import push_plan as pp
from agent_journal.core.delta_plan import Tip


@st.composite
def chains(draw: st.DrawFn, name: str = "r0123456789abcde-000001.sqlite",
           max_size: int = 6) -> list[dict]:
    """A chain a push writes: rising, contiguous, malformed rows inside their delta."""
    start = draw(st.integers(0, 50))
    cuts = sorted(set(draw(st.lists(st.integers(start + 1, start + 200), min_size=1,
                                    max_size=max_size))))
    out, lo = [], start
    for hi in cuts:
        bad = draw(st.lists(st.integers(lo + 1, hi), unique=True, max_size=2))
        out.append(dp.delta_entry(lo, hi, draw(st.integers(1, 10_000)),
                                  f"xxh3-64:{draw(HEX16)}", draw(st.integers(0, hi - lo)),
                                  [{"row": r, "reason": "bad"} for r in sorted(bad)]))
        lo = hi
    return out


@given(NAMES, st.data())
def test_a_chain_a_push_writes_is_accepted_and_its_objects_are_its_content(name, data):
    chain = data.draw(chains(name))
    assert dp.chain_error(name, chain) is None
    objects = dp.chain_objects({name: chain})
    assert len(objects) == len(set(objects.values())) == len(chain)
    for path, key in objects.items():
        seg, lo, hi = dp.parse_path(path)
        assert seg == name and any((d["from"], d["to"]) == (lo, hi) for d in chain)
        assert key.startswith("segments/") and key.endswith(".delta")
        assert key != pp.segment_key(name, "xxh3-64:0")
    # No two deltas share a row, and together they cover (first from, last to].
    rows = [r for d in chain for r in range(d["from"] + 1, d["to"] + 1)]
    assert len(rows) == len(set(rows)) == chain[-1]["to"] - chain[0]["from"]


@given(chains(), st.data())
def test_a_chain_that_is_not_rising_and_contiguous_is_refused(chain, data):
    name = "r0123456789abcde-000001.sqlite"
    k = data.draw(st.integers(0, len(chain) - 1))
    how = data.draw(st.sampled_from(["gap", "overlap", "empty", "row", "swap"]))
    bad = [dict(d) for d in chain]
    if how == "gap" and k > 0:
        bad[k]["from"] += 1
    elif how == "overlap" and k > 0:
        bad[k]["from"] -= 1
    elif how == "empty":
        bad[k]["to"] = bad[k]["from"]
    elif how == "row":
        bad[k]["malformed"] = [{"row": bad[k]["from"], "reason": "x"}]
    elif how == "swap" and len(bad) > 1:
        bad[0], bad[-1] = bad[-1], bad[0]
    else:
        return
    assert dp.chain_error(name, bad) is not None


@given(chains(), st.data())
def test_a_pull_wants_exactly_the_deltas_it_has_not_merged(chain, data):
    name = "r0123456789abcde-000001.sqlite"
    keys = list(dp.chain_objects({name: chain}).values())
    had = set(data.draw(st.lists(st.sampled_from(keys), unique=True)))
    wanted = dp.wanted(chain, name, had)
    assert [d for d in chain if d not in wanted] == [
        d for d in chain if dp.delta_key(name, d["from"], d["to"], d["checksum"]) in had]
    assert wanted == sorted(wanted, key=lambda d: d["from"])


@st.composite
def held_segments(draw: st.DrawFn) -> tuple[str, pp.Remembered]:
    name = draw(NAMES)
    chain = draw(st.just([]) | chains(name, max_size=3))
    high = chain[-1]["to"] if chain else draw(st.integers(0, 50))
    tip = draw(st.none() | st.just(Tip(high, "e", high)))
    return name, pp.Remembered(draw(SIGS), entry(name, draw(HEX16)),
                               tuple(draw(st.lists(artifacts(), max_size=2))), high, tip,
                               draw(st.sampled_from([None, "g1", "g2"])), tuple(chain))


def everything_of(name: str, held: pp.Remembered) -> set[str]:
    keys = {pp.segment_key(name, held.entry["checksum"])}
    keys |= set(dp.chain_objects({name: list(held.deltas)}).values())
    keys |= {a["path"] for a in held.artifacts or () if a["path"]}
    return {PREFIX + k for k in keys}


@given(held_segments(), SIGS, st.sampled_from(["g1", "g2"]), st.data())
def test_a_segment_is_extended_only_while_the_remote_holds_all_of_it(seg, sig, gen, data):
    name, held = seg
    memory = pp.PushMemory(url="s3://b/p", segments={name: held})
    present = everything_of(name, held)
    lost = data.draw(st.sets(st.sampled_from(sorted(present))))
    reusable = pp.reusable(memory, {name: sig}, PREFIX, present - lost)
    got = pp.extendable(memory, {name: sig}, gen, PREFIX, present - lost, reusable)
    # A segment is reused or extended, never both; extended only under its tip,
    # its generation, a short chain and every object of it still there.
    assert not (set(got) & set(reusable))
    expect = (sig != held.sig or not (present - lost >= present)) and not lost \
        and held.tip is not None and held.generation == gen \
        and len(held.deltas) < dp.MAX_DELTAS
    assert (name in got) == (expect and name not in reusable)


@given(held_segments(), st.sampled_from(["g1", "g2"]))
def test_the_memory_of_a_chain_reads_back_and_its_manifest_names_every_delta(seg, gen):
    name, held = seg
    assembled = pp.assemble({"files": [], "artifacts": [], "tombstoned": []}, {name: held},
                            set(), {})
    manifest = pp.manifest("ws", "r0123456789abcde", "2026-01-01T00:00:00.000Z", assembled)
    assert manifest["syncFormat"] == (pp.DELTA_SYNC_FORMAT if held.deltas else pp.SYNC_FORMAT)
    assert pp.segment_keys(manifest) == {
        k[len(PREFIX):] for k in everything_of(name, held) if "/segments/" in k}
    assert pp.stale_keys(everything_of(name, held), PREFIX, assembled.objects) == []
    memory = pp.next_memory("s3://b/p", assembled, {name: held.sig}, {name: held}, {}, gen,
                            {}, set(), set())
    again = pp.PushMemory.parse(json.loads(json.dumps(memory.as_json())))
    assert again == memory
    assert again.segments[name].deltas == held.deltas
    assert again.segments[name].generation == (gen if held.tip else None)


def test_a_chain_at_its_longest_is_snapshotted_whole_again() -> None:
    name = "r0123456789abcde-000001.sqlite"
    chain = [dp.delta_entry(n, n + 1, 1, "xxh3-64:00", 1, []) for n in range(dp.MAX_DELTAS)]
    held = dp.Held(Tip(dp.MAX_DELTAS, "e", dp.MAX_DELTAS), "g", tuple(chain))
    keys = {PREFIX + k for k in dp.chain_objects({name: chain}).values()}
    assert not dp.can_extend(held, "g", True, keys, PREFIX, name, [])
    assert dp.can_extend(held._replace(deltas=tuple(chain[:-1])), "g", True, keys, PREFIX,
                         name, [])
