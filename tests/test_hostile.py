"""Hostile paths, ids, arguments and streams (issue 15): every one is refused in one line
or handled, nothing is written outside the root, nothing reaches "internal error"."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import CLI, Result, all_bytes_under, clean_env
from s3_support import plain

SETPRIV = shutil.which("setpriv")
# Root reads and writes everything; without these capabilities it meets the permission
# bits like any other user (the files it owns, at mode 000, are closed to it).
NO_DAC = [SETPRIV or "setpriv", "--bounding-set=-dac_override,-dac_read_search"]
PAYLOAD = {"hook_event_name": "PostToolUse", "session_id": "s1", "tool_name": "Bash",
           "tool_use_id": "t1", "tool_input": {"command": "ls"},
           "tool_response": {"stdout": "hello"}, "cwd": "/srv/project"}


def run_main(argv: list[str], *, stdin: bytes = b"", root: Path | None = None,
             env: dict[str, str] | None = None) -> Result:
    """cli.main.main in this process, with its own stdin/stdout/stderr and environment."""
    from agent_journal.cli import main as cli_main
    from agent_journal.storage import connection

    saved_env = dict(os.environ)
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    saved_patience = connection.BUSY_TIMEOUT_S, connection.WRITE_ATTEMPTS
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace")
    try:
        for key in [k for k in os.environ if k.startswith("AGENT_JOURNAL_")]:
            del os.environ[key]
        if root is not None:
            os.environ["AGENT_JOURNAL_ROOT"] = str(root)
        os.environ.update(env or {})
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
        sys.stdout, sys.stderr = out, err
        code = cli_main.main(argv)
        out.flush()
        err.flush()
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        connection.BUSY_TIMEOUT_S, connection.WRITE_ATTEMPTS = saved_patience
        os.environ.clear()
        os.environ.update(saved_env)
    return Result(code, out.buffer.getvalue().decode(),  # type: ignore[attr-defined]
                  err.buffer.getvalue().decode())  # type: ignore[attr-defined]


def one_line_error(result: Result, code: int = 1) -> None:
    assert result.code == code, (result.code, result.err)
    assert result.err.count("\n") == 1 and result.err.startswith("error: "), result.err
    assert "internal error" not in result.err and "Traceback" not in result.err


def tree(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*")) if path.exists() else []


def aj(root: Path, *args: str, workspace: str = "ws", stdin: bytes = b"") -> Result:
    """One command in this process against `root` and `workspace` (fast set-up)."""
    return run_main(list(args), root=root, stdin=stdin,
                    env={"AGENT_JOURNAL_WORKSPACE": workspace})


@pytest.fixture
def journal(root: Path) -> Path:
    """A root whose workspace `ws` has an entry, an observation with an artifact, and
    built search and digest caches."""
    big = root.parent / "big-output.txt"
    big.write_text("line of output\n" * 4000)
    assert aj(root, "record", "--kind", "note", "--id", "n1", "--text", "hello").code == 0
    assert aj(root, "observe", "--kind", "tool_call", "--id", "o1", "--output", str(big)
              ).code == 0
    assert aj(root, "search", "hello").code == 0
    assert aj(root, "digest").code == 0
    assert (root / "workspaces" / "ws" / "artifacts").is_dir()
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside"
    path.mkdir(mode=0o700)
    return path


def plant_link(path: Path, target: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)


# -- 1. nothing under the root is followed out of it -------------------------------------

def test_symlinked_artifacts_folder_is_refused(cli, journal, outside):
    plant_link(journal / "workspaces" / "ws" / "artifacts", outside)
    big = journal.parent / "other-output.txt"
    big.write_text("other output\n" * 4000)
    one_line_error(cli("observe", "--kind", "tool_call", "--id", "o2", "--output", str(big)))
    one_line_error(cli("get", "o1"))
    assert "symbolic link" in cli("get", "o1").err
    assert tree(outside) == []


def test_symlinked_logs_folder_gets_no_hook_line(cli, journal, outside):
    plant_link(journal / "logs", outside)
    result = cli("hook", "claude-code", input=b"not json")
    assert (result.code, result.out) == (0, "")
    assert tree(outside) == []
    # The line is kept inside the root itself.
    assert "failed open" in (journal / "hook.log").read_text()


def test_symlinked_hook_log_does_not_append_to_its_target(cli, journal, outside):
    target = outside / "victim.txt"
    target.write_text("precious\n")
    plant_link(journal / "logs" / "hook.log", target)
    result = cli("hook", "claude-code", input=b"not json")
    assert (result.code, result.out) == (0, "")
    assert target.read_text() == "precious\n"
    assert "failed open" in (journal / "hook.log").read_text()
    # Every other command refuses the root while the link is there.
    one_line_error(cli("show"))


@pytest.mark.parametrize("area, command", [("search", ["search", "hello"]),
                                           ("digest", ["digest"])])
def test_symlinked_cache_folder_is_refused(cli, journal, outside, area, command):
    plant_link(journal / "cache" / area, outside)
    result = cli(*command)
    one_line_error(result)
    assert "symbolic link" in result.err and f"cache/{area}" in result.err
    one_line_error(cli("compact", "--apply"))  # would delete files in the link's target
    assert tree(outside) == []


def test_symlinked_cache_file_is_refused(cli, journal, outside):
    target = outside / "victim.sqlite"
    target.write_bytes(b"")
    plant_link(journal / "cache" / "search" / "ws.sqlite", target)
    one_line_error(cli("search", "hello"))
    assert target.read_bytes() == b""


def test_symlinked_workspace_folder_is_refused(cli, journal, outside):
    plant_link(journal / "workspaces" / "other", outside)
    for command in (["record", "--kind", "note", "--id", "n2", "--text", "t"], ["show"],
                    ["search", "t"], ["digest"]):
        result = cli(*command, workspace="other")
        one_line_error(result)
        assert "symbolic link" in result.err
    assert tree(outside) == []


def test_symlinked_segment_is_refused(cli, journal, tmp_path, outside):
    (seg,) = (journal / "workspaces" / "ws" / "segments").glob("*.sqlite")
    moved = outside / seg.name
    shutil.move(seg, moved)
    seg.symlink_to(moved)
    before = moved.read_bytes()
    one_line_error(cli("record", "--kind", "note", "--id", "n2", "--text", "t"))
    one_line_error(cli("show"))
    assert moved.read_bytes() == before


def test_shared_writable_workspaces_folder_is_refused(cli, journal):
    os.chmod(journal / "workspaces", 0o777)
    result = cli("record", "--kind", "note", "--id", "n2", "--text", "t")
    one_line_error(result)
    assert "group- or world-writable" in result.err
    os.chmod(journal / "workspaces", 0o700)
    os.chmod(journal / "workspaces" / "ws", 0o777)
    one_line_error(cli("show"))


def test_merge_does_not_follow_a_symlinked_source_segment(cli, tmp_path, outside):
    source = tmp_path / "private" / "source"
    assert cli("record", "--kind", "note", "--id", "mine", "--text", "t",
               env={"AGENT_JOURNAL_ROOT": str(source)}).code == 0
    elsewhere = tmp_path / "private" / "elsewhere"
    assert cli("record", "--kind", "note", "--id", "stranger", "--text", "t",
               env={"AGENT_JOURNAL_ROOT": str(elsewhere)}).code == 0
    (stranger,) = (elsewhere / "workspaces" / "ws" / "segments").glob("*.sqlite")
    (source / "workspaces" / "ws" / "segments" / "r0000000000000000-000001.sqlite"
     ).symlink_to(stranger)
    result = cli("merge", str(source))
    one_line_error(result)
    assert "symbolic link" in result.err
    shown = cli("show")
    assert shown.code != 0 or "stranger" not in shown.out


# -- 2. ids ------------------------------------------------------------------------------

@pytest.mark.parametrize("bad", ["a\u0085b", "a\u009bb", "x\u0080", "\u009f" + "y"])
def test_c1_controls_in_ids_are_refused(root, bad):
    for argv in (["record", "--workspace", bad, "--kind", "note", "--id", "n", "--text", "t"],
                 ["record", "--workspace", "ws", "--kind", "note", "--id", bad, "--text", "t"]):
        result = run_main(argv, root=root)
        one_line_error(result, 2)
        assert not root.exists()


@pytest.mark.parametrize("char", ["é", "日", "😀"])
def test_ids_are_bounded_by_bytes(root, char):
    long_id = char * (129 // len(char.encode()) + 1)  # at most 128 characters, > 128 bytes
    assert len(long_id) <= 128 < len(long_id.encode())
    for argv in (["record", "--workspace", long_id, "--kind", "note", "--id", "n", "--text",
                  "t"],
                 ["record", "--workspace", "ws", "--kind", "note", "--id", long_id, "--text",
                  "t"]):
        result = run_main(argv, root=root)
        one_line_error(result, 2)
        assert "bytes" in result.err
        assert not root.exists()


def test_the_longest_multibyte_workspace_id_works_everywhere(root, tmp_path):
    ws = "😀" * 32  # 128 bytes of UTF-8
    common = ["--workspace", ws]
    assert run_main(["record", *common, "--kind", "note", "--id", "😀" * 32, "--text",
                     "hello there"], root=root).code == 0
    for argv in (["show"], ["search", "hello"], ["digest"], ["coverage"], ["compact"],
                 ["export", str(tmp_path / "export")]):
        result = run_main(argv[:1] + common + argv[1:], root=root)
        assert result.code == 0, (argv, result.err)


# -- 3. export to a dangling symlink ------------------------------------------------------

def test_export_to_a_dangling_symlink(cli, journal, tmp_path):
    dest = tmp_path / "dangling"
    dest.symlink_to(tmp_path / "nowhere" / "at-all")
    one_line_error(cli("export", str(dest)))
    assert not (tmp_path / "nowhere").exists()


# -- 4. config ---------------------------------------------------------------------------

BROKEN = {"redact": {"patterns": [{"name": "broken", "regex": "("},
                                  {"name": "order", "regex": "ORDER-[0-9]{4}"}]}}


def test_hook_journals_with_usable_rules_when_a_pattern_does_not_compile(cli, root):
    root.mkdir(mode=0o700)
    (root / "config.json").write_text(json.dumps(BROKEN))
    token = "ghp_" + "A1b2C3d4E5" * 4
    payload = PAYLOAD | {"tool_response": {"stdout": f"ORDER-1234 {token}"}}
    result = cli("hook", "claude-code", input=json.dumps(payload))
    assert (result.code, result.out) == (0, "")
    log = (root / "logs" / "hook.log").read_text()
    assert "'broken'" in log and "invalid regex" in log
    raw = b"".join(p.read_bytes() for p in (root / "workspaces").rglob("*.sqlite"))
    assert b"[REDACTED:order]" in raw and b"[REDACTED:github-token]" in raw
    assert b"ORDER-1234" not in raw and token.encode() not in raw
    # Every other command refuses, naming the pattern.
    for command in (["show"], ["record", "--kind", "note", "--id", "n", "--text", "t"],
                    ["search", "x"], ["digest"]):
        result = cli(*command)
        one_line_error(result)
        assert "'broken'" in result.err


@pytest.mark.parametrize("config, key", [({"redcat": {"patterns": []}}, '"redcat"'),
                                         ({"redact": {"pattern": []}}, '"redact.pattern"')])
def test_misspelt_config_key_is_reported(cli, root, config, key):
    root.mkdir(mode=0o700)
    (root / "config.json").write_text(json.dumps(config))
    result = cli("record", "--kind", "note", "--id", "n", "--text", "t")
    one_line_error(result)
    assert key in result.err
    assert cli("hook", "claude-code", input=json.dumps(PAYLOAD)).code == 0
    assert key in (root / "logs" / "hook.log").read_text()


# -- 5. invalid UTF-8 from the shell -----------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["record", "--workspace", "ws", "--kind", "note", "--id", "n", "--text", "caf\udce9"],
    ["record", "--workspace", "ws", "--kind", "note", "--id", "n\udce9", "--text", "t"],
    ["record", "--workspace", "w\udce9", "--kind", "note", "--id", "n", "--text", "t"],
    ["observe", "--workspace", "ws", "--kind", "tool_call", "--id", "o",
     "--input", '{"a": "caf\udce9"}'],
    ["show", "--workspace", "ws", "--id", "\udcff"],
    ["get", "--workspace", "ws", "\udcff"],
    ["search", "--workspace", "ws", "caf\udce9"],
])
def test_invalid_utf8_arguments_are_usage_errors(root, argv):
    result = run_main(argv, root=root)
    one_line_error(result, 2)
    assert "not valid UTF-8" in result.err
    assert not root.exists()


def test_invalid_utf8_workspace_through_a_real_process(root):
    env = clean_env(AGENT_JOURNAL_ROOT=str(root))
    proc = subprocess.run([CLI, "record", "--workspace", b"w\xe9", "--kind", "note", "--id",
                           "n", "--text", b"caf\xe9"], capture_output=True, env=env, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count(b"\n") == 1 and b"internal error" not in proc.stderr
    assert not root.exists()
    proc = subprocess.run([CLI, "record", "--kind", "note", "--id", "n", "--text", "t"],
                          capture_output=True, timeout=60,
                          env=env | {"AGENT_JOURNAL_WORKSPACE": "w\udce9"})
    assert proc.returncode == 2 and b"not valid UTF-8" in proc.stderr
    assert not root.exists()


# -- 6. what the user cannot read or write -----------------------------------------------

def _no_dac(cli_args: list[str], root: Path) -> Result:
    env = clean_env(AGENT_JOURNAL_ROOT=str(root), AGENT_JOURNAL_WORKSPACE="ws")
    proc = subprocess.run([*NO_DAC, CLI, *cli_args], capture_output=True, env=env, timeout=60)
    return Result(proc.returncode, proc.stdout.decode(), proc.stderr.decode())


@pytest.mark.skipif(SETPRIV is None or os.geteuid() != 0,
                    reason="needs setpriv and root to drop the DAC override")
def test_unreadable_root_and_segment_are_one_line(journal):
    os.chmod(journal, 0)
    try:
        for args in (["show"], ["record", "--kind", "note", "--id", "n2", "--text", "t"],
                     ["search", "x"], ["digest"]):
            result = _no_dac(args, journal)
            one_line_error(result)
            assert str(journal) in result.err and "Permission denied" in result.err
    finally:
        os.chmod(journal, 0o700)
    (seg,) = (journal / "workspaces" / "ws" / "segments").glob("*.sqlite")
    os.chmod(seg, 0)
    try:
        result = _no_dac(["record", "--kind", "note", "--id", "n2", "--text", "t"], journal)
        one_line_error(result)
        assert str(seg) in result.err and "Permission denied" in result.err
        result = _no_dac(["show"], journal)
        assert result.code == 0 and "Permission denied" in result.out
    finally:
        os.chmod(seg, 0o600)


def test_folder_or_fifo_where_a_segment_is_expected(cli, journal):
    segments = journal / "workspaces" / "ws" / "segments"
    (segments / "rzzzz-000001.sqlite").mkdir()
    os.mkfifo(segments / "rzzzy-000001.sqlite")
    shown = cli("show")
    assert shown.code == 0 and shown.out.count("is not a regular file") == 2
    (seg,) = [p for p in segments.glob("r*.sqlite") if p.is_file()]
    seg.unlink()
    seg.mkdir()
    result = cli("record", "--kind", "note", "--id", "n2", "--text", "t")
    one_line_error(result)
    assert "is not a regular file" in result.err


def test_root_that_is_a_file(cli, root):
    root.parent.mkdir(exist_ok=True)
    root.write_text("x")
    one_line_error(cli("record", "--kind", "note", "--id", "n", "--text", "t"))
    one_line_error(cli("show"))


# -- 7. closed or broken stdout ----------------------------------------------------------

def test_closed_stdout_is_one_line(journal):
    env = clean_env(AGENT_JOURNAL_ROOT=str(journal), AGENT_JOURNAL_WORKSPACE="ws")
    for args in (["show"], ["record", "--kind", "note", "--id", "n9", "--text", "t"],
                 ["get", "o1"]):
        proc = subprocess.run([CLI, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              env=env, timeout=60, preexec_fn=lambda: os.close(1))
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr.decode() == "error: cannot print the result: stdout is closed\n"


@pytest.mark.parametrize("argv", [
    ["show"], ["compact"], ["timeline"], ["--help"], ["show", "--help"], ["--version"],
    ["completion", "bash"],
    ["hooks", "install", "claude-code", "--dry-run", "--project", "{project}"]])
def test_broken_pipe_ends_quietly(journal, tmp_path, argv):
    """`... | head`: the reader leaving early ends the command with exit 1 and nothing on
    stderr, whatever was printing (a result, help, a diff, the version)."""
    for n in range(40):
        aj(journal, "record", "--kind", "note", "--id", f"big{n}", "--text", "x" * 5000)
    project = tmp_path / "project"
    project.mkdir()
    env = clean_env(AGENT_JOURNAL_ROOT=str(journal), AGENT_JOURNAL_WORKSPACE="ws",
                    HOME=str(tmp_path),  # (and this installation's command on PATH)
                    PATH=f"{Path(CLI).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first byte
    proc = subprocess.run([CLI, *(a.format(project=project) for a in argv)], stdout=write_end,
                          stderr=subprocess.PIPE, env=env, timeout=60)
    os.close(write_end)
    assert (proc.returncode, proc.stderr) == (1, b""), proc.stderr


def test_full_disk_behind_stdout_is_one_line(journal):
    env = clean_env(AGENT_JOURNAL_ROOT=str(journal), AGENT_JOURNAL_WORKSPACE="ws")
    with open("/dev/full", "wb") as full:
        proc = subprocess.run([CLI, "show"], stdout=full, stderr=subprocess.PIPE, env=env,
                              timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.decode() == "error: cannot print the result: No space left on device\n"


# -- 8. the hook's stdin -----------------------------------------------------------------

def test_hook_stdin_left_open_after_a_whole_payload_is_journaled(root):
    env = clean_env(AGENT_JOURNAL_ROOT=str(root))
    proc = subprocess.Popen([CLI, "hook", "claude-code", "--workspace", "ws"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(PAYLOAD).encode())
    proc.stdin.flush()  # and never closed
    try:
        # Generous: what shows it did not wait for an end of stdin is "t1" journaled below
        # (waiting, it would give up after STDIN_WAIT_S and journal nothing).
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
        proc.stdin.close()
    shown = run_main(["show", "--json", "--workspace", "ws", "--observations"], root=root)
    assert '"t1"' in shown.out


def test_hook_stdin_that_never_ends_is_bounded(monkeypatch):
    from agent_journal.agents import hook as hook_module
    from agent_journal.capture.claude_code import HookPayloadError

    monkeypatch.setattr(hook_module, "STDIN_WAIT_S", 0.3)
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b'{"hook_event_name": "Stop", "partial": ')
    start = time.monotonic()
    with open(read_fd, "rb") as reader, pytest.raises(HookPayloadError, match="within"):
        hook_module.read_payload(reader)
    # Generous for 0.3 s on a loaded machine, and still under the unpatched 5 s.
    assert time.monotonic() - start < 4
    monkeypatch.setattr(hook_module, "STDIN_MAX_BYTES", 1000)
    read_fd2, w2 = os.pipe()
    writer = threading.Thread(target=lambda: (os.write(w2, b" " * 5000), os.close(w2)))
    writer.start()
    with open(read_fd2, "rb") as reader, pytest.raises(HookPayloadError, match="larger"):
        hook_module.read_payload(reader)
    writer.join()
    os.close(write_fd)


def test_hook_with_stdin_that_never_ends_fails_open(root, monkeypatch):
    env = clean_env(AGENT_JOURNAL_ROOT=str(root))
    proc = subprocess.Popen([CLI, "hook", "claude-code", "--workspace", "ws"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    assert proc.stdin is not None
    proc.stdin.write(b'{"hook_event_name": "Stop", ')
    proc.stdin.flush()
    try:
        assert proc.wait(timeout=60) == 0  # STDIN_WAIT_S (5 s), generously bounded
    finally:
        proc.kill()
        proc.stdin.close()
    assert "no end of the hook payload" in (root / "logs" / "hook.log").read_text()


# -- 9. hook.log is redacted before it is cut ---------------------------------------------

def test_hook_log_redacts_before_it_cuts(root):
    token = "ghp_" + "Z9y8X7w6V5" * 4
    for pad in range(40, 80, 3):  # wherever the cut would fall inside the token
        payload = {"hook_event_name": "x" * pad + " " + token, "session_id": "s"}
        assert aj(root, "hook", "claude-code", stdin=json.dumps(payload).encode()).code == 0
    log = (root / "logs" / "hook.log").read_text()
    assert "ghp_Z9y8" not in log and "Z9y8X7w6V5" not in log


# -- 10. values that start with a dash ---------------------------------------------------

PEM = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----"


@pytest.mark.parametrize("text", ["-x is wrong", PEM, "--not-an-option of record", "-"])
def test_values_that_start_with_a_dash(root, text):
    result = run_main(["record", "--workspace", "ws", "--kind", "note", "--id", "n",
                       "--text", text, "--json"], root=root)
    assert result.code == 0, result.err
    shown = run_main(["show", "--json", "--workspace", "ws", "--id", "n"], root=root)
    (entry,) = json.loads(shown.out)["entries"]
    if text == PEM:  # taken as the value, then redacted as the private key it is
        assert entry["fields"]["text"].startswith("[REDACTED:")
    else:
        assert entry["fields"]["text"] == text


def test_a_missing_value_before_an_own_flag_is_still_a_usage_error(root):
    for argv in (["record", "--kind", "note", "--id", "n", "--text", "t", "--workspace",
                  "--json"],
                 ["record", "--workspace", "ws", "--kind", "note", "--id", "n", "--text",
                  "--json"],
                 ["record", "--workspace", "ws", "--kind", "note", "--id", "--text", "t"],
                 ["record", "--workspace", "ws", "--kind", "note", "--id", "n", "--text",
                  "--root=/tmp"]):
        result = run_main(argv, root=root)
        one_line_error(result, 2)
        assert "needs a value" in result.err
    assert not root.exists()


# -- 11. every command, hostile arguments -------------------------------------------------

def _hostile_values(tmp: Path) -> dict[str, str]:
    fifo = tmp / "fifo"
    os.mkfifo(fifo)
    folder = tmp / "a-folder"
    folder.mkdir()
    (tmp / "dangling").symlink_to(tmp / "no-such-target")
    (tmp / "loop").symlink_to(tmp / "loop")
    (tmp / "junk.jsonl").write_bytes(b"\xff\xfe not json\n{\"type\": 1}\n\x00\x00")
    return {
        "empty": "",
        "blank": "   ",
        "huge": "x" * (1 << 20),
        "utf8-invalid": "caf\udce9",
        "nul": "a\x00b",
        "c0": "a\x1b[31mb",
        "c1": "a\x85b\x9b",
        "newline": "a\nb",
        "dash": "-x",
        "flag-like": "--json",
        "dots": "..",
        "slash": "../../etc/passwd",
        "json-nan": '{"a": NaN}',
        "json-deep": "[" * 5000 + "]" * 5000,
        "json-900": "[" * 900 + "]" * 900,
        "json-object-deep": '{"a":' * 400 + "1" + "}" * 400,
        "stdin": "-",
        "zero": "0",
        "number-huge": "9" * 5000,
        "negative": "-1",
        "instant-min": "0001-01-01T00:00:00+05:00",  # before year 1 in UTC
        "instant-max": "9999-12-31T23:59:59-05:00",  # after year 9999 in UTC
        "fifo": str(fifo),
        "folder": str(folder),
        "dangling": str(tmp / "dangling"),
        "loop": str(tmp / "loop"),
        "missing": str(tmp / "no-such-file"),
        "junk-file": str(tmp / "junk.jsonl"),
        "devnull": "/dev/null",
    }


def _valid_args(name: str, base: Path) -> tuple[list[str], dict[str, str]]:
    """Arguments that make `name` run for real, so a hostile value in any one slot
    reaches as deep into the command as it can."""
    options = {"--workspace": "ws"}
    positional: list[str] = []
    if name == "record":
        options |= {"--kind": "note", "--id": "fuzzed", "--text": "t"}
    elif name == "observe":
        options |= {"--kind": "tool_call", "--id": "fuzzed-o", "--input": "{}"}
    elif name in ("invalidate", "tombstone"):
        positional, options["--reason"] = ["no-such-entry"], "r"
    elif name in ("search", "get", "trace"):
        positional = ["n1"]
    elif name.startswith("import "):
        positional = [str(base / "junk.jsonl")]
    elif name == "completion":
        positional = ["bash"]
    elif name == "export":
        positional = [str(base / "exports" / os.urandom(4).hex())]
    elif name == "merge":
        positional = [str(base / "no-source")]
    elif name.startswith("hooks"):
        options = {"--project": str(base)}
    # Any other command's positional arguments get a plain value.
    from agent_journal.cli.commands import COMMANDS

    positional += ["n1"] * (len(COMMANDS[name].args) - len(positional))
    return positional, options


def _feed_fifo(path: str, stop: threading.Event) -> None:
    """Keep a writer on the FIFO, so a command that opens it reads bytes and an end."""
    while not stop.is_set():
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # no reader yet
            time.sleep(0.005)
            continue
        try:
            os.write(fd, b"\xff{not json\n")
        except OSError:
            pass
        os.close(fd)


def test_every_command_with_hostile_arguments(tmp_path, monkeypatch):
    """No hostile argument, in any slot of any command, reaches "internal error", a
    traceback, or an exit code outside 0/1/2."""
    from agent_journal.cli.argv import BARE
    from agent_journal.cli.commands import COMMANDS

    base = tmp_path / "private"
    base.mkdir(mode=0o700)
    monkeypatch.chdir(base)  # relative placeholders (an export DEST) land here
    root = base / "journal"
    assert run_main(["record", "--workspace", "ws", "--kind", "note", "--id", "n1", "--text",
                     "hello"], root=root).code == 0
    values = _hostile_values(base)
    stop = threading.Event()
    feeder = threading.Thread(target=_feed_fifo, args=(values["fifo"], stop), daemon=True)
    feeder.start()
    failures: list[str] = []
    codes: dict[int, int] = {}
    tried = 0
    start = time.monotonic()
    try:
        for name, cmd in COMMANDS.items():
            slots: list[tuple[str, Any]] = [(f"arg {a.metavar}", a) for a in cmd.args]
            slots += [(o.flag, o) for o in cmd.opts if o.kind != BARE]
            if cmd.fail_open:
                slots.append(("stdin", None))
            for label, slot in slots:
                for value_name, value in values.items():
                    if label == "--root" and value_name in ("slash", "dots"):
                        continue  # a root made above the test's own folder
                    positional, options = _valid_args(name, base)
                    stdin = json.dumps(PAYLOAD).encode()
                    if label == "stdin":
                        stdin = value.encode("utf-8", "surrogateescape")
                    elif label.startswith("arg "):
                        positional[cmd.args.index(slot)] = value
                    else:
                        options[slot.flag] = value
                    full = name.split() + positional + [t for flag, v in options.items()
                                                        for t in (flag, v)]
                    if name.startswith("hooks"):  # never edit a real project's settings
                        full.append("--dry-run")
                    result = run_main(full, root=root, stdin=stdin)
                    tried += 1
                    codes[result.code] = codes.get(result.code, 0) + 1
                    text = result.err + result.out
                    if (result.code not in (0, 1, 2) or "internal error" in text
                            or "Traceback" in text):
                        failures.append(f"{name} {label}={value_name}: {result.code} "
                                        f"{result.err[:300]!r}")
    finally:
        stop.set()
        feeder.join(timeout=5)
    elapsed = time.monotonic() - start
    print(f"hostile cases tried: {tried} in {elapsed:.1f} s; exit codes {codes}")
    # The journal took all of that and is still whole and usable.
    assert aj(root, "show").code == 0 and aj(root, "coverage").code == 0
    assert not failures, "\n".join(failures)
    assert tried > 2000  # about 2 s alone; timing is left to --durations, not asserted


def test_closed_stdin_is_one_line(root):
    env = clean_env(AGENT_JOURNAL_ROOT=str(root), AGENT_JOURNAL_WORKSPACE="ws")
    proc = subprocess.run([CLI, "observe", "--kind", "tool_call", "--id", "o", "--output", "-"],
                          stdin=subprocess.DEVNULL, capture_output=True, env=env, timeout=60,
                          preexec_fn=lambda: os.close(0))
    assert proc.returncode == 2
    assert proc.stderr.decode() == "error: cannot read --output -: stdin is closed\n"
    assert not root.exists()
    proc = subprocess.run([CLI, "hook", "claude-code"], stdin=subprocess.DEVNULL,
                          capture_output=True, env=env, timeout=60,
                          preexec_fn=lambda: os.close(0))
    assert (proc.returncode, proc.stdout) == (0, b"")
    log = (root / "logs" / "hook.log").read_text()
    assert "stdin is closed" in log and "AttributeError" not in log


def test_root_path_that_is_not_utf8(tmp_path):
    base = tmp_path / "private"
    base.mkdir(mode=0o700)
    root = os.fsdecode(bytes(base) + b"/r\xe9")
    result = run_main(["record", "--workspace", "ws", "--kind", "note", "--id", "n", "--text",
                       "t"], env={"AGENT_JOURNAL_ROOT": root})
    one_line_error(result, 2)
    assert "not valid UTF-8" in result.err
    assert os.listdir(base) == []


# -- 12. every MCP tool, hostile arguments (issue 32) -------------------------------------
#
# A real `agent-journal mcp` process, spoken to one JSON-RPC line at a time rather than
# through the SDK's client, so what a client would refuse to send (deep nesting, NaN, lone
# surrogates, numbers past every range) reaches the server as it is.

class RawMCP:
    """One `agent-journal mcp` process; `call` writes one line and waits (bounded) for
    the answer carrying its id."""

    def __init__(self, root: Path, session: str | None = "hostile") -> None:
        import queue

        env = clean_env(AGENT_JOURNAL_ROOT=str(root), AGENT_JOURNAL_WORKSPACE="ws")
        if session is not None:
            env["AGENT_JOURNAL_SESSION"] = session
        self.proc = subprocess.Popen([CLI, "mcp"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.next_id = 0
        stdout = self.proc.stdout
        assert stdout is not None

        def pump() -> None:
            for line in stdout:
                self.lines.put(line)
            self.lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        init = self.call('"initialize"', json.dumps({
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "hostile", "version": "1"}}))
        assert "result" in init, init
        self.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode("utf-8", "surrogatepass") + b"\n")
        self.proc.stdin.flush()

    def call(self, method: str, params: str | None) -> dict[str, Any]:
        """`method` and `params` as raw JSON text; the answer to this request."""
        import queue

        self.next_id += 1
        rid = self.next_id
        self.send(f'{{"jsonrpc": "2.0", "id": {rid}, "method": {method}'
                  + (f', "params": {params}' if params is not None else "") + "}")
        while True:
            try:
                line = self.lines.get(timeout=60)
            except queue.Empty:
                raise AssertionError(f"no answer to request {rid} within 60 s") from None
            if line is None:
                raise AssertionError(f"the server exited before answering request {rid}: "
                                     f"{self.stderr()[-2000:]!r}")
            answer = json.loads(line)
            if answer.get("id") == rid:
                assert answer.get("jsonrpc") == "2.0", answer
                return dict(answer)

    def tool(self, name: str, arguments: str | None) -> dict[str, Any]:
        params = f'{{"name": {name}' + (f', "arguments": {arguments}'
                                         if arguments is not None else "") + "}"
        return self.call('"tools/call"', params)

    def stderr(self) -> str:
        return self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""

    def close(self) -> tuple[int, str]:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            code = self.proc.wait(timeout=60)
        finally:
            self.proc.kill()
        return code, self.stderr()


def mcp_fault(answer: dict[str, Any]) -> str | None:
    """What is wrong with one answer to a tools/call, or None: a result whose content is
    text blocks (an error result's one line long), or a JSON-RPC error with a one-line
    message; never a traceback or "internal error"."""
    if "error" in answer:
        error = answer["error"]
        if not (isinstance(error, dict) and isinstance(error.get("code"), int)
                and isinstance(error.get("message"), str)):
            return f"malformed error {error!r}"
        text = error["message"]
    else:
        result = answer.get("result")
        if not isinstance(result, dict) or not isinstance(result.get("content"), list):
            return f"malformed result {str(result)[:300]!r}"
        blocks = result["content"]
        if not all(isinstance(b, dict) and b.get("type") == "text"
                   and isinstance(b.get("text"), str) for b in blocks):
            return f"content that is not text blocks {str(blocks)[:300]!r}"
        text = "\n".join(b["text"] for b in blocks)
        if result.get("isError") and "\n" in text:
            return f"a tool error of more than one line {text[:300]!r}"
    if "Traceback" in text or "internal error" in text:
        return f"an internal failure {text[:300]!r}"
    return None


# Raw JSON text: a client can send all of this, whatever a schema says.
HOSTILE_JSON = {
    "int": "3", "negative": "-1", "zero": "0", "float": "1.5", "true": "true",
    "null": "null", "int64": str(2**63), "huge-int": "1" + "0" * 400,
    "digits-5000": "9" * 5000, "overflow-float": "1e999", "nan": "NaN",
    "infinity": "-Infinity", "empty-list": "[]", "list": '["n1"]', "list-of-int": "[1]",
    "object": '{"a": 1}', "two-unknown": '["nope1", "nope2"]', "empty": '""',
    "blank": '"   "', "huge": json.dumps("x" * (1 << 20)),
    "nul": '"a\\u0000b"', "c0": '"a\\u001b[31mb"', "c1": '"a\\u0085b\\u009b"',
    "bidi": '"n\\u202e1"', "bidi-isolate": '"\\u2066n1\\u2069"', "newline": '"a\\nb"',
    "lone-surrogate": '"a\\ud800b"', "slash": '"../../etc/passwd"', "backslash": '"a\\\\b"',
    "dots": '".."', "dash": '"-x"', "flag-like": '"--json"', "span-huge": '"999999999d"',
    "span-digits": json.dumps("9" * 5000 + "d"), "instant-min": '"0001-01-01T00:00:00+05:00"',
    "instant-max": '"9999-12-31T23:59:59-05:00"', "fts-syntax": '"\\"a NEAR( OR * ^ -b:c"',
    "nested-50": "[" * 50 + "]" * 50, "nested-300": "[" * 300 + "]" * 300,
    "nested-5000": "[" * 5000 + "]" * 5000,
    "object-deep": '{"a":' * 300 + "1" + "}" * 300,
}
VALID_MCP_ARGS: dict[str, dict[str, Any]] = {
    "search": {"query": "hello"}, "get": {"ids": ["n1"]}, "timeline": {},
    "trace": {"id": "n1"}, "record": {"kind": "note", "id": "fuzzed", "text": "t"},
    "invalidate": {"target": "no-such-entry", "reason": "r"},
}


def _arguments(fields: dict[str, str]) -> str:
    """An arguments object from raw JSON text values."""
    return "{" + ", ".join(f"{json.dumps(k)}: {v}" for k, v in fields.items()) + "}"


def test_every_mcp_tool_with_hostile_arguments(root):
    """No hostile argument, in any slot of any tool the server lists (or in the call
    itself), crashes the server, leaves a call unanswered, or answers with a traceback,
    "internal error" or an error of more than one line."""
    assert aj(root, "record", "--kind", "note", "--id", "n1", "--text", "hello").code == 0
    server = RawMCP(root)
    failures: list[str] = []
    tried = 0
    start = time.monotonic()

    def check(what: str, answer: dict[str, Any]) -> None:
        nonlocal tried
        tried += 1
        fault = mcp_fault(answer)
        if fault is not None:
            failures.append(f"{what}: {fault}")

    try:
        listed = server.call('"tools/list"', None)["result"]["tools"]
        assert sorted(t["name"] for t in listed) == sorted(VALID_MCP_ARGS)
        for spec in listed:
            name, schema = spec["name"], spec["inputSchema"]
            valid = {k: json.dumps(v) for k, v in VALID_MCP_ARGS[name].items()}
            tool = json.dumps(name)
            # Every slot the schema names, each hostile value in it (array items too).
            for prop, prop_schema in schema["properties"].items():
                for label, value in HOSTILE_JSON.items():
                    check(f"{name} {prop}={label}",
                          server.tool(tool, _arguments(valid | {prop: value})))
                    if prop_schema.get("type") == "array":
                        check(f"{name} {prop}=[{label}]",
                              server.tool(tool, _arguments(valid | {prop: f"[{value}]"})))
            # Each required field missing; an unknown field; arguments that are not an object.
            for prop in schema.get("required", []):
                check(f"{name} without {prop}", server.tool(
                    tool, _arguments({k: v for k, v in valid.items() if k != prop})))
            for label, value in HOSTILE_JSON.items():
                check(f"{name} unknown field={label}",
                      server.tool(tool, _arguments(valid | {"bogus\u202e": value})))
                if not value.startswith("{"):
                    check(f"{name} arguments={label}", server.tool(tool, value))
            check(f"{name} without arguments", server.tool(tool, None))
        # The call itself: the tool's name, and params, hostile.
        for label, value in HOSTILE_JSON.items():
            check(f"name={label}", server.tool(value, "{}"))
            check(f"params={label}", server.call('"tools/call"', value))
        for name in ('"search\\u0000"', '"../search"', '"forget"', '"SEARCH"'):
            check(f"name {name}", server.tool(name, '{"query": "hello"}'))
        # A hit on one word of 200,000 characters is shown, cut, not left out of its page.
        word = "y" * 200_000
        assert "error" not in server.tool('"record"', json.dumps(
            {"kind": "note", "id": "long-word", "text": word}))
        found = server.tool('"search"', json.dumps({"query": word}))["result"]
        assert found["content"][0]["text"].startswith("long-word  entry/note"), found
        assert len(found["content"][0]["text"]) < 1000
        # Still serving, and still whole.
        assert server.tool('"search"', '{"query": "hello"}')["result"]["isError"] is False
    finally:
        code, stderr = server.close()
    print(f"hostile MCP calls tried: {tried} in {time.monotonic() - start:.1f} s")
    assert not failures, "\n".join(failures)
    assert code == 0, stderr[-2000:]
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr[-2000:]
    assert aj(root, "show").code == 0
    assert tried > 1000


def _json_values() -> Any:
    from hypothesis import strategies as st

    scalars = (st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
               | st.floats(allow_nan=False, allow_infinity=False)
               | st.text(max_size=30) | st.sampled_from(["n1", "hello", "note", "1d", ""]))
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                        | st.dictionaries(st.text(max_size=10), inner, max_size=4),
                        max_leaves=12)


def test_mcp_tools_with_arbitrary_json_arguments(root):
    """Any JSON value as the arguments, or as any one named argument, of any tool: one
    server process, a bounded number of derandomized examples."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    assert aj(root, "record", "--kind", "note", "--id", "n1", "--text", "hello").code == 0
    server = RawMCP(root)
    names = sorted(VALID_MCP_ARGS)
    fields = sorted({k for name in names for k in mcp_recall_properties(name)})

    @settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
    @given(tool=st.sampled_from(names), whole=st.booleans(), field=st.sampled_from(fields),
           value=_json_values())
    def check(tool: str, whole: bool, field: str, value: Any) -> None:
        arguments = value if whole else VALID_MCP_ARGS[tool] | {field: value}
        answer = server.tool(json.dumps(tool), json.dumps(arguments))
        fault = mcp_fault(answer)
        assert fault is None, (tool, arguments, fault)

    try:
        check()
    finally:
        code, stderr = server.close()
    assert code == 0 and "Traceback" not in stderr and "internal error" not in stderr, stderr


def mcp_recall_properties(tool: str) -> list[str]:
    from agent_journal.agents import mcp_recall

    return list(mcp_recall.TOOLS[tool]["inputSchema"]["properties"])


# -- 13. a bucket holding hostile objects (issue 32) ---------------------------------------
#
# Another replica's prefix, in a real S3 endpoint (moto) and in a shared folder, holding
# what a careless or hostile writer of the bucket could put there. `pull` (the library and
# the command) and `remote status` refuse or report each one: never a traceback, never an
# imported byte of it, never a write outside the pulling root, and the honest replica's
# events still arrive.

EVIL = "EVILMARKER"
HOSTILE_ID = "r0bad0bad0bad0bad"
HONEST_ID = "r600d600d600d600d"


class Bucket:
    """The remote's keys (relative to the remote URL), whichever backend holds them."""

    def __init__(self, url: str, share: Path | None = None, s3: Any = None,
                 bucket: str | None = None, prefix: str = "") -> None:
        self.url, self.share, self.s3, self.bucket, self.prefix = url, share, s3, bucket, prefix

    def keys(self) -> dict[str, bytes]:
        if self.share is not None:
            return {str(p.relative_to(self.share)): p.read_bytes()
                    for p in self.share.rglob("*") if p.is_file() and not p.is_symlink()
                    and not p.name.startswith(".")}
        client = self.s3.client()
        out = {}
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket):
            for item in page.get("Contents", []):
                out[item["Key"].removeprefix(self.prefix)] = client.get_object(
                    Bucket=self.bucket, Key=item["Key"])["Body"].read()
        return out

    def fingerprint(self) -> Any:
        """Every key and what it holds, cheaply (a pull must leave all of them as they were)."""
        if self.share is not None:
            return self.keys()
        client = self.s3.client()
        return {item["Key"]: (item["ETag"], item["Size"])
                for page in client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket)
                for item in page.get("Contents", [])}

    def put(self, key: str, data: bytes) -> None:
        if self.share is not None:
            path = self.share.joinpath(*key.split("/"))
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.is_symlink() or path.exists() and not path.is_dir():
                path.unlink()
            path.write_bytes(data)
        else:
            self.s3.client().put_object(Bucket=self.bucket, Key=self.prefix + key, Body=data)

    def clear(self, under: str) -> None:
        if self.share is not None:
            shutil.rmtree(self.share / under, ignore_errors=True)
            return
        client = self.s3.client()
        for page in client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=self.prefix + under):
            for item in page.get("Contents", []):
                client.delete_object(Bucket=self.bucket, Key=item["Key"])


