"""Large outputs kept whole as artifacts, and `get` returning only verified evidence."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import CLI, clean_env

SMALL = {"AGENT_JOURNAL_ARTIFACT_THRESHOLD": "1024"}


@pytest.fixture
def cli(inproc):
    """In-process: these tests need no real process."""
    return inproc



def events(root: Path, workspace: str = "ws") -> list[dict[str, Any]]:
    out = []
    for seg in sorted((root / "workspaces" / workspace / "segments").glob("*.sqlite")):
        with sqlite3.connect(seg) as conn:
            out += [json.loads(b) for (b,) in conn.execute("SELECT body FROM events ORDER BY seq")]
    return out


def blobs(root: Path, workspace: str = "ws") -> list[Path]:
    folder = root / "workspaces" / workspace / "artifacts"
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def observe_output(cli, tmp_path: Path, obs_id: str, text: str, *extra: str,
                   env: dict[str, str] | None = None):
    path = tmp_path / f"{obs_id}.out"
    path.write_text(text, encoding="utf-8")
    return cli("observe", "--kind", "tool_call", "--id", obs_id, "--tool", "Bash",
               "--output", str(path), *extra, env=env if env is not None else SMALL)


def hook(cli, payload: dict[str, Any], env: dict[str, str] | None = None):
    return cli("hook", "claude-code", input=json.dumps(payload),
               env=env if env is not None else SMALL)


def post(tool_use_id: str, response: Any, **extra: Any) -> dict[str, Any]:
    return {"session_id": "s1", "cwd": "/x/ws", "hook_event_name": "PostToolUse",
            "tool_name": "Bash", "tool_input": {"command": "cat big"},
            "tool_use_id": tool_use_id, "tool_response": response, **extra}


LARGE_TEXT = "".join(f"line {i}: caf\u00e9 \u65e5\u672c \u2603\n" for i in range(400))


def test_large_output_is_stored_whole_and_privately(cli, root, tmp_path):
    assert observe_output(cli, tmp_path, "o1", LARGE_TEXT).code == 0
    (ev,) = events(root)
    artifact = ev["data"]["artifact"]
    data = LARGE_TEXT.encode()
    assert artifact["bytes"] == len(data) and artifact["status"] == "complete"
    assert artifact["ref"].startswith("xxh3-128:") and artifact["checksum"].startswith("xxh3-64:")
    assert ev["data"]["output"] == LARGE_TEXT[:2000]
    (blob,) = blobs(root)
    hexdigest = artifact["ref"].split(":")[1]
    where = f"workspaces/ws/artifacts/{hexdigest[:2]}/{hexdigest}"
    assert blob.relative_to(root).as_posix() == where
    assert blob.read_bytes() == data
    assert oct(blob.stat().st_mode & 0o777) == "0o600"
    assert oct(blob.parent.stat().st_mode & 0o777) == "0o700"
    assert oct(blob.parent.parent.stat().st_mode & 0o777) == "0o700"
    assert not [p for p in blob.parent.iterdir() if p.name.startswith(".")]
    result = cli("get", "--json", "o1")
    assert result.code == 0 and result.out == LARGE_TEXT and result.err == ""


def test_small_output_stays_in_the_event(cli, root, tmp_path):
    assert observe_output(cli, tmp_path, "o1", "short\n").code == 0
    (ev,) = events(root)
    assert ev["data"]["output"] == "short\n" and ev["data"]["artifact"] is None
    assert blobs(root) == []
    assert cli("get", "--json", "o1").out == "short\n"


def test_default_threshold_is_16_kib(cli, root, tmp_path):
    assert observe_output(cli, tmp_path, "at", "x" * 16384, env={}).code == 0
    assert observe_output(cli, tmp_path, "over", "x" * 16385, env={}).code == 0
    by_id = {e["id"]: e for e in events(root)}
    assert by_id["at"]["data"]["artifact"] is None
    assert by_id["over"]["data"]["artifact"]["bytes"] == 16385


def test_same_bytes_are_one_blob(cli, root, tmp_path):
    for obs_id in ("o1", "o2"):
        assert observe_output(cli, tmp_path, obs_id, LARGE_TEXT).code == 0
    assert len(blobs(root)) == 1
    assert cli("get", "--json", "o2").out == LARGE_TEXT


def test_structured_response_is_stored_as_canonical_json(cli, root):
    response = {"stdout": LARGE_TEXT, "stderr": "", "interrupted": False, "isImage": False}
    assert hook(cli, post("toolu_big", response)).code == 0
    (ev,) = events(root)
    canonical = json.dumps(response, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert ev["data"]["artifact"]["status"] == "complete"
    assert blobs(root)[0].read_bytes() == canonical.encode()
    result = cli("get", "--json", "toolu_big")
    assert result.out == canonical and json.loads(result.out) == response
    # A small structured response is printed the same way, straight from the event.
    assert hook(cli, post("toolu_small", {"b": 1, "a": [True, None]})).code == 0
    assert cli("get", "--json", "toolu_small").out == '{"a":[true,null],"b":1}'


# Runs the hook as its only child and prints the child's peak RSS in KiB.
_PEAK_RSS = """
import resource, subprocess, sys
with open(sys.argv[1], "rb") as stdin:
    code = subprocess.run(sys.argv[2:], stdin=stdin).returncode
