"""agent-journal's MCP server inside the real Claude Code (`make clients` installs the pinned
release), registered by `agent-journal hooks install claude-code --mcp` as a user runs it,
against the scripted model server (issue 28).

Claude Code 2.1.337 does not offer MCP tools up front: it lists their names as "deferred
tools" in a system reminder of the first user message, offers a `ToolSearch` tool (input
`query`, "select:<name>" or keywords, and `max_results`), and only once ToolSearch has
returned a tool (as `tool_reference` blocks) does that tool's schema appear in `tools`
(`defer_loading: true`) so it can be called. So what decides whether a model ever uses
the journal is a keyword search over our tool names and descriptions; this scenario goes
through it the way a model would, and reads the journal's answer off the tool result the
client sends back. (`claude -p` connects MCP servers in the background unless told not to:
tests/real_clients.py makes it wait, or a server slow to start on a loaded machine would be
missing from the first turn's deferred tools and from ToolSearch.)
"""

from __future__ import annotations

import json
from typing import Any

from model_server import Call, ModelServer, Script
from real_clients import agent_requests, needs_clients

from agent_journal.agents.mcp_installer import SERVER

pytestmark = needs_clients

SEARCH = f"mcp__{SERVER}__search"
# The deferred tools' announcement, and what a model would type to find a journal search.
DEFERRED = "deferred tools are now available via ToolSearch"
FIND = {"query": "journal search"}
WORD = "kestrel"  # in one journaled call only (and in the searches that look for it)




def tool_result(server: ModelServer, call: str) -> Any:
    """The content of the tool result the client sent back for `call`."""
    for request in reversed(agent_requests(server)):
        for message in request["body"]["messages"]:
            content = message.get("content")
            for block in content if isinstance(content, list) else []:
                if block.get("type") == "tool_result" and block.get("tool_use_id") == call:
                    return block.get("content")
    raise AssertionError(f"no tool result for {call} in any request")


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content if isinstance(b, dict))


def offered(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in request["body"]["tools"]}


def session(marker: str) -> Script:
    """Find the journal's search through ToolSearch (keywords, as a model would), then ask
    it for the word."""
    return Script(marker, [[Call("ToolSearch", FIND)], [Call(SEARCH, {"query": WORD})],
                           "done"])


def test_the_journal_search_is_found_through_toolsearch_and_answers_without_itself(box):
    box.install("claude-code", "--mcp")
    assert json.loads((box.project / ".mcp.json").read_text())["mcpServers"][SERVER]
    work = Script("alpha", [
        [Call("Bash", {"command": f"echo {WORD}-7731", "description": "the bird"})],
        [Call("Bash", {"command": "false", "description": "fail"})],
        *session("alpha").turns])
    again = session("beta")
    bird, _, first_find, first_search = work.call_ids()
    find, search = again.call_ids()
    with ModelServer([work, again]) as server:
        result = box.claude(server, "alpha: look for the bird")
        assert result["result"] == "done" and not result["is_error"], result
        # Deferred: named in the first request's messages, not offered as a tool.
        first = agent_requests(server)[0]
        assert "ToolSearch" in offered(first) and SEARCH not in offered(first)
        listed = json.dumps(first["body"]["messages"])
        assert DEFERRED in listed and SEARCH in listed
        # Both of alpha's searches journaled, finished, before beta looks: the earlier
        # search holds the word (its input and output), so only its exclusion keeps it out.
        calls = box.wait_for_calls(lambda c: all(
            c.get(i, {}).get("status") not in (None, "started") for i in work.call_ids()))
        assert calls[first_search]["tool"] == SEARCH, calls.get(first_search)
        assert calls[first_search]["status"] == "ok"
        plain = json.loads(box.aj("search", WORD, "--json").stdout)
        assert first_search in json.dumps(plain), plain  # the CLI's search does find it
        seen = len(server.requests)
        result = box.claude(server, "beta: look for the bird again")
        assert result["result"] == "done" and not result["is_error"], result
        # ToolSearch's keyword match puts the journal's search first, and loads its schema.
        references = [b.get("tool_name") for b in tool_result(server, find)
                      if b.get("type") == "tool_reference"]
        assert references[:1] == [SEARCH], references
        loaded = [r for r in agent_requests(server, seen) if SEARCH in offered(r)]
        assert loaded, "the search tool was never offered after ToolSearch returned it"
        schema = offered(loaded[0])[SEARCH]["input_schema"]
        assert schema["required"] == ["query"] and "query" in schema["properties"]
        # The journal's answer came back to the model: the bird call, and no search call.
        answer = text_of(tool_result(server, search))
        earlier = text_of(tool_result(server, first_search))
    assert bird in answer and WORD in answer, answer
    for asking in (first_find, first_search, find, search):  # no call made to find it
        assert asking not in answer, answer
    assert bird in earlier and first_search not in earlier, earlier
    assert box.hook_log() == ""
