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


# -- one byte-scan law over every feature -----------------------------------------------------

def _places(tag: str) -> dict[str, str]:
    """One marker per place content can be written, all sharing the prefix `tag`."""
    return {p: f"{tag}{p}Q" for p in ("input", "inline", "blob", "claim", "subject", "anchor",
                                      "question", "chosen", "text", "reason", "hookin",
                                      "hookout")}


def _fill(root: Path, m: dict[str, str]) -> None:
    def ok(*args: str, stdin: str | None = None) -> None:
        done = subprocess.run([CLI, *args], input=stdin, env=clean_env(
            AGENT_JOURNAL_ROOT=str(root), AGENT_JOURNAL_WORKSPACE=WS,
            AGENT_JOURNAL_ARTIFACT_THRESHOLD="256"), capture_output=True, text=True,
            timeout=120)
        assert done.returncode == 0, (args, done.stderr)

    import json

    ok("observe", "--kind", "tool_call", "--id", "o1", "--tool", "Bash", "--callId", "c1",
       "--input", json.dumps({"command": f"echo {m['input']}"}), "--output", "-",
       "--status", "ok", stdin=f"{m['inline']} said")
    ok("observe", "--kind", "tool_call", "--id", "o2", "--tool", "Bash", "--callId", "c2",
       "--output", "-", "--status", "error", "--exit-code", "1",
       stdin=f"{m['blob']} a failing line\n" * 40)
    ok("observe", "--kind", "tool_call", "--id", "kept", "--tool", "Bash", "--output", "-",
       "--status", "ok", stdin="nothing to hide")
    ok("record", "--kind", "finding", "--id", "f1", "--claim", f"{m['claim']} holds",
       "--subject", m["subject"], "--anchor", "tool_use:o1", "--anchor",
       f"file:{m['anchor']}.py")
    ok("record", "--kind", "decision", "--id", "d1", "--question", m["question"],
       "--chosen", m["chosen"], "--depends-on", "f1")
    ok("record", "--kind", "constraint", "--id", "k1", "--text", m["text"])
    ok("record", "--kind", "finding", "--id", "fine", "--claim", "a kept finding",
       "--anchor", "tool_use:kept")
    ok("invalidate", "k1", "--reason", m["reason"])
    for event in ("PreToolUse", "PostToolUse"):
        payload = {"session_id": "s1", "cwd": "/x/ws", "hook_event_name": event,
                   "tool_name": "Bash", "tool_use_id": "toolu_audit",
                   "tool_input": {"command": f"cat {m['hookin']}"}}
        if event == "PostToolUse":
            payload["tool_response"] = {"stdout": f"{m['hookout']} line\n" * 40, "stderr": ""}
        ok("hook", "claude-code", "--workspace", WS, stdin=json.dumps(payload))
    ok("checkpoint", "before")


TARGETS = ("o1", "o2", "f1", "d1", "k1", "toolu_audit")
READS = (["show"], ["show", "--json"], ["show", "--observations", "--json"], ["trace", "f1"],
         ["trace", "o1"], ["timeline"], ["timeline", "--json"], ["timeline", "--failures-only"],
         ["digest"], ["digest", "--json"], ["coverage"], ["decay"], ["get", "o2"], ["get", "f1"],
         ["checkpoints"], ["show", "--as-of", "before", "--json"],
         ["show", "--as-of", "before", "--observations", "--json"],
         ["digest", "--as-of", "before"], ["trace", "f1", "--as-of", "before"],
         ["timeline", "--as-of", "before", "--json"], ["compact"])


def _hits(tag: str, *folders: Path) -> list[str]:
    return sorted(str(p) for f in folders for p in f.rglob("*")
                  if p.is_file() and not p.is_symlink() and tag.encode() in p.read_bytes())


