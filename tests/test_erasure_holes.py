"""Erasure and acknowledged data under attack (issue 15): a blob cited while
compaction erases another capture of it, a journal whose writers never stop,
tombstoned content brought back through every path that writes, projection
leftovers, and a stale replica merged again after a TTL run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import CLI, all_bytes_under, clean_env

from agent_journal.ops import compact, context, evidence, writes


def _env(root: Path, **extra: str) -> dict[str, str]:
    return clean_env(AGENT_JOURNAL_ROOT=str(root), AGENT_JOURNAL_WORKSPACE="ws", **extra)


def _ctx(root: Path) -> context.Context:
    return context.Context(str(root), "ws", session="test")


def _observe(ctx: context.Context, obs_id: str, output: str | None) -> None:
    writes.observe(ctx, kind="tool_call", obs_id=obs_id, tool="Bash", call_id="c",
                   input_value=None, output=output, status="ok", exit_code=0, duration_ms=1)


def _compact(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([CLI, "compact", "--apply", "--json", *args], env=_env(root),
                          capture_output=True, timeout=120)


def _wait_for(predicate, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


# -- a blob cited while compaction erases another capture of the same bytes ------------------

# Each round: capture the round's output (a blob), then take a while to commit, as a
# writer waiting on a busy journal does; only then is the observation acknowledged.
CAPTURER = r"""
import os, sys, time
from agent_journal.ops import context, writes
from agent_journal.storage.workspace import Workspace
root, name, folder, delay = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
real_append = Workspace.append
def slow_append(self, *a, **kw):
    time.sleep(delay)  # the slow commit is the test: a capture cited late, mid-compaction
    return real_append(self, *a, **kw)
Workspace.append = slow_append
ctx = context.Context(root, "ws", session=name)
done = 0
while True:
    if os.path.exists(os.path.join(folder, "stop")):
        break
    path = os.path.join(folder, f"round-{done + 1}")
    if not os.path.exists(path):
        time.sleep(0.005)  # polling for the next round's file (or "stop")
        continue
    done += 1
    output = open(path).read()
    oid = f"{name}-{done}"
    writes.observe(ctx, kind="tool_call", obs_id=oid, tool="Bash", call_id="c",
                   input_value=None, output=output, status="ok", exit_code=0, duration_ms=1)
    with open(os.path.join(folder, f"ack-{name}-{done}"), "w") as fh:
        fh.write(oid)
