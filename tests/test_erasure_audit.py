"""The audit of the two promises a user cannot check: nothing acknowledged is ever
lost, and erasure is complete and never undone. Each test is an attack that once
got through (real processes where a process matters), kept so it cannot again."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from conftest import CLI, all_bytes_under, clean_env
from test_replicas import make_root

from agent_journal.ops import compact, remotes, sync, writes
from agent_journal.ops.context import Context

WS = "ws"
MARK = "AUDITMARKER-7c1e"


def _ctx(root: Path) -> Context:
    return Context(str(root), WS)


def _run(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], env=clean_env(AGENT_JOURNAL_ROOT=str(root),
                                                     AGENT_JOURNAL_WORKSPACE=WS, **env),
                          capture_output=True, text=True, timeout=120)


def _note(root: Path, entry_id: str, text: str) -> None:
    writes.record(_ctx(root), kind="note", entry_id=entry_id, fields={"text": text},
                  anchors=[], depends_on=[], subject=None)


def _purge(root: Path, target: str) -> None:
    writes.tombstone(_ctx(root), target, "leaked")
    compact.compact(_ctx(root), entry_ttl_days=None, observation_ttl_days=None, apply=True)


def test_a_copy_of_a_root_made_before_a_purge_cannot_push_the_content_back(tmp_path):
    # The copy has the same replica id, so it writes under the same prefix: its push
    # would replace the purged manifest with its own, content and all, and every
    # replica pulling before the owner pushes again would take the content without
    # the tombstone that withholds it.
    share = tmp_path / "share"
    share.mkdir(mode=0o700)
    a = make_root(tmp_path, "a")
    remotes.add(_ctx(a), "origin", f"file://{share}", endpoint_url=None)
    _note(a, "secret", f"the key is {MARK}")
    _note(a, "fine", "nothing to hide")
    sync.push(_ctx(a), None)
    copy = tmp_path / "copy"
    shutil.copytree(a, copy, symlinks=True)
    _purge(a, "secret")
    sync.push(_ctx(a), None)
    assert MARK.encode() not in all_bytes_under(share)

    pushed = _run(copy, "push")
    assert pushed.returncode == 1, pushed
    assert len(pushed.stderr.strip().splitlines()) == 1 and "tombstone" in pushed.stderr
    assert MARK.encode() not in all_bytes_under(share)
    fresh = make_root(tmp_path, "fresh")
    remotes.add(_ctx(fresh), "origin", f"file://{share}", endpoint_url=None)
    assert _run(fresh, "pull").returncode == 0
    assert MARK.encode() not in all_bytes_under(fresh)
    assert "nothing to hide" in _run(fresh, "show").stdout