def test_erasure_reaches_every_copy_every_feature_made(tmp_path):
    tag = "ERASEDZQ"
    m = _places(tag)
    a, b = make_root(tmp_path, "a"), make_root(tmp_path, "b")
    share = tmp_path / "share"
    share.mkdir(mode=0o700)
    _fill(a, m)
    _note(b, "b-own", "b's own note")
    for root in (a, b):
        assert _run(root, "remote", "add", "r", f"file://{share}").returncode == 0
    # Every read first, so every cache, projection and index holds the content.
    for read in READS + tuple(["search", m[p]] for p in ("claim", "blob", "hookout")):
        done = _run(a, *read)
        assert done.returncode == 0, (read, done.stderr)
    assert _run(a, "push").returncode == 0
    assert _run(b, "merge", str(a)).returncode == 0
    assert _run(b, "pull").returncode == 0
    for read in (["digest"], ["search", m["claim"]], ["show", "--observations"], ["coverage"]):
        assert _run(b, *read).returncode == 0
    stale = tmp_path / "stale"
    shutil.copytree(a, stale, symlinks=True)
    assert _run(a, "export", str(tmp_path / "exported")).returncode == 0
    assert _hits(tag, a) and _hits(tag, b) and _hits(tag, share)

    for target in TARGETS:
        assert _run(a, "tombstone", target, "--reason", "leaked").returncode == 0
    # Hidden at once, in as-of views of a checkpoint written before the tombstones too.
    for read in READS:
        if read[0] not in ("get", "compact"):
            shown = _run(a, *read)
            assert tag not in shown.stdout + shown.stderr, read
    for target in ("o1", "o2", "f1"):
        assert _run(a, "get", target).returncode == 1
    for place in ("claim", "blob", "hookout"):
        assert '"hits": []' in _run(a, "search", m[place], "--json").stdout

    assert _run(a, "compact", "--apply").returncode == 0
    assert _run(a, "push").returncode == 0
    assert _hits(tag, a, share) == []
    assert _run(b, "pull").returncode == 0
    assert _run(b, "compact", "--apply").returncode == 0
    assert _hits(tag, b) == []
    # A copy of the root, or an export, made before the purge brings nothing back.
    assert _run(a, "merge", str(stale)).returncode == 0
    assert _run(b, "merge", str(stale)).returncode == 0
    assert _run(b, "merge", str(tmp_path / "exported")).returncode == 0  # made before, too
    assert _run(stale, "push").returncode == 1
    assert _run(b, "pull").returncode == 0
    for root in (a, b):
        for read in (["show", "--observations", "--json"], ["digest"],
                     ["timeline", "--as-of", "before", "--json"]):
            assert tag not in _run(root, *read).stdout, (root, read)
    assert _hits(tag, a, b, share) == []
    assert "a kept finding" in _run(b, "show").stdout
    assert _run(a, "get", "kept").stdout == "nothing to hide"


def _state(root: Path) -> str:
    shown = _run(root, "show", "--observations", "--json")
    assert shown.returncode == 0, shown.stderr
    return shown.stdout


def _disk_full_commands(tmp_path: Path) -> dict[str, tuple[list[str], str | None]]:
    import json

    src = _source(tmp_path, 3, 50_000)
    assert _run(src, "export", str(tmp_path / "exported")).returncode == 0
    share = tmp_path / "share"
    share.mkdir(mode=0o700)
    transcript = tmp_path / "session.jsonl"
    transcript.write_text("".join(json.dumps(r) + "\n" for r in [
        {"type": "assistant", "sessionId": "s9", "timestamp": "2025-01-01T00:00:00.000Z",
         "message": {"role": "assistant", "content": [
             {"type": "tool_use", "id": "toolu_t", "name": "Bash", "input": {"command": "ls"}}]}},
        {"type": "user", "sessionId": "s9", "timestamp": "2025-01-01T00:00:01.000Z",
         "message": {"role": "user", "content": [
             {"type": "tool_result", "tool_use_id": "toolu_t", "content": "x\n" * 40_000}]}}]))
    hook = json.dumps({"session_id": "s", "cwd": "/x", "hook_event_name": "PostToolUse",
                       "tool_name": "Bash", "tool_use_id": "toolu_h",
                       "tool_input": {"command": "ls"},
                       "tool_response": {"stdout": "z\n" * 40_000, "stderr": ""}})
    return {
        "record": (["record", "--kind", "note", "--id", "new", "--text", "t" * 20_000], None),
        "observe": (["observe", "--kind", "tool_call", "--id", "obs", "--tool", "Bash",
                     "--status", "ok", "--output", "-"], "a big output line\n" * 10_000),
        "invalidate": (["invalidate", "mine", "--reason", "r" * 20_000], None),
        "tombstone": (["tombstone", "mine", "--reason", "r" * 20_000], None),
        "checkpoint": (["checkpoint", "cp", "--note", "n" * 20_000], None),
        "hook": (["hook", "claude-code", "--workspace", WS], hook),
        "import": (["import", "claude-code", str(transcript)], None),
        "merge a root": (["merge", str(src)], None),
        "merge an export": (["merge", str(tmp_path / "exported")], None),
        "export": (["export", str(tmp_path / "out")], None),
        "push": (["push"], None),
        "compact": (["compact", "--apply"], None),
    }