print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def test_a_20_mb_response_is_one_blob_in_bounded_memory(root, tmp_path):
    """Claude Code caps most outputs, not all (an Edit's response holds the whole file):
    a 20 MB response is kept whole as a blob, and the hook's memory stays a small
    multiple of the payload (the stdin cap bounds it)."""
    response = {"stdout": "".join(f"{i:08d} {'x' * 90}\n" for i in range(200_000)),
                "stderr": "", "interrupted": False, "isImage": False}
    payload = tmp_path / "payload.json"
    payload.write_text(json.dumps(post("toolu_huge", response)))
    size = payload.stat().st_size
    env = clean_env(AGENT_JOURNAL_ROOT=str(root), AGENT_JOURNAL_WORKSPACE="ws")
    proc = subprocess.run([sys.executable, "-c", _PEAK_RSS, str(payload), CLI, "hook",
                           "claude-code"], env=env, capture_output=True, text=True,
                          timeout=120)
    code, peak_kib = map(int, proc.stdout.split())
    assert code == 0 and not (root / "logs").exists()
    assert peak_kib * 1024 < 6 * size + 80 * 2**20, (peak_kib, size)
    (ev,) = events(root)
    assert ev["data"]["artifact"]["status"] == "complete"
    (blob,) = blobs(root)
    assert blob.read_bytes() == json.dumps(response, sort_keys=True, separators=(",", ":"),
                                           ensure_ascii=False).encode()


@pytest.mark.parametrize("flag", ["interrupted", "truncated"])
def test_output_the_tool_cut_short_is_partial(cli, root, flag):
    response = {"stdout": LARGE_TEXT, "stderr": "", flag: True}
    assert hook(cli, post("toolu_cut", response)).code == 0
    (ev,) = events(root)
    assert ev["data"]["artifact"]["status"] == "partial"
    result = cli("get", "--json", "toolu_cut")
    assert result.code == 0 and json.loads(result.out) == response
    assert "partial capture" in result.err


def test_interrupted_failure_is_partial(cli, root):
    payload = {"session_id": "s1", "cwd": "/x/ws", "hook_event_name": "PostToolUseFailure",
               "tool_name": "Bash", "tool_input": {"command": "make"}, "tool_use_id": "t1",
               "error": "Exit code 130\n" + LARGE_TEXT, "is_interrupt": True}
    assert hook(cli, payload).code == 0
    (ev,) = events(root)
    assert ev["data"]["artifact"]["status"] == "partial" and ev["data"]["exitCode"] == 130


def test_observe_status_partial_marks_the_capture_partial(cli, root, tmp_path):
    assert observe_output(cli, tmp_path, "o1", LARGE_TEXT, "--status", "partial").code == 0
    assert events(root)[0]["data"]["artifact"]["status"] == "partial"


def test_blob_that_cannot_be_written_is_failed_never_complete(cli, root):
    assert hook(cli, post("toolu_first", {"stdout": "small"})).code == 0
    response = {"stdout": "y" * 300_000}
    env = clean_env(AGENT_JOURNAL_ROOT=str(root), AGENT_JOURNAL_WORKSPACE="ws", **SMALL)
    # Files may grow to 64 KiB: enough for the segment and its journal, not for the blob.
    proc = subprocess.run([CLI, "hook", "claude-code"], env=env, capture_output=True,
                          input=json.dumps(post("toolu_fail", response)).encode(),
                          preexec_fn=_file_size_limit(64 * 1024))
    assert (proc.returncode, proc.stdout) == (0, b"")
    ev = [e for e in events(root) if e["id"] == "toolu_fail"][0]
    artifact = ev["data"]["artifact"]
    assert artifact["status"] == "failed" and artifact["bytes"] > 300_000
    assert ev["data"]["output"].startswith('{"stdout":"yyy')
    assert blobs(root) == []
    result = cli("get", "--json", "toolu_fail")
    assert result.code == 1 and result.out == ""
    assert "never stored" in result.err and "preview" in result.err


def _file_size_limit(limit: int):
    def apply() -> None:
        import resource
        import signal

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


# -- get refuses what it cannot verify ---------------------------------------------------

def stored(cli, root: Path, tmp_path: Path) -> Path:
    assert observe_output(cli, tmp_path, "o1", LARGE_TEXT).code == 0
    (blob,) = blobs(root)
    return blob


def test_tampered_artifact_is_refused(cli, root, tmp_path):
    blob = stored(cli, root, tmp_path)
    data = bytearray(blob.read_bytes())
    data[100] ^= 1
    blob.write_bytes(bytes(data))
    result = cli("get", "--json", "o1")
    assert (result.code, result.out) == (1, "")
    assert "does not match its recorded checksum" in result.err