class Prefix:
    """The hostile replica's pristine push, and ways to put something else in its place."""

    def __init__(self, bucket: Bucket, work: Path) -> None:
        self.bucket = bucket
        self.work = work
        self.base = f"ws/{HOSTILE_ID}/"
        self.pristine = {k: v for k, v in bucket.keys().items() if k.startswith(self.base)}
        self.manifest: dict[str, Any] = json.loads(self.pristine[self.base + "manifest.json"])
        (self.seg,) = self.manifest["export"]["files"]
        key = self.base + self.manifest["objects"][self.seg["name"]]
        self.seg_bytes = plain(key, self.pristine[key])

    def restore(self) -> None:
        self.bucket.clear(self.base)
        for key, data in self.pristine.items():
            self.bucket.put(key, data)

    def fresh(self) -> dict[str, Any]:
        return json.loads(json.dumps(self.manifest))

    def put_manifest(self, manifest: Any) -> None:
        body = manifest if isinstance(manifest, bytes) else json.dumps(manifest).encode()
        self.bucket.put(self.base + "manifest.json", body)

    def put_segment(self, data: bytes, manifest: dict[str, Any] | None = None) -> None:
        """`data` as the segment, named and described consistently by the manifest (as its
        writer could: sizes and checksums prove only that the bytes arrived whole)."""
        from agent_journal.ops import sync
        from agent_journal.storage.files import file_digest

        manifest = manifest or self.fresh()
        (entry,) = manifest["export"]["files"]
        entry.pop("packed", None)  # sent as it is
        path = self.work / f"seg-{os.urandom(4).hex()}"
        path.write_bytes(data)
        entry["bytes"], entry["checksum"] = file_digest(str(path))
        manifest["objects"][entry["name"]] = sync.segment_key(entry["name"], entry["checksum"])
        self.bucket.put(self.base + manifest["objects"][entry["name"]], data)
        self.put_manifest(manifest)

    def sqlite(self, *statements: str, functions: bool = False) -> bytes:
        """The pristine segment with `statements` applied."""
        import sqlite3

        path = self.work / f"sql-{os.urandom(4).hex()}.sqlite"
        path.write_bytes(self.seg_bytes)
        conn = sqlite3.connect(path, isolation_level=None)
        if functions:
            conn.create_function("evil", 1, lambda x: x, deterministic=True)
        conn.execute("PRAGMA secure_delete = OFF")
        for statement in statements:
            conn.execute(statement)
        conn.close()
        return path.read_bytes()