@pytest.mark.parametrize("room", [pytest.param("none", marks=pytest.mark.soak),
                                  "the largest file's size"])
def test_every_write_on_a_full_disk_works_or_fails_in_one_line_changing_nothing(
        tmp_path, room):
    template = make_root(tmp_path, "template")
    _note(template, "mine", "acknowledged " * 200)
    _observe(template, "o", "an acknowledged output line\n" * 2_000)
    _observe(template, "gone", "tombstoned output\n" * 2_000)
    writes.tombstone(_ctx(template), "gone", "must go")
    commands = _disk_full_commands(tmp_path)
    assert _run(template, "remote", "add", "origin",
                f"file://{tmp_path / 'share'}").returncode == 0
    before = _state(template)
    # SQLite writes whole pages: past the largest file, nothing under the root can grow.
    largest = max(p.stat().st_size for p in template.rglob("*") if p.is_file())
    limit = 1 if room == "none" else largest + 1
    failures = []
    for name, (args, stdin) in sorted(commands.items()):
        here = tmp_path / "here"
        shutil.rmtree(here, ignore_errors=True)
        shutil.rmtree(tmp_path / "out", ignore_errors=True)
        shutil.copytree(template, here, symlinks=True)
        done = subprocess.run([CLI, *args], input=stdin, env=clean_env(
            AGENT_JOURNAL_ROOT=str(here), AGENT_JOURNAL_WORKSPACE=WS,
            AGENT_JOURNAL_ARTIFACT_THRESHOLD="256"), capture_output=True, text=True,
            timeout=120, preexec_fn=_file_size_limit(limit))
        lines = done.stderr.strip().splitlines()
        if "internal error" in done.stderr or len(lines) > 1 or (
                done.returncode not in (0, 1)) or (name == "hook" and done.returncode != 0):
            failures.append((name, done.returncode, lines[:3]))
        elif done.returncode == 1 or name == "hook":
            # A refusal changed nothing (and the hook, when it could not journal, too).
            if done.returncode == 1 and not lines:
                failures.append((name, "exit 1 without a word"))
            left = [p for p in _leftovers(here) if not p.endswith(".compact-pending.json")]
            if left:
                failures.append((name, "left", left))
            if name != "hook" and _state(here) != before:
                failures.append((name, "failed, yet changed what the journal holds"))
        elif lines and not (name == "observe" and "could not be stored" in lines[0]):
            # It worked; only an output it could not keep is worth a word.
            failures.append((name, "worked, but said", lines))
        assert _run(here, "compact", "--apply").returncode == 0, name
        got = _run(here, "get", "o")
        if got.returncode != 0 or got.stdout != "an acknowledged output line\n" * 2_000:
            failures.append((name, "lost an acknowledged blob"))
    assert failures == [], "\n".join(map(str, failures))


def test_observe_says_so_when_its_output_could_not_be_stored_whole(tmp_path):
    # The event is written (the call happened) with the capture marked failed, but an
    # acknowledgement alone would read as "the output is kept": it must not be silent.
    root = make_root(tmp_path, "journal")
    _note(root, "first", "a segment to append to")
    done = subprocess.run(
        [CLI, "observe", "--kind", "tool_call", "--id", "o", "--tool", "Bash", "--output", "-"],
        input="an output line too big for the disk\n" * 4_000, capture_output=True, text=True,
        env=clean_env(AGENT_JOURNAL_ROOT=str(root), AGENT_JOURNAL_WORKSPACE=WS),
        timeout=120, preexec_fn=_file_size_limit(100_000))
    assert done.returncode == 0 and done.stdout == "observed o\n"
    assert done.stderr.count("\n") == 1 and "could not be stored" in done.stderr, done.stderr
    assert "File too large" in done.stderr
    got = _run(root, "get", "o")
    assert got.returncode == 1 and "never stored" in got.stderr


