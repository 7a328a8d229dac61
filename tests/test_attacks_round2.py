"""Round-two attacks on the product: acknowledged data lost, erasure undone or incomplete,
secrets reaching a file. Each test is one finding, written to fail before its fix."""

from __future__ import annotations

import sys

from conftest import all_bytes_under

AWS = "AKIAQWERTYUIOPASDFGH"


def test_an_id_holding_a_secret_is_refused_not_stored(cli, root):
    # Ids are stored as given and a tombstone names its target's id for ever, so a secret
    # in an id could never be erased: it is refused before anything is written.
    for args in (["record", "--kind", "note", "--id", f"n-{AWS}", "--text", "t"],
                 ["observe", "--kind", "tool_call", "--id", f"o-{AWS}", "--tool", "Bash"],
                 ["record", "--kind", "note", "--id", "n1", "--text", "t", "--depends-on",
                  f"d-{AWS}"],
                 ["record", "--kind", "note", "--id", "n1", "--text", "t", "--anchor",
                  f"tool_use:t-{AWS}"],
                 ["record", "--kind", "note", "--id", "n1", "--text", "t", "--session",
                  f"s-{AWS}"],
                 ["tombstone", "n0", "--reason", "r", "--session", f"s-{AWS}"],
                 ["checkpoint", f"c-{AWS}"]):
        result = cli(*args)
        assert result.code == 2 and "secret" in result.err and AWS not in result.err, result
        assert result.err.count("\n") == 1
    assert not root.exists() or AWS.encode() not in all_bytes_under(root)
    assert cli("record", "--kind", "note", "--id", "n-plain", "--text", "t").code == 0


def test_a_renamed_workspace_leaves_no_tombstoned_bytes_in_the_old_names_cache(cli, root):
    # Projections are named after the workspace: after `mv workspaces/w workspaces/w2` the
    # old name's search index and digest cache still hold everything w had, and compact in
    # w2 used to clear only w2's.
    word = "QUOKKASECRET"
    assert cli("record", "--kind", "note", "--id", "n1", "--text", f"the {word}",
               workspace="w").code == 0
    assert cli("search", word, "--json", workspace="w").json()["hits"]
    assert cli("digest", workspace="w").code == 0
    assert word.encode() in all_bytes_under(root / "cache")
    (root / "workspaces" / "w").rename(root / "workspaces" / "w2")
    assert cli("tombstone", "n1", "--reason", "leaked", workspace="w2").code == 0
    assert cli("compact", "--apply", workspace="w2").code == 0
    assert word.encode() not in all_bytes_under(root)
    # A workspace that exists keeps its projections.
    assert cli("record", "--kind", "note", "--id", "n2", "--text", "kept", workspace="x").code == 0
    assert cli("search", "kept", workspace="x").code == 0
    assert cli("compact", "--apply", workspace="w2").code == 0
    assert (root / "cache" / "search" / "x.sqlite").exists()


def test_a_full_disk_when_compact_writes_its_intent_is_a_clean_refusal(inproc, root,
                                                                       monkeypatch):
    import errno

    from agent_journal.storage import erasure

    assert inproc("observe", "--kind", "tool_call", "--id", "o1", "--tool", "Bash").code == 0
    assert inproc("tombstone", "o1", "--reason", "r").code == 0
    before = all_bytes_under(root / "workspaces")

    def full(path, data, **kw):
        raise OSError(errno.ENOSPC, "No space left on device", path)

    monkeypatch.setattr(erasure, "write_file_atomic", full)
    result = inproc("compact", "--apply")
    assert result.code == 1 and "internal error" not in result.err, result
    assert "No space left on device" in result.err and result.err.count("\n") == 1
    assert all_bytes_under(root / "workspaces") == before  # nothing was touched


def test_export_to_a_full_disk_blames_the_disk_not_the_segment(cli, root, tmp_path,
                                                                monkeypatch):
    import sqlite3

    import pytest

    from agent_journal.core.errors import DamagedJournalError, StorageError
    from agent_journal.storage import replica_source

    assert cli("observe", "--kind", "tool_call", "--id", "o1", "--tool", "Bash").code == 0
    (segment,) = (root / "workspaces" / "ws" / "segments").glob("*.sqlite")

    class Full:
        def execute(self, *args):
            exc = sqlite3.OperationalError("database or disk is full")
            exc.sqlite_errorcode = sqlite3.SQLITE_FULL  # type: ignore[attr-defined]
            raise exc

        def close(self):
            pass

    monkeypatch.setattr(replica_source, "_open_for_reading", lambda *a, **kw: Full())
    dest = tmp_path / "snap.sqlite"
    with pytest.raises(StorageError) as caught:
        replica_source.snapshot_segment(str(segment), str(dest))
    assert not isinstance(caught.value, DamagedJournalError)
    assert "disk is full" in caught.value.message and str(dest) in caught.value.message
    assert not dest.exists()


def test_a_finish_stamped_before_its_start_still_finishes_the_call(cli):
    # The clock stepped back between PreToolUse and PostToolUse (NTP, a VM resumed): the
    # outcome was recorded, so no read may call the call unfinished.
    assert cli("observe", "--kind", "tool_call", "--id", "o1", "--tool", "Bash", "--status",
               "started", env={"AGENT_JOURNAL_NOW": "2026-12-01T10:00:00Z"}).code == 0
    assert cli("observe", "--kind", "tool_call", "--id", "o1", "--tool", "Bash", "--status",
               "ok", "--exit-code", "0",
               env={"AGENT_JOURNAL_NOW": "2026-12-01T09:59:00Z"}).code == 0
    (view,) = cli("show", "--json", "--observations").json()["entries"]
    assert view["status"] == "ok" and view["exitCode"] == 0
    digest = cli("digest", "--json").json()
    assert "o1" not in str(digest.get("unfinished", [])), digest.get("unfinished")
    assert "no outcome recorded" not in cli("digest").out