"""


def _capture_race(root: Path, tmp_path: Path, rounds: int) -> None:
    ctx = _ctx(root)
    _observe(ctx, "seed", None)
    folder = tmp_path / "signals"
    folder.mkdir()
    names = ["w0", "w1"]
    writers = [subprocess.Popen([sys.executable, "-c", CAPTURER, str(root), name,
                                 str(folder), "0.8"], env=_env(root)) for name in names]
    try:
        for r in range(1, rounds + 1):
            output = f"round {r} output line, the same bytes for everyone\n" * 800
            # An earlier capture of these bytes, tombstoned: compaction erases its blob
            # unless something else cites it.
            _observe(ctx, f"doomed-{r}", output)
            writes.tombstone(ctx, f"doomed-{r}", "must go")
            (folder / "next").write_text(output)
            (folder / "next").rename(folder / f"round-{r}")  # whole, never half-written
            result = _compact(root)
            assert result.returncode == 0, result.stderr
            assert json.loads(result.stdout)["tombstoned"] == [f"doomed-{r}"]
            _wait_for(lambda r=r: all((folder / f"ack-{n}-{r}").exists() for n in names))
            # Every acknowledged observation hands back its exact bytes.
            for n in names:
                got = evidence.get(ctx, f"{n}-{r}")
                assert got.raw == output.encode() and not got.warnings
    finally:
        (folder / "stop").write_text("")
        for w in writers:
            w.wait(timeout=60)
    assert [w.returncode for w in writers] == [0, 0]


def test_a_blob_cited_while_compaction_erases_another_capture_of_it_survives(root, tmp_path):
    _capture_race(root, tmp_path, rounds=2)


@pytest.mark.soak
def test_a_blob_cited_while_compaction_erases_another_capture_of_it_survives_soak(
        root, tmp_path):
    _capture_race(root, tmp_path, rounds=40)



def test_a_blob_writers_keep_locked_is_left_for_the_next_run_which_erases_it(
        root, monkeypatch):
    from agent_journal.storage import artifacts
    from agent_journal.storage.artifacts import (
        BlobHolds,
        artifact_path,
        artifact_ref,
        write_artifact,
    )
    from agent_journal.storage.erasure import COMPACT_INTENT

    ctx = _ctx(root)
    secret = f"{OLD_MARKER} held\n" * 1000
    _observe(ctx, "doomed", secret)
    writes.tombstone(ctx, "doomed", "must go")
    ws = ctx.open(create=False)
    blob = Path(artifact_path(ws, artifact_ref(secret.encode())))
    monkeypatch.setattr(artifacts, "ERASE_WAIT_S", 0.2)
    with BlobHolds() as holds:  # a writer that has not committed (and never will)
        write_artifact(ws, secret.encode(), holds)
        outcome = compact.compact(ctx, entry_ttl_days=None, observation_ttl_days=None,
                                  apply=True)
    assert outcome.report["tombstoned"] == ["doomed"] and outcome.skipped == []
    assert any("left for the next compact --apply" in w for w in outcome.warnings)
    assert blob.exists() and (Path(ws.path) / COMPACT_INTENT).exists()
    again = compact.compact(ctx, entry_ttl_days=None, observation_ttl_days=None, apply=True)
    assert again.warnings == [] and not blob.exists()
    assert not (Path(ws.path) / COMPACT_INTENT).exists()
    assert OLD_MARKER.encode() not in all_bytes_under(root)


# -- a journal whose writers never stop --------------------------------------------------------

APPENDER = r"""
import os, sys, time
from agent_journal.ops import context, writes
root, name, log, stop, mode = sys.argv[1:6]
ctx = context.Context(root, "ws", session=name)
i = 0
with open(log, "a") as out:
    while not os.path.exists(stop):
        oid = f"{name}-{i}"
        writes.observe(ctx, kind="tool_call", obs_id=oid, tool="Bash", call_id=str(i),
                       input_value=None, output="appended while compacting", status="ok",
                       exit_code=0, duration_ms=1)
        out.write(f"obs {oid}\n")
        if mode == "tombstones" and i % 3 == 0:
            writes.tombstone(ctx, oid, "named a person")
            out.write(f"tomb {oid}\n")
        out.flush()
        i += 1
        time.sleep(0.005)  # busier than any agent's hooks, but not a lock-hogging spin