def test_a_merge_that_cannot_take_its_lock_says_why_in_one_line(tmp_path):
    # On a read-only root the lock file cannot be opened for writing; a folder in its
    # place fails the same open, whoever runs the test.
    src = _source(tmp_path, 2, 1000)
    here = make_root(tmp_path, "here")
    _note(here, "mine", "acknowledged")
    (here / "workspaces" / WS / ".merge.lock").mkdir(mode=0o700)
    done = _run(here, "merge", str(src))
    assert done.returncode == 1, done
    assert len(done.stderr.strip().splitlines()) == 1 and "internal error" not in done.stderr
    assert ".merge.lock" in done.stderr
    assert "mine" in _run(here, "show").stdout
    writes.tombstone(_ctx(here), "mine", "gone")
    compacted = _run(here, "compact", "--apply")  # it clears a killed merge's leftovers
    assert compacted.returncode == 1 and ".merge.lock" in compacted.stderr, compacted
    assert len(compacted.stderr.strip().splitlines()) == 1


# -- compact --apply killed at any instant, then run again --------------------------------------

# Runs the CLI in this process and SIGKILLs itself just before its Nth call into SQLite
# or the file system: every such call is an instant a real kill could land between.
# With N = 0 it prints how many there were.
KILL_AT_IO_CALL = r"""
import os, signal, sys, threading
target = int(sys.argv[1])
IO = {"execute", "executemany", "executescript", "commit", "rollback", "close", "connect",
      "unlink", "rename", "replace", "fsync", "write", "ftruncate", "remove", "rmdir",
      "link", "open", "truncate", "mkdir", "flock"}
count = 0
# KILL_FROM=module.function: count only from the first call of that function on (with
# N = 0 it also prints how many there were when that call returned).
armed = "KILL_FROM" not in os.environ
def profile(frame, event, arg):
    global count
    if armed and event == "c_call" and getattr(arg, "__name__", "") in IO:
        count += 1
        if count == target:
            os.kill(os.getpid(), signal.SIGKILL)
if not armed:
    import importlib
    module, name = os.environ["KILL_FROM"].rsplit(".", 1)
    real = getattr(importlib.import_module(module), name)
    def arming(*args, **kwargs):
        global armed
        armed = True
        try:
            return real(*args, **kwargs)
        finally:
            if target == 0:
                sys.stderr.write(f"within {count}\n")
    setattr(importlib.import_module(module), name, arming)
from agent_journal.cli.main import main
sys.setprofile(profile)
threading.setprofile(profile)
code = main(sys.argv[2:])
sys.setprofile(None)
if target == 0:
    sys.stderr.write(f"calls {count}\n")
elif armed:
    # A run makes a few calls more or fewer than the one that counted them
    # (timing decides some work, e.g. checksumming a file written too recently to
    # trust its mtime): a target past this run's last call is the instant it ends.
    os.kill(os.getpid(), signal.SIGKILL)
sys.exit(code)
"""

DOOMED = "DOOMEDZQ"


@pytest.fixture(scope="module")
def doomed_journal(tmp_path_factory):  # type: ignore[no-untyped-def]
    """Several segments of observations (some with blobs), every seventh tombstoned,
    every cache built."""
    import sys

    root = make_root(tmp_path_factory.mktemp("doomed"), "journal")
    build = r"""
import sys
from agent_journal.ops import context, writes
ctx = context.Context(sys.argv[1], "ws", session="s")
for i in range(140):
    m = f"DOOMEDZQ{i:04d}Q" if i % 7 == 3 else f"kept {i}"
    output = (m + " out\n") * (30 if i % 3 == 0 else 1)
    writes.observe(ctx, kind="tool_call", obs_id=f"o{i}", tool="Bash", call_id=f"c{i}",
                   input_value={"command": "echo " + m}, output=output, status="ok",
                   exit_code=0, duration_ms=1)
for i in range(3, 140, 7):
    writes.tombstone(ctx, f"o{i}", "x")
"""
    env = clean_env(AGENT_JOURNAL_ARTIFACT_THRESHOLD="256",
                    AGENT_JOURNAL_SEGMENT_MAX_BYTES="60000")
    subprocess.run([sys.executable, "-c", build, str(root)], env=env, check=True, timeout=120)
    for read in (["search", "kept"], ["digest"], ["coverage"], ["compact"]):
        assert _run(root, *read).returncode == 0
    assert len(list((root / "workspaces" / WS / "segments").glob("*.sqlite"))) > 2
    counted = subprocess.run([sys.executable, "-c", KILL_AT_IO_CALL, "0", "compact", "--apply"],
                             env=clean_env(AGENT_JOURNAL_ROOT=str(_copy(root)),
                                           AGENT_JOURNAL_WORKSPACE=WS),
                             capture_output=True, text=True, timeout=120)
    assert counted.returncode == 0, counted.stderr
    return root, int(counted.stderr.split()[-1])


