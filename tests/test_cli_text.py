"""Every command speaks text (issue 33): the commands that do something (import, export,
merge, compact, push, pull, sync, remote ...) print a few exact lines for people by
default and their documented JSON only with --json; ids that name nothing are exit 1;
mistyped commands and options get a suggestion; help shows bare flags bare."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agent_journal.cli.argv import BARE
from agent_journal.cli.commands import COMMANDS

NOW = {"AGENT_JOURNAL_NOW": "2026-05-01T12:00:00Z"}
TRANSCRIPT = [
    {"type": "assistant", "sessionId": "s2", "uuid": "a1", "timestamp": "2026-05-01T11:00:00Z",
     "message": {"role": "assistant", "content": [
         {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}]}},
    {"type": "user", "sessionId": "s2", "uuid": "u2", "timestamp": "2026-05-01T11:00:01Z",
     "message": {"role": "user", "content": [
         {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a b"}]}},
]


@pytest.fixture
def cli(inproc):
    return inproc


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _plain(text: str, tmp_path: Path) -> str:
    """Text with the run's own names (folders, replica ids, event ids) made stable."""
    text = text.replace(str(tmp_path), "TMP")
    text = re.sub(r"\br[0-9a-f]{15}\b", "REPLICA", text)
    text = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "EVENT", text)
    # A compressed object's size depends on the ids and times inside it.
    text = re.sub(r"\b(object|objects) \([0-9]+ bytes\)", r"\1 (N bytes)", text)
    return re.sub(r"import-REPLICA-[0-9a-f]{16}", "import-REPLICA-X", text)