"""

OLD_MARKER = "MARKER-DUE-ON-TTL-5c1d"


def _appenders(root: Path, tmp_path: Path, mode: str, n: int = 2):  # type: ignore[no-untyped-def]
    stop = tmp_path / "stop"
    logs = [tmp_path / f"a{k}.log" for k in range(n)]
    procs = [subprocess.Popen([sys.executable, "-c", APPENDER, str(root), f"a{k}", str(logs[k]),
                               str(stop), mode], env=_env(root)) for k in range(n)]
    return stop, logs, procs


def _stop(stop: Path, procs: list[subprocess.Popen[bytes]]) -> None:
    stop.write_text("")
    for p in procs:
        p.wait(timeout=60)
    assert [p.returncode for p in procs] == [0] * len(procs)


def _acknowledged(logs: list[Path], what: str) -> list[str]:
    return [line.split()[1] for log in logs for line in log.read_text().splitlines()
            if line.startswith(what + " ")]


def _seed_due(root: Path, n: int = 30) -> None:
    os.environ["AGENT_JOURNAL_NOW"] = "2025-01-01T00:00:00Z"
    try:
        for i in range(n):
            _observe(_ctx(root), f"old-{i}", f"{OLD_MARKER} {i}")
    finally:
        del os.environ["AGENT_JOURNAL_NOW"]


def _wait_for_lines(logs: list[Path], count: int) -> None:
    _wait_for(lambda: all(log.exists() and len(log.read_text().splitlines()) >= count
                          for log in logs))


def test_a_journal_whose_writers_never_stop_still_compacts_in_one_run(root, tmp_path):
    _compact_under_writers(root, tmp_path)


@pytest.mark.soak
def test_a_journal_whose_writers_never_stop_still_compacts_in_one_run_soak(tmp_path):
    for n in range(24):
        run = tmp_path / f"run-{n}"
        (run / "private").mkdir(parents=True, mode=0o700)
        _compact_under_writers(run / "private" / "journal", run)


def _compact_under_writers(root: Path, tmp_path: Path) -> None:
    _seed_due(root)
    stop, logs, procs = _appenders(root, tmp_path, "plain")
    try:
        _wait_for_lines(logs, 5)  # the writers are appending to the active segment
        result = _compact(root, "--observation-ttl-days", "30")
        mid = _acknowledged(logs, "obs")
        # On a loaded machine the writers may not have been scheduled since: wait for
        # them to append after the run too, however long that takes.
        _wait_for(lambda: len(_acknowledged(logs, "obs")) > len(mid))
    finally:
        _stop(stop, procs)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert "skipped" not in report
    assert sorted(report["expired"]) == sorted(f"old-{i}" for i in range(30))
    acknowledged = _acknowledged(logs, "obs")
    assert len(acknowledged) > len(mid) > 0  # they wrote before, during and after the run
    present = {e.id for e in _ctx(root).open(create=False).read().events}
    assert not [oid for oid in acknowledged if oid not in present]
    assert not {f"old-{i}" for i in range(30)} & present
    assert OLD_MARKER.encode() not in all_bytes_under(root)


def test_tombstones_appended_during_a_run_never_purge_wrongly_or_lose_an_event(root, tmp_path):
    _seed_due(root, 10)
    stop, logs, procs = _appenders(root, tmp_path, "tombstones")
    codes = []
    try:
        _wait_for_lines(logs, 5)
        for _ in range(2):
            result = _compact(root, "--observation-ttl-days", "30")
            assert result.returncode in (0, 1), result.stderr
            if result.returncode == 1:
                assert json.loads(result.stdout)["skipped"]
            codes.append(result.returncode)
    finally:
        _stop(stop, procs)
    events = _ctx(root).open(create=False).read().events
    present = {e.id for e in events if e.type == "observation"}
    tombstones = {e.event_id: e for e in events if e.type == "tombstone"}
    tombstoned = {e.id for e in tombstones.values()}
    # Every acknowledged observation is held unless a tombstone names it; every
    # acknowledged tombstone is held; none reads purged while its target is held.
    assert not [o for o in _acknowledged(logs, "obs") if o not in present | tombstoned]
    assert set(_acknowledged(logs, "tomb")) <= tombstoned
    assert not [t for t in tombstones.values() if t.data["purged"] and t.id in present]
    # With the writers gone, one more run finishes: nothing tombstoned is left.
    final = _compact(root, "--observation-ttl-days", "30")
    assert final.returncode == 0, final.stderr
    events = _ctx(root).open(create=False).read().events
    assert not {e.id for e in events if e.type == "observation"} & tombstoned


# -- tombstoned content is never written again, on any path ------------------------------------

MARK = "MARKER-ERASED-CONTENT-91f3"
BIG = (MARK + " and more of the tool's output\n") * 40  # a blob, at the threshold below
THRESHOLD = {"AGENT_JOURNAL_ARTIFACT_THRESHOLD": "256"}


def _hook_payload(event: str) -> str:
    payload = {"session_id": "s1", "cwd": "/x/ws", "hook_event_name": event,
               "tool_name": "Bash", "tool_use_id": "toolu_erase1",
               "tool_input": {"command": f"echo {MARK}"}}
    if event == "PostToolUse":
        payload["tool_response"] = {"stdout": BIG, "stderr": ""}
    return json.dumps(payload)


def _transcript(tmp_path: Path) -> Path:
    records = [
        {"type": "assistant", "sessionId": "sess-1", "timestamp": "2025-01-01T00:00:00.000Z",
         "message": {"role": "assistant", "content": [
             {"type": "tool_use", "id": "toolu_erase1", "name": "Bash",
              "input": {"command": f"echo {MARK}"}}]}},
        {"type": "user", "sessionId": "sess-1", "timestamp": "2025-01-01T00:00:01.000Z",
         "message": {"role": "user", "content": [
             {"type": "tool_result", "tool_use_id": "toolu_erase1", "content": BIG}]}},
        {"type": "assistant", "sessionId": "sess-1", "timestamp": "2025-01-01T00:00:02.000Z",
         "message": {"role": "assistant", "content": [
             {"type": "tool_use", "id": "toolu_kept", "name": "Bash",
              "input": {"command": "ls"}}]}},
        {"type": "user", "sessionId": "sess-1", "timestamp": "2025-01-01T00:00:03.000Z",
         "message": {"role": "user", "content": [
             {"type": "tool_result", "tool_use_id": "toolu_kept", "content": "a b c"}]}},
    ]
    path = tmp_path / "session.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _other_root(tmp_path: Path) -> Path:
    other = tmp_path / "private" / "other"
    subprocess.run([CLI, "observe", "--kind", "tool_call", "--id", "X", "--output", "-"],
                   input=BIG.encode(), env=_env(other, **THRESHOLD), check=True,
                   capture_output=True)
    return other


def _search_and_digest(cli) -> list:  # type: ignore[no-untyped-def]
    return [cli("search", MARK, "--json"), cli("digest")]


def _plant_leftovers(root: Path) -> None:
    """What a search or digest killed at the wrong moment leaves: the index committed
    under its build name, an atomic write's temp file, stray sidecars."""
    for area in ("search", "digest"):
        folder = root / "cache" / area
        if not folder.is_dir():
            continue
        for name in ("ws.sqlite.tmp", ".ws.sqlite.4242.abcd1234.tmp", "ws.sqlite.tmp-journal",
                     "ws.sqlite-wal", "ws.sqlite-shm"):
            (folder / name).write_bytes(f"leftover {MARK}".encode())
    index = root / "cache" / "search" / "ws.sqlite"
    if index.exists():
        (index.parent / "ws.sqlite.tmp").write_bytes(index.read_bytes())