def _copy(root: Path) -> Path:
    copy = root.parent / "run"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(root, copy, symlinks=True)
    return copy


def _killed_at(journal: Path, call: int, reads: bool = True, **env: str) -> list[str]:
    """Kill a compact --apply of a copy of `journal` at its `call`th I/O call, read
    (unless not `reads`: then no read has a chance to refresh a cache first), run it
    again: what went wrong."""
    import json
    import sys

    root = _copy(journal)
    killed = subprocess.run([sys.executable, "-c", KILL_AT_IO_CALL, str(call), "compact",
                             "--apply"], env=clean_env(AGENT_JOURNAL_ROOT=str(root),
                                                       AGENT_JOURNAL_WORKSPACE=WS, **env),
                            capture_output=True, timeout=120)
    problems = [] if killed.returncode == -9 else [f"not killed: {killed.returncode}"]
    for read in (["show", "--observations", "--json"], ["digest"],
                 ["search", "DOOMEDZQ0003Q", "--json"]) if reads else ():
        done = _run(root, *read)
        shown = done.stdout.replace("DOOMEDZQ0003Q", "").replace("doomedzq0003q", "")
        if done.returncode != 0 or done.stderr or DOOMED in shown:
            problems.append(f"{read[0]} after the kill: {done.returncode} {done.stderr}")
    again = _run(root, "compact", "--apply")
    if again.returncode != 0:
        problems.append(f"the next run: {again.stderr}")
    problems += [f"left in {p}" for p in _hits(DOOMED, root)]
    doc = json.loads(_run(root, "show", "--observations", "--json").stdout)
    if len(doc["entries"]) != 120 or doc["malformed"] or doc["unreadable"]:
        problems.append(f"holds {len(doc['entries'])} of 120, {doc['malformed']}")
    plan = json.loads(_run(root, "compact", "--json").stdout)
    if plan["tombstoned"] or plan["tombstonesMarkedPurged"]:
        problems.append(f"a third run still plans {plan}")
    return problems


