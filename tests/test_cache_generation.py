"""A projection read before `compact --apply` erased a row is never stored after it
(storage/erasure_generation.py): each reader is paused between its read of the
segments and its store, a real second process tombstones the entry and compacts,
and once the reader has finished no file under the root holds the erased claim."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import CLI, all_bytes_under, clean_env

from agent_journal.ops import compact, context, decay, search, writes
from agent_journal.storage import projection, read_projection, search_index

MARKER = "quokkaxylophonemarker"


def _erase_meanwhile(root: Path) -> None:
    """What another process does while the reader is paused: tombstone and compact."""
    env = clean_env(AGENT_JOURNAL_ROOT=str(root), AGENT_JOURNAL_WORKSPACE="ws")
    for args in (["tombstone", "doomed", "--reason", "must go"], ["compact", "--apply"]):
        done = subprocess.run([CLI, *args], env=env, capture_output=True, timeout=120)
        assert done.returncode == 0, done.stderr


def _paused(root: Path, original: Callable[..., Any], *, after: bool) -> Callable[..., Any]:
    """`original`, with the erasure run once, before or after its first call."""
    state = {"done": False}

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not after and not state["done"]:
            state["done"] = True
            _erase_meanwhile(root)
        result = original(*args, **kwargs)
        if after and not state["done"]:
            state["done"] = True
            _erase_meanwhile(root)
        return result

    return wrapper


def _compact_dry_run(ctx: context.Context) -> None:
    compact.compact(ctx, entry_ttl_days=None, observation_ttl_days=None, apply=False)


def _decay(ctx: context.Context) -> None:
    decay.decay(ctx)


# (reader, where it is paused: the step between its read and its store)
READERS = {
    # compact's dry run keeps each segment's read part in cache/reads
    "read-projection": (_compact_dry_run, read_projection.Projection, "store", False),
    # the projection engine (decay's counts in cache/counts, stats)
    "projection": (_decay, projection, "_keep", False),
}


@pytest.mark.parametrize("kind", sorted(READERS))
def test_a_reader_paused_across_compact_apply_stores_nothing_it_erased(
        kind: str, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = context.Context(str(root), "ws", session="test")
    writes.record(ctx, kind="finding", entry_id="doomed", fields={"claim": MARKER},
                  anchors=[], depends_on=[], subject=None)
    writes.record(ctx, kind="finding", entry_id="kept", fields={"claim": "stays"},
                  anchors=[], depends_on=[], subject=None)
    reader, owner, name, after = READERS[kind]
    monkeypatch.setattr(owner, name, _paused(root, getattr(owner, name), after=after))

    reader(ctx)  # its answer is from what it read; only the cache must not keep it

    assert MARKER.encode() not in all_bytes_under(root)



# A compaction that stops once it has listed cache/search/, before deleting what it
# listed, until the test lets it go on.
STOPPED_COMPACTION = r"""
import os, sys, time
listed, go = sys.argv[1], sys.argv[2]
real = os.listdir

def listdir(path):
    names = real(path)
    if os.path.basename(str(path)) == "search" and not os.path.exists(listed):
        open(listed, "w").close()
        while not os.path.exists(go):
            time.sleep(0.01)
    return names

os.listdir = listdir
from agent_journal.cli.main import main
sys.argv = ["agent-journal", "compact", "--apply"]
sys.exit(main())
"""


class _Killed(BaseException):
    """The search's process dying right after its rename (a search that lives on
    finds the segments changed and builds its index again)."""


def _wait_for(path: Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_search_index_renamed_into_place_while_compaction_sweeps_is_not_kept(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = context.Context(str(root), "ws", session="test")
    writes.record(ctx, kind="finding", entry_id="doomed", fields={"claim": MARKER},
                  anchors=[], depends_on=[], subject=None)
    env = clean_env(AGENT_JOURNAL_ROOT=str(root), AGENT_JOURNAL_WORKSPACE="ws")
    listed, go = tmp_path / "listed", tmp_path / "go"
    procs: list[subprocess.Popen[bytes]] = []
    sync, publish = search_index._Index.sync, search_index.publish_cache

    def read_then_erase(self: Any, ws: Any) -> None:
        sync(self, ws)
        if procs:
            return
        # Read; now another process tombstones the entry and compacts, and its
        # sweep has listed cache/search/ (the index is still a temporary file).
        done = subprocess.run([CLI, "tombstone", "doomed", "--reason", "must go"], env=env,
                              capture_output=True, timeout=120)
        assert done.returncode == 0, done.stderr
        procs.append(subprocess.Popen(
            [sys.executable, "-c", STOPPED_COMPACTION, str(listed), str(go)], env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        _wait_for(listed, procs[0])

    def publish_then_die(*args: Any) -> None:
        publish(*args)
        raise _Killed

    monkeypatch.setattr(search_index._Index, "sync", read_then_erase)
    monkeypatch.setattr(search_index, "publish_cache", publish_then_die)
    try:
        with contextlib.suppress(_Killed):
            search.search(ctx, MARKER)
    finally:
        go.touch()
        for proc in procs:
            _out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
    assert procs and MARKER.encode() not in all_bytes_under(root)