# path -> (write the content as id X, tombstone target, bring it back: a list of results
# and what each must look like: "refused" exit 1 naming the tombstone, "ok" exit 0)
WRITE_PATHS = {
    "observe": (
        lambda cli, tmp: cli("observe", "--kind", "tool_call", "--id", "X", "--output", "-",
                             input=BIG, env=THRESHOLD),
        "X",
        lambda cli, tmp: [(cli("observe", "--kind", "tool_call", "--id", "X", "--output",
                               "-", input=BIG, env=THRESHOLD), "refused")]),
    "record": (
        lambda cli, tmp: cli("record", "--kind", "finding", "--id", "X", "--claim", BIG),
        "X",
        lambda cli, tmp: [(cli("record", "--kind", "finding", "--id", "X", "--claim", BIG),
                           "refused")]),
    "invalidate": (
        lambda cli, tmp: cli("record", "--kind", "finding", "--id", "X", "--claim", MARK),
        "X",
        lambda cli, tmp: [(cli("invalidate", "X", "--reason", MARK), "refused")]),
    "hook": (
        lambda cli, tmp: [cli("hook", "claude-code", "--workspace", "ws",
                              input=_hook_payload(e), env=THRESHOLD)
                          for e in ("PreToolUse", "PostToolUse")][-1],
        "toolu_erase1",
        lambda cli, tmp: [(cli("hook", "claude-code", "--workspace", "ws",
                               input=_hook_payload(e), env=THRESHOLD), "ok")
                          for e in ("PreToolUse", "PostToolUse")]),
    "import": (
        lambda cli, tmp: cli("import", "claude-code", str(_transcript(tmp)), env=THRESHOLD),
        "toolu_erase1",
        lambda cli, tmp: [(cli("import", "claude-code", str(_transcript(tmp)), "--json",
                               env=THRESHOLD), "ok")]),
    "merge": (
        lambda cli, tmp: cli("merge", str(_other_root(tmp))),
        "X",
        lambda cli, tmp: [(cli("merge", str(tmp / "private" / "other")), "ok")]),
    "merge an export": (
        lambda cli, tmp: (cli("export", str(tmp / "exported"), root_of=_other_root(tmp)),
                          cli("merge", str(tmp / "exported")))[1],
        "X",
        lambda cli, tmp: [(cli("merge", str(tmp / "exported")), "ok")]),
    "search and digest caches": (  # the projections hold it too, and what they leave
        lambda cli, tmp: [cli("record", "--kind", "finding", "--id", "X", "--claim", BIG),
                          *_search_and_digest(cli)][0],
        "X",
        lambda cli, tmp: [(r, "ok") for r in _search_and_digest(cli)]),
}