def test_compact_killed_at_any_instant_is_finished_by_the_next_run(doomed_journal):
    journal, calls = doomed_journal
    for call in (calls // 4, calls * 2 // 3, calls - 3):
        assert _killed_at(journal, call) == [], call


TRIM = {"KILL_FROM": "agent_journal.storage.digest_cache.keep_unchanged"}


def _trim_calls(journal: Path) -> int:
    """How many I/O calls compaction makes while it trims the digest's cache."""
    import sys

    counted = subprocess.run([sys.executable, "-c", KILL_AT_IO_CALL, "0", "compact", "--apply"],
                             env=clean_env(AGENT_JOURNAL_ROOT=str(_copy(journal)),
                                           AGENT_JOURNAL_WORKSPACE=WS, **TRIM),
                             capture_output=True, text=True, timeout=120)
    assert counted.returncode == 0, counted.stderr
    return int(counted.stderr.split("within ")[1].split()[0])


def test_compact_killed_while_it_trims_the_digest_cache_is_finished_by_the_next_run(
        doomed_journal):
    # Between dropping rows and renaming the copy written afresh over the file: the
    # cache is the old one, the trimmed one or none, and the next run trims it again.
    journal, _ = doomed_journal
    calls = _trim_calls(journal)
    assert calls > 10
    for call, reads in ((calls // 3, False), (calls * 3 // 4, True), (calls, False)):
        assert _killed_at(journal, call, reads, **TRIM) == [], call


@pytest.mark.soak
def test_compact_killed_while_it_trims_the_digest_cache_soak(doomed_journal):
    journal, _ = doomed_journal
    for call in range(1, _trim_calls(journal) + 1):
        for reads in (False, True):
            assert _killed_at(journal, call, reads, **TRIM) == [], (call, reads)


COPY = {"KILL_FROM": "agent_journal.storage.erasure.copy_survivors"}


def test_compact_killed_while_it_copies_a_sealed_segment_is_finished_by_the_next_run(
        doomed_journal):
    # Between the copy of a sealed segment's surviving rows and its rename over the
    # segment (storage/segment_copy.py): the segment is the old file or the copy, a
    # killed copy is deleted by the next run, which erases what is left to erase.
    import sys

    journal, _ = doomed_journal
    counted = subprocess.run([sys.executable, "-c", KILL_AT_IO_CALL, "0", "compact", "--apply"],
                             env=clean_env(AGENT_JOURNAL_ROOT=str(_copy(journal)),
                                           AGENT_JOURNAL_WORKSPACE=WS, **COPY),
                             capture_output=True, text=True, timeout=120)
    assert counted.returncode == 0 and "within " in counted.stderr, counted.stderr
    calls = int(counted.stderr.split("within ")[1].split()[0])
    assert calls > 10
    for call in (calls // 4, calls // 2, calls * 3 // 4, calls):
        assert _killed_at(journal, call, **COPY) == [], call
        segments = journal.parent / "run" / "workspaces" / WS / "segments"
        assert [p.name for p in segments.iterdir() if p.name.startswith(".")] == [], call


@pytest.mark.soak
def test_compact_killed_at_any_instant_is_finished_by_the_next_run_soak(doomed_journal):
    import random

    journal, calls = doomed_journal
    for call in sorted(random.Random(7).sample(range(1, calls + 1), 60)):
        assert _killed_at(journal, call) == [], call


# -- writers racing compaction, merges, pulls, rollover and SIGKILL ---------------------------

WRITER = r"""
import os, random, sys
from agent_journal.ops import context, writes
root, name, acks = sys.argv[1], sys.argv[2], sys.argv[3]
rnd = random.Random(name)
ctx = context.Context(root, "ws", session=name)
fd = os.open(acks, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
i = 0
while True:
    i += 1
    doomed = rnd.random() < 0.15
    oid = f"{'d' if doomed else 'k'}-{name}-{i}"
    text = (f"DOOMEDZQ{oid}Q" if doomed else f"kept {oid}") + " line\n"
    if rnd.random() < 0.6:
        writes.observe(ctx, kind="tool_call", obs_id=oid, tool="Bash", call_id=oid,
                       input_value={"command": "echo"}, status="ok", exit_code=0,
                       duration_ms=1, output=text * (80 if rnd.random() < 0.3 else 1))
    else:
        writes.record(ctx, kind="finding", entry_id=oid, fields={"claim": text},
                      anchors=[], depends_on=[], subject=None)
    os.write(fd, (oid + "\n").encode())  # acknowledged: the write returned
"""


def _race(tmp_path: Path, seconds: float, writers: int, seed: int) -> None:
    import json
    import random
    import signal
    import sys
    import time

    rnd = random.Random(seed)
    a, b = make_root(tmp_path, "a"), make_root(tmp_path, "b")
    share, acks = tmp_path / "share", tmp_path / "acks"
    share.mkdir(mode=0o700)
    acks.mkdir()
    small = {"AGENT_JOURNAL_SEGMENT_MAX_BYTES": "200000",
             "AGENT_JOURNAL_ARTIFACT_THRESHOLD": "512"}  # segments roll over all the time
    for root in (a, b):
        _note(root, f"first-{root.name}", "a first event")
        assert _run(root, "remote", "add", "r", f"file://{share}").returncode == 0

    def start(root: Path, name: str) -> subprocess.Popen[bytes]:
        env = clean_env(AGENT_JOURNAL_ROOT=str(root), AGENT_JOURNAL_WORKSPACE=WS, **small)
        return subprocess.Popen([sys.executable, "-c", WRITER, str(root), name,
                                 str(acks / name)], env=env, stderr=subprocess.PIPE)

    procs = {f"w{n}": start(a, f"w{n}") for n in range(writers)}
    procs["b0"] = start(b, "b0")
    started, born, tombstoned, failed = time.monotonic(), writers, set(), []

    def acknowledged_so_far() -> int:
        return sum(len(f.read_text().split()) for f in acks.iterdir())

    try:
        # At least `seconds` of chaos, and on until the writers have acknowledged enough
        # for the checks below to mean something: a loaded machine may schedule them
        # seldom in the first seconds (bounded, so a writer that never writes fails).
        while time.monotonic() - started < seconds or acknowledged_so_far() <= 20:
            assert time.monotonic() - started < seconds + 300, "the writers barely wrote"
            action = rnd.choice(["compact", "kill compact", "merge", "pull", "push",
                                 "tombstone", "kill writer"])
            if action in ("compact", "merge", "pull"):
                args = {"compact": ["compact", "--apply"], "merge": ["merge", str(b)],
                        "pull": ["pull"]}[action]
                done = _run(a, *args, **small)
                if done.returncode != 0:
                    failed.append((action, done.stderr))
            elif action == "push":
                for root in (b, a):
                    if (done := _run(root, "push", **small)).returncode != 0:
                        failed.append((action, done.stderr))
            elif action == "kill compact":
                proc = subprocess.Popen([CLI, "compact", "--apply"], env=clean_env(
                    AGENT_JOURNAL_ROOT=str(a), AGENT_JOURNAL_WORKSPACE=WS, **small),
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(rnd.uniform(0.1, 1.0))  # a kill at a random point: the test
                proc.send_signal(signal.SIGKILL)
                proc.wait()
            elif action == "tombstone":
                for f in acks.iterdir():
                    doomed = [o for o in f.read_text().split() if o.startswith("d-")]
                    for oid in [o for o in doomed if o not in tombstoned][:3]:
                        owner = b if oid.startswith("d-b") else a
                        assert _run(owner, "tombstone", oid, "--reason", "x").returncode == 0
                        tombstoned.add(oid)
            else:
                name = rnd.choice(sorted(n for n in procs if n.startswith("w")))
                time.sleep(rnd.uniform(0, 0.2))  # a kill at a random point: the test
                procs.pop(name).send_signal(signal.SIGKILL)
                procs[f"w{born}"] = start(a, f"w{born}")
                born += 1
    finally:
        for proc in procs.values():
            proc.send_signal(signal.SIGKILL)
            proc.wait()
    assert failed == []
    assert _run(a, "merge", str(b)).returncode == 0
    assert _run(a, "compact", "--apply").returncode == 0
    doc = json.loads(_run(a, "show", "--observations", "--json").stdout)
    assert doc["malformed"] == [] and doc["unreadable"] == []
    held = {e["id"] for e in doc["entries"]}
    acknowledged = {o for f in acks.iterdir() for o in f.read_text().split()}
    assert len(acknowledged) > 20
    assert sorted(acknowledged - tombstoned - held) == []  # nothing acknowledged is lost
    assert sorted(tombstoned & held) == []
    mine = {t for t in tombstoned if not t.startswith("d-b")}
    left = [(p, t) for p in a.rglob("*") if p.is_file()
            for t in mine if f"DOOMEDZQ{t}Q".encode() in p.read_bytes()]
    assert left == []


def test_acknowledged_writes_survive_compaction_merges_pulls_rollover_and_kills(tmp_path):
    _race(tmp_path, seconds=6, writers=4, seed=1)


@pytest.mark.soak
@pytest.mark.parametrize("seed", [2, 3, 4])
def test_acknowledged_writes_survive_compaction_merges_pulls_rollover_and_kills_soak(
        tmp_path, seed):
    _race(tmp_path, seconds=150, writers=8, seed=seed)


def test_export_from_a_root_whose_cache_cannot_be_written_still_exports(tmp_path):
    # A read-only root (or a full disk) cannot keep the export's verified points, a
    # disposable projection: that costs the next export time, never this export. A file
    # in the projection folder's place fails the same way, whoever runs the test.
    root = make_root(tmp_path, "journal")
    _note(root, "mine", "acknowledged")
    (root / "cache").mkdir(mode=0o700)
    (root / "cache" / "verified").write_text("")
    done = _run(root, "export", str(tmp_path / "out"))
    assert done.returncode == 0 and done.stderr == "", done
    assert _run(make_root(tmp_path, "other"), "merge", str(tmp_path / "out")).returncode == 0
