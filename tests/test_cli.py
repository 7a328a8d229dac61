"""The write commands and show: parsing, usage errors and output, run in-process
(the same `main` the console script calls); the few tests that need the real
console script or `python -m` say so."""

import os
import sqlite3
import subprocess
import sys

import pytest
from conftest import clean_env


@pytest.fixture
def cli(inproc):
    return inproc


def segment_rows(root):
    total = 0
    for seg in (root / "workspaces").rglob("*.sqlite"):
        with sqlite3.connect(seg) as conn:
            total += conn.execute("SELECT count(*) FROM events").fetchone()[0]
    return total


def test_record_kinds_and_fields(cli):
    assert cli("record", "--kind", "finding", "--id", "f1", "--claim", "c").out == "recorded f1\n"
    assert cli("record", "--kind", "decision", "--id", "d1", "--question", "q",
               "--chosen", "a").code == 0
    for kind in ("constraint", "objective", "assumption", "note"):
        assert cli("record", "--kind", kind, "--id", f"{kind}1", "--text", "t").code == 0
    entries = {e["id"]: e for e in cli("show", "--json").json()["entries"]}
    assert entries["d1"]["fields"] == {"question": "q", "chosen": "a"}
    assert entries["f1"]["author"] == "human" and entries["f1"]["session"] is None


@pytest.mark.parametrize("args, message", [
    (["--kind", "finding", "--id", "f1"], "--claim is required"),
    (["--kind", "finding", "--id", "f1", "--claim", "   "], "--claim is required"),
    (["--kind", "decision", "--id", "d1", "--question", "q"], "--chosen is required"),
    (["--kind", "finding", "--id", "f1", "--claim", "c", "--text", "t"], "--text does not apply"),
    (["--kind", "guess", "--id", "g1", "--text", "t"], "--kind must be one of"),
    (["--kind", "note", "--id", "a/b", "--text", "t"], "--id must not contain"),
    (["--kind", "note", "--id", "n", "--text", "t", "--anchor", "nowhere"], "anchor must be"),
    (["--kind", "note", "--id", "n", "--text"], "--text needs a value"),
    (["--kind", "note", "--id", "n", "--text", "t", "--json=yes"], "--json takes no value"),
    (["--kind", "note", "--id", "n", "--text", "t", "--json", "true"], "--json takes no value"),
    (["--kind", "note", "--id", "n", "--text", "t", "--bogus"], "no such option --bogus"),
    (["--kind", "note", "--id", "n", "--id", "m", "--text", "t"], "more than once"),
])
def test_record_usage_errors_write_nothing(cli, root, args, message):
    result = cli("record", *args)
    assert result.code == 2, result.err
    assert message in result.err
    assert result.err.count("\n") == 1 and "Traceback" not in result.err
    assert not root.exists()


def test_workspace_flag_discipline(cli, root):
    for args in (["--workspace"], ["--workspace", ""], ["--workspace", "--json"]):
        result = cli("record", "--kind", "note", "--id", "n", "--text", "t", *args)
        assert result.code == 2 and "--workspace needs a value" in result.err
    result = cli("record", "--kind", "note", "--id", "n", "--text", "t", workspace=None)
    assert result.code == 2 and "--workspace is required" in result.err
    result = cli("record", "--kind", "note", "--id", "n", "--text", "t", workspace="",)
    assert result.code == 2 and "is empty" in result.err
    assert not root.exists()


def test_duplicate_entry_id_is_refused(cli, root):
    assert cli("record", "--kind", "note", "--id", "n", "--text", "first").code == 0
    result = cli("record", "--kind", "note", "--id", "n", "--text", "second")
    assert result.code == 1 and "already exists" in result.err
    assert segment_rows(root) == 1


def test_json_write_output_names_the_event(cli):
    out = cli("tombstone", "x", "--reason", "r", "--json").json()
    assert out["id"] == "x" and len(out["eventId"]) == 36


def test_session_makes_agent_author(cli):
    cli("record", "--kind", "note", "--id", "n", "--text", "t", env={
        "AGENT_JOURNAL_SESSION": "s-1"})
    cli("record", "--kind", "note", "--id", "m", "--text", "t", "--session", "s-2")
    entries = {e["id"]: e for e in cli("show", "--json").json()["entries"]}
    assert (entries["n"]["author"], entries["n"]["session"]) == ("agent", "s-1")
    assert (entries["m"]["author"], entries["m"]["session"]) == ("agent", "s-2")


