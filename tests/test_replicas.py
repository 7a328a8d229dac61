"""Export and merge: the union laws, erasure across replicas, snapshots under load, tampering.

Replicas are built as real roots with store functions and merged through the
library (fast enough to merge hundreds of times); a few tests go through the
console script. "State" below is everything a read command derives: the
`show --observations` document, the entry and observation views (conflicts
included), the tombstoned ids and the unclassified events.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import CLI, all_bytes_under, clean_env, run_on_a_terminal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_journal.core.errors import DamagedJournalError, IntegrityError
from agent_journal.core.model import Event
from agent_journal.ops import export as export_op
from agent_journal.ops import replicas
from agent_journal.ops.context import Context, read_workspace
from agent_journal.ops.show import show
from agent_journal.storage.artifacts import artifact_path
from agent_journal.storage.connection import connect, run_write
from agent_journal.storage.files import create_private_file, make_private_dirs
from agent_journal.storage.root import Root
from agent_journal.storage.segment import init_segment, insert_events

WS = "ws"


# -- building replicas ------------------------------------------------------------------

def make_root(base: Path, name: str, replica_id: str | None = None) -> Path:
    path = base / name
    path.mkdir(mode=0o700)
    os.chmod(path, 0o700)
    if replica_id is not None:
        (path / "replica-id").write_text(replica_id + "\n")
    return path


def put(root: Path, events: list[Event]) -> None:
    if events:
        Root.open(root, create=True).workspace(WS).append(events)


def fast_put(root: Path, events: list[Event]) -> None:
    """Like put, into the replica's own first segment, without waiting for fsync:
    law tests build thousands of small replicas."""
    ws = Root.open(root, create=True).workspace(WS)
    make_private_dirs(ws.segments_dir)
    path = os.path.join(ws.segments_dir, f"{ws.root.replica_id}-000001.sqlite")
    create_private_file(path)
    conn = connect(path)
    try:
        conn.execute("PRAGMA synchronous = OFF")
        init_segment(conn, workspace=WS, replica=ws.root.replica_id)
        run_write(conn, lambda c: insert_events(c, events))
    finally:
        conn.close()


def merge(target: Path, source: Path) -> dict:
    return replicas.merge(Context(str(target), WS), str(source))


def export(root: Path, dest: Path) -> dict:
    return export_op.export(Context(str(root), WS), str(dest))


def state(root: Path) -> str:
    ctx = Context(str(root), WS)
    shown, _ = show(ctx, observations=True)
    _, d = read_workspace(ctx)
    return json.dumps({
        "show": shown,
        "entries": {i: d.entry_view(i) for i in d.visible_entry_ids()},
        "observations": {i: d.observation_view(i) for i in d.visible_observation_ids()},
        "tombstoned": sorted(d.tombstones),
        "unclassified": sorted(e.event_id for e in d.unclassified),
    }, sort_keys=True)


def union_state(base: Path, groups: list[list[Event]]) -> str:
    """The oracle: derive from the plain union of every replica's events."""
    seen: dict[str, Event] = {}
    for events in groups:
        for ev in events:
            seen.setdefault(ev.event_id, ev)
    oracle = make_root(base, f"oracle-{time.monotonic_ns()}", "roracle000000000")
    fast_put(oracle, list(seen.values()))
    return state(oracle)


def imported_tombstones_unpurged(root: Path) -> bool:
    """Every tombstone a merge wrote says purged: false (and checks out)."""
    from agent_journal.core import codec

    for seg in (root / "workspaces" / WS / "segments").glob("import-*.sqlite"):
        with sqlite3.connect(seg) as conn:
            for body, digest in conn.execute(
                    "SELECT body, checksum FROM events WHERE type = 'tombstone'"):
                if codec.decode(body, digest).data["purged"] is not False:
                    return False
    return True


def copy_root(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    return dest


def segment_files(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "workspaces" / WS / "segments").glob("*.sqlite"))


_seq = itertools.count()


def ev(type_: str, subject: str | None, *, replica: str, ts: str, data: dict,
       kind: str | None = None) -> Event:
    n = next(_seq)
    return Event(event_id=f"{n:08x}-0000-4000-8000-{n:012x}", type=type_,
                 kind=kind or {"entry": "note", "observation": "tool_call"}.get(type_, type_),
                 id=subject, ts=ts, author="human", session=None, replica=replica, data=data)


def entry(eid: str, *, replica: str = "rx", ts: str = "2026-01-01T00:00:00.000Z",
          deps: list[str] | None = None, kind: str = "note", text: str | None = None,
          anchors: list[str] | None = None) -> Event:
    fields = {"claim": text or eid} if kind == "finding" else {"text": text or eid}
    return ev("entry", eid, replica=replica, ts=ts, kind=kind, data={
        "fields": fields, "anchors": anchors or [], "dependsOn": deps or [], "subject": None})


def observation(oid: str, *, replica: str = "rx", ts: str = "2026-01-01T00:00:00.000Z",
                status: str = "ok", output: str = "out", artifact: dict | None = None) -> Event:
    data = {"tool": "Bash", "callId": oid, "input": {"command": "ls"}, "output": output,
            "status": status, "exitCode": 0, "durationMs": 1}
    if artifact is not None:
        data["artifact"] = artifact
    return ev("observation", oid, replica=replica, ts=ts, data=data)


def invalidation(target: str, *, replica: str = "rx",
                 ts: str = "2026-01-01T00:00:00.000Z") -> Event:
    return ev("invalidation", target, replica=replica, ts=ts, data={"reason": "wrong"})


def tombstone(target: str, *, replica: str = "rx", ts: str = "2026-01-01T00:00:00.000Z",
              purged: bool = False) -> Event:
    return ev("tombstone", target, replica=replica, ts=ts,
              data={"reason": "must not exist", "purged": purged})


# -- random replicas --------------------------------------------------------------------

ENTRY_IDS = ["a", "b", "c"]
OBS_IDS = ["o1", "o2"]
TIMES = [f"2026-01-01T00:00:0{k}.000Z" for k in range(3)]