def test_truncated_artifact_is_refused(cli, root, tmp_path):
    blob = stored(cli, root, tmp_path)
    blob.write_bytes(blob.read_bytes()[:-1])
    result = cli("get", "--json", "o1")
    assert (result.code, result.out) == (1, "")
    assert f"has {len(LARGE_TEXT.encode()) - 1} bytes" in result.err


def test_missing_artifact_is_refused(cli, root, tmp_path):
    blob = stored(cli, root, tmp_path)
    blob.unlink()
    result = cli("get", "--json", "o1")
    assert (result.code, result.out) == (1, "")
    assert "is missing" in result.err and blob.name in result.err


def test_damaged_blob_is_replaced_by_the_next_capture_of_the_same_bytes(cli, root, tmp_path):
    blob = stored(cli, root, tmp_path)
    blob.write_bytes(b"garbage")
    assert observe_output(cli, tmp_path, "o2", LARGE_TEXT).code == 0
    assert blob.read_bytes() == LARGE_TEXT.encode()
    assert cli("get", "--json", "o1").out == LARGE_TEXT


def test_get_entry_prints_its_full_record(cli):
    cli("record", "--kind", "decision", "--id", "d1", "--question", "q?", "--chosen", "a",
        "--anchor", "tool_use:o1")
    result = cli("get", "--json", "d1")
    record = result.json()
    assert result.code == 0
    assert record["id"] == "d1" and record["fields"] == {"question": "q?", "chosen": "a"}
    assert record["anchors"] == ["tool_use:o1"] and record["live"] is True


def test_get_of_an_invalidated_entry_still_prints_it(cli):
    cli("record", "--kind", "finding", "--id", "f1", "--claim", "c")
    cli("invalidate", "f1", "--reason", "wrong")
    assert cli("get", "--json", "f1").json()["outcome"] == "invalidated"


def test_get_refuses_tombstoned_and_unknown_ids(cli, tmp_path):
    assert observe_output(cli, tmp_path, "o1", LARGE_TEXT).code == 0
    cli("tombstone", "o1", "--reason", "leaked")
    for some_id in ("o1", "nope"):
        result = cli("get", "--json", some_id)
        assert (result.code, result.out) == (1, "")
        assert f"no entry or observation with id {some_id}" in result.err
    assert cli("get", "--json", "a/b").code == 2


def test_get_of_a_call_without_output(cli):
    cli("observe", "--kind", "tool_call", "--id", "o1", "--status", "started")
    result = cli("get", "--json", "o1")
    assert (result.code, result.out) == (0, "")
    assert "no recorded output (status started)" in result.err


def test_latest_capture_decides_the_output(cli, root, tmp_path):
    assert observe_output(cli, tmp_path, "o1", LARGE_TEXT).code == 0
    assert observe_output(cli, tmp_path, "o1", "retry: short\n").code == 0
    assert cli("get", "--json", "o1").out == "retry: short\n"


def test_bad_threshold_is_refused(cli, root, tmp_path):
    result = observe_output(cli, tmp_path, "o1", "x", env={
        "AGENT_JOURNAL_ARTIFACT_THRESHOLD": "lots"})
    assert result.code == 1 and "AGENT_JOURNAL_ARTIFACT_THRESHOLD" in result.err
    assert not (root / "workspaces" / "ws" / "segments").exists() or events(root) == []


@pytest.mark.parametrize("ref", [
    "xxh3-128:../../../../etc/passwd",
    "xxh3-128:" + "A" * 32,
    "xxh3-128:" + "a" * 31,
    "sha256:" + "a" * 32,
    "xxh3-128" + "a" * 32,
    "",
])
def test_artifact_path_accepts_only_valid_refs(root, ref):
    from agent_journal.core.errors import JournalError
    from agent_journal.storage.artifacts import artifact_path
    from agent_journal.storage.root import Root

    ws = Root.open(str(root), create=True).workspace("ws")
    with pytest.raises(JournalError, match="not an artifact reference"):
        artifact_path(ws, ref)


def test_artifact_from_a_hostile_event_is_not_followed(cli, root, tmp_path):
    stored(cli, root, tmp_path)
    (seg,) = (root / "workspaces" / "ws" / "segments").glob("*.sqlite")
    from agent_journal.core import codec
    from agent_journal.core.model import Event

    evil = Event(event_id="e" * 8 + "-0000-4000-8000-" + "0" * 12, type="observation",
                 kind="tool_call", id="o1", ts="2999-01-01T00:00:00.000Z", author="agent",
                 session="x", replica="rother", data={
                     "output": "x", "artifact": {"ref": "xxh3-128:../../../../replica-id",
                                                 "bytes": 10, "checksum": "xxh3-64:0",
                                                 "status": "complete"}})
    body, digest = codec.encode(evil)
    with sqlite3.connect(seg) as conn:
        conn.execute("INSERT INTO events(event_id, type, subject, ts, body, checksum) "
                     "VALUES (?, ?, ?, ?, ?, ?)",
                     (evil.event_id, evil.type, evil.id, evil.ts, body, digest))
    result = cli("get", "--json", "o1")
    assert (result.code, result.out) == (1, "")
    assert "not an artifact reference" in result.err
