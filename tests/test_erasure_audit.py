"""The audit of the two promises a user cannot check: nothing acknowledged is ever
lost, and erasure is complete and never undone. Each test is an attack that once
got through (real processes where a process matters), kept so it cannot again."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
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


# -- a full disk ------------------------------------------------------------------------------

def _file_size_limit(limit: int):  # type: ignore[no-untyped-def]
    """A process whose every file write past `limit` bytes fails (EFBIG), as on a full
    disk; Python ignores SIGXFSZ, so the write fails instead of killing the process."""
    import resource

    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def _observe(root: Path, obs_id: str, output: str) -> None:
    writes.observe(_ctx(root), kind="tool_call", obs_id=obs_id, tool="Bash", call_id="c",
                   input_value={"command": "ls"}, output=output, status="ok", exit_code=0,
                   duration_ms=1)


def _source(tmp_path: Path, notes: int, blob_bytes: int) -> Path:
    src = make_root(tmp_path, "src")
    for i in range(notes):
        _note(src, f"n{i}", f"note {i} " + "x" * 400)
    _observe(src, "big", "a line of output\n" * (blob_bytes // 17))
    return src


def _leftovers(root: Path) -> list[str]:
    """Hidden files a command left behind, its lock files aside."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.name.startswith(".") and not p.name.endswith(".lock") and p.is_file())


# (notes in the source, bytes of its blob, file size limit): the import cannot be
# created, its rows cannot be committed, its blob cannot be copied.
FULL_DISK_MERGES = {"creating the import": (5, 1000, 0),
                    "committing its rows": (300, 1000, 60_000),
                    "copying a blob": (5, 200_000, 100_000)}


@pytest.mark.parametrize("case", sorted(FULL_DISK_MERGES))
def test_a_merge_on_a_full_disk_fails_in_one_line_and_leaves_nothing(tmp_path, case):
    notes, blob_bytes, limit = FULL_DISK_MERGES[case]
    src = _source(tmp_path, notes, blob_bytes)
    here = make_root(tmp_path, "here")
    _note(here, "mine", "acknowledged before the merge")
    failed = subprocess.run([CLI, "merge", str(src)], env=clean_env(
        AGENT_JOURNAL_ROOT=str(here), AGENT_JOURNAL_WORKSPACE=WS), capture_output=True,
        text=True, timeout=120, preexec_fn=_file_size_limit(limit))
    assert failed.returncode == 1, failed
    assert len(failed.stderr.strip().splitlines()) == 1, failed.stderr
    assert "internal error" not in failed.stderr, failed.stderr
    assert _leftovers(here) == []
    shown = _run(here, "show", "--observations")
    assert shown.returncode == 0 and "mine" in shown.stdout, shown
    again = _run(here, "merge", str(src))
    assert again.returncode == 0, again.stderr
    got = _run(here, "get", "big")
    assert got.returncode == 0 and got.stdout.startswith("a line of output"), got.stderr


# -- files a command writes where compaction cannot reach -------------------------------------

def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


# What a command would write inside the journal root, outside every file compaction
# knows: a copy of the content no `compact --apply` would ever erase.
INSIDE_THE_ROOT = {
    "timeline --html": lambda root: ["timeline", "--html", str(root / "timeline.html")],
    "export": lambda root: ["export", str(root / "backup")],
    "export into the workspace": lambda root: ["export",
                                               str(root / "workspaces" / WS / "exp")],
    "remote add": lambda root: ["remote", "add", "here", f"file://{root}/share"],
}


@pytest.mark.parametrize("case", sorted(INSIDE_THE_ROOT))
def test_nothing_is_written_inside_the_root_where_compaction_cannot_erase_it(tmp_path, case):
    root = make_root(tmp_path, "journal")
    _note(root, "secret", f"the key is {MARK}")
    (root / "share").mkdir(mode=0o700)
    before = _snapshot(root)
    refused = _run(root, *INSIDE_THE_ROOT[case](root))
    assert refused.returncode == 2, refused
    assert len(refused.stderr.strip().splitlines()) == 1 and "root" in refused.stderr
    assert _snapshot(root) == before
    # The same through a link to the root: the place is what counts, not its name.
    link = tmp_path / "link"
    link.symlink_to(root)
    via_link = _run(root, *INSIDE_THE_ROOT[case](link))
    assert via_link.returncode == 2, via_link
    assert _snapshot(root) == before
    # Beside the root is fine.
    beside = INSIDE_THE_ROOT[case](tmp_path)
    if case == "remote add":
        (tmp_path / "share").mkdir(mode=0o700)
    elif case == "export into the workspace":
        return
    assert _run(root, *beside).returncode == 0