@st.composite
def replica_sets(draw, count: int):
    """`count` replicas: shared and independent events, same ids recorded on several
    replicas, invalidations, tombstones, unknown types, and replicas that have
    already compacted (tombstone kept, target gone, purged: true)."""
    rids = [f"r{i:015x}" for i in range(1, count + 1)]
    groups: list[list[Event]] = [[] for _ in rids]
    for _ in range(draw(st.integers(2, 12))):
        holders = draw(st.sets(st.integers(0, count - 1), min_size=1))
        origin = rids[min(holders)]
        ts = draw(st.sampled_from(TIMES))
        what = draw(st.sampled_from(["entry", "entry", "entry", "observation", "invalidation",
                                     "invalidation", "tombstone", "tombstone", "unknown"]))
        if what == "entry":
            event = entry(draw(st.sampled_from(ENTRY_IDS)), replica=origin, ts=ts,
                          kind=draw(st.sampled_from(["note", "constraint", "finding"])),
                          deps=draw(st.lists(st.sampled_from(ENTRY_IDS), min_size=0,
                                             max_size=2, unique=True)),
                          text=draw(st.sampled_from(["x", "y"])))
        elif what == "observation":
            event = observation(draw(st.sampled_from(OBS_IDS)), replica=origin, ts=ts,
                                status=draw(st.sampled_from(["started", "ok", "error"])))
        elif what == "invalidation":
            event = invalidation(draw(st.sampled_from(ENTRY_IDS)), replica=origin, ts=ts)
        elif what == "tombstone":
            event = tombstone(draw(st.sampled_from(ENTRY_IDS + OBS_IDS)), replica=origin, ts=ts)
        else:
            event = ev("hologram", draw(st.sampled_from(ENTRY_IDS)), replica=origin, ts=ts,
                       data={"x": 1})
        for h in sorted(holders):
            groups[h].append(event)
    # Stories: events about one id that interact (a dependent, an invalidation,
    # a tombstone), each held by a random set of replicas (possibly none).
    for _ in range(draw(st.integers(0, 2))):
        x, y = draw(st.permutations(ENTRY_IDS))[:2]
        story = [entry(x, replica=rids[0], ts=draw(st.sampled_from(TIMES))),
                 entry(y, replica=rids[0], ts=draw(st.sampled_from(TIMES)), deps=[x]),
                 invalidation(x, replica=rids[0], ts=draw(st.sampled_from(TIMES))),
                 tombstone(x, replica=rids[0], ts=draw(st.sampled_from(TIMES)))]
        for event in story:
            for h in sorted(draw(st.sets(st.integers(0, count - 1)))):
                groups[h].append(event)
    for i in range(count):
        if draw(st.integers(0, 2)) == 0:
            groups[i] = compacted(groups[i])
    return rids, groups


def compacted(events: list[Event]) -> list[Event]:
    """What `compact --apply` (no TTL) leaves: tombstoned content gone, tombstones purged."""
    targets = {e.id for e in events if e.type == "tombstone"}
    held = {e.id for e in events if e.type in ("entry", "observation")}
    out = []
    for e in events:
        if e.type in ("entry", "observation", "invalidation") and e.id in targets:
            continue
        if e.type == "tombstone" and e.id in held:
            e = e.replace(data=dict(e.data, purged=True))
        out.append(e)
    return out


def build(base: Path, rids: list[str], groups: list[list[Event]]) -> list[Path]:
    roots = []
    for i, (rid, events) in enumerate(zip(rids, groups, strict=True)):
        root = make_root(base, f"rep{i}", rid)
        fast_put(root, events)
        roots.append(root)
    return roots


def scratch() -> Path:
    base = Path(tempfile.mkdtemp(prefix="aj-merge-"))
    os.chmod(base, 0o700)
    return base


LAW_SETTINGS = settings(max_examples=int(os.environ.get("AJ_LAW_EXAMPLES", "40")), deadline=None,
                        suppress_health_check=[HealthCheck.too_slow])


@LAW_SETTINGS
@given(replica_sets(2))
def test_merge_is_commutative(data):
    base = scratch()
    try:
        a, b = build(base, *data)
        ab = copy_root(a, base / "ab")
        merge(ab, b)
        ba = copy_root(b, base / "ba")
        merge(ba, a)
        assert state(ab) == state(ba)
        assert state(ab) == union_state(base, data[1])
        assert imported_tombstones_unpurged(ab) and imported_tombstones_unpurged(ba)
    finally:
        shutil.rmtree(base)


@LAW_SETTINGS
@given(replica_sets(3))
def test_merge_is_associative(data):
    base = scratch()
    try:
        a, b, c = build(base, *data)
        left = copy_root(a, base / "left")      # (A + B) + C
        merge(left, b)
        merge(left, c)
        bc = copy_root(b, base / "bc")          # A + (B + C)
        merge(bc, c)
        right = copy_root(a, base / "right")
        merge(right, bc)
        assert state(left) == state(right) == union_state(base, data[1])
    finally:
        shutil.rmtree(base)


@LAW_SETTINGS
@given(replica_sets(2))
def test_merge_is_idempotent(data):
    base = scratch()
    try:
        a, b = build(base, *data)
        once = copy_root(a, base / "once")
        merge(once, b)
        files = segment_files(once)
        before = state(once)
        again = merge(once, b)
        assert again["imported"] == 0 and again["segmentsTouched"] == []
        assert segment_files(once) == files
        assert state(once) == before
        # Merging a replica into itself, or the merged result back, adds nothing either.
        assert merge(once, once)["imported"] == 0
        assert state(once) == before
    finally:
        shutil.rmtree(base)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(replica_sets(2))
def test_an_export_merges_exactly_like_its_root(data):
    """Exports take the sealed path (decided from verified columns); roots are
    parsed row by row. Both must give the same state."""
    base = scratch()
    try:
        a, b = build(base, *data)
        via_root = copy_root(a, base / "via-root")
        r1 = merge(via_root, b)
        export(b, base / "exp-b")
        via_export = copy_root(a, base / "via-export")
        r2 = merge(via_export, base / "exp-b")
        assert state(via_root) == state(via_export)
        assert imported_tombstones_unpurged(via_root)
        assert imported_tombstones_unpurged(via_export)
        # The export already left out what B's tombstones name, so only the
        # held-back counts differ; what is written is the same.
        assert r1["imported"] == r2["imported"]
        assert segment_files(via_root) == segment_files(via_export)
    finally:
        shutil.rmtree(base)