@pytest.fixture
def cli_any_root(cli, root):  # type: ignore[no-untyped-def]
    """`cli`, able to run one command against another root (`root_of=`)."""

    def run(*args: str, root_of: Path | None = None, **kw):  # type: ignore[no-untyped-def]
        if root_of is None:
            return cli(*args, **kw)
        env = dict(kw.pop("env", None) or {})
        env["AGENT_JOURNAL_ROOT"] = str(root_of)
        return cli(*args, env=env, **kw)

    return run


@pytest.mark.parametrize("path", sorted(WRITE_PATHS))
def test_tombstoned_content_never_comes_back_through_any_write_path(
        cli_any_root, root, tmp_path, path):
    cli = cli_any_root
    write, target, bring_back = WRITE_PATHS[path]
    first = write(cli, tmp_path)
    assert first.code == 0, first.err
    assert MARK.encode() in all_bytes_under(root)
    _plant_leftovers(root)
    assert cli("tombstone", target, "--reason", "named a person").code == 0
    erased = cli("compact", "--apply")
    assert erased.code == 0, erased.err
    assert MARK.encode() not in all_bytes_under(root)
    for result, expected in bring_back(cli, tmp_path):
        if expected == "refused":
            assert result.code == 1 and "tombstoned" in result.err, result
            assert len(result.err.strip().splitlines()) == 1
        else:
            assert result.code == 0 and result.err == "", result
    if path == "import":  # the call is skipped whole and counted; the other one is kept
        report = result.json()
        assert report["tombstoned"] == 1 and report["eventsWritten"] == 0
    assert MARK.encode() not in all_bytes_under(root)
    # and a run afterwards has nothing of it to erase
    again = cli("compact", "--json").json()
    assert again["tombstoned"] == [] and again["expired"] == []



def test_every_leftover_of_a_projection_is_its_workspaces_and_no_other(root):
    from agent_journal.storage.erasure import projection_of

    for name in ("ws.sqlite", "ws.sqlite-wal", "ws.sqlite-shm", "ws.sqlite-journal",
                 "ws.sqlite.tmp", "ws.sqlite.tmp-journal", ".ws.sqlite.77.0badf00d.tmp",
                 "ws.sqlite.anything-a-later-version-leaves", "ws.json", "ws"):
        assert projection_of(name, "ws"), name
    for name in ("ws.b.sqlite", "ws.b.sqlite.tmp", "wsx.sqlite", "other.sqlite", "w.sqlite",
                 ".other.sqlite.1.2.tmp"):
        assert not projection_of(name, "ws"), name


# -- a stale replica merged again after a TTL run -------------------------------------------