def _manifest_with(change: Any) -> Any:
    def case(p: Prefix) -> None:
        m = p.fresh()
        change(m)
        p.put_manifest(m)
    return case


def _raw_manifest(make: Any) -> Any:
    return lambda p: p.put_manifest(make(p).encode() if isinstance(make(p), str) else make(p))


def _segment_sql(*statements: str, functions: bool = False) -> Any:
    return lambda p: p.put_segment(p.sqlite(*statements, functions=functions))


def _dotdot_checksum(m: dict[str, Any]) -> None:
    from agent_journal.ops import sync

    (f,) = m["export"]["files"]
    f.pop("packed", None)
    f["checksum"] = "xxh3-64:/../../../../../outside"
    m["objects"] = {f["name"]: sync.segment_key(f["name"], f["checksum"])} | {
        a["path"]: a["path"] for a in m["export"]["artifacts"] if a["path"]}


def _tampered_artifact(consistent: bool) -> Any:
    def case(p: Prefix) -> None:
        from agent_journal.storage.files import file_digest

        m = p.fresh()
        (art,) = m["export"]["artifacts"]
        data = (EVIL + "\n") * 100
        if consistent:  # the manifest describes the new bytes; the ref still names the old
            path = p.work / f"art-{os.urandom(4).hex()}"
            path.write_bytes(data.encode())
            art["bytes"], art["checksum"] = file_digest(str(path))
            p.put_manifest(m)
        p.bucket.put(p.base + art["path"], data.encode())
    return case