def five_replicas(base: Path) -> list[Path]:
    """Five replicas that disagree in every way the laws must absorb."""
    r = [f"r{i:015x}" for i in range(1, 6)]
    t = [f"2026-01-01T00:00:0{k}.000Z" for k in range(6)]
    shared = entry("shared", replica=r[0], ts=t[0], kind="constraint", text="keep tests green")
    obs = observation("o-shared", replica=r[0], ts=t[0], status="started")
    groups = [
        [shared, obs, entry("dup", replica=r[0], ts=t[2], text="A says"),
         entry("leak", replica=r[0], ts=t[1], text="SECRET"), entry("dep", replica=r[0],
                                                                    ts=t[3], deps=["base"]),
         entry("wrong-and-leaky", replica=r[0], ts=t[0]),
         invalidation("wrong-and-leaky", replica=r[0], ts=t[1]),
         entry("rests-on-it", replica=r[0], ts=t[2], deps=["wrong-and-leaky"])],
        [shared, entry("dup", replica=r[1], ts=t[2], text="B says"),
         entry("base", replica=r[1], ts=t[1]), tombstone("leak", replica=r[1], ts=t[4]),
         tombstone("wrong-and-leaky", replica=r[1], ts=t[5])],
        [obs, observation("o-shared", replica=r[2], ts=t[3], status="ok"),
         entry("dup", replica=r[2], ts=t[1], text="C says, earlier clock"),
         invalidation("base", replica=r[2], ts=t[5])],
        compacted([entry("gone", replica=r[3], ts=t[0]), tombstone("gone", replica=r[3], ts=t[1]),
                   entry("leak", replica=r[3], ts=t[0], text="SECRET again")]),
        [entry("gone", replica=r[3], ts=t[0]), entry("e5", replica=r[4], ts=t[0], deps=["dup"]),
         ev("hologram", "e5", replica=r[4], ts=t[2], data={"future": True})],
    ]
    return build(base, r, groups), groups


def test_five_replicas_in_all_120_orders_reach_one_state(tmp_path):
    roots, groups = five_replicas(tmp_path)
    states = set()
    # Walk the tree of merge orders so that shared prefixes are merged once:
    # every one of the 120 orders is still merged in exactly that order.
    frontier = [((i,), roots[i]) for i in range(5)]
    merges = 0
    while frontier:
        order, root = frontier.pop()
        if len(order) == 5:
            states.add(state(root))
            continue
        for nxt in range(5):
            if nxt in order:
                continue
            child = copy_root(root, tmp_path / ("m" + "".join(map(str, order + (nxt,)))))
            merge(child, roots[nxt])
            merges += 1
            frontier.append((order + (nxt,), child))
    assert merges == 5 * 4 + 5 * 4 * 3 + 5 * 4 * 3 * 2 + 120
    assert len(states) == 1
    assert states == {union_state(tmp_path, groups)}
    final = json.loads(states.pop())
    dup = final["entries"]["dup"]
    assert dup["fields"] == {"text": "C says, earlier clock"} and len(dup["conflicts"]) == 2
    assert "leak" not in final["entries"] and "gone" not in final["entries"]
    assert final["entries"]["dep"]["outcome"] == "suppressed"


def test_cli_merge_orders_agree(tmp_path, cli):
    roots, _ = five_replicas(tmp_path)
    outs = []
    for order in ([0, 1, 2, 3, 4], [4, 3, 2, 1, 0], [2, 0, 4, 1, 3]):
        target = make_root(tmp_path, "cli" + "".join(map(str, order)))
        for i in order:
            res = cli("merge", str(roots[i]), env={"AGENT_JOURNAL_ROOT": str(target)})
            assert res.code == 0, res.err
            assert res.err == ""  # not a terminal: no progress
        outs.append(cli("show", "--json", "--observations",
                        env={"AGENT_JOURNAL_ROOT": str(target)}).out)
    assert outs[0] == outs[1] == outs[2]


# -- the report, and what a merge writes -------------------------------------------------

def test_report_counts_and_tombstone_arrives_unpurged(tmp_path):
    a = make_root(tmp_path, "a", "raaaaaaaaaaaaaaa")
    b = make_root(tmp_path, "b", "rbbbbbbbbbbbbbbb")
    keep, secret = entry("keep", replica="rb"), entry("s", replica="rb", text="SECRET-1")
    tomb = tombstone("s", replica="ra", purged=True)
    put(a, [tomb, entry("mine", replica="ra")])
    put(b, [keep, secret, tomb.replace(data=dict(tomb.data, purged=False))])
    report = merge(a, b)
    assert (report["imported"], report["alreadyPresent"]) == (1, 1)
    assert report["notImported"] == [{"eventId": secret.event_id, "reason": "tombstoned"}]
    assert report["replicaIdCollisions"] == [] and report["unreadable"] == []
    assert report["source"] == {"path": str(b), "kind": "root", "replica": "rbbbbbbbbbbbbbbb"}
    (touched,) = report["segmentsTouched"]
    assert touched.startswith("workspaces/ws/segments/import-rbbbbbbbbbbbbbbb-")

    # The other way: A's tombstone (purged there) arrives as not purged in B.
    c = make_root(tmp_path, "c", "rccccccccccccccc")
    put(c, [secret])
    merge(c, a)
    _, d = read_workspace(Context(str(c), WS))
    assert [t.data["purged"] for t in d.tombstones["s"]] == [False]
    assert "s" not in d.visible_entry_ids()


def test_imports_are_new_files_never_appends(tmp_path):
    a = make_root(tmp_path, "a", "raaaaaaaaaaaaaaa")
    b = make_root(tmp_path, "b", "rbbbbbbbbbbbbbbb")
    put(a, [entry("x", replica="ra")])
    put(b, [entry("y", replica="rb")])
    own_b = (b / "workspaces" / WS / "segments" / "rbbbbbbbbbbbbbbb-000001.sqlite")
    before = own_b.read_bytes()
    merge(b, a)
    assert own_b.read_bytes() == before
    (imported,) = [n for n in segment_files(b) if n.startswith("import-")]
    # Local writes keep going to B's own segment, never to the import.
    imp = b / "workspaces" / WS / "segments" / imported
    imp_bytes = imp.read_bytes()
    put(b, [entry("z", replica="rb")])
    assert imp.read_bytes() == imp_bytes
    with sqlite3.connect(own_b) as conn:
        assert conn.execute("SELECT count(*) FROM events").fetchone()[0] == 2
    assert not [n for n in os.listdir(imp.parent) if n.startswith(".")]