def test_merging_a_stale_replica_again_after_a_ttl_run_works_and_brings_nothing_back(
        cli, root, tmp_path):
    stale = tmp_path / "private" / "stale"
    _seed_due(stale, 3)
    exported = tmp_path / "stale-export"
    assert cli("export", str(exported), env={"AGENT_JOURNAL_ROOT": str(stale)}).code == 0
    for source in (str(exported), str(stale)):
        first = cli("merge", source)
        assert first.code == 0, first.err
        expired = cli("compact", "--apply", "--observation-ttl-days", "30")
        assert expired.code == 0, expired.err
        assert OLD_MARKER.encode() not in all_bytes_under(root)
        # The same stale replica, merged again: every one of its rows was imported
        # here once and expired, so none is written back.
        for _ in range(2):
            again = cli("merge", source, "--json")
            assert again.code == 0, again.err
            report = again.json()
            assert report["imported"] == 0 and report["segmentsTouched"] == []
            assert {r["reason"] for r in report["notImported"]} <= {"removedHere"}
            assert OLD_MARKER.encode() not in all_bytes_under(root)
    # What arrives new from it still comes in.
    subprocess.run([CLI, "observe", "--kind", "tool_call", "--id", "fresh", "--output", "-"],
                   input=b"fresh", env=_env(stale), check=True, capture_output=True)
    later = cli("merge", str(stale), "--json")
    assert later.code == 0 and later.json()["imported"] == 1
    assert "fresh" in {e.id for e in _ctx(root).open(create=False).read().events}



def test_an_own_event_expired_here_never_comes_back_from_a_replica_that_copied_it(
        cli, root, tmp_path):
    """R3 for what this replica wrote itself: its own segment keeps no
    provenance, so compaction keeps the ids it removed there."""
    _seed_due(root, 3)
    _observe(_ctx(root), "kept", "still here")
    other = tmp_path / "private" / "other"
    assert cli("merge", str(root), env={"AGENT_JOURNAL_ROOT": str(other)}).code == 0
    expired = cli("compact", "--apply", "--observation-ttl-days", "30", "--json")
    assert expired.code == 0 and len(expired.json()["expired"]) == 3, expired.err
    for _ in range(2):
        again = cli("merge", str(other), "--json")
        assert again.code == 0, again.err
        report = again.json()
        assert report["imported"] == 0, report
        assert sorted(r["reason"] for r in report["notImported"]) == ["removedHere"] * 3
        assert OLD_MARKER.encode() not in all_bytes_under(root)
    assert {e.id for e in _ctx(root).open(create=False).read().events} >= {"kept"}
    # A later compaction keeps the list; nothing else changes what it names.
    assert cli("compact", "--apply", "--observation-ttl-days", "30").code == 0
    assert cli("merge", str(other), "--json").json()["imported"] == 0

def test_an_import_name_already_taken_gets_a_sibling(root, tmp_path, monkeypatch):
    """Whatever compaction did to an earlier import (here: every row removed by a path
    that leaves no provenance), a merge of the same ids never fails on the name."""
    import sqlite3

    from agent_journal.ops import replicas

    stale = tmp_path / "private" / "stale"
    subprocess.run([CLI, "observe", "--kind", "tool_call", "--id", "o", "--output", "-"],
                   input=b"x", env=_env(stale), check=True, capture_output=True)
    ctx = _ctx(root)
    first = replicas.merge(ctx, str(stale))
    [taken] = first["segmentsTouched"]
    conn = sqlite3.connect(root / taken)
    conn.execute("DELETE FROM events")
    conn.execute("DELETE FROM origin")
    conn.commit()
    conn.close()
    again = replicas.merge(ctx, str(stale))
    assert again["imported"] == 1 and again["segmentsTouched"] != [taken]
    assert "o" in {e.id for e in ctx.open(create=False).read().events}


# -- a row moved by the delete that erases it leaves no copy behind ---------------------------