def test_observe_fold_and_stdin_output(cli):
    assert cli("observe", "--kind", "tool_call", "--id", "o1", "--tool", "Bash", "--callId",
               "c1", "--input", '{"command": "make"}', "--status", "started").out == \
        "observed o1\n"
    assert cli("observe", "--kind", "tool_call", "--id", "o1", "--tool", "Bash", "--output",
               "-", "--status", "error", "--exit-code", "2", "--duration-ms", "15",
               input="make: *** boom\n").code == 0
    obs = cli("show", "--json", "--id", "o1").json()["entries"][0]
    assert obs["type"] == "observation"
    assert (obs["status"], obs["exitCode"], obs["durationMs"]) == ("error", 2, 15)
    assert obs["output"] == "make: *** boom\n" and obs["input"] == {"command": "make"}


@pytest.mark.parametrize("args, message", [
    (["--input", "{bad"], "--input is not valid JSON"),
    (["--input", '{"a": 1, "a": 2}'], "duplicate key"),
    (["--input", '{"a": NaN}'], "NaN"),
    (["--status", "maybe"], "--status must be one of"),
    (["--exit-code", "x"], "whole number"),
    (["--duration-ms", "-1"], "at least 0"),
    (["--output", "/nonexistent/file"], "cannot read --output"),
])
def test_observe_usage_errors(cli, root, args, message):
    result = cli("observe", "--kind", "tool_call", "--id", "o1", *args)
    assert result.code == 2 and message in result.err
    assert not root.exists()


def test_invalidate_keeps_content_visible(cli):
    cli("record", "--kind", "finding", "--id", "f1", "--claim", "cache is warm")
    cli("record", "--kind", "decision", "--id", "d1", "--question", "q", "--chosen", "c",
        "--depends-on", "f1")
    assert cli("invalidate", "f1", "--reason", "measured cold").out == "invalidated f1\n"
    f1, d1 = cli("show", "--json").json()["entries"]
    assert (f1["outcome"], f1["live"], f1["fields"]["claim"]) == ("invalidated", False,
                                                                  "cache is warm")
    assert f1["invalidation"]["reason"] == "measured cold"
    assert (d1["outcome"], d1["suppressedThrough"]) == ("suppressed", ["f1"])


def test_tombstone_hides_at_once_and_purges_nothing(cli, root):
    cli("record", "--kind", "finding", "--id", "f1", "--claim", "SECRET-MARKER-1")
    result = cli("tombstone", "f1", "--reason", "leaked a key")
    assert (result.code, result.out, result.err) == (0, "tombstoned f1\n", "")
    assert cli("show", "--json").json()["entries"] == []
    hidden = cli("show", "--json", "--id", "f1")  # a tombstoned id names nothing
    assert (hidden.code, hidden.out) == (1, "")
    assert hidden.err == "error: no entry or observation with id f1 in workspace ws\n"
    raw = b"".join(p.read_bytes() for p in root.rglob("*.sqlite"))
    assert b"SECRET-MARKER-1" in raw  # suppression now, destruction only by compact


def test_tombstone_of_unknown_target_warns(cli):
    result = cli("tombstone", "ghost", "--reason", "coming from another replica")
    assert result.code == 0 and result.out == "tombstoned ghost\n"
    assert result.err == "WARNING: no entry with id ghost is present in this workspace\n"


@pytest.mark.parametrize("reason", [None, "", "   "])
def test_reason_is_required(cli, root, reason):
    args = ["tombstone", "x"] + ([] if reason is None else ["--reason", reason])
    result = cli(*args)
    assert result.code == 2 and "--reason" in result.err
    assert not root.exists()
    assert cli("invalidate", "x", *args[2:]).code == 2


def test_live_constraints_listed(cli):
    cli("record", "--kind", "constraint", "--id", "c1", "--text", "never force-push")
    cli("record", "--kind", "constraint", "--id", "c2", "--text", "old rule")
    cli("invalidate", "c2", "--reason", "superseded")
    shown = cli("show", "--json").json()
    assert [c["id"] for c in shown["liveConstraints"]] == ["c1"]
    assert shown["liveConstraints"][0]["fields"]["text"] == "never force-push"


def test_show_observations_flag(cli):
    cli("observe", "--kind", "tool_call", "--id", "o1", "--tool", "Read")
    cli("record", "--kind", "note", "--id", "n1", "--text", "t", "--anchor", "tool_use:o1")
    assert [e["id"] for e in cli("show", "--json").json()["entries"]] == ["n1"]
    assert [e["type"] for e in cli("show", "--json", "--observations").json()["entries"]] == [
        "observation", "entry"]


def test_now_env_fixes_the_clock(cli):
    cli("record", "--kind", "note", "--id", "n", "--text", "t",
        env={"AGENT_JOURNAL_NOW": "2026-03-04T05:06:07+02:00"})
    assert cli("show", "--json").json()["entries"][0]["ts"] == "2026-03-04T03:06:07.000Z"
    bad = cli("record", "--kind", "note", "--id", "m", "--text", "t",
              env={"AGENT_JOURNAL_NOW": "yesterday"})
    assert bad.code == 2 and "ISO 8601" in bad.err


