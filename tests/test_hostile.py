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
from conftest import CLI, Result, clean_env

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


def test_broken_pipe_is_one_line(journal):
    for n in range(40):
        aj(journal, "record", "--kind", "note", "--id", f"big{n}", "--text", "x" * 5000)
    env = clean_env(AGENT_JOURNAL_ROOT=str(journal), AGENT_JOURNAL_WORKSPACE="ws")
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first byte
    proc = subprocess.run([CLI, "show"], stdout=write_end, stderr=subprocess.PIPE, env=env,
                          timeout=60)
    os.close(write_end)
    assert proc.returncode == 1
    assert proc.stderr.decode().count("\n") == 1 and b"broken pipe" in proc.stderr
    assert b"Exception ignored" not in proc.stderr and b"Traceback" not in proc.stderr


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
    from agent_journal.agents import claude_code_hook as hook_module
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
    from agent_journal.cli.commands import BARE, COMMANDS

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