def _due_then_fresh(root: Path, seed: int) -> list[int]:
    """Due observations (each carrying a numbered marker), then fresh ones, as
    a journal whose writers kept appending looks; ids and sizes from `seed`."""
    import random

    from agent_journal.core.model import Event

    rnd = random.Random(seed)
    ws = _ctx(root).open(create=True)
    due = rnd.randint(20, 60)
    events = []
    for n in range(due + rnd.randint(5, 60)):
        h = "".join(rnd.choice("0123456789abcdef") for _ in range(32))
        old = n < due
        text = (f"{OLD_MARKER}-{n:04d} " if old else f"kept-{n:04d} ") + "x" * rnd.randint(20, 40)
        events.append(Event(
            event_id=f"{h[:8]}-{h[8:12]}-4{h[13:16]}-8{h[17:20]}-{h[20:]}", type="observation",
            kind="tool_call", id=f"old-{n}" if old else f"new-{n}",
            ts="2025-01-01T00:00:00.000Z" if old else "2026-12-01T00:00:00.000Z",
            author="agent", session="test", replica=ws.root.replica_id,
            data={"tool": "Bash", "callId": "c", "input": None, "output": text,
                  "status": "ok", "exitCode": 0, "durationMs": 1, "artifact": None}))
    ws.append(events)
    return list(range(due))


# Each of these layouts (SQLite 3.40) had the delete move a row it had yet to
# reach into another page, and leave a copy of its content in the page it left.
@pytest.mark.parametrize("seed", [0, 23, 73, 94])
def test_rows_the_delete_moves_between_pages_leave_no_copy_behind(root, monkeypatch, seed):
    monkeypatch.setenv("AGENT_JOURNAL_NOW", "2026-12-01T00:00:00Z")
    due = _due_then_fresh(root, seed)
    outcome = compact.compact(_ctx(root), entry_ttl_days=None, observation_ttl_days=30,
                              apply=True)
    assert sorted(outcome.report["expired"]) == sorted(f"old-{n}" for n in due)
    left = all_bytes_under(root)
    assert [n for n in due if f"{OLD_MARKER}-{n:04d}".encode() in left] == []
    assert b"kept-" in left


# -- a page rebuilt while a row stays leaves no copy of it to outlive its erasure --------------

def _due_among_kept(root: Path, seed: int) -> list[int]:
    """Due and fresh observations interleaved, sizes spread over a page's worth;
    each fresh one carries a numbered marker. Returns the fresh ones' numbers."""
    import random

    from agent_journal.core.model import Event

    rnd = random.Random(seed)
    ws = _ctx(root).open(create=True)
    events, kept = [], []
    for n in range(120):
        h = "".join(rnd.choice("0123456789abcdef") for _ in range(32))
        old = rnd.random() < 0.5
        if not old:
            kept.append(n)
        marker = f"old-{n:04d} " if old else f"{KEPT_MARKER}-{n:04d}-k "
        text = marker + "x" * rnd.randint(40, 900)
        events.append(Event(
            event_id=f"{h[:8]}-{h[8:12]}-4{h[13:16]}-8{h[17:20]}-{h[20:]}", type="observation",
            kind="tool_call", id=f"old-{n}" if old else f"kept-{n}",
            ts="2025-01-01T00:00:00.000Z" if old else "2026-12-01T00:00:00.000Z",
            author="agent", session="test", replica=ws.root.replica_id,
            data={"tool": "Bash", "callId": "c", "input": None, "output": text,
                  "status": "ok", "exitCode": 0, "durationMs": 1, "artifact": None}))
    ws.append(events)
    return kept


KEPT_MARKER = "MARKER-KEPT-THEN-ERASED-7e20"


def _copies(root: Path, kept: list[int]) -> dict[int, int]:
    """How often each kept row's marker occurs in the files under the root."""
    left = all_bytes_under(root)
    return {n: left.count(f"{KEPT_MARKER}-{n:04d}-k".encode()) for n in kept}