def test_a_killed_merges_temporary_import_does_not_outlive_compact(cli, root, tmp_path):
    # A merge killed mid-import leaves .import-<pid>-<n>.tmp beside the segments, holding
    # what it had copied; only the next merge swept it, so a tombstone and compact --apply
    # in between left the content under the root.
    import os
    import shutil
    import signal
    import subprocess
    import time

    from conftest import CLI, clean_env

    source = tmp_path / "source"
    env = clean_env(AGENT_JOURNAL_ROOT=str(source), AGENT_JOURNAL_WORKSPACE="ws")
    for n in range(3):
        subprocess.run([CLI, "observe", "--kind", "tool_call", "--id", f"s{n}", "--tool",
                        "Bash", "--output", "-"], input=f"PLATYPUS{n} ".encode() * 50,
                       env=env, check=True, capture_output=True)
    assert cli("record", "--kind", "note", "--id", "t0", "--text", "here").code == 0
    assert cli("merge", str(source)).code == 0
    segments = root / "workspaces" / "ws" / "segments"
    (imported,) = segments.glob("import-*.sqlite")
    # What the killed merge left: an import of the same rows under the temporary name.
    leftover = segments / ".import-99999-1.tmp"
    shutil.copy(imported, leftover)
    (segments / ".import-99999-1.tmp-journal").write_bytes(b"PLATYPUS1 half written")
    assert cli("tombstone", "s1", "--reason", "leaked").code == 0
    assert cli("compact", "--apply").code == 0
    assert b"PLATYPUS1 " not in all_bytes_under(root)
    assert not leftover.exists()
    # A merge still running keeps its temporary import: compact leaves it alone.
    blocker = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys, time\n"
         "fd = os.open(sys.argv[1], os.O_RDWR)\nfcntl.flock(fd, fcntl.LOCK_EX)\n"
         "print('held', flush=True)\ntime.sleep(60)\n",  # held until killed (synced on "held")
         str(root / "workspaces" / "ws" / ".merge.lock")], stdout=subprocess.PIPE)
    try:
        assert blocker.stdout is not None and blocker.stdout.readline() == b"held\n"
        live = segments / ".import-12345-1.tmp"
        live.write_bytes(b"being written")
        assert cli("tombstone", "s2", "--reason", "leaked").code == 0
        started = time.monotonic()
        assert cli("compact", "--apply").code == 0
        assert live.exists() and time.monotonic() - started < 30
    finally:
        os.kill(blocker.pid, signal.SIGKILL)
        blocker.wait()


def test_stages_killed_syncs_left_do_not_outlive_compact(cli, root):
    # A push or pull killed mid-way leaves its stage (snapshots of this replica's segments,
    # or fetched objects) under <ws>/remotes/<name>/; a killed `remote status` leaves the
    # objects it scanned (the very ones holding erased content) in <ws>/.status-*. Only a
    # later sync to the same remote swept the first kind, nothing the second.
    import os

    assert cli("observe", "--kind", "tool_call", "--id", "o1", "--tool", "Bash").code == 0
    ws = root / "workspaces" / "ws"
    dead = _dead_pid()
    leftovers = [ws / "remotes" / "team" / f".push-{dead}-0a1b2c3d" / "seg.sqlite",
                 ws / "remotes" / "nas" / f".pull-{dead}-0a1b2c3d" / "obj",
                 ws / f".status-{dead}-x1y2z3" / "obj", ws / ".status-k3j4h5" / "obj"]
    live = ws / "remotes" / "team" / f".push-{os.getpid()}-0a1b2c3d" / "seg.sqlite"
    for path in leftovers + [live]:
        path.parent.mkdir(parents=True)
        path.write_bytes(b"ECHIDNASECRET")
    assert cli("tombstone", "o1", "--reason", "leaked").code == 0
    assert cli("compact", "--apply").code == 0
    assert [p for p in leftovers if p.parent.exists()] == []
    assert live.exists()  # a sync still running keeps its stage


def _dead_pid() -> int:
    import subprocess

    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_a_workspace_named_like_a_cache_folder_clears_only_its_own_projections(tmp_path):
    """`digest` is an area of cache/ and `locks` the folder of every area's locks: a
    workspace with either name clears its own files there, not the folder."""
    from agent_journal.storage.erasure import clear_workspace_cache
    from agent_journal.storage.root import Root

    root = Root.open(str(tmp_path / "j"), create=True)
    cache = tmp_path / "j" / "cache"
    keep = [cache / "digest" / "other.sqlite", cache / "digest" / "locks" / "other.lock",
            cache / "search" / "locks" / "other.lock"]
    gone = [cache / "digest" / "digest.sqlite", cache / "search" / "locks.sqlite"]
    for path in keep + gone:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")
    for name in ("digest", "locks"):
        clear_workspace_cache(root.workspace(name))
    assert [p for p in keep if not p.exists()] == []
    assert [p for p in gone if p.exists()] == []