def test_same_id_on_two_replicas_one_deterministic_winner(tmp_path):
    # B's clock runs behind: its record is earlier and wins in every order.
    a = make_root(tmp_path, "a", "raaaaaaaaaaaaaaa")
    b = make_root(tmp_path, "b", "rbbbbbbbbbbbbbbb")
    ea = entry("same", replica="ra", ts="2026-01-01T10:00:00.000Z", text="from A")
    eb = entry("same", replica="rb", ts="2026-01-01T09:59:59.000Z", text="from B")
    put(a, [ea])
    put(b, [eb])
    ab, ba = copy_root(a, tmp_path / "ab"), copy_root(b, tmp_path / "ba")
    merge(ab, b)
    merge(ba, a)
    for root in (ab, ba):
        _, d = read_workspace(Context(str(root), WS))
        view = d.entry_view("same")
        assert view["fields"] == {"text": "from B"} and view["conflicts"] == [ea.event_id]
    # Equal timestamps: the smaller event id wins, whoever merged first.
    c = make_root(tmp_path, "c", "rccccccccccccccc")
    e1 = entry("tie", replica="rc", ts="2026-01-01T00:00:00.000Z", text="one")
    e2 = entry("tie", replica="ra", ts="2026-01-01T00:00:00.000Z", text="two")
    put(c, [e2])
    put(a, [e1])
    merge(c, a)
    _, d = read_workspace(Context(str(c), WS))
    winner = min(e1, e2, key=lambda e: e.event_id)
    assert d.entry_view("tie")["eventId"] == winner.event_id


# -- erasure is not undone ---------------------------------------------------------------

MARKER = "SECRET-MARKER-7f3a9c"


def simulate_compact(root: Path) -> None:
    """What compact --apply leaves behind for tombstoned content (compact itself is
    built elsewhere): the rows gone, their bytes scrubbed from the file, the
    tombstone marked purged."""
    segments = list((root / "workspaces" / WS / "segments").glob("*.sqlite"))
    targets = set()
    for seg in segments:
        with sqlite3.connect(seg) as conn:
            targets |= {r[0] for r in conn.execute(
                "SELECT subject FROM events WHERE type = 'tombstone'")}
    for seg in segments:
        conn = sqlite3.connect(seg, isolation_level=None)
        conn.execute("PRAGMA secure_delete = ON")
        for t in targets:
            conn.execute("DELETE FROM events WHERE subject = ? AND type != 'tombstone'", (t,))
        conn.execute("VACUUM")
        conn.close()
    assert MARKER.encode() not in all_bytes_under(root)


def _stale_pair(tmp_path: Path) -> tuple[Path, Path, Event]:
    """A and B both hold a secret; A tombstones it and compacts; B is stale."""
    a = make_root(tmp_path, "a", "raaaaaaaaaaaaaaa")
    b = make_root(tmp_path, "b", "rbbbbbbbbbbbbbbb")
    secret = entry("leaky", replica="ra", kind="finding", text=f"token {MARKER}")
    obs = observation("o-leak", replica="ra", output=f"printed {MARKER}")
    put(a, [secret, obs, entry("fine", replica="ra", anchors=["tool_use:o-leak"])])
    merge(b, a)  # B now holds everything, secret included
    put(a, [tombstone("leaky", replica="ra"), tombstone("o-leak", replica="ra")])
    simulate_compact(a)
    return a, b, secret


def test_stale_replica_cannot_resurrect_into_the_compacted_one(tmp_path, cli):
    a, b, secret = _stale_pair(tmp_path)
    for source in (b, tmp_path / "export-b"):
        if source.name == "export-b":
            export(b, source)
        report = merge(a, source)
        assert report["imported"] == 0
        assert {r["reason"] for r in report["notImported"]} == {"tombstoned"}
        assert secret.event_id in {r["eventId"] for r in report["notImported"]}
        shown = cli("show", "--json", "--observations", env={"AGENT_JOURNAL_ROOT": str(a)})
        assert MARKER not in shown.out and "leaky" not in shown.out
        ids = {item["id"] for item in json.loads(shown.out)["entries"]}
        assert ids == {"fine"}  # its anchor still names o-leak: that text is its own
        assert MARKER.encode() not in all_bytes_under(a)


def test_compacted_replica_erases_on_the_stale_one_too(tmp_path, cli):
    a, b, secret = _stale_pair(tmp_path)
    before = set((b / "workspaces").rglob("*"))
    report = merge(b, a)
    assert report["imported"] == 2  # the two tombstones, nothing else
    shown = cli("show", "--json", "--observations", env={"AGENT_JOURNAL_ROOT": str(b)})
    assert MARKER not in shown.out and "leaky" not in shown.out
    # The stale replica still holds the bytes it had (its own compaction erases
    # them), but the merge wrote none of them anywhere.
    for path in set((b / "workspaces").rglob("*")) - before:
        if path.is_file():
            assert MARKER.encode() not in path.read_bytes(), path
    _, d = read_workspace(Context(str(b), WS))
    assert all(t.data["purged"] is False for ts in d.tombstones.values() for t in ts)
    # ...and an export of the stale replica no longer carries the secret at all.
    out = export(b, tmp_path / "exp")
    assert out["withheld"] == 2
    assert MARKER.encode() not in all_bytes_under(tmp_path / "exp")
    simulate_compact(b)