# Each of these layouts (SQLite 3.40) had the TTL delete rebuild a page and leave
# a stale copy of a row it kept (seed, row); erasing that row later left the copy.
@pytest.mark.parametrize(("seed", "row"), [(6, 42), (16, 59), (24, 71), (32, 35)])
def test_a_row_kept_by_one_compaction_leaves_no_copy_for_the_next_to_miss(
        root, monkeypatch, seed, row):
    monkeypatch.setenv("AGENT_JOURNAL_NOW", "2026-12-01T00:00:00Z")
    kept = _due_among_kept(root, seed)
    compact.compact(_ctx(root), entry_ttl_days=None, observation_ttl_days=30, apply=True)
    # Every kept row is stored once: no page keeps a stale copy of one.
    assert {n: c for n, c in _copies(root, kept).items() if c != 1} == {}
    writes.tombstone(_ctx(root), f"kept-{row}", "must go")
    outcome = compact.compact(_ctx(root), entry_ttl_days=None, observation_ttl_days=None,
                              apply=True)
    assert outcome.report["tombstoned"] == [f"kept-{row}"]
    assert _copies(root, kept)[row] == 0
    assert {n: c for n, c in _copies(root, kept).items() if c != 1} == {row: 0}


def test_a_run_killed_before_rebuilding_a_segment_is_finished_by_the_next(root, monkeypatch):
    # The first run deletes, then dies before its rebuild: the stale copy of
    # a kept row is still there. The next run (with nothing left to delete)
    # rebuilds the segment, so erasing that row later leaves no copy of it.
    from agent_journal.storage import erasure

    # In place: what a segment a copy cannot replace goes through (segment_copy.py).
    monkeypatch.setattr(erasure, "copy_survivors", lambda *a, **kw: None)
    monkeypatch.setenv("AGENT_JOURNAL_NOW", "2026-12-01T00:00:00Z")
    kept = _due_among_kept(root, 6)

    def killed(path: str) -> bool:
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(erasure, "_rebuild", killed)
        with pytest.raises(KeyboardInterrupt):
            compact.compact(_ctx(root), entry_ttl_days=None, observation_ttl_days=30,
                            apply=True)
    assert _copies(root, kept)[42] == 2  # the layout's stale copy, left by the delete
    again = compact.compact(_ctx(root), entry_ttl_days=None, observation_ttl_days=30,
                            apply=True)
    assert again.report["expired"] == [] and again.warnings == []
    assert {n: c for n, c in _copies(root, kept).items() if c != 1} == {}
    assert not os.path.exists(os.path.join(_ctx(root).open(create=False).path,
                                           erasure.COMPACT_INTENT))


def test_a_segment_kept_busy_through_its_rebuild_is_named_and_rebuilt_by_the_next_run(
        root, monkeypatch):
    import sqlite3

    from agent_journal.storage import connection, erasure

    monkeypatch.setattr(erasure, "copy_survivors", lambda *a, **kw: None)  # in place
    monkeypatch.setenv("AGENT_JOURNAL_NOW", "2026-12-01T00:00:00Z")
    kept = _due_among_kept(root, 6)
    real = erasure._rebuild

    def with_a_reader(path: str) -> bool:
        reader = sqlite3.connect(path, isolation_level=None)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM events").fetchall()  # holds a shared lock
        try:
            return real(path)
        finally:
            reader.close()

    with monkeypatch.context() as m:
        m.setattr(connection, "BUSY_TIMEOUT_S", 0.2)
        m.setattr(erasure, "_rebuild", with_a_reader)
        outcome = compact.compact(_ctx(root), entry_ttl_days=None, observation_ttl_days=30,
                                  apply=True)
    assert len(outcome.warnings) == 1 and "not rebuilt" in outcome.warnings[0]
    assert _copies(root, kept)[42] == 2
    intent = os.path.join(_ctx(root).open(create=False).path, erasure.COMPACT_INTENT)
    assert os.path.exists(intent)
    again = compact.compact(_ctx(root), entry_ttl_days=None, observation_ttl_days=30,
                            apply=True)
    assert again.warnings == [] and not os.path.exists(intent)
    assert {n: c for n, c in _copies(root, kept).items() if c != 1} == {}
