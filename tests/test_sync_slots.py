"""A pull's merge reads the append slots of only the local segments that can speak about
a slot the arriving objects hold (ops/replicas.py `_local_slots`), not of every import
the history left: sync CPU does not grow with the number of replicas merged before.
The collision report is the same either way (a segment whose slots are not watched
adds nothing to it)."""

from __future__ import annotations

import os
import shutil

from test_replicas import make_root
from test_sync import add_remote, ctx, note

from agent_journal.ops import replicas, sync

WS = "ws"


def test_a_pull_reads_the_slots_of_only_the_segments_it_can_collide_with(
        tmp_path, monkeypatch) -> None:
    share = tmp_path / "share"
    share.mkdir(mode=0o700)
    others = []
    for n in range(5):
        other = make_root(tmp_path, f"o{n}")
        add_remote(other, f"file://{share}")
        note(other, f"o{n}-first")
        sync.push(ctx(other), None)
        others.append(other)
    me = make_root(tmp_path, "me")
    add_remote(me, f"file://{share}")
    note(me, "mine")
    sync.pull(ctx(me), None)
    # One replica grows: its segment arrives again (a delta), and the local import of
    # its first rows is the one segment that can speak about the same slots.
    note(others[0], "o0-second")
    sync.push(ctx(others[0]), None)
    opened: list[str] = []
    real = replicas.read_slots

    def counting(path: str, **kw):
        opened.append(os.path.basename(path))
        return real(path, **kw)

    monkeypatch.setattr(replicas, "read_slots", counting)
    pulled = sync.pull(ctx(me), None)
    assert pulled["imported"] == 1 and not pulled["merges"][0]["replicaIdCollisions"]
    o0 = (others[0] / "replica-id").read_text().strip()
    assert opened and all(name.startswith(f"import-{o0}-") for name in opened), opened
    segments = os.listdir(me / "workspaces" / WS / "segments")
    assert len([n for n in segments if n.endswith(".sqlite")]) > len(opened) + 4


def test_a_copy_that_wrote_the_same_slots_is_still_reported(tmp_path) -> None:
    share = tmp_path / "share"
    share.mkdir(mode=0o700)
    owner = make_root(tmp_path, "owner")
    add_remote(owner, f"file://{share}")
    note(owner, "first")
    copy = tmp_path / "copy"
    shutil.copytree(owner, copy, symlinks=True)
    note(owner, "owner-second")
    sync.push(ctx(owner), None)
    note(copy, "copy-second")
    reader = make_root(tmp_path, "reader")
    add_remote(reader, f"file://{share}")
    sync.pull(ctx(reader), None)
    # The copy pushes under a new id (a fork), its segment still named after the old
    # one: the reader's pull finds two events in one slot of the old id.
    assert sync.push(ctx(copy), None)["forked"] is not None
    pulled = sync.pull(ctx(reader), None)
    old = (owner / "replica-id").read_text().strip()
    assert [old] in [m["replicaIdCollisions"] for m in pulled["merges"]]