EVIL_ROW = ("INSERT INTO events(event_id, type, subject, ts, body, checksum) VALUES "
            "('evil-{n}', 'entry', 'evil', '2026-01-01T00:00:00.000Z', {body}, {checksum})")
HOSTILE_CASES: dict[str, Any] = {
    # The manifest.
    "manifest-not-json": lambda p: p.put_manifest(b"\xff\xfe{not json"),
    "manifest-empty": lambda p: p.put_manifest(b""),
    "manifest-list": lambda p: p.put_manifest([]),
    "manifest-string": lambda p: p.put_manifest("manifest"),
    "manifest-nan": lambda p: p.put_manifest(
        json.dumps(p.fresh() | {"pushedTs": 1.0}).replace("1.0", "NaN").encode()),
    "manifest-infinity": lambda p: p.put_manifest(
        json.dumps(p.fresh()).replace(f'"bytes": {p.seg["bytes"]}', '"bytes": 1e999').encode()),
    "manifest-huge-number": lambda p: p.put_manifest(
        json.dumps(p.fresh()).replace(f'"bytes": {p.seg["bytes"]}',
                                      '"bytes": 1' + "0" * 400).encode()),
    "manifest-5000-digits": lambda p: p.put_manifest(
        json.dumps(p.fresh()).replace(f'"bytes": {p.seg["bytes"]}',
                                      '"bytes": ' + "9" * 5000).encode()),
    "manifest-deep": lambda p: p.put_manifest(("[" * 100_000 + "]" * 100_000).encode()),
    "manifest-deep-member": lambda p: p.put_manifest(json.dumps(p.fresh()).replace(
        '"pushedTs"', '"deep": ' + "[" * 100_000 + "]" * 100_000 + ', "pushedTs"').encode()),
    "manifest-not-utf8": lambda p: p.put_manifest(
        json.dumps(p.fresh()).replace(HOSTILE_ID, HOSTILE_ID + "\udcff", 1).encode(
            "utf-8", "surrogateescape")),
    "export-a-list": _manifest_with(lambda m: m.update(export=[m["export"]])),
    "files-a-dict": _manifest_with(lambda m: m["export"].update(files={})),
    "file-entry-a-list": _manifest_with(lambda m: m["export"].update(
        files=[list(m["export"]["files"][0].items())])),
    "objects-a-list": _manifest_with(lambda m: m.update(objects=list(m["objects"]))),
    "counts-negative": _manifest_with(lambda m: m["export"]["files"][0].update(bytes=-1)),
    "counts-strings": _manifest_with(lambda m: m["export"]["files"][0].update(events="1")),
    "malformed-not-rows": _manifest_with(
        lambda m: m["export"]["files"][0].update(malformed=[{"row": -1, "reason": 1}])),
    "tombstoned-not-strings": _manifest_with(
        lambda m: m["export"].update(tombstoned=[1, None, {"a": []}])),
    "object-outside-prefix": _manifest_with(lambda m: m["objects"].update(
        {m["export"]["files"][0]["name"]: f"../{HONEST_ID}/manifest.json"})),
    "object-absolute": _manifest_with(lambda m: m["objects"].update(
        {m["export"]["files"][0]["name"]: "/etc/passwd"})),
    "checksum-with-dotdot": _manifest_with(_dotdot_checksum),
    "artifact-path-dotdot": _manifest_with(lambda m: m["export"]["artifacts"][0].update(
        path="../../../../outside")),
    "segment-of-another-replica": _manifest_with(lambda m: m["export"]["files"][0].update(
        name=f"{HONEST_ID}-000001.sqlite")),
    "segment-name-dotdot": _manifest_with(lambda m: m["export"]["files"][0].update(
        name="../../x-000001.sqlite")),
    "claims-another-replica": _manifest_with(lambda m: m.update(replica=HONEST_ID)),
    "another-workspace": _manifest_with(lambda m: m.update(workspace="other")),
    # The segment: what SQLite reads, described truthfully by its manifest.
    "segment-not-sqlite": lambda p: p.put_segment(b"not a database " * 300),
    "segment-zero-bytes": lambda p: p.put_segment(b""),
    "segment-header-only": lambda p: p.put_segment(b"SQLite format 3\x00" + b"\xff" * 4000),
    "segment-truncated": lambda p: p.put_segment(p.seg_bytes[: len(p.seg_bytes) // 2]),
    "segment-wal-header": lambda p: p.put_segment(
        p.seg_bytes[:18] + b"\x02\x02" + p.seg_bytes[20:]),
    "extra-table": _segment_sql("CREATE TABLE evil (x)", f"INSERT INTO evil VALUES ('{EVIL}')"),
    "trigger": _segment_sql(
        "CREATE TABLE evil (x)",
        "CREATE TRIGGER t AFTER INSERT ON meta BEGIN "
        f"INSERT INTO evil VALUES ('{EVIL}'); END",
        "CREATE TRIGGER u AFTER UPDATE ON meta BEGIN "
        f"INSERT INTO evil VALUES ('{EVIL}'); END"),
    "view": _segment_sql(f"CREATE VIEW evil AS SELECT '{EVIL}' AS x"),
    "index-on-unknown-function": _segment_sql(
        "CREATE INDEX evil_ix ON events(evil(body))", functions=True),
    "events-extra-column": _segment_sql(
        f"ALTER TABLE events ADD COLUMN evil TEXT DEFAULT '{EVIL}'"),
    "events-wrong-columns": _segment_sql(
        "DROP VIEW events_json", "DROP TABLE events", "CREATE TABLE events (a, b)",
        f"INSERT INTO events VALUES ('{EVIL}', 1)"),
    "events-a-view": _segment_sql(
        "DROP VIEW events_json", "ALTER TABLE events RENAME TO real_events",
        "CREATE VIEW events AS SELECT * FROM real_events"),
    "no-meta": _segment_sql("DROP TABLE meta"),
    "meta-a-view": _segment_sql("ALTER TABLE meta RENAME TO real_meta",
                                "CREATE VIEW meta AS SELECT * FROM real_meta"),
    "meta-lies": _segment_sql(
        "UPDATE meta SET value = 'other' WHERE key = 'workspace'",
        "UPDATE meta SET value = '99' WHERE key = 'format'",
        f"INSERT OR REPLACE INTO meta VALUES ('replica', '{HONEST_ID}')"),
    "rows-malformed": _segment_sql(
        EVIL_ROW.format(n=1, body=f"CAST('{EVIL}' AS BLOB)", checksum="'xxh3-64:0'"),
        EVIL_ROW.format(n=2, body=f"'{{\"eventId\": \"evil-2\", \"text\": \"{EVIL}\"}}'",
                        checksum="''"),
        EVIL_ROW.format(n=3, body="x'00ff'", checksum="'sha1:zz'"),
        EVIL_ROW.format(n=4, body="12345", checksum="12345"),
        "INSERT INTO events(seq, event_id, type, subject, ts, body, checksum) VALUES "
        f"(-9223372036854775808, 'evil-5', 'tombstone', NULL, 'not a time', "
        f"CAST('{EVIL}' AS BLOB), 'x')"),
    "row-of-another-id": _segment_sql("UPDATE events SET event_id = 'evil-' || seq"),
    "row-bodies-swapped": _segment_sql(
        f"UPDATE events SET body = CAST(replace(CAST(body AS TEXT), 'h1', '{EVIL}') AS BLOB)"),
    "free-pages": _segment_sql(
        "INSERT INTO meta VALUES ('x', printf('%.*c', 20000, 'E') || "
        f"'{EVIL}')", "DELETE FROM meta WHERE key = 'x'"),
    # Artifacts.
    "artifact-checksum-mismatch": _tampered_artifact(consistent=False),
    "artifact-not-its-ref": _tampered_artifact(consistent=True),
    "artifact-zero-bytes": lambda p: p.bucket.put(
        p.base + p.manifest["export"]["artifacts"][0]["path"], b""),
    # Keys nobody would write.
    "odd-keys": lambda p: [p.bucket.put(p.base + key, EVIL.encode()) for key in (
        "segments/a b.sqlite", "segments/\u202eevil.sqlite", "segments/x\x01y.sqlite",
        "segments/...sqlite", "segments/%2e%2e/x.sqlite", "artifacts/sha256/" + "0" * 64,
        "manifest.json.bak", "segments/" + "n" * 200 + ".sqlite")],
    "odd-replica-prefixes": lambda p: [p.bucket.put(key, json.dumps(p.manifest).encode())
                                       for key in (
        "ws/r\u202eevil/manifest.json", "ws/r evil/manifest.json", "ws/-rx/manifest.json",
        "ws/" + "r" * 250 + "/manifest.json", "ws/%2e%2e/manifest.json",
        "ws/rcopy0000000000000/manifest.json")],
}


# What the library's report must say of a case: its manifest refused, or one object.
# (A size past any file's is still a size: the object that fails to match it is refused.)
MANIFEST_REFUSED = set(list(HOSTILE_CASES)[:list(HOSTILE_CASES).index("segment-not-sqlite")]
                       ) - {"manifest-huge-number"}
OBJECT_REFUSED = {"manifest-huge-number", "segment-not-sqlite", "segment-header-only",
                  "segment-truncated", "events-wrong-columns", "events-a-view", "meta-a-view",
                  "rows-malformed", "row-of-another-id", "row-bodies-swapped",
                  "artifact-checksum-mismatch", "artifact-not-its-ref", "artifact-zero-bytes"}


def _files_state(base: Path, skip: list[Path]) -> dict[str, tuple[int, int]]:
    out = {}
    for dirpath, dirs, files in os.walk(base):
        if any(Path(dirpath) == s or Path(dirpath).is_relative_to(s) for s in skip):
            dirs[:] = []
            continue
        for name in files + dirs:
            if Path(dirpath, name) in skip:
                continue
            st = os.lstat(os.path.join(dirpath, name))
            out[os.path.join(dirpath, name)] = (st.st_size, st.st_mtime_ns)
    return out


def _entry_ids(root: Path) -> set[str]:
    shown = aj(root, "show", "--json", "--observations")
    if shown.code != 0:
        return {f"(show failed: {shown.err.strip()})"}
    data = json.loads(shown.out)
    return {e["id"] for e in data["entries"]} | {o["id"] for o in data.get("observations", [])}


def _hostile_bucket_walk(tmp_path: Path, bucket: Bucket,
                         extra_cases: dict[str, Any] | None = None) -> None:
    from test_replicas import make_root

    from agent_journal.core.errors import JournalError
    from agent_journal.ops import remotes, sync
    from agent_journal.ops.context import Context

    def add(root: Path) -> Path:
        remotes.add(Context(str(root), "ws"), "origin", bucket.url,
                    endpoint_url=getattr(bucket.s3, "url", None))
        return root

    work = tmp_path / "work"
    work.mkdir()
    hostile = add(make_root(tmp_path, "hostile", HOSTILE_ID))
    honest = add(make_root(tmp_path, "honest", HONEST_ID))
    output = work / "output.txt"
    output.write_text("an exact output\n" * 4000)
    assert aj(hostile, "record", "--kind", "note", "--id", "h1", "--text", "hostile's").code == 0
    assert aj(hostile, "observe", "--kind", "tool_call", "--id", "h-obs", "--output",
              str(output)).code == 0
    assert aj(honest, "record", "--kind", "note", "--id", "b1", "--text", "honest").code == 0
    sync.push(Context(str(hostile), "ws"), None)
    sync.push(Context(str(honest), "ws"), None)
    prefix = Prefix(bucket, work)
    outside = tmp_path / "outside"
    outside.mkdir()
    failures: list[str] = []
    cases = HOSTILE_CASES | (extra_cases or {})
    for n, (name, plant) in enumerate(cases.items()):
        prefix.restore()
        plant(prefix)
        lib_root, cli_root = (add(make_root(tmp_path, f"{kind}-{n}")) for kind in ("lib", "cli"))
        before = bucket.fingerprint()
        others = _files_state(tmp_path, [lib_root, cli_root])
        try:
            report = sync.pull(Context(str(lib_root), "ws"), None)
            reasons = [(r["key"] or "", r["reason"]) for r in report["refused"]]
            if "\n" in "".join(why for _, why in reasons):
                failures.append(f"{name}: a refusal of more than one line {reasons}")
            refused_manifest = any(key.endswith(f"{HOSTILE_ID}/manifest.json")
                                   and why.startswith("bad manifest") for key, why in reasons)
            refused_object = any(key.startswith(f"ws/{HOSTILE_ID}/")
                                 and not key.endswith("manifest.json") for key, why in reasons)
            if (name in MANIFEST_REFUSED or name.startswith("manifest-a-")) \
                    and not refused_manifest:
                failures.append(f"{name}: its manifest was not refused: {reasons}")
            if (name in OBJECT_REFUSED or name.startswith("segment-a-")) \
                    and not refused_object:
                failures.append(f"{name}: no object was refused: {reasons}")
        except JournalError as exc:
            if "\n" in exc.message:
                failures.append(f"{name}: library: an error of more than one line")
        except Exception as exc:  # noqa: BLE001 - what the walk is looking for
            failures.append(f"{name}: library: {exc.__class__.__name__}: {str(exc)[:300]}")
        for argv, root in ((["pull"], cli_root), (["pull"], cli_root),
                           (["remote", "status"], cli_root)):
            result = aj(root, *argv)
            errors = [line for line in result.err.splitlines() if line.startswith("error:")]
            text = result.err + result.out
            if result.code not in (0, 1) or "internal error" in text or "Traceback" in text \
                    or len(errors) > 1 or (errors and result.err.count("\n") != 1):
                failures.append(f"{name}: {' '.join(argv)}: {result.code} {result.err[:300]!r}")
        for root in (lib_root, cli_root):
            # Nothing of it imported, the honest replica's events still in, the root whole.
            ids = _entry_ids(root)
            if "b1" not in ids or not ids <= {"b1", "h1", "h-obs"}:
                failures.append(f"{name}: {root.name} holds {sorted(ids)}")
            if EVIL.encode() in all_bytes_under(root):
                failures.append(f"{name}: {root.name} holds the hostile bytes")
            got = aj(root, "get", "h-obs")
            if EVIL in got.out or "Traceback" in got.err or "internal error" in got.err:
                failures.append(f"{name}: get h-obs: {got.code} {got.out[:100]!r}")
        if bucket.fingerprint() != before:
            failures.append(f"{name}: the pull changed the remote")
        after = _files_state(tmp_path, [lib_root, cli_root])
        if after != others or tree(outside):
            changed = sorted(set(after.items()) ^ set(others.items()))[:3]
            failures.append(f"{name}: the pull wrote outside its root: {changed}")
    assert not failures, "\n".join(failures)


def test_a_bucket_holding_hostile_objects(tmp_path, s3, aws):
    import uuid

    name = f"b-{uuid.uuid4().hex[:12]}"
    s3.client().create_bucket(Bucket=name)
    _hostile_bucket_walk(tmp_path, Bucket(f"s3://{name}/team", s3=s3, bucket=name,
                                          prefix="team/"))


def _share_special(what: str, key: str = "manifest") -> Any:
    """In the shared folder, something no push writes where the manifest or the segment
    object belongs: a folder, a FIFO (a read would wait for ever) or a symbolic link (to
    /dev/zero, a read would never end)."""
    def case(p: Prefix) -> None:
        assert p.bucket.share is not None
        name = "manifest.json" if key == "manifest" else p.manifest["objects"][p.seg["name"]]
        path = p.bucket.share / p.base / name
        path.unlink()
        if what == "folder":
            path.mkdir()
        elif what == "fifo":
            os.mkfifo(path)
        else:
            path.symlink_to(what)
    return case


def test_a_shared_folder_holding_hostile_objects(tmp_path):
    share = tmp_path / "share"
    share.mkdir(mode=0o700)
    secret = tmp_path / "outside-secret.txt"
    secret.write_text(EVIL)
    _hostile_bucket_walk(tmp_path, Bucket(f"file://{share}", share=share), {
        "manifest-a-folder": _share_special("folder"),
        "manifest-a-fifo": _share_special("fifo"),
        "manifest-a-link-out": _share_special(str(secret)),
        "manifest-a-dangling-link": _share_special(str(tmp_path / "nowhere")),
        "manifest-a-device": _share_special("/dev/zero"),
        "replica-folder-a-link": lambda p: (p.bucket.share / "ws" / "rlinked0000000000"
                                            ).symlink_to(p.bucket.share / p.base),
        "segment-a-folder": _share_special("folder", "segment"),
        "segment-a-fifo": _share_special("fifo", "segment"),
        "segment-a-device": _share_special("/dev/zero", "segment"),
        "segment-a-link-out": _share_special(str(secret), "segment"),
    })