@pytest.mark.parametrize("command", [["show"], ["search", "x"], ["get", "x"], ["trace", "x"],
                                     ["digest"], ["coverage"], ["decay"], ["export", "out"]])
def test_a_read_of_a_missing_workspace_says_so_and_creates_nothing(cli, root, tmp_path,
                                                                    command):
    if command[0] == "export":
        command = ["export", str(tmp_path / "out")]
    # No root at all: a typo in --root or $AGENT_JOURNAL_ROOT.
    result = cli(*command)
    assert (result.code, result.out) == (1, "")
    assert result.err.startswith("error: no journal root at ") and result.err.count("\n") == 1
    assert not root.exists() and not (tmp_path / "out").exists()
    # A root that holds other workspaces: a typo in --workspace.
    assert cli("record", "--kind", "note", "--id", "n", "--text", "t", workspace="real").code == 0
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    result = cli(*command, workspace="typo")
    assert (result.code, result.out) == (1, "")
    assert result.err == f"error: no workspace 'typo' in {root} (workspaces here: real)\n"
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before


def test_module_entry_point_matches_console_script(root):
    env = clean_env(AGENT_JOURNAL_ROOT=str(root), AGENT_JOURNAL_WORKSPACE="ws")
    proc = subprocess.run([sys.executable, "-m", "agent_journal", "record", "--kind", "note",
                           "--id", "n", "--text", "t"], capture_output=True, env=env)
    assert proc.returncode == 0 and proc.stdout == b"recorded n\n"


def test_unknown_command(cli):
    result = cli("frobnicate")
    assert result.code == 2 and "no such command" in result.err


def test_every_command_has_help(inproc, monkeypatch):
    from agent_journal.cli.commands import COMMANDS

    monkeypatch.setenv("COLUMNS", "120")
    for name in COMMANDS:
        result = inproc(*name.split(), "--help")
        assert result.code == 0, (name, result.err)
        assert COMMANDS[name].help.split()[0] in result.out
        for opt in COMMANDS[name].opts:
            assert opt.flag in result.out, (name, opt.flag)


def test_files_are_private(cli, root):
    cli("record", "--kind", "note", "--id", "n", "--text", "t")
    for path in [root, *root.rglob("*")]:
        mode = os.stat(path).st_mode & 0o777
        assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))


def test_a_plugin_installs_workspace_is_found_from_the_folder_the_hooks_named_it_after(
        tmp_path):
    # The plugin route writes no project file; its hooks write to the workspace named after
    # the project's folder. A person reading in that folder gets that workspace, and a
    # folder whose workspace the root does not hold still needs --workspace.
    import json as _json
    import subprocess

    from conftest import CLI, clean_env

    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    project = home / "shop-api"
    project.mkdir()
    env = clean_env(HOME=str(home), AGENT_JOURNAL_ROOT=str(home / "journal"))
    payload = {"session_id": "s1", "hook_event_name": "PostToolUse", "tool_name": "Bash",
               "tool_input": {"command": "echo FROMHOOK"}, "tool_response": {"stdout": "x"},
               "tool_use_id": "t1", "cwd": str(project)}
    hooked = subprocess.run([CLI, "hook", "claude-code"], input=_json.dumps(payload),
                            text=True, capture_output=True, env=env, cwd=project, timeout=60)
    assert hooked.returncode == 0
    shown = subprocess.run([CLI, "show", "--observations", "--json"], text=True,
                           capture_output=True, env=env, cwd=project, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert "FROMHOOK" in shown.stdout
    elsewhere = home / "other"
    elsewhere.mkdir()
    refused = subprocess.run([CLI, "show"], text=True, capture_output=True, env=env,
                             cwd=elsewhere, timeout=60)
    assert refused.returncode == 2 and "--workspace is required" in refused.stderr


def test_digest_before_anything_was_journaled_says_so_and_creates_nothing(tmp_path):
    # A newcomer's first `digest` (no root named anywhere, the default one not made yet)
    # gets an empty digest saying so, exit 0; a named root that is not there is a typo
    # (test_a_read_of_a_missing_workspace_says_so_and_creates_nothing).
    import subprocess

    from conftest import CLI, clean_env

    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    env = clean_env(HOME=str(home), XDG_DATA_HOME=str(home / "data"))
    done = subprocess.run([CLI, "digest", "--workspace", "w"], text=True, capture_output=True,
                          env=env, cwd=home, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("_Nothing journaled yet: ") and "## Goal" in done.stdout
    assert not (home / "data").exists()
    as_json = subprocess.run([CLI, "digest", "--workspace", "w", "--json"], text=True,
                             capture_output=True, env=env, cwd=home, timeout=60)
    assert as_json.returncode == 0 and '"workspace": "w"' in as_json.stdout
    assert not (home / "data").exists()