def test_tombstone_the_prescan_misses_still_holds_back(tmp_path):
    """The pre-scan finds tombstones by their type column; one whose column lies
    (or that lands while a live source is read) is met later, after its target
    was already written to the unpublished import: it is dropped, bytes and all."""
    a = make_root(tmp_path, "a", "raaaaaaaaaaaaaaa")
    b = make_root(tmp_path, "b", "rbbbbbbbbbbbbbbb")
    secret = observation("o-secret", replica="rb", output=f"printed {MARKER}")
    fine = [entry(f"n{i}", replica="rb") for i in range(5)]
    put(b, fine[:2] + [secret] + fine[2:] + [tombstone("o-secret", replica="rb")])
    seg = b / "workspaces" / WS / "segments" / "rbbbbbbbbbbbbbbb-000001.sqlite"
    with sqlite3.connect(seg) as conn:
        conn.execute("UPDATE events SET type = 'entry' WHERE type = 'tombstone'")
    report = merge(a, b)
    assert report["imported"] == 6 and report["malformed"] == []
    assert report["notImported"] == [{"eventId": secret.event_id, "reason": "tombstoned"}]
    assert MARKER.encode() not in all_bytes_under(a)
    _, d = read_workspace(Context(str(a), WS))
    assert "o-secret" in d.tombstones and len(d.visible_entry_ids()) == 5


def test_ttl_expired_content_may_return_but_tombstoned_never(tmp_path):
    a = make_root(tmp_path, "a", "raaaaaaaaaaaaaaa")
    b = make_root(tmp_path, "b", "rbbbbbbbbbbbbbbb")
    old = observation("o-old", replica="ra", ts="2025-01-01T00:00:00.000Z")
    put(a, [old])
    merge(b, a)
    # A expires o-old by TTL (local policy), B still holds it.
    seg = a / "workspaces" / WS / "segments" / "raaaaaaaaaaaaaaa-000001.sqlite"
    with sqlite3.connect(seg) as conn:
        conn.execute("DELETE FROM events WHERE subject = 'o-old'")
    report = merge(a, b)
    assert report["imported"] == 1 and report["replicaIdCollisions"] == []
    _, d = read_workspace(Context(str(a), WS))
    assert "o-old" in d.visible_observation_ids()


# -- replica id collisions ---------------------------------------------------------------

def test_copied_root_is_detected_and_nothing_is_lost(tmp_path):
    a = make_root(tmp_path, "a", "raaaaaaaaaaaaaaa")
    put(a, [entry("before-copy", replica="raaaaaaaaaaaaaaa")])
    a2 = copy_root(a, tmp_path / "a2")  # the same root on a second machine
    put(a, [entry("on-a", replica="raaaaaaaaaaaaaaa")])
    put(a2, [entry("on-a2", replica="raaaaaaaaaaaaaaa")])
    report = merge(a, a2)
    assert report["replicaIdCollisions"] == ["raaaaaaaaaaaaaaa"]
    assert report["imported"] == 1
    _, d = read_workspace(Context(str(a), WS))
    assert set(d.visible_entry_ids()) == {"before-copy", "on-a", "on-a2"}


def test_copied_root_seen_by_a_third_replica(tmp_path):
    a = make_root(tmp_path, "a", "raaaaaaaaaaaaaaa")
    put(a, [entry("base", replica="raaaaaaaaaaaaaaa")])
    a2 = copy_root(a, tmp_path / "a2")
    put(a, [entry("on-a", replica="raaaaaaaaaaaaaaa")])
    put(a2, [entry("on-a2", replica="raaaaaaaaaaaaaaa")])
    c = make_root(tmp_path, "c", "rccccccccccccccc")
    assert merge(c, a)["replicaIdCollisions"] == []
    report = merge(c, a2)
    assert report["replicaIdCollisions"] == ["raaaaaaaaaaaaaaa"]
    _, d = read_workspace(Context(str(c), WS))
    assert set(d.visible_entry_ids()) == {"base", "on-a", "on-a2"}
    # ...and through an export of C that a fourth replica merges with A2 again.
    e = make_root(tmp_path, "e", "reeeeeeeeeeeeeee")
    merge(e, a2)
    export(c, tmp_path / "exp-c")
    assert merge(e, tmp_path / "exp-c")["replicaIdCollisions"] == ["raaaaaaaaaaaaaaa"]


def test_copy_is_a_collision_once_both_copies_have_written(tmp_path):
    a = make_root(tmp_path, "a", "raaaaaaaaaaaaaaa")
    put(a, [entry("base", replica="raaaaaaaaaaaaaaa")])
    a2 = copy_root(a, tmp_path / "a2")
    put(a2, [entry("only-on-a2", replica="raaaaaaaaaaaaaaa")])
    # Only the copy wrote: one linear history (a root moved or restored), no fork yet.
    assert merge(a, a2)["replicaIdCollisions"] == []
    # Now the original writes too: its next append takes a slot the copy already used.
    put(a, [entry("on-a-later", replica="raaaaaaaaaaaaaaa")])
    put(a2, [entry("a2-again", replica="raaaaaaaaaaaaaaa")])
    report = merge(a, a2)
    assert report["replicaIdCollisions"] == ["raaaaaaaaaaaaaaa"]
    assert report["imported"] == 1
    _, d = read_workspace(Context(str(a), WS))
    assert set(d.visible_entry_ids()) == {"base", "only-on-a2", "on-a-later", "a2-again"}


def test_no_collision_for_ordinary_replicas_and_own_export(tmp_path):
    a = make_root(tmp_path, "a", "raaaaaaaaaaaaaaa")
    b = make_root(tmp_path, "b", "rbbbbbbbbbbbbbbb")
    put(a, [entry("x", replica="ra")])
    put(b, [entry("y", replica="rb")])
    export(a, tmp_path / "exp-a")
    assert merge(b, a)["replicaIdCollisions"] == []
    assert merge(a, b)["replicaIdCollisions"] == []
    put(a, [entry("later", replica="ra")])
    assert merge(a, tmp_path / "exp-a")["replicaIdCollisions"] == []
    assert merge(b, a)["replicaIdCollisions"] == []


# -- damaged sources and a damaged local side --------------------------------------------