def test_every_command_that_does_something_prints_text_and_json_only_with_json(
        cli, root, tmp_path):
    """Each command's default output is the lines below, exactly; with --json the very
    document the text was made from (compact --json was refused before)."""
    other = tmp_path / "private" / "other"
    share = tmp_path / "share"
    share.mkdir(mode=0o700)
    there = {"AGENT_JOURNAL_ROOT": str(other), **NOW}
    transcript = tmp_path / "session.jsonl"
    transcript.write_text("".join(json.dumps(line) + "\n" for line in TRANSCRIPT))
    for argv in (["record", "--kind", "note", "--id", "n1", "--text", "kept"],
                 ["record", "--kind", "note", "--id", "n2", "--text", "leaked"],
                 ["tombstone", "n2", "--reason", "a secret"]):
        assert cli(*argv, env=NOW).code == 0
    assert cli("record", "--kind", "note", "--id", "t1", "--text", "theirs", env=there).code == 0

    def both(*argv: str, env: dict[str, str] = NOW, code: int = 0) -> tuple[str, dict]:
        """The text of one run and the JSON of a second one (an idempotent step, or one
        whose second run reports the same)."""
        text = cli(*argv, env=env)
        assert text.code == code, (argv, text.err)
        assert text.out and not _is_json(text.out), (argv, text.out)
        as_json = cli(*argv, "--json", env=env)
        assert as_json.code == code, (argv, as_json.err)
        return _plain(text.out, tmp_path), as_json.json()

    text, doc = both("compact")
    assert text == (
        "compact: dry run, nothing changed (--apply carries out this plan)\n"
        "  entry TTL: never; observation TTL: never\n"
        "  expired: 0\n"
        "  tombstoned: 1 (n2)\n"
        "  pinned: 0\n"
        "  downgraded: 0\n"
        "  tombstones marked purged: 1 (EVENT)\n")
    assert doc["apply"] is False and doc["tombstoned"] == ["n2"]

    text, doc = both("import", "claude-code", str(transcript))
    assert text.startswith("imported TMP/session.jsonl into workspace ws\n"
                           "  1 call, 0 messages, ")
    assert doc["calls"] == 1 and doc["transcript"] == str(transcript)

    exported = cli("export", str(tmp_path / "exp"), env=NOW)
    assert exported.code == 0 and _plain(exported.out, tmp_path) == (
        "exported workspace ws (replica REPLICA) to TMP/exp\n"
        "  1 segment file, 4 events, 1 withheld (tombstoned), 0 artifacts\n")
    assert cli("export", str(tmp_path / "exp2"), "--json", env=NOW).json()["withheld"] == 1

    merged = cli("merge", str(tmp_path / "exp"), env=there)
    assert merged.code == 0 and _plain(merged.out, tmp_path) == (
        "merged export TMP/exp (replica REPLICA) into workspace ws\n"
        "  events: 4 imported, 0 already present, 0 not imported\n"
        "  artifacts: 0 copied, 0 already present, 0 missing\n"
        "  new segment: workspaces/ws/segments/import-REPLICA-X.sqlite\n")
    doc = cli("merge", str(tmp_path / "exp"), "--json", env=there).json()
    assert (doc["imported"], doc["alreadyPresent"]) == (0, 4)

    added = cli("remote", "add", "nas", f"file://{share}", env=NOW)
    assert _plain(added.out, tmp_path) == \
        "added remote nas file://TMP/share for workspace ws\n"
    assert cli("remote", "add", "nas", f"file://{share}", "--json", env=there).json() == {
        "workspace": "ws", "added": {"name": "nas", "url": f"file://{share}"}}
    text, doc = both("remote", "list")
    assert text == "nas  file://TMP/share\n"
    assert doc == {"workspace": "ws", "remotes": [{"name": "nas", "url": f"file://{share}"}]}

    pushed = cli("push", env=NOW)
    assert pushed.code == 0 and _plain(pushed.out, tmp_path) == (
        "pushed workspace ws to nas (file://TMP/share) as replica REPLICA\n"
        "  1 segment file (1 snapshotted now, 0 deltas of new rows), 4 events, "
        "1 withheld (tombstoned)\n"
        "  uploaded 1 object (N bytes), 0 already present; manifest written\n"
        "  deleted: 0\n")
    doc = cli("push", "--json", env=NOW).json()
    assert (doc["uploaded"], doc["manifestWritten"]) == (0, False)

    synced = cli("sync", env=there)
    assert synced.code == 0 and _plain(synced.out, tmp_path) == (
        "pulled workspace ws from nas (file://TMP/share)\n"
        "  1 other replica, 1 changed; fetched 1 object (N bytes)\n"
        "  events: 0 imported, 4 already present, 0 not imported\n"
        "pushed workspace ws to nas (file://TMP/share) as replica REPLICA\n"
        "  1 segment file (1 snapshotted now, 0 deltas of new rows), 1 event, "
        "0 withheld (tombstoned)\n"
        "  uploaded 1 object (N bytes), 0 already present; manifest written\n"
        "  deleted: 0\n")
    doc = cli("sync", "--json", env=there).json()
    assert doc["pull"]["changed"] == 0 and doc["push"]["manifestWritten"] is False

    text, doc = both("pull")
    assert text.startswith("pulled workspace ws from nas (file://TMP/share)\n"
                           "  1 other replica, 1 changed; ")
    assert doc["changed"] == 0

    text, doc = both("remote", "status")
    lines = text.splitlines()
    assert lines[0] == "remote nas (file://TMP/share), workspace ws: 2 replicas, 1 tombstoned id"
    assert sorted(re.sub(r"pushed \S+,", "pushed TS,", line) for line in lines[1:]) == [
        "  REPLICA (this root): pushed TS, 1 file, 4 events, 24576 bytes",
        "  REPLICA: pushed TS, 1 file, 1 event, 24576 bytes",
        "  not pushed yet from this root: 0 events (0 bytes) in 0 segments"]
    assert sorted(r["self"] for r in doc["replicas"]) == [False, True]
    assert doc["unpushed"] == {"segments": 0, "events": 0, "bytes": 0}

    removed = cli("remote", "remove", "nas", env=NOW)
    assert _plain(removed.out, tmp_path) == \
        "removed remote nas file://TMP/share from workspace ws\n"
    assert cli("remote", "list", env=NOW).out == "no remotes for workspace ws\n"
    assert cli("remote", "remove", "nas", "--json", env=there).json()["removed"]["name"] == "nas"

    applied = cli("compact", "--apply", env=NOW)
    assert applied.code == 0 and applied.out.startswith("compact: applied\n")
    assert cli("compact", "--apply", "--json", env=NOW).json()["apply"] is True


