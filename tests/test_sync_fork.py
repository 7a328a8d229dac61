"""A push replaces only a manifest this root wrote (spec/SYNC.md, "A root copied or
restored"): a copy that holds every event of the manifest another root put in place
is refused too, before it takes the prefix over and the real owner is refused in
its turn. Through a shared folder, where the push code is the same as for S3."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_replicas import make_root
from test_sync import add_remote, ctx, note, run_cli
from test_sync_copy import entry_ids, files_under

from agent_journal.core.errors import ConflictError
from agent_journal.ops import remotes, sync

WS = "ws"


def owner_and_late_copy(tmp_path: Path) -> tuple[Path, Path, Path]:
    """An owner that pushed once, then wrote an event, then was copied; then it
    pushed that event: the copy holds every event the remote has, and its push
    memory knows only the first manifest."""
    share = tmp_path / "share"
    share.mkdir(mode=0o700)
    owner = make_root(tmp_path, "owner")
    add_remote(owner, f"file://{share}")
    note(owner, "first")
    sync.push(ctx(owner), None)
    note(owner, "in-both")
    copy = tmp_path / "copy"
    shutil.copytree(owner, copy, symlinks=True)
    assert sync.push(ctx(owner), None)["manifestWritten"]
    return owner, copy, share


def fresh_pull(tmp_path: Path, share: Path, name: str) -> set[str]:
    fresh = make_root(tmp_path, name)
    add_remote(fresh, f"file://{share}")
    sync.pull(ctx(fresh), None)
    return entry_ids(fresh)


def test_a_copy_holding_every_pushed_event_cannot_take_the_prefix_over(tmp_path) -> None:
    owner, copy, share = owner_and_late_copy(tmp_path)
    note(copy, "copy-after")
    remote_before, copy_before = files_under(share), files_under(copy)
    pushed = run_cli(copy, "push")
    assert pushed.returncode == 1, pushed
    line = pushed.stderr.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line
    assert "is not one this root wrote" in line and "Nothing was pushed" in line
    assert "make a new root, `merge` this root into it and `pull` there" in line
    assert files_under(share) == remote_before and files_under(copy) == copy_before
    # The owner is not locked out by the copy: it goes on pushing.
    note(owner, "owner-after")
    assert sync.push(ctx(owner), None)["manifestWritten"]
    assert fresh_pull(tmp_path, share, "f1") == {"first", "in-both", "owner-after"}
    # The way on the refusal names keeps the copy's event too.
    new = make_root(tmp_path, "new")
    assert run_cli(new, "merge", str(copy)).returncode == 0
    add_remote(new, f"file://{share}")
    sync.pull(ctx(new), None)
    assert entry_ids(new) == {"first", "in-both", "copy-after", "owner-after"}


def test_a_copy_without_push_memory_is_judged_by_its_events(tmp_path) -> None:
    """The limit of the rule: a copy whose memory is gone cannot tell the owner's
    manifest from one it wrote, so it replaces it when it holds every event there;
    then the owner, whose memory never saw that manifest, is the one refused."""
    owner, copy, _ = owner_and_late_copy(tmp_path)
    shutil.rmtree(copy / "workspaces" / WS / "remotes")
    note(copy, "copy-after")
    assert sync.push(ctx(copy), None)["manifestWritten"]
    with pytest.raises(ConflictError, match="is not one this root wrote"):
        sync.push(ctx(owner), None)


def test_a_memory_without_manifests_and_a_second_name_for_the_url_are_not_refused(
        tmp_path) -> None:
    share = tmp_path / "share"
    share.mkdir(mode=0o700)
    root = make_root(tmp_path, "root")
    add_remote(root, f"file://{share}")
    remotes.add(ctx(root), "mirror", f"file://{share}", endpoint_url=None)
    note(root, "n0")
    sync.push(ctx(root), "origin")
    note(root, "n1")
    assert sync.push(ctx(root), "mirror")["manifestWritten"]
    note(root, "n2")
    assert sync.push(ctx(root), "origin")["manifestWritten"]
    # A memory an older version wrote names no manifests: the events decide, as before.
    memory = root / "workspaces" / WS / "remotes" / "origin" / "pushed.json"
    older = json.loads(memory.read_text())
    del older["manifests"]
    memory.write_text(json.dumps(older))
    note(root, "n3")
    assert sync.push(ctx(root), "origin")["manifestWritten"]
    assert fresh_pull(tmp_path, share, "f") == {"n0", "n1", "n2", "n3"}