def test_damaged_source_is_reported_never_imported(tmp_path, cli):
    a = make_root(tmp_path, "a", "raaaaaaaaaaaaaaa")
    b = make_root(tmp_path, "b", "rbbbbbbbbbbbbbbb")
    put(b, [entry(f"n{i}", replica="rb") for i in range(5)])
    seg = b / "workspaces" / WS / "segments" / "rbbbbbbbbbbbbbbb-000001.sqlite"
    with sqlite3.connect(seg) as conn:
        conn.execute("UPDATE events SET body = CAST(replace(body, 'n3', 'n9') AS BLOB) "
                     "WHERE subject = 'n3'")
    junk = seg.parent / "junk.sqlite"
    junk.write_bytes(b"not a database" * 100)
    # Damage refuses the merge, with --allow-damaged too while a segment is unreadable.
    for extra in ((), ("--allow-damaged",)):
        res = cli("merge", str(b), *extra, env={"AGENT_JOURNAL_ROOT": str(a)})
        assert res.code == 1 and "refusing to merge" in res.err and "junk.sqlite" in res.err
        assert not (a / "workspaces" / WS / "segments").exists() or \
            not list((a / "workspaces" / WS / "segments").iterdir())
    junk.unlink()
    res = cli("merge", str(b), env={"AGENT_JOURNAL_ROOT": str(a)})
    assert res.code == 1 and "1 malformed row(s)" in res.err and "--allow-damaged" in res.err
    res = cli("merge", str(b), "--allow-damaged", "--json", env={"AGENT_JOURNAL_ROOT": str(a)})
    assert res.code == 0
    report = res.json()
    assert report["imported"] == 4
    assert report["malformed"] == [{"segment": "workspaces/ws/segments/"
                                    "rbbbbbbbbbbbbbbb-000001.sqlite", "row": 4,
                                    "reason": "checksum mismatch"}]
    assert report["unreadable"] == []
    assert "were not imported" in res.err
    shown = cli("show", "--json", env={"AGENT_JOURNAL_ROOT": str(a)}).json()
    assert [e["id"] for e in shown["entries"]] == ["n0", "n1", "n2", "n4"]
    assert shown["malformed"] == [] and shown["unreadable"] == []


def test_export_names_its_damaged_rows_and_fixes_lying_columns(tmp_path):
    a = make_root(tmp_path, "a", "raaaaaaaaaaaaaaa")
    put(a, [entry(f"n{i}", replica="ra") for i in range(5)])
    seg = a / "workspaces" / WS / "segments" / "raaaaaaaaaaaaaaa-000001.sqlite"
    with sqlite3.connect(seg) as conn:
        conn.execute("UPDATE events SET body = CAST(replace(body, 'n3', 'n9') AS BLOB) "
                     "WHERE subject = 'n3'")
        # A lookup column that lies: the bytes say entry n1.
        conn.execute("UPDATE events SET subject = 'elsewhere', type = 'tombstone' "
                     "WHERE subject = 'n1'")
    report = export(a, tmp_path / "exp")
    assert [(m["row"], m["reason"]) for m in report["malformed"]] == [(4, "checksum mismatch")]
    manifest = json.loads((tmp_path / "exp" / "manifest.json").read_text())
    assert manifest["files"][0]["malformed"] == [{"row": 4, "reason": "checksum mismatch"}]
    b = make_root(tmp_path, "b", "rbbbbbbbbbbbbbbb")
    with pytest.raises(DamagedJournalError, match="1 malformed row"):
        merge(b, tmp_path / "exp")
    out = replicas.merge(Context(str(b), WS), str(tmp_path / "exp"), allow_damaged=True)
    assert out["imported"] == 4
    assert [(m["row"], m["reason"]) for m in out["malformed"]] == [(4, "checksum mismatch")]
    shown, result = show(Context(str(b), WS))
    assert [e["id"] for e in shown["entries"]] == ["n0", "n1", "n2", "n4"]
    assert not result.damaged
    (imp,) = [p for p in (b / "workspaces" / WS / "segments").glob("import-*")]
    with sqlite3.connect(imp) as conn:
        assert conn.execute("SELECT type FROM events WHERE subject = 'n1'").fetchone() == \
            ("entry",)


def test_merge_refuses_a_damaged_local_workspace(tmp_path, cli):
    a = make_root(tmp_path, "a", "raaaaaaaaaaaaaaa")
    b = make_root(tmp_path, "b", "rbbbbbbbbbbbbbbb")
    put(a, [entry("x", replica="ra"), tombstone("s", replica="ra")])
    put(b, [entry("s", replica="rb", text=MARKER)])
    seg = a / "workspaces" / WS / "segments" / "raaaaaaaaaaaaaaa-000001.sqlite"
    with sqlite3.connect(seg) as conn:  # the tombstone's row is damaged
        conn.execute("UPDATE events SET body = replace(body, 'must', 'must') || ' ' "
                     "WHERE type = 'tombstone'")
    with pytest.raises(DamagedJournalError, match="0 unreadable segment.s., 1 malformed row"):
        merge(a, b)
    res = cli("merge", str(b), env={"AGENT_JOURNAL_ROOT": str(a)})
    assert res.code == 1 and "refusing to merge" in res.err
    assert MARKER.encode() not in all_bytes_under(a)


def test_missing_or_odd_sources(tmp_path, cli):
    a = make_root(tmp_path, "a", "raaaaaaaaaaaaaaa")
    assert cli("merge", str(tmp_path / "nope"), env={"AGENT_JOURNAL_ROOT": str(a)}).code == 1
    (tmp_path / "empty").mkdir()
    res = cli("merge", str(tmp_path / "empty"), env={"AGENT_JOURNAL_ROOT": str(a)})
    assert res.code == 1 and "neither an export" in res.err
    assert cli("merge", "", env={"AGENT_JOURNAL_ROOT": str(a)}).code == 2
    fresh = tmp_path / "fresh-root"
    assert cli("merge", str(tmp_path / "nope"), env={"AGENT_JOURNAL_ROOT": str(fresh)}).code == 1
    assert not fresh.exists()  # refused before anything was created
    assert cli("merge", env={"AGENT_JOURNAL_ROOT": str(a)}).code == 2
    assert cli("merge", str(a), "--json=yes", env={"AGENT_JOURNAL_ROOT": str(a)}).code == 2


# -- export -------------------------------------------------------------------------------