def test_a_long_list_of_ids_shows_the_first_five_and_the_count(cli):
    for n in range(8):
        assert cli("record", "--kind", "note", "--id", f"n{n}", "--text", "t").code == 0
        assert cli("tombstone", f"n{n}", "--reason", "r").code == 0
    text = cli("compact").out
    assert "  tombstoned: 8 (n0, n1, n2, n3, n4, and 3 more)\n" in text
    assert len(cli("compact", "--json").json()["tombstoned"]) == 8


def test_each_of_these_commands_takes_json():
    for name in ("import claude-code", "import codex", "export", "merge", "compact", "push",
                 "pull", "sync", "remote add", "remote list", "remote remove", "remote status"):
        flags = {opt.flag: opt.kind for opt in COMMANDS[name].opts}
        assert flags.get("--json") == BARE, name


# -- ids that name nothing -------------------------------------------------------------------

@pytest.mark.parametrize("argv", [["show", "--id", "nosuch"], ["show", "--id", "gone"],
                                  ["show", "--json", "--id", "nosuch"], ["get", "nosuch"],
                                  ["trace", "nosuch"], ["trace", "--json", "gone"],
                                  ["show", "--id", "nosuch", "--as-of", "cp"],
                                  ["trace", "nosuch", "--as-of", "cp"]])
def test_an_id_that_names_nothing_is_exit_1_in_one_line(cli, argv):
    """Unknown or tombstoned: nothing on stdout, one line naming it (`show --id` exited 0
    with an empty answer before)."""
    assert cli("record", "--kind", "note", "--id", "gone", "--text", "secret").code == 0
    assert cli("checkpoint", "cp").code == 0
    assert cli("tombstone", "gone", "--reason", "r").code == 0
    named = "gone" if "gone" in argv else "nosuch"
    result = cli(*argv)
    assert (result.code, result.out) == (1, ""), result.err
    assert result.err.startswith(f"error: no entry or observation with id {named} in "
                                 "workspace ws")
    assert result.err.count("\n") == 1 and "secret" not in result.err


def test_an_observation_no_entry_cites_is_still_traced(cli):
    assert cli("observe", "--kind", "tool_call", "--id", "o1", "--tool", "Bash").code == 0
    result = cli("trace", "o1")
    assert result.code == 0 and "(no entry cites it)" in result.out
    assert cli("show", "--id", "o1").code == 0


# -- did you mean ----------------------------------------------------------------------------

@pytest.mark.parametrize("argv, message", [
    (["hooks", "install", "claude"], "no such command 'hooks install claude'; did you mean "
     "'hooks install claude-code'? (see agent-journal --help)"),
    (["hoks", "install", "claude-code"], "did you mean 'hooks install claude-code'?"),
    (["serch", "x"], "no such command 'serch'; did you mean 'search'?"),
    (["remtoe", "list"], "did you mean 'remote list'?"),
    (["remtoe"], "did you mean 'remote'?"),
    (["hooks"], "'hooks' needs a command: hooks install claude-code, hooks uninstall "
     "claude-code, hooks install codex, hooks uninstall codex"),
    (["import"], "'import' needs a command: import claude-code, import codex"),
    (["frobnicate"], "no such command 'frobnicate'; see agent-journal --help"),
    (["show", "--jsn"], "no such option --jsn for show; did you mean --json?"),
    (["show", "-json"], "unexpected argument '-json'; did you mean --json?"),
    (["compact", "--aply"], "no such option --aply for compact; did you mean --apply?"),
    (["record", "--bogus"], "no such option --bogus for record\n"),
])
def test_a_mistyped_command_or_option_names_the_nearest(cli, root, argv, message):
    result = cli(*argv)
    assert (result.code, result.out) == (2, "")
    assert result.err.startswith("error: ") and result.err.count("\n") == 1
    assert message in result.err, result.err
    assert not root.exists()


# -- help ------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv", [[], ["show"], ["hooks"], ["hooks", "install"],
                                  ["hooks", "install", "claude-code"], ["remote", "status"],
                                  ["compact"]])
def test_help_shows_no_value_placeholder_for_bare_flags(cli, argv):
    result = cli(*argv, "--help")
    assert result.code == 0 and "--help" in result.out
    assert "<bool>" not in result.out, result.out
