"""`agent-journal mcp`: driven through the MCP SDK's own client, over stdio, in a real process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import CLI, clean_env
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from agent_journal.agents import mcp_recall

TOOLS = ["search", "get", "timeline", "trace", "record", "invalidate"]


def server(root: Path, mode: str = "auto", **env: str) -> Client:
    params = StdioServerParameters(
        command=CLI, args=["mcp"],
        env={"AGENT_JOURNAL_ROOT": str(root), "AGENT_JOURNAL_WORKSPACE": "ws", **env})
    # No client-side cache: every call must reach the server, which is what is tested.
    # "legacy" is the initialize handshake agent clients speak today; "auto" lets the SDK
    # pick its newest protocol.
    return Client(params, cache=None, read_timeout_seconds=60, mode=mode)


def text(result: Any) -> str:
    return "\n".join(block.text for block in result.content)


def run(scenario: Any) -> None:
    anyio.run(scenario)


@pytest.fixture
def journal(cli, tmp_path):
    """A workspace with a finding, a decision built on it, and two tool calls."""
    out = tmp_path / "out.txt"
    out.write_text("FAIL test_timestamps: expected Z suffix\n")
    assert cli("observe", "--kind", "tool_call", "--id", "call1", "--tool", "Bash",
               "--input", '{"command": "pytest -q"}', "--output", str(out),
               "--status", "error", "--exit-code", "1").code == 0
    assert cli("observe", "--kind", "tool_call", "--id", "call2", "--tool", "Read",
               "--input", '{"file_path": "src/clock.py"}').code == 0
    assert cli("record", "--kind", "finding", "--id", "utc",
               "--claim", "timestamps are stored in UTC with a Z suffix",
               "--anchor", "tool_use:call1").code == 0
    assert cli("record", "--kind", "decision", "--id", "iso",
               "--question", "how are timestamps written", "--chosen", "ISO 8601 strings",
               "--depends-on", "utc").code == 0
    return cli


def test_lists_six_small_tools_and_every_one_answers(journal, root):
    async def scenario() -> None:
        async with server(root, AGENT_JOURNAL_SESSION="sess-7") as client:
            tools = (await client.list_tools()).tools
            assert [t.name for t in tools] == TOOLS
            # Schemas cost context tokens on every turn: all six stay small.
            schemas = json.dumps([t.model_dump(by_alias=True, exclude_none=True)
                                  for t in tools])
            assert len(schemas) < 3000, len(schemas)
            assert all(len(t.description or "") <= 160 for t in tools)
            resources = (await client.list_resources()).resources
            assert [str(r.uri) for r in resources] == [mcp_recall.DIGEST_URI]
            prompts = (await client.list_prompts()).prompts
            assert [p.name for p in prompts] == ["digest"]

            found = await client.call_tool("search", {"query": "timestamps"})
            assert not found.is_error
            lines = text(found).splitlines()
            assert [line.split()[0] for line in lines] == ["iso", "utc"] or \
                [line.split()[0] for line in lines] == ["utc", "iso"]
            assert any(line.startswith("utc  entry/finding  ") and "«timestamps»" in line
                       for line in lines)
            only = await client.call_tool("search", {"query": "timestamps", "kind": "finding",
                                                     "limit": 1})
            assert text(only).split()[0] == "utc" and len(text(only).splitlines()) == 1

            got = await client.call_tool("get", {"ids": ["utc", "call1"]})
            assert not got.is_error
            record = json.loads(got.content[0].text)
            assert record["id"] == "utc" and record["live"] is True
            assert got.content[1].text == "FAIL test_timestamps: expected Z suffix\n"

            timeline = await client.call_tool("timeline", {})
            rows = text(timeline).splitlines()
            assert [row.rsplit("id ", 1)[1] for row in rows] == ["call1", "call2", "utc", "iso"]
            assert "Bash  pytest -q  [error, exit 1]" in rows[0]
            failures = await client.call_tool("timeline", {"failures_only": True})
            assert text(failures).splitlines()[0].endswith("id call1")
            assert len(text(failures).splitlines()) == 1
            last = await client.call_tool("timeline", {"last": 1, "since": "1d"})
            assert text(last).endswith("id iso")

            traced = await client.call_tool("trace", {"id": "call1"})
            assert text(traced).splitlines() == ["utc  finding  live  cites it as anchor",
                                                 "  iso  decision  live  depends on utc"]

            written = await client.call_tool("record", {
                "kind": "finding", "id": "z-suffix", "claim": "the parser wants a Z suffix",
                "anchors": ["tool_use:call1"], "depends_on": ["utc"]})
            assert not written.is_error and text(written).startswith("recorded z-suffix")
            retracted = await client.call_tool("invalidate", {"target": "utc",
                                                              "reason": "it was local time"})
            assert text(retracted).startswith("invalidated utc")
            marked = await client.call_tool("search", {"query": "timestamps"})
            assert "[invalidated]" in text(marked) and "[suppressed]" in text(marked)

            digest = await client.read_resource(mcp_recall.DIGEST_URI)
            assert "# Journal digest: workspace ws" in digest.contents[0].text
            assert "invalidated: it was local time" in digest.contents[0].text
            prompt = await client.get_prompt("digest")
            assert prompt.messages[0].content.text == digest.contents[0].text

    run(scenario)
    shown = journal("show", "--id", "z-suffix", "--json").json()["entries"][0]
    # Written as the agent, in the server's session, like the hook's observations.
    assert (shown["author"], shown["session"]) == ("agent", "sess-7")
    assert shown["outcome"] == "suppressed"


def test_bad_calls_are_error_results_and_write_nothing(journal, root):
    bad = [
        ("search", {}, "search: query is required"),
        ("search", {"query": 3}, "search: query must be a string"),
        ("search", {"query": "x", "limit": 0}, "search: limit must be at least 1"),
        ("search", {"query": "x", "limt": 3}, "search: unknown argument 'limt'"),
        ("get", {"ids": "utc"}, "get: ids must be a list of strings"),
        ("get", {"ids": []}, "get: ids must not be empty"),
        ("get", {"ids": ["nope"]}, "no entry or observation with id nope in workspace ws"),
        ("get", {"ids": ["utc", "nope"]}, "no entry or observation with id nope"),
        ("get", {"ids": ["../x"]}, "id must not"),
        ("timeline", {"since": "yesterday-ish"}, "since must be an ISO instant or a span"),
        ("timeline", {"failures_only": "yes"}, "timeline: failures_only must be true or false"),
        ("trace", {"id": ""}, "ID must not be empty"),
        ("record", {"kind": "rumour", "id": "r"}, "record: kind must be one of"),
        ("record", {"kind": "finding", "id": "r"}, "claim is required"),
        ("record", {"kind": "note", "id": "r", "text": "t", "claim": "c"},
         "claim does not apply to a note"),
        ("record", {"kind": "note", "id": "r", "text": "t", "anchors": ["nowhere"]},
         "anchor must be SCHEME:REF"),
        ("invalidate", {"target": "utc", "reason": "  "}, "reason is required"),
    ]

    async def scenario() -> None:
        async with server(root, AGENT_JOURNAL_SESSION="s") as client:
            for tool, args, message in bad:
                result = await client.call_tool(tool, args)
                assert result.is_error, (tool, args, text(result))
                assert message in text(result), (tool, args, text(result))
                assert "\n" not in text(result) and "Traceback" not in text(result)
            with pytest.raises(MCPError, match="no such tool 'forget'"):
                await client.call_tool("forget", {"id": "utc"})
            with pytest.raises(MCPError, match="no such resource"):
                await client.read_resource("agent-journal://everything")

    before = journal("show", "--observations").out
    run(scenario)
    assert journal("show", "--observations").out == before


def test_writes_without_a_session_are_refused(journal, root):
    async def scenario() -> None:
        async with server(root, mode="legacy") as client:
            result = await client.call_tool("record", {"kind": "note", "id": "n", "text": "t"})
            assert result.is_error and "writes need the agent's session" in text(result)
            # Reads need none.
            assert not (await client.call_tool("trace", {"id": "utc"})).is_error

    run(scenario)
    assert journal("get", "n").code == 1


def test_claude_codes_session_id_is_the_fallback(journal, root):
    async def scenario() -> None:
        async with server(root, CLAUDE_CODE_SESSION_ID="cc-123") as client:
            result = await client.call_tool("record", {"kind": "note", "id": "n", "text": "t"})
            assert not result.is_error, text(result)

    run(scenario)
    assert journal("show", "--id", "n", "--json").json()["entries"][0]["session"] == "cc-123"


def test_a_tombstone_written_while_the_server_runs_hides_at_the_next_call(journal, root):
    async def scenario() -> None:
        async with server(root, mode="legacy") as client:
            assert "call1" in text(await client.call_tool("timeline", {}))
            assert not (await client.call_tool("get", {"ids": ["call1"]})).is_error
            assert "utc" in text(await client.call_tool("search", {"query": "suffix"}))
            # The CLI, another process, tombstones both while the server is up.
            assert journal("tombstone", "call1", "--reason", "held a secret").code == 0
            assert journal("tombstone", "utc", "--reason", "held a secret").code == 0
            got = await client.call_tool("get", {"ids": ["call1"]})
            assert got.is_error and "FAIL test_timestamps" not in text(got)
            searched = text(await client.call_tool("search", {"query": "suffix"}))
            assert "utc" not in searched and "Z suffix" not in searched
            timeline = text(await client.call_tool("timeline", {}))
            assert "call1" not in timeline and "pytest" not in timeline
            assert "utc" not in timeline and "Z suffix" not in timeline
            traced = text(await client.call_tool("trace", {"id": "call1"}))
            assert "utc" not in traced
            digest = (await client.read_resource(mcp_recall.DIGEST_URI)).contents[0].text
            assert "Z suffix" not in digest and "pytest -q" not in digest

    run(scenario)


def test_exact_outputs_are_bounded_read_on_by_offset_and_refused_when_damaged(cli, root,
                                                                             tmp_path):
    body = "".join(f"line {i:05d} of a long build log\n" for i in range(2000))  # 64 KB
    (tmp_path / "log.txt").write_text(body)
    assert cli("observe", "--kind", "tool_call", "--id", "build", "--tool", "Bash",
               "--output", str(tmp_path / "log.txt")).code == 0
    damaged = "secret-free but large output\n" * 1000
    (tmp_path / "big.txt").write_text(damaged)
    assert cli("observe", "--kind", "tool_call", "--id", "big",
               "--output", str(tmp_path / "big.txt")).code == 0
    blobs = [p for p in (root / "workspaces" / "ws" / "artifacts").rglob("*") if p.is_file()]
    [blob] = [p for p in blobs if p.read_bytes() == damaged.encode()]
    data = bytearray(blob.read_bytes())
    data[100] ^= 0x20
    blob.chmod(0o600)
    blob.write_bytes(bytes(data))

    async def scenario() -> None:
        async with server(root) as client:
            parts, offset = [], 0
            while True:
                result = await client.call_tool("get", {"ids": ["build"], "offset": offset})
                assert not result.is_error
                assert sum(len(b.text) for b in result.content[:-1]) <= mcp_recall.MAX_CHARS
                parts.append(result.content[0].text)
                note = result.content[-1].text
                assert note.startswith(f"note: output of build: characters {offset}-")
                if "offset=" not in note:
                    break
                offset = int(note.rsplit("offset=", 1)[1].split()[0])
            assert "".join(parts) == body  # verified bytes, whole, in order
            assert len(parts) == -(-len(body) // mcp_recall.MAX_CHARS)

            result = await client.call_tool("get", {"ids": ["big"]})
            assert result.is_error
            assert "does not match its recorded checksum" in text(result)
            assert "large output" not in text(result)  # not even the preview
            both = await client.call_tool("get", {"ids": ["build", "big"]})
            assert both.is_error and "long build log" not in text(both)

    run(scenario)


def test_requests_written_at_once_then_stdin_closed_are_all_answered(journal, root):
    """Issue 32: a client that writes its calls and closes stdin at once gets every answer;
    the SDK used to cancel the calls still running when its input ended."""
    def request(rid: int, method: str, params: dict[str, Any] | None = None) -> str:
        return json.dumps({"jsonrpc": "2.0", "id": rid, "method": method,
                           **({"params": params} if params is not None else {})})

    lines = [
        request(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                  "clientInfo": {"name": "pipe", "version": "1"}}),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        request(2, "tools/list"),
        request(3, "tools/call", {"name": "search", "arguments": {"query": "timestamps"}}),
        request(4, "tools/call", {"name": "get", "arguments": {"ids": ["call1"]}}),
        request(5, "tools/call", {"name": "timeline", "arguments": {}}),
    ]
    # Everything is written and stdin closed before the first answer is read; stdout is
    # then read to its end (the server's exit), under a timeout rather than any sleep.
    proc = subprocess.run([CLI, "mcp"], input="\n".join(lines) + "\n", capture_output=True,
                          text=True, timeout=120,
                          env=clean_env(AGENT_JOURNAL_ROOT=str(root),
                                        AGENT_JOURNAL_WORKSPACE="ws"))
    assert proc.returncode == 0, proc.stderr
    answers = {a["id"]: a for a in map(json.loads, proc.stdout.splitlines())}
    assert sorted(answers) == [1, 2, 3, 4, 5], proc.stdout
    assert all("result" in a for a in answers.values()), proc.stdout
    assert [t["name"] for t in answers[2]["result"]["tools"]] == TOOLS
    found = answers[3]["result"]["content"][0]["text"]
    assert {line.split()[0] for line in found.splitlines()} == {"utc", "iso"}
    got = answers[4]["result"]
    assert not got.get("isError") and \
        got["content"][0]["text"] == "FAIL test_timestamps: expected Z suffix\n"
    assert answers[5]["result"]["content"][0]["text"].endswith("id iso")


def test_search_never_returns_the_servers_own_calls(journal, root):
    """Issue 28: the hook journals each MCP call before it runs, so the search call itself
    was the top hit of `search`; the server's own tools' calls are never returned."""
    own = f"{mcp_recall.OWN_TOOLS}search"
    assert own == "mcp__agent-journal__search"  # Claude Code's name for the installed server
    for i, tool in enumerate([own, f"{mcp_recall.OWN_TOOLS}get", "mcp__other__lookup"]):
        assert journal("observe", "--kind", "tool_call", "--id", f"mcp{i}", "--tool", tool,
                       "--input", json.dumps({"query": "timestamps timestamps"})).code == 0
    session = mcp_recall.Journal(str(root), "ws", None)
    hits = [line.split()[0] for line in
            mcp_recall.call(session, "search", {"query": "timestamps"}).text.splitlines()]
    assert sorted(hits) == ["iso", "mcp2", "utc"]  # another server's calls stay
    # Left out before the limit: the page is filled by what is kept.
    for limit in (1, 2, 3):
        page = mcp_recall.call(session, "search", {"query": "timestamps", "limit": limit})
        assert len(page.text.splitlines()) == limit
        assert not {"mcp0", "mcp1"} & {line.split()[0] for line in page.text.splitlines()}
    # The command line's search is the whole journal, the server's calls included.
    cli_hits = journal("search", "timestamps", "--json").json()["hits"]
    assert {"mcp0", "mcp1"} <= {h["id"] for h in cli_hits}


def test_without_the_extra_one_line_names_it(root):
    probe = ("import sys; sys.modules['mcp'] = None\n"
             "from agent_journal.cli.main import main\n"
             "sys.exit(main(['mcp']))\n")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env=clean_env(AGENT_JOURNAL_ROOT=str(root),
                                        AGENT_JOURNAL_WORKSPACE="ws"), timeout=60)
    assert proc.returncode == 1
    assert proc.stderr == ("error: the MCP server needs the optional extra agent-journal[mcp]: "
                           "pip install 'agent-journal[mcp]'\n")
    assert proc.stdout == ""


def test_a_bad_workspace_is_a_usage_error_before_serving(cli):
    result = cli("mcp", "--workspace", "../up")
    assert result.code == 2 and result.err.count("\n") == 1


# -- the recall layer in process: bounds and argument checks -----------------------------

def test_answers_are_bounded_with_a_note(cli, root, monkeypatch):
    for i in range(60):
        assert cli("observe", "--kind", "tool_call", "--id", f"c{i:02d}", "--tool", "Bash",
                   "--input", json.dumps({"command": f"echo {'x' * 300} {i}"})).code == 0
    monkeypatch.setattr(mcp_recall, "MAX_CHARS", 2000)
    journal = mcp_recall.Journal(str(root), "ws", None)
    answer = mcp_recall.call(journal, "timeline", {"last": 60})
    lines = answer.text.splitlines()
    assert lines[0].startswith("note: ") and "earlier event(s) cut to fit" in lines[0]
    assert lines[-1].endswith("id c59")  # the most recent are the ones kept
    assert len(answer.text) <= 2000 + len(lines[0]) + 1


@pytest.mark.parametrize("args, message", [
    (None, "search: query is required"),
    ([], "search: arguments must be an object"),
    ({"query": "q", "limit": True}, "search: limit must be a whole number"),
    ({"query": "q", "limit": 51}, "search: limit must be at most 50"),
])
def test_argument_checks(root, args, message):
    answer = mcp_recall.call(mcp_recall.Journal(str(root), "ws", None), "search", args)
    assert answer.is_error and answer.text == message


def test_search_uses_the_thesaurus_and_names_words_that_match_nothing(journal, root):
    """Issue 34: the MCP search reads the root's thesaurus afresh and, like the CLI, returns
    what holds some of the words, saying which matched nothing."""
    session = mcp_recall.Journal(str(root), "ws", None)
    answer = mcp_recall.call(session, "search", {"query": "zulu timestamps"}).text
    lines = answer.splitlines()
    assert lines[0] == "no document holds: zulu"
    assert {line.split()[0] for line in lines[1:]} == {"utc", "iso"}
    assert mcp_recall.call(session, "search", {"query": "zulu"}).text == (
        "no document holds: zulu\nno matches")
    (root / "thesaurus.json").write_text('{"zulu": ["UTC"]}')
    lines = mcp_recall.call(session, "search", {"query": "zulu"}).text.splitlines()
    assert lines[:2] == ["thesaurus: zulu also searched as utc", "no document holds: zulu"]
    assert [line.split()[0] for line in lines[2:]] == ["utc"]
    (root / "thesaurus.json").write_text('{"zulu": ["UTC"], "zulu": []}')  # broken: ignored
    lines = mcp_recall.call(session, "search", {"query": "zulu"}).text.splitlines()
    assert lines[:2] == ["no document holds: zulu", "no matches"]
    assert "thesaurus" in lines[2] and "broken" in lines[2]


def test_a_weak_search_is_logged_as_the_agent_and_only_with_a_session(journal, root):
    (root / "config.json").write_text('{"search": {"missLog": true}}')
    mcp_recall.call(mcp_recall.Journal(str(root), "ws", None), "search", {"query": "zulu"})
    assert journal("search", "--misses", "--json").json()["misses"] == []
    mcp_recall.call(mcp_recall.Journal(str(root), "ws", "sess-9"), "search", {"query": "zulu"})
    (miss,) = journal("search", "--misses", "--json").json()["misses"]
    assert miss["query"] == "zulu" and miss["count"] == 1
    shown = journal("show", "--id", miss["ids"][0], "--json").json()["entries"][0]
    assert shown["author"] == "agent" and shown["session"] == "sess-9"