def test_export_manifest_and_round_trip(tmp_path, cli):
    a = make_root(tmp_path, "a")
    assert cli("record", "--kind", "finding", "--id", "f1", "--claim", "c",
               env={"AGENT_JOURNAL_ROOT": str(a)}).code == 0
    assert cli("observe", "--kind", "tool_call", "--id", "o1", "--tool", "Bash",
               env={"AGENT_JOURNAL_ROOT": str(a)}).code == 0
    dest = tmp_path / "out" / "exp"
    res = cli("export", str(dest), "--json", env={"AGENT_JOURNAL_ROOT": str(a)})
    assert res.code == 0 and res.err == ""
    report = res.json()
    assert (report["files"], report["events"], report["withheld"]) == (1, 2, 0)
    manifest = json.loads((dest / "manifest.json").read_text())
    assert set(manifest) == {"format", "workspace", "sourceReplica", "createdTs", "files",
                             "artifacts", "tombstoned"}
    (f,) = manifest["files"]
    assert f["events"] == 2 and f["bytes"] == (dest / f["name"]).stat().st_size
    assert f["replica"] == manifest["sourceReplica"] == (a / "replica-id").read_text().strip()
    assert f["checksum"].startswith("xxh3-64:")
    assert oct(dest.stat().st_mode & 0o777) == "0o700"
    assert all(oct(p.stat().st_mode & 0o777) == "0o600" for p in dest.iterdir())
    # Refuses to overwrite.
    again = cli("export", str(dest), env={"AGENT_JOURNAL_ROOT": str(a)})
    assert again.code == 1 and "not empty" in again.err
    b = make_root(tmp_path, "b")
    merged = cli("merge", str(dest), "--json", env={"AGENT_JOURNAL_ROOT": str(b)})
    assert merged.code == 0 and merged.json()["imported"] == 2
    shown_a = cli("show", "--json", "--observations", env={"AGENT_JOURNAL_ROOT": str(a)}).out
    shown_b = cli("show", "--json", "--observations", env={"AGENT_JOURNAL_ROOT": str(b)}).out
    assert shown_a == shown_b


@pytest.mark.parametrize("where", ["segment", "manifest-bytes", "artifact"])
def test_tampered_export_is_refused_and_nothing_imported(tmp_path, cli, where):
    a = make_root(tmp_path, "a", "raaaaaaaaaaaaaaa")
    blob = b"large tool output\n" * 100
    ref = _ref(blob)
    art = {"ref": ref, "bytes": len(blob), "checksum": _xxh(blob), "status": "complete"}
    put(a, [entry(f"n{i}", replica="ra") for i in range(20)]
        + [observation("o-art", replica="ra", artifact=art)])
    blob_path = Path(artifact_path(Root.open(a, create=False).workspace(WS), ref))
    blob_path.parent.mkdir(parents=True)
    blob_path.write_bytes(blob)
    dest = tmp_path / "exp"
    assert export(a, dest)["artifacts"] == 1
    manifest = json.loads((dest / "manifest.json").read_text())
    if where == "segment":
        target = dest / manifest["files"][0]["name"]
        data = bytearray(target.read_bytes())
        at = data.find(b"n17")
        data[at + 2] ^= 0x01  # one byte
        target.write_bytes(bytes(data))
    elif where == "artifact":
        target = dest / manifest["artifacts"][0]["path"]
        data = bytearray(target.read_bytes())
        data[5] ^= 0x20
        target.write_bytes(bytes(data))
    else:
        manifest["files"][0]["bytes"] += 1
        (dest / "manifest.json").write_text(json.dumps(manifest))
    b = make_root(tmp_path, "b", "rbbbbbbbbbbbbbbb")
    put(b, [entry("mine", replica="rb")])
    before = sorted(p.name for p in (b / "workspaces").rglob("*"))
    with pytest.raises(IntegrityError, match="do not match the manifest"):
        merge(b, dest)
    res = cli("merge", str(dest), env={"AGENT_JOURNAL_ROOT": str(b)})
    assert res.code == 1 and "nothing was imported" in res.err and res.out == ""
    assert sorted(p.name for p in (b / "workspaces").rglob("*")) == before


def _xxh(data: bytes) -> str:
    import xxhash

    return "xxh3-64:" + xxhash.xxh3_64_hexdigest(data)


def _ref(data: bytes) -> str:
    """A content address in the capture branch's form."""
    import xxhash

    return "xxh3-128:" + xxhash.xxh3_128_hexdigest(data)


def test_artifacts_travel_with_their_observations(tmp_path):
    a = make_root(tmp_path, "a", "raaaaaaaaaaaaaaa")
    ws_a = Root.open(a, create=True).workspace(WS)
    blobs = {}
    events = []
    for name in ("keep", "secret", "broken"):
        blob = f"{name} output {MARKER if name == 'secret' else ''}\n".encode() * 50
        ref = _ref(blob)
        art = {"ref": ref, "bytes": len(blob), "checksum": _xxh(blob), "status": "complete"}
        blobs[name] = (ref, blob)
        events.append(observation(f"o-{name}", replica="ra", artifact=art))
        path = Path(artifact_path(ws_a, ref))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(blob if name != "broken" else blob[:-1])
    put(a, events + [tombstone("o-secret", replica="ra")])
    report = export(a, tmp_path / "exp")
    assert report["artifacts"] == 1 and report["artifactsMissing"] == [blobs["broken"][0]]
    assert MARKER.encode() not in all_bytes_under(tmp_path / "exp")
    b = make_root(tmp_path, "b", "rbbbbbbbbbbbbbbb")
    out = merge(b, tmp_path / "exp")
    assert out["artifacts"] == {"copied": 1, "alreadyPresent": 0,
                                "missing": [blobs["broken"][0]]}
    ws_b = Root.open(b, create=False).workspace(WS)
    assert Path(artifact_path(ws_b, blobs["keep"][0])).read_bytes() == blobs["keep"][1]
    # From a root source too; the tombstoned observation's blob never travels.
    c = make_root(tmp_path, "c", "rccccccccccccccc")
    out = merge(c, a)
    assert out["artifacts"]["copied"] == 1
    assert MARKER.encode() not in all_bytes_under(c)


