"""spec/cli-json.md against what the commands print: every key of every read's --json (and
of the commands that always print JSON) is camelCase and documented in the section for that
command, and every key the section's tables and JSON examples document is still printed by
it. Goldens
(tests/golden) pin a few documents byte for byte; this covers every read, by name.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from test_hostile import run_main

from agent_journal.cli.commands import find_command

SPEC = Path(__file__).resolve().parents[1] / "spec" / "cli-json.md"
NOW = "2026-06-01T12:00:00Z"

# Objects whose keys are data, not names the spec defines: a tool's input, an event's
# data, counts by type or kind, counts by digest section.
DATA_MAPS = {"input", "data", "byType", "byKind", "notShown", "trimmedToFit", "expansions",
             "aliases"}

SHARED = "Shared by the audit reads (trace, digest, coverage, decay)"
SYNC = "Sync: `remote add|list|remove|status`, `push`, `pull`, `sync`"
WRITES = "Write commands: `record`, `observe`, `invalidate`, `tombstone`"

# Each command run here, with the spec sections that document its document. "{ev}" is an
# event id of the journal, "{dest}" a folder to export to.
RUNS: dict[str, tuple[list[str], list[str]]] = {
    "show": (["show", "--json", "--observations"], ["`show`"]),
    "trace": (["trace", "f1", "--json"], ["trace", SHARED]),
    "digest": (["digest", "--json"], ["digest", SHARED, "`show`"]),
    "coverage": (["coverage", "--json"], ["coverage", SHARED]),
    "decay": (["decay", "--json"], ["decay", SHARED]),
    "stats": (["stats", "--json"], ["stats", SHARED]),
    "search": (["search", "tests", "--json", "--include-retracted"], ["search"]),
    # The miss log is on (the fixture turns it on): a weak query, then the log.
    "search weak": (["search", "nowhere-at-all", "--json"], ["search"]),
    "search misses": (["search", "--misses", "--json"], ["search"]),
    "alias list": (["alias", "list", "--json"], ["search"]),
    "get": (["get", "d1", "--json"], ["`get`", "`show`"]),
    "get event": (["get", "{ev}", "--json"], ["`get`"]),
    "compact": (["compact", "--observation-ttl-days", "0", "--json"], ["compact"]),
    "checkpoints": (["checkpoints", "--json"], ["`checkpoint`, `checkpoints`"]),
    "checkpoint": (["checkpoint", "cp2", "--json"], ["`checkpoint`, `checkpoints`"]),
    "record": (["record", "--kind", "note", "--id", "n8", "--text", "x", "--json"], [WRITES]),
    "remote add": (["remote", "add", "r2", "file://{dest}-r2", "--json"], [SYNC]),
    "remote remove": (["remote", "remove", "r2", "--json"], [SYNC]),
    "remote list": (["remote", "list", "--json"], [SYNC]),
    "push": (["push", "--json"], [SYNC]),
    "remote status": (["remote", "status", "--json"], [SYNC]),
    "pull": (["pull", "--json"], [SYNC, "`merge`"]),
    "sync": (["sync", "--json"], [SYNC, "`merge`"]),
    "export": (["export", "{dest}", "--json"], ["`export`"]),
    "merge": (["merge", "{dest}", "--json"], ["`merge`"]),
    "export sqlite": (["export", "--sqlite", "{dest}.db", "--json"], ["`export --sqlite`"]),
    "timeline": (["timeline", "--json"], ["`timeline`"]),
    "timeline failures": (["timeline", "--json", "--failures-only"], ["`timeline`"]),
    "import claude-code": (["import", "claude-code", "{transcript}", "--json"],
                           ["`import claude-code`"]),
    "doctor": (["doctor", "--json"], ["`doctor`"]),
    "hook claude-code": (["hook", "claude-code"], ["`hook claude-code`"]),
}
# What the hook reads on stdin.
SESSION_START = {"hook_event_name": "SessionStart", "session_id": "s1", "source": "startup"}

# Documented keys this journal's documents do not hold, each for the reason given.
CONDITIONAL = {
    "conflictVersions": "only when an id has records from two replicas",
    "endpointUrl": "only for an S3 remote given --endpoint-url",
    "skipped": "only in an applied compaction that left segments alone",
    "number": "only in a digest whose gh calls named a pull request (test_pull_requests.py)",
    "url": "only in a digest whose gh calls named a pull request (test_pull_requests.py)",
}


def sections() -> dict[str, str]:
    out: dict[str, str] = {}
    current = None
    for line in SPEC.read_text().splitlines():
        if line.startswith("## "):
            current = line[3:].strip()
            out[current] = ""
        elif current is not None:
            out[current] += line + "\n"
    return out


def documented(text: str) -> set[str]:
    """The keys a section defines: the first cell of its table rows, and the keys of its
    JSON examples."""
    keys: set[str] = set()
    for line in text.splitlines():
        if line.startswith("| `"):
            keys.update(re.findall(r"`(\w+)`", line.split("|")[1]))
    for block in re.findall(r"```(?:json)?\n(.*?)```", text, flags=re.S):
        keys.update(re.findall(r'"(\w+)":', block))
    return keys


def code_of(text: str) -> str:
    """The section's code: its fenced blocks and `inline spans`, where keys are named
    (a word in the prose is not a definition)."""
    blocks = re.findall(r"```.*?```", text, flags=re.S)
    rest = re.sub(r"```.*?```", "", text, flags=re.S)
    return "\n".join(blocks + re.findall(r"`[^`]+`", rest))


def keys_of(value: Any, *, into_data: bool) -> set[str]:
    found: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            found.add(key)
            if into_data or key not in DATA_MAPS:
                found |= keys_of(item, into_data=into_data)
    elif isinstance(value, list):
        for item in value:
            found |= keys_of(item, into_data=into_data)
    return found


@pytest.fixture(scope="module")
def printed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Any]]:
    """What each run printed, on a journal holding every kind of thing: an objective, a
    constraint, a failed call with its output, a prompt, a finding citing the call that
    was then invalidated, a decision depending on it, a tombstoned note, a finding citing
    nothing held, a checkpoint, a file remote and a transcript."""
    base = tmp_path_factory.mktemp("json-spec")
    base.chmod(0o700)
    root = base / "journal"
    (base / "remote").mkdir()
    (base / "remote").chmod(0o700)  # a file remote's objects take its bits (spec/SYNC.md)
    output = base / "output.txt"
    output.write_text("FAILED tests/test_x.py::test_y\n" * 3)
    # Three runs of one test command: the digest's run line keeps its first run (2 tests)
    # and its last pass (3 tests) under the latest, failing one.
    runs = []
    for n, text in enumerate(("2 passed in 0.1s", "3 passed in 0.1s",
                              "FAILED t.py::test_a - boom\n1 failed, 3 passed in 0.1s")):
        runs.append(base / f"run{n}.txt")
        runs[-1].write_text(f"{text}\n")
    transcript = base / "session.jsonl"
    transcript.write_text("\n".join(json.dumps(line) for line in (
        {"type": "assistant", "sessionId": "s2", "uuid": "a1", "timestamp": NOW,
         "cwd": "/home/me/app", "gitBranch": "main",
         "message": {"role": "assistant", "content": [
             {"type": "tool_use", "id": "toolu_1", "name": "Bash",
              "input": {"command": "ls"}}]}},
        {"type": "user", "sessionId": "s2", "uuid": "u2", "timestamp": NOW,
         "message": {"role": "user", "content": [
             {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a b"}]}},
    )) + "\n")

    def run(*argv: str, stdin: bytes = b"") -> Any:
        cmd, _ = find_command(list(argv))
        assert cmd is not None
        workspace = ["--workspace", "ws"] if any(o.flag == "--workspace" for o in cmd.opts) else []
        return run_main([*argv, *workspace], root=root, stdin=stdin,
                        env={"AGENT_JOURNAL_NOW": NOW, "HOME": str(base / "home")})

    session = ["--session", "s1"]
    for argv in (
            ["record", "--kind", "objective", "--id", "goal", "--text", "ship it"],
            ["record", "--kind", "constraint", "--id", "c1", "--text", "no force push"],
            ["observe", "--kind", "tool_call", "--id", "o1", "--tool", "Bash", "--callId", "c",
             "--input", '{"command": "make test"}', "--status", "started", *session],
            ["observe", "--kind", "tool_call", "--id", "o1", "--tool", "Bash", "--status",
             "error", "--exit-code", "1", "--output", str(output), *session],
            *(["observe", "--kind", "tool_call", "--id", f"r{n}", "--tool", "Bash",
               "--input", '{"command": "pytest"}', "--status", "error" if n == 2 else "ok",
               "--exit-code", "1" if n == 2 else "0", "--output", str(path), *session]
              for n, path in enumerate(runs)),
            ["observe", "--kind", "user_prompt", "--id", "p1", "--input",
             '{"prompt": "please fix the tests"}', *session],
            ["record", "--kind", "finding", "--id", "f1", "--claim", "tests fail", "--anchor",
             "tool_use:o1", "--subject", "build", *session],
            ["record", "--kind", "decision", "--id", "d1", "--question", "fix?", "--chosen",
             "yes", "--depends-on", "f1"],
            ["record", "--kind", "note", "--id", "gone", "--text", "secret"],
            ["record", "--kind", "finding", "--id", "f2", "--claim", "cites what is not held",
             "--anchor", "tool_use:nothing"],
            ["invalidate", "f1", "--reason", "wrong"],
            ["tombstone", "gone", "--reason", "a secret"],
            ["checkpoint", "cp1", "--note", "here"],
            ["remote", "add", "r1", "file://" + str(base / "remote")]):
        result = run(*argv)
        assert result.code == 0, (argv, result.err)
    event = json.loads(run("record", "--kind", "note", "--id", "n9", "--text", "x",
                           "--json").out)["eventId"]
    config = json.loads((root / "config.json").read_text())
    (root / "config.json").write_text(json.dumps(config | {"search": {"missLog": True}}))
    out: dict[str, list[Any]] = {}
    for name, (argv, _) in RUNS.items():
        filled = [a.format(ev=event, dest=base / "export", transcript=transcript)
                  for a in argv]
        result = run(*filled, stdin=json.dumps(SESSION_START | {"cwd": str(base)}).encode())
        assert result.code in (0, 1) and result.out, (name, result.code, result.err)
        lines = result.out.splitlines() if name.startswith("timeline") else [result.out]
        out[name] = [json.loads(line) for line in lines]
    return out


@pytest.mark.parametrize("name", list(RUNS))
def test_every_key_printed_is_documented(printed, name):
    text = code_of("".join(sections()[title] for title in RUNS[name][1]))
    keys = set().union(*(keys_of(doc, into_data=False) for doc in printed[name]))
    missing = sorted(key for key in keys
                     if not re.search(rf"(?<![\w-]){re.escape(key)}(?![\w-])", text))
    assert not missing, f"{name} prints keys {', '.join(RUNS[name][1])} does not name: {missing}"
    assert all(re.fullmatch(r"[a-z][a-zA-Z0-9]*", key) for key in keys), sorted(keys)


def test_every_key_documented_is_printed(printed):
    """A key a section's table or example defines is printed by one of its commands
    (CONDITIONAL names those this journal cannot show, and why)."""
    by_section: dict[str, set[str]] = {}
    for name, (_, titles) in RUNS.items():
        keys = set().union(*(keys_of(doc, into_data=True) for doc in printed[name]))
        by_section[titles[0]] = by_section.get(titles[0], set()) | keys
    gone = {title: sorted(documented(sections()[title]) - keys - set(CONDITIONAL))
            for title, keys in by_section.items()}
    gone = {title: keys for title, keys in gone.items() if keys}
    assert not gone, f"documented but not printed: {gone}"


def test_everything_the_commands_made_is_private(printed, tmp_path_factory):
    """Files 0600, folders 0700: the root and what the commands wrote outside it (an
    export, the objects of a file remote whose folder is 0700), after every run above."""
    base = next(tmp_path_factory.getbasetemp().glob("json-spec*"))
    loose = []
    for top in (base / "journal", base / "export", base / "remote"):
        assert top.is_dir()
        for path in [top, *top.rglob("*")]:
            mode = path.lstat().st_mode & 0o777
            if mode != (0o700 if path.is_dir() else 0o600):
                loose.append(f"{path.relative_to(base)} {mode:o}")
    assert not loose, loose
