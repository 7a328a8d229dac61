"""A push replaces only a manifest this root wrote (spec/SYNC.md, "A root copied or
restored"): a copy that holds every event of the manifest another root put in place
forks to a new replica id rather than take the prefix over (so the real owner is
never refused), and pushes everything it holds, what a writer added under the old
id after the fork included. Through a shared folder, where the push code is the
same as for S3."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_replicas import make_root
from test_sync import add_remote, ctx, note, run_cli
from test_sync_copy import entry_ids

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


def replica_id(root: Path) -> str:
    return (root / "replica-id").read_text().strip()


def test_a_copy_holding_every_pushed_event_forks_instead_of_taking_the_prefix(
        tmp_path) -> None:
    owner, copy, share = owner_and_late_copy(tmp_path)
    old = replica_id(owner)
    note(copy, "copy-after")
    owners_manifest = (share / WS / old / "manifest.json").read_bytes()
    pushed = run_cli(copy, "push")
    assert pushed.returncode == 0, pushed
    line = pushed.stderr.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line
    assert "is not one this root wrote" in line and "is now replica" in line
    new = replica_id(copy)
    assert new != old and (share / WS / old / "manifest.json").read_bytes() == owners_manifest
    manifest = json.loads((share / WS / new / "manifest.json").read_bytes())
    assert manifest["forkedFrom"] == [old] and manifest["syncFormat"] == 2
    # The owner is not locked out by the copy: it goes on pushing under its id.
    note(owner, "owner-after")
    assert sync.push(ctx(owner), None)["forked"] is None
    assert fresh_pull(tmp_path, share, "f1") == {"first", "in-both", "copy-after",
                                                 "owner-after"}
    assert replica_id(owner) == old


def test_events_a_writer_adds_under_the_old_id_after_the_fork_are_pushed(tmp_path) -> None:
    # A writer that read the id just before the fork appends to the old id's segment:
    # that segment is still this root's own, so its rows travel under the new id.
    owner, copy, share = owner_and_late_copy(tmp_path)
    old = replica_id(owner)
    note(copy, "copy-after")
    sync.push(ctx(copy), None)
    new = replica_id(copy)
    (copy / "replica-id").write_text(old + "\n")
    note(copy, "late-writer")  # appends to the old id's segment
    (copy / "replica-id").write_text(new + "\n")
    assert any(p.name.startswith(old) for p in (copy / "workspaces" / WS / "segments").iterdir())
    note(copy, "new-id-writer")
    assert {p.name.split("-")[0] for p in (copy / "workspaces" / WS / "segments").iterdir()
            if p.suffix == ".sqlite"} == {old, new}
    # remote status counts both as not pushed yet: the old id's segment is still its own.
    assert sync.status(ctx(copy), None)["unpushed"]["events"] == 2
    assert sync.push(ctx(copy), None)["forked"] is None
    assert sync.status(ctx(copy), None)["unpushed"]["events"] == 0
    assert fresh_pull(tmp_path, share, "f1") == {"first", "in-both", "copy-after",
                                                 "late-writer", "new-id-writer"}


def test_a_copy_without_push_memory_is_judged_by_its_events(tmp_path) -> None:
    """The limit of the rule: a copy whose memory is gone cannot tell the owner's
    manifest from one it wrote, so it replaces it when it holds every event there;
    then the owner, whose memory never saw that manifest, is the one that forks.
    Either way no event is lost."""
    owner, copy, share = owner_and_late_copy(tmp_path)
    shutil.rmtree(copy / "workspaces" / WS / "remotes")
    note(copy, "copy-after")
    assert sync.push(ctx(copy), None)["manifestWritten"]
    note(owner, "owner-after")
    assert "is not one this root wrote" in sync.push(ctx(owner), None)["forked"]["why"]
    assert fresh_pull(tmp_path, share, "f1") == {"first", "in-both", "copy-after",
                                                 "owner-after"}


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


def test_a_manifest_names_another_ids_segments_only_under_forked_from(tmp_path) -> None:
    from agent_journal.core.errors import JournalError
    from agent_journal.ops.sync_manifests import check_sync_manifest

    owner, copy, share = owner_and_late_copy(tmp_path)
    note(copy, "copy-after")
    sync.push(ctx(copy), None)
    new = replica_id(copy)
    raw = (share / WS / new / "manifest.json").read_bytes()
    good = json.loads(raw)
    assert check_sync_manifest(raw, workspace=WS, replica=new)["forkedFrom"]
    for bad in ({k: v for k, v in good.items() if k != "forkedFrom"},
                {**good, "forkedFrom": [new]}, {**good, "forkedFrom": []},
                {**good, "forkedFrom": [*good["forkedFrom"], "r0000000000000ff"]},
                {**good, "syncFormat": 1}):
        with pytest.raises(JournalError):
            check_sync_manifest(json.dumps(bad).encode(), workspace=WS, replica=new)


def test_a_root_forks_once_and_keeps_owning_the_old_ids_segments(tmp_path) -> None:
    # (Compaction copies every segment that loses rows, the old id's newest included, and
    # takes in what a process still holding the old id appends meanwhile: no segment is
    # taken for sealed: storage/segment_copy.py.)
    from agent_journal.storage.replica_fork import fork, own_replicas
    from agent_journal.storage.root import Root

    root = make_root(tmp_path, "root")
    note(root, "n0")
    old = replica_id(root)
    opened = Root.open(str(root), create=False)
    new = fork(opened, old)
    assert replica_id(root) == new and own_replicas(opened) == {old, new}
    assert fork(Root.open(str(root), create=False), old) == new  # once only