def test_an_artifact_ref_this_version_cannot_place_is_missing_not_fatal(tmp_path):
    a = make_root(tmp_path, "a", "raaaaaaaaaaaaaaa")
    odd = {"ref": "sha999:" + "ab" * 20, "bytes": 3, "checksum": "xxh3-64:00",
           "status": "complete"}
    put(a, [observation("o-odd", replica="ra", artifact=odd)])
    assert export(a, tmp_path / "exp")["artifactsMissing"] == [odd["ref"]]
    b = make_root(tmp_path, "b", "rbbbbbbbbbbbbbbb")
    assert merge(b, tmp_path / "exp")["artifacts"]["missing"] == [odd["ref"]]
    c = make_root(tmp_path, "c", "rccccccccccccccc")
    assert merge(c, a)["artifacts"]["missing"] == [odd["ref"]]


# -- export under load --------------------------------------------------------------------

WRITER = r"""
import os, sys
from agent_journal.ops.context import Context
from agent_journal.ops.writes import observe
root, name, stop = sys.argv[1], sys.argv[2], sys.argv[3]
ctx = Context(root, "ws")
ack = open(os.path.join(os.path.dirname(stop), f"ack-{name}"), "a", buffering=1)
i = 0
while not os.path.exists(stop):
    res = observe(ctx, kind="tool_call", obs_id=f"{name}-{i}", tool="Bash", call_id=str(i),
                  input_value={"i": i}, output="x" * 300, status="ok", exit_code=0,
                  duration_ms=1)
    ack.write(res.event_id + "\n")  # written only after the append committed
    i += 1
"""


def test_export_while_four_writers_append(tmp_path):
    root = make_root(tmp_path, "live", "rlivelivelivelive"[:16])
    put(root, [entry("seed", replica="rl")])
    ctl = tmp_path / "ctl"
    ctl.mkdir()
    stop = ctl / "stop"
    env = clean_env()
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(root), f"w{i}", str(stop)],
                              env=env, stderr=subprocess.PIPE) for i in range(4)]
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            acked = _acked(ctl)
            if len(acked) >= 200:
                break
            time.sleep(0.05)  # polling, with the deadline above
        before = _acked(ctl)  # every event acknowledged before the export began
        assert len(before) >= 200
        report = export(root, tmp_path / "exp")
        # The writers append on past the export: wait until one has acknowledged a write
        # the export may not have seen (not a fixed sleep that a loaded machine outlasts).
        deadline = time.monotonic() + 120
        while len(_acked(ctl)) <= len(before):
            assert time.monotonic() < deadline, "the writers stopped appending"
            time.sleep(0.01)
    finally:
        stop.write_text("")
        errs = [p.communicate(timeout=60)[1] for p in procs]
    assert all(p.returncode == 0 for p in procs), errs
    exported: set[str] = set()
    manifest = json.loads((tmp_path / "exp" / "manifest.json").read_text())
    for f in manifest["files"]:
        path = tmp_path / "exp" / f["name"]
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            ids = [r[0] for r in conn.execute("SELECT event_id FROM events")]
        assert len(ids) == f["events"]
        exported.update(ids)
    assert before <= exported
    assert report["events"] == len(exported) and report["malformed"] == []
    after = _acked(ctl)
    assert len(after) > len(before)  # the writers really were appending throughout
    # The export merges cleanly into a fresh replica.
    fresh = make_root(tmp_path, "fresh", "rfreshfreshfresh"[:16])
    assert merge(fresh, tmp_path / "exp")["imported"] == len(exported)


def _acked(ctl: Path) -> set[str]:
    out: set[str] = set()
    for p in ctl.glob("ack-*"):
        out.update(line for line in p.read_text().splitlines() if len(line) == 36)
    return out


def test_two_merges_at_once_import_each_event_once(tmp_path):
    a = make_root(tmp_path, "a", "raaaaaaaaaaaaaaa")
    b = make_root(tmp_path, "b", "rbbbbbbbbbbbbbbb")
    fast_put(b, [observation(f"o{i}", replica="rb") for i in range(3000)])
    env = clean_env(AGENT_JOURNAL_ROOT=str(a), AGENT_JOURNAL_WORKSPACE=WS)
    procs = [subprocess.Popen([CLI, "merge", str(b), "--json"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=env) for _ in range(3)]
    reports = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        reports.append(json.loads(out))
    assert sorted(r["imported"] for r in reports) == [0, 0, 3000]
    ids = []
    for seg in (a / "workspaces" / WS / "segments").glob("*.sqlite"):
        with sqlite3.connect(seg) as conn:
            ids += [r[0] for r in conn.execute("SELECT event_id FROM events")]
    assert len(ids) == len(set(ids)) == 3000


# -- quiet unless a terminal ----------------------------------------------------------------

def test_progress_only_on_a_terminal(tmp_path):
    a = make_root(tmp_path, "a", "raaaaaaaaaaaaaaa")
    b = make_root(tmp_path, "b", "rbbbbbbbbbbbbbbb")
    put(b, [entry("x", replica="rb")])
    env = clean_env(AGENT_JOURNAL_ROOT=str(a), AGENT_JOURNAL_WORKSPACE=WS)
    proc, seen = run_on_a_terminal([CLI, "merge", str(b), "--json"], env, 60)
    assert proc.returncode == 0 and json.loads(proc.stdout)["imported"] == 1
    assert b"merge: importing 1/1" in seen


def test_a_segment_its_writers_keep_locked_is_reported_busy_not_damaged(tmp_path, monkeypatch):
    """A snapshot that cannot get past the writers' lock says so; it never calls
    the segment unreadable (that would send the user to repair sound bytes)."""
    from agent_journal.core.errors import BusyError
    from agent_journal.storage import connection, replica_source

    root = make_root(tmp_path, "busy", "rbusybusybusybus")
    fast_put(root, [entry("e1", replica="rb")])
    seg = next((root / "workspaces" / WS / "segments").glob("*.sqlite"))
    monkeypatch.setattr(connection, "BUSY_TIMEOUT_S", 0.05)
    holder = sqlite3.connect(seg, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        dest = tmp_path / "copy.sqlite"
        with pytest.raises(BusyError):
            replica_source.snapshot_segment(str(seg), str(dest))
        assert not dest.exists()
        with pytest.raises(BusyError):
            export(root, tmp_path / "exp")
        assert not (tmp_path / "exp").exists()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    replica_source.snapshot_segment(str(seg), str(tmp_path / "copy.sqlite"))  # free again
