"""Work done once: export checks shared with workers and remembered per snapshot's bytes,
and several sources merged in one pass over the local workspace.

Each structural shortcut is held to the plain way it replaces: the same
export, the same reports, whatever the shortcut remembered or who did the work.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from conftest import CLI, all_bytes_under, clean_env
from hypothesis import given, settings
from test_replicas import (
    LAW_SETTINGS,
    WS,
    build,
    copy_root,
    entry,
    export,
    make_root,
    merge,
    observation,
    put,
    replica_sets,
    scratch,
    state,
    tombstone,
)

from agent_journal.core import codec
from agent_journal.core.errors import DamagedJournalError
from agent_journal.ops import export_check, replicas
from agent_journal.ops.context import Context
from agent_journal.storage import local_scans, verified_mark, verified_points
from agent_journal.storage.connection import connect, run_write
from agent_journal.storage.files import create_private_file, make_private_dirs
from agent_journal.storage.root import Root
from agent_journal.storage.segment import init_segment, insert_events

RID = "r0000000000000a1"


def _segments(root: Path) -> Path:
    return root / "workspaces" / WS / "segments"


def _projection(root: Path) -> Path:
    return root / "cache" / verified_points.PROJECTION_AREA / f"{WS}.json"


def _sealed_root(base: Path, segments: int = 4) -> Path:
    """A replica with several own segments (an entry and an observation in each)."""
    root = make_root(base, "src", RID)
    ws = Root.open(root, create=True).workspace(WS)
    make_private_dirs(ws.segments_dir)
    for k in range(segments):
        path = os.path.join(ws.segments_dir, f"{RID}-{k + 1:06d}.sqlite")
        create_private_file(path)
        conn = connect(path)
        try:
            init_segment(conn, workspace=WS, replica=RID)
            events = [entry(f"e{k}", replica=RID, text=f"SECRET-{k}"),
                      observation(f"o{k}", replica=RID, output=f"out {k}")]
            run_write(conn, lambda c, e=events: insert_events(c, e))
        finally:
            conn.close()
    return root


def _manifest(dest: Path) -> dict:
    got = json.loads((dest / "manifest.json").read_text())
    got.pop("createdTs")
    return got


def _files(dest: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(dest.glob("*.sqlite"))}


def _damage_a_body(root: Path, segment: str) -> None:
    """Flip one byte of one body, keeping its length (the checksum then disagrees)."""
    with sqlite3.connect(_segments(root) / segment) as conn:
        seq, body = conn.execute("SELECT seq, body FROM events ORDER BY seq LIMIT 1").fetchone()
        flipped = body.replace(b"SECRET", b"SECRFT", 1)
        assert flipped != body and len(flipped) == len(body)
        conn.execute("UPDATE events SET body = ? WHERE seq = ?", (flipped, seq))


def test_workers_export_exactly_what_one_process_exports(tmp_path, monkeypatch):
    root = _sealed_root(tmp_path, segments=5)
    _damage_a_body(root, f"{RID}-000002.sqlite")
    put(root, [tombstone("e3", replica=RID)])
    runs = {}
    for workers in ("0", "2"):
        shutil.rmtree(root / "cache", ignore_errors=True)
        monkeypatch.setenv(export_check.ENV_VERIFY_WORKERS, workers)
        dest = tmp_path / f"w{workers}"
        report = export(root, dest)
        runs[workers] = (_manifest(dest), _files(dest), report["malformed"], report["withheld"])
    assert runs["0"] == runs["2"]
    assert runs["0"][2] and runs["0"][3] == 1  # the damaged row named, e3 held back


def test_a_worker_that_fails_has_its_checks_done_here(tmp_path, monkeypatch):
    root = _sealed_root(tmp_path)
    monkeypatch.setenv(export_check.ENV_VERIFY_WORKERS, "0")
    export(root, tmp_path / "plain")
    shutil.rmtree(root / "cache")
    monkeypatch.setenv(export_check.ENV_VERIFY_WORKERS, "2")
    monkeypatch.setattr("sys.executable", "/bin/false")  # every worker exits at once
    export(root, tmp_path / "failed")
    assert _manifest(tmp_path / "plain") == _manifest(tmp_path / "failed")
    assert _files(tmp_path / "plain") == _files(tmp_path / "failed")


def test_bytes_checked_before_are_not_checked_again(tmp_path, monkeypatch):
    root = _sealed_root(tmp_path)
    export(root, tmp_path / "first")
    assert _projection(root).exists()
    calls = []
    real = export_check.verdict
    monkeypatch.setattr(export_check, "verdict", lambda *a: calls.append(a) or real(*a))
    export(root, tmp_path / "second")
    # Only the active segment (the tombstone-free newest one, unchanged) could
    # differ; every sealed one is found by its bytes.
    assert calls == []
    assert _manifest(tmp_path / "first")["files"] == _manifest(tmp_path / "second")["files"]


def test_a_new_tombstone_is_honoured_in_snapshots_checked_before(tmp_path):
    root = _sealed_root(tmp_path)
    export(root, tmp_path / "first")
    put(root, [tombstone("e1", replica=RID)])
    report = export(root, tmp_path / "second")
    assert report["withheld"] == 1
    assert b"SECRET-1" not in all_bytes_under(tmp_path / "second")
    assert b"SECRET-2" in all_bytes_under(tmp_path / "second")


def test_a_projection_whose_file_changed_under_it_is_not_trusted(tmp_path):
    root = _sealed_root(tmp_path)
    export(root, tmp_path / "first")
    remembered = json.loads(_projection(root).read_text())["segments"]
    assert f"{RID}-000002.sqlite" in remembered
    _damage_a_body(root, f"{RID}-000002.sqlite")
    report = export(root, tmp_path / "second")
    assert [m["segment"].rsplit("/", 1)[-1] for m in report["malformed"]] == \
        [f"{RID}-000002.sqlite"]
    entry_of = {f["name"]: f for f in _manifest(tmp_path / "second")["files"]}
    assert entry_of[f"{RID}-000002.sqlite"]["malformed"]
    # A snapshot with damage is not remembered as clean.
    assert f"{RID}-000002.sqlite" not in json.loads(_projection(root).read_text())["segments"]


def test_a_lying_projection_entry_for_other_bytes_changes_nothing(tmp_path):
    root = _sealed_root(tmp_path)
    export(root, tmp_path / "first")
    lied = json.loads(_projection(root).read_text())
    for held in lied["segments"].values():
        held["rows"] = 0
        held["artifacts"] = [["sha256:" + "0" * 64, 1, "xxh3-64:0", "o9"]]
    _projection(root).write_text(json.dumps(lied))
    _damage_a_body(root, f"{RID}-000003.sqlite")  # its bytes no longer match what it says
    report = export(root, tmp_path / "second")
    assert [m["segment"].rsplit("/", 1)[-1] for m in report["malformed"]] == \
        [f"{RID}-000003.sqlite"]
    entry_of = {f["name"]: f for f in _manifest(tmp_path / "second")["files"]}
    assert entry_of[f"{RID}-000003.sqlite"]["events"] == 2


def test_compaction_purges_the_projection(tmp_path):
    root = _sealed_root(tmp_path)
    export(root, tmp_path / "first")
    assert _projection(root).exists()
    put(root, [tombstone("e1", replica=RID)])
    proc = subprocess.run([CLI, "compact", "--apply", "--root", str(root), "--workspace", WS],
                          capture_output=True, env=clean_env())
    assert proc.returncode == 0, proc.stderr
    assert not _projection(root).exists()


# -- one pass over the local workspace ---------------------------------------------------

@LAW_SETTINGS
@given(replica_sets(4))
def test_merging_n_sources_in_one_pass_reports_what_n_merges_report(data):
    base = scratch()
    try:
        target, *sources = build(base, *data)
        # Sources as pull stages them (exports) and as roots, one of them twice.
        exported = []
        for n, src in enumerate(sources):
            dest = base / f"export{n}"
            export(src, dest)
            exported.append(dest)
        order = [exported[0], sources[1], exported[2], exported[0]]
        separate = copy_root(target, base / "separate")
        one_by_one = [merge(separate, s) for s in order]
        one_pass = copy_root(target, base / "one-pass")
        together = replicas.merge_all(Context(str(one_pass), WS), [str(s) for s in order])
        assert together == one_by_one
        assert state(one_pass) == state(separate)
    finally:
        shutil.rmtree(base)


def test_one_pass_reads_the_local_workspace_once(tmp_path, monkeypatch):
    rids = [f"r{i:015x}" for i in range(1, 5)]
    roots = []
    for i, rid in enumerate(rids):
        root = make_root(tmp_path, f"rep{i}", rid)
        put(root, [entry(f"x{i}", replica=rid), tombstone(f"x{(i + 1) % 4}", replica=rid)])
        roots.append(root)
    full_scans = []
    real = replicas.scan_local

    def counting(ws, **kw):
        if kw.get("paths") is None:
            full_scans.append(ws.name)
        return real(ws, **kw)

    monkeypatch.setattr(replicas, "scan_local", counting)
    reports = replicas.merge_all(Context(str(roots[0]), WS), [str(r) for r in roots[1:]])
    assert full_scans == [WS]
    # Each entry is held back by the tombstone the source before it brought:
    # only a merge that sees what the earlier ones published knows that.
    assert [r["imported"] for r in reports] == [1, 1, 1]
    assert [len(r["notImported"]) for r in reports] == [1, 1, 1]


# -- what a merge remembers of the local segments ------------------------------------------

def _scan_points(root: Path) -> Path:
    return root / "cache" / local_scans.AREA / f"{WS}.json"


def test_a_remembered_local_segment_that_changed_is_read_again(tmp_path, monkeypatch):
    monkeypatch.setattr(verified_mark, "RACY_NS", 0)
    target = make_root(tmp_path, "target", "r00000000000000t")
    put(target, [entry("x", replica="r00000000000000t")])
    first = make_root(tmp_path, "first", "r00000000000000f")
    put(first, [entry("f", replica="r00000000000000f")])
    merge(target, first)
    assert _scan_points(target).exists()
    # The remembered own segment gains a tombstone for what the next source brings.
    put(target, [tombstone("y", replica="r00000000000000t")])
    second = make_root(tmp_path, "second", "r00000000000000s")
    put(second, [entry("y", replica="r00000000000000s", text="SECRET-y")])
    report = merge(target, second)
    assert report["imported"] == 0
    assert [n["reason"] for n in report["notImported"]] == ["tombstoned"]
    assert b"SECRET-y" not in all_bytes_under(target / "workspaces")


def test_damage_in_a_remembered_local_segment_still_refuses(tmp_path, monkeypatch):
    monkeypatch.setattr(verified_mark, "RACY_NS", 0)
    target = make_root(tmp_path, "target", "r00000000000000t")
    put(target, [tombstone("x", replica="r00000000000000t"),
                 entry("z", replica="r00000000000000t")])
    src = make_root(tmp_path, "src", "r00000000000000s")
    put(src, [entry("a", replica="r00000000000000s")])
    merge(target, src)
    seg = next(_segments(target).glob("r00000000000000t-*.sqlite"))
    assert seg.name in json.loads(_scan_points(target).read_text())["segments"]
    with sqlite3.connect(seg) as conn:
        conn.execute("UPDATE events SET checksum = 'xxh3-64:0000000000000000' "
                     "WHERE type = 'tombstone'")
    put(src, [entry("b", replica="r00000000000000s")])
    for _ in range(2):  # and not remembered as clean either
        with pytest.raises(DamagedJournalError):
            merge(target, src)


def test_merges_through_remembered_scans_equal_merges_without(tmp_path, monkeypatch):
    monkeypatch.setattr(verified_mark, "RACY_NS", 0)
    rids = [f"r{i:015x}" for i in range(1, 4)]
    roots = []
    for i, rid in enumerate(rids):
        root = make_root(tmp_path, f"rep{i}", rid)
        put(root, [entry(f"x{i}", replica=rid), tombstone(f"x{(i + 1) % 3}", replica=rid),
                   observation(f"o{i}", replica=rid)])
        roots.append(root)
    remembering = copy_root(roots[0], tmp_path / "remembering")
    forgetting = copy_root(roots[0], tmp_path / "forgetting")
    for src in (roots[1], roots[2], roots[1]):
        got = merge(remembering, src)
        shutil.rmtree(forgetting / "cache", ignore_errors=True)
        assert got == merge(forgetting, src)
    assert state(remembering) == state(forgetting)


def _direct_scan(path: Path) -> dict:
    """What scan_local reads of one segment, without any projection."""
    from agent_journal.storage.replica_source import (
        SegmentRows,
        imported_then_removed,
        origin_keys,
    )

    tombstoned = set()
    for _seq, event_id, type_, subject, ts, body, digest in SegmentRows(
            str(path), only="tombstone_candidates").rows:
        ev = codec.decode_checked(body, digest, event_id, type_, subject, ts)
        if ev.type == "tombstone":
            tombstoned.add(ev.id)
    return {"tombstoned": sorted(tombstoned), "removed": sorted(imported_then_removed(str(path))),
            "origin": sorted([r, s] for r, s in origin_keys(str(path)))}


def test_a_published_import_is_remembered_as_a_read_finds_it(tmp_path, monkeypatch):
    # Three replicas in a chain, so that an import carries another import's
    # provenance; tombstones arrive purged and not, and one only in a later
    # source segment (its target, already written, is dropped before publishing).
    monkeypatch.setenv("AGENT_JOURNAL_SEGMENT_MAX_BYTES", "1")  # an import per source file
    a, b, c = "r00000000000000a", "r00000000000000b", "r00000000000000c"
    first = make_root(tmp_path, "first", a)
    put(first, [entry("x", replica=a), tombstone("gone", replica=a, purged=True),
                observation("o1", replica=a)])
    middle = make_root(tmp_path, "middle", b)
    merge(middle, first)
    put(middle, [entry("y", replica=b), tombstone("x2", replica=b)])
    target = make_root(tmp_path, "target", c)
    put(target, [entry("z", replica=c)])
    for src in (middle, first):
        merge(target, src)
    held = json.loads(_scan_points(target).read_text())["segments"]
    imports = sorted(_segments(target).glob("import-*.sqlite"))
    assert len(imports) >= 2
    for path in imports:
        entry_ = held[path.name]
        assert {k: entry_[k] for k in ("tombstoned", "removed", "origin")} == \
            _direct_scan(path), path.name
    assert any(held[p.name]["tombstoned"] for p in imports)
    assert any(len(held[p.name]["origin"]) > 0 for p in imports)


def test_a_published_import_is_used_only_for_the_bytes_it_was_published_with(tmp_path):
    target = make_root(tmp_path, "target", "r00000000000000t")
    src = make_root(tmp_path, "src", "r00000000000000s")
    put(src, [tombstone("q", replica="r00000000000000s"), entry("a", replica="r00000000000000s")])
    merge(target, src)
    path = next(_segments(target).glob("import-*.sqlite"))
    ws = Root.open(target, create=False).workspace(WS)
    assert local_scans.ScanPoints(ws).lookup(str(path)) is not None
    # The same size, mtime and SQLite change counter, other bytes: a write the
    # fingerprint cannot see, in the clock tick of the publish.
    st = os.stat(path)
    data = bytearray(path.read_bytes())
    at = data.rindex(b'"must not exist"')
    data[at + 1:at + 5] = b"MUST"
    with open(path, "r+b") as fh:
        fh.write(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert local_scans.segment_signature(str(path))[0] == \
        json.loads(_scan_points(target).read_text())["segments"][path.name]["sig"]
    assert local_scans.ScanPoints(ws).lookup(str(path)) is None


def test_a_published_import_is_trusted_by_its_fingerprint_once_it_is_old(tmp_path, monkeypatch):
    target = make_root(tmp_path, "target", "r00000000000000t")
    src = make_root(tmp_path, "src", "r00000000000000s")
    put(src, [entry("a", replica="r00000000000000s")])
    merge(target, src)
    path = next(_segments(target).glob("import-*.sqlite"))
    assert "checksum" in json.loads(_scan_points(target).read_text())["segments"][path.name]
    monkeypatch.setattr(verified_mark, "RACY_NS", 0)  # as if two seconds had passed
    put(src, [entry("b", replica="r00000000000000s")])
    merge(target, src)
    assert "checksum" not in json.loads(_scan_points(target).read_text())["segments"][path.name]


def test_an_export_of_bytes_checked_before_reads_no_row_for_its_tombstones(tmp_path,
                                                                              monkeypatch):
    from agent_journal.ops import export as export_op

    root = _sealed_root(tmp_path)
    put(root, [tombstone("e2", replica=RID), tombstone("o3", replica=RID)])
    first = export(root, tmp_path / "first")

    def unread(*_a, **_k):
        raise AssertionError("read the snapshot's rows for its tombstones again")

    monkeypatch.setattr(export_op, "_candidates", unread)
    again = export(root, tmp_path / "again")
    assert _manifest(tmp_path / "first") == _manifest(tmp_path / "again")
    assert _files(tmp_path / "first") == _files(tmp_path / "again")
    assert again == {**first, "dest": str(tmp_path / "again")}
    assert first["withheld"] == 2


@settings(LAW_SETTINGS, max_examples=max(1, LAW_SETTINGS.max_examples // 3))
@given(replica_sets(3))
@pytest.mark.parametrize("kind", ["export", "root"])
def test_asking_the_local_index_about_the_source_ids_merges_what_reading_every_id_merges(
        kind, data):
    """Asked segment by segment as each is read (a journal root's, which may gain
    rows meanwhile, as well as an export's)."""
    from unittest import mock

    base = scratch()
    try:
        target, first, *sources = build(base, *data)
        merge(target, first)  # imports (with provenance) on the local side too
        exported = []
        for n, src in enumerate([*sources, first]):
            dest = base / f"export{n}"
            if kind == "export":
                export(src, dest)
            else:
                shutil.copytree(src, dest, symlinks=True)
            exported.append(dest)
        runs = {}
        for probing in (False, True):
            into = copy_root(target, base / f"probing-{probing}")
            asked = []
            real = replicas.held_here

            def counting(ws, wanted, probe=None, real=real, asked=asked):
                asked.append(len(wanted))
                return real(ws, wanted, probe)

            with mock.patch.object(replicas, "probe_ids", lambda ws, srcs, p=probing: p), \
                    mock.patch.object(replicas, "held_here", counting):
                reports = [merge(into, exported[-1])]
                reports += replicas.merge_all(Context(str(into), WS),
                                              [str(e) for e in exported])
            assert bool(asked) == probing
            runs[probing] = (reports, state(into))
        assert runs[True] == runs[False]
    finally:
        shutil.rmtree(base)


def test_a_large_workspace_is_asked_about_the_source_ids_never_read_whole(tmp_path,
                                                                         monkeypatch):
    """Bounded memory: past READ_IDS_MAX_BYTES of local segments a merge keeps only the
    local ids it was asked about, even from a source larger than the workspace."""
    base = tmp_path / "b"
    base.mkdir(mode=0o700)
    src = _sealed_root(base, segments=4)
    into = make_root(base, "into", "r00000000000000b")
    put(into, [entry("local", replica="r00000000000000b")])
    ws = Context(str(into), WS).open(create=False)
    sources = [replicas.open_source(str(src), WS)]
    assert not replicas.probe_ids(ws, sources)  # the source is the larger
    monkeypatch.setattr(replicas, "READ_IDS_MAX_BYTES", 0)
    assert replicas.probe_ids(ws, sources)


def test_the_held_probe_answers_as_a_fresh_read_and_never_keeps_a_writer_waiting(tmp_path):
    """HeldProbe keeps each local segment open across a merge's questions: its answers
    are ids_held's, including rows appended between two questions, and no transaction
    is held between them, so a writer commits while it is open."""
    from agent_journal.storage.replica_source import HeldProbe, ids_held

    base = tmp_path / "b"
    base.mkdir(mode=0o700)
    root = _sealed_root(base, segments=2)
    seg = sorted(_segments(root).iterdir())[0]
    held = {r[0] for r in sqlite3.connect(seg).execute("SELECT event_id FROM events")}
    wanted = held | {"not-held-1", "not-held-2"}
    probe = HeldProbe()
    try:
        assert probe.held(str(seg), wanted) == ids_held(str(seg), wanted) == held
        more = entry("later", replica=RID)
        conn = connect(str(seg))
        conn.execute("PRAGMA busy_timeout = 0")  # a lock left held would fail at once
        try:
            run_write(conn, lambda c: insert_events(c, [more]))
        finally:
            conn.close()
        assert probe.held(str(seg), wanted | {more.event_id}) == held | {more.event_id}
    finally:
        probe.close()
