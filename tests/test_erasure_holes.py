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
from agent_journal.storage.artifacts import artifact_path, artifact_ref


def _env(root: Path, **extra: str) -> dict[str, str]:
    return clean_env(AGENT_JOURNAL_ROOT=str(root), AGENT_JOURNAL_WORKSPACE="ws", **extra)


def _ctx(root: Path) -> context.Context:
    return context.Context(str(root), "ws", session="test")


def _observe(ctx: context.Context, obs_id: str, output: str | None) -> None:
    writes.observe(ctx, kind="tool_call", obs_id=obs_id, tool="Bash", call_id="c",
                   input_value=None, output=output, status="ok", exit_code=0, duration_ms=1)


def _compact(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([CLI, "compact", "--apply", *args], env=_env(root),
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
    time.sleep(delay)
    return real_append(self, *a, **kw)
Workspace.append = slow_append
ctx = context.Context(root, "ws", session=name)
done = 0
while True:
    if os.path.exists(os.path.join(folder, "stop")):
        break
    path = os.path.join(folder, f"round-{done + 1}")
    if not os.path.exists(path):
        time.sleep(0.005)
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
            (folder / f"round-{r}").write_text(output)
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
    _seed_due(root)
    stop, logs, procs = _appenders(root, tmp_path, "plain")
    try:
        _wait_for_lines(logs, 5)  # the writers are appending to the active segment
        result = _compact(root, "--observation-ttl-days", "30")
        mid = _acknowledged(logs, "obs")
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
