"""`agent-journal mcp`: the recall tools of mcp_recall.py served over MCP on stdio.

Invariants:
- This is the only module that imports the MCP SDK (`mcp`, the optional extra
  `agent-journal[mcp]`), and only when the server starts: without the extra the command
  fails with one line naming it, and no other command pays for the SDK's import.
- What a call answers is decided by mcp_recall.py alone; here it is only carried:
  a failure a caller can cause is a tool result with `isError`, an unknown tool or
  resource is a protocol error, and an unexpected exception is a one-line error
  result, never a traceback.
- Calls are answered one at a time, in the order they arrive: the journal's writes
  take locks that are per process, so two calls of one server must not overlap.
- A line the SDK cannot read (nesting, numbers or escapes its JSON parser refuses, or
  not a JSON-RPC message) is answered with a JSON-RPC error to the id it carries: the
  SDK drops such a line without a word, and its sender would wait for ever.
- Every request read before the client closes stdin is answered before the server
  exits (a client may write its calls and close at once): the SDK cancels the calls
  still running when its input ends, so its input ends only once each request read has
  its response, or was cancelled by the client, or the SDK stopped serving.
"""

from __future__ import annotations

import sys
from typing import Any

import agent_journal
from agent_journal.agents import mcp_recall
from agent_journal.core.errors import JournalError

EXTRA = "agent-journal[mcp]"
MISSING_EXTRA = (f"the MCP server needs the optional extra {EXTRA}: "
                 f"pip install '{EXTRA}'")
SERVER_NAME = "agent-journal"


def sdk_missing() -> bool:
    from importlib.util import find_spec

    try:
        return find_spec("mcp") is None
    except (ImportError, ValueError):
        return True


# Claude Code (2.1.154 on) gives the stdio servers it starts the id of their session: the
# same id its hooks are sent, so the server's writes join the session's observations.
ENV_CLAUDE_SESSION = "CLAUDE_CODE_SESSION_ID"


def session_for(given: str | None) -> str | None:
    """The writing session: --session or $AGENT_JOURNAL_SESSION, else Claude Code's own."""
    if given is not None:
        return given
    import os

    raw = os.environ.get(ENV_CLAUDE_SESSION)
    if not raw:
        return None
    from agent_journal.capture.observation import safe_id

    return safe_id(raw)  # the hook names the session the same way


def serve(root: str | None, workspace: str, session: str | None) -> None:
    """Serve one workspace on stdin/stdout until the client closes the connection."""
    journal = mcp_recall.Journal(root, workspace, session_for(session))
    if sdk_missing():
        raise JournalError(MISSING_EXTRA)
    import anyio

    server = build_server(journal)

    async def main() -> None:
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read_stream, write_stream):
            await answer_before_eof(read_stream, write_stream, lambda r, w: server.run(
                r, w, server.create_initialization_options()))

    anyio.run(main)


async def answer_before_eof(read_stream: Any, write_stream: Any, run: Any) -> None:
    """`run(reads, writes)` (the SDK serving a connection) between the transport's streams,
    with the end of its input held back until every request read was answered.

    Requests are counted by id as they pass in, and counted off as their response (or
    error) passes out, or when the client cancels them (no response is due then).
    """
    from collections import Counter

    import anyio
    import mcp_types as types

    to_server, server_reads = anyio.create_memory_object_stream[Any](0)
    server_writes, from_server = anyio.create_memory_object_stream[Any](0)
    unanswered: Counter[str] = Counter()
    at_eof = False
    drained = anyio.Event()
    reading = anyio.CancelScope()

    def settle(request_id: Any) -> None:
        key = str(request_id)
        if unanswered[key] > 0:
            unanswered[key] -= 1
        if at_eof and not +unanswered:
            drained.set()

    async def pass_in() -> None:
        nonlocal at_eof
        with reading:
            async with to_server:
                try:
                    async with read_stream:
                        async for item in read_stream:
                            if isinstance(item, Exception):
                                # A line the SDK could not read: it drops these without a
                                # word, so the request's sender would wait for ever.
                                owed = unreadable_answer(item)
                                if owed is not None:
                                    await write_stream.send(owed)
                                continue
                            message = getattr(item, "message", None)
                            if isinstance(message, types.JSONRPCRequest):
                                unanswered[str(message.id)] += 1
                            await to_server.send(item)
                            if isinstance(message, types.JSONRPCNotification) and \
                                    message.method == "notifications/cancelled":
                                settle((message.params or {}).get("requestId"))
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return  # the SDK stopped reading: nothing more can be answered
                at_eof = True
                if not +unanswered:
                    drained.set()
                await drained.wait()  # then the SDK's input ends, with nothing in flight

    async def pass_out() -> None:
        async with write_stream, from_server:
            async for item in from_server:
                await write_stream.send(item)
                message = getattr(item, "message", None)
                if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
                    settle(message.id)
        # The SDK closed its output and its last answer passed on: no more input is
        # wanted (should the SDK have stopped before the client did).
        reading.cancel()

    async def serve() -> None:
        try:
            await run(server_reads, server_writes)
        finally:
            # The SDK closes what it was handed; closing again is harmless, and sure.
            server_reads.close()
            server_writes.close()

    async with anyio.create_task_group() as tg:
        tg.start_soon(pass_in)
        tg.start_soon(pass_out)
        tg.start_soon(serve)


PARSE_ERROR, INVALID_REQUEST = -32700, -32600


def unreadable_answer(exc: Exception) -> Any | None:
    """The JSON-RPC error owed for a line the SDK could not read (its JSON parser refuses
    what Python's accepts: nesting past 200 levels, numbers past 64 bits, lone surrogates;
    or the line is not a JSON-RPC message), to the id the line carries (null when it has
    none the reader can find), or None for a notification (nothing is owed to one)."""
    import mcp_types as types
    from mcp.shared.message import SessionMessage

    listed = getattr(exc, "errors", None)  # a pydantic ValidationError's
    errors = listed() if callable(listed) else []
    first = errors[0] if errors and isinstance(errors[0], dict) else {}
    raw = first.get("input")
    if first.get("type") == "json_invalid":
        code, request_id = PARSE_ERROR, _request_id(raw) if isinstance(raw, str) else None
        message = f"unreadable message: {first.get('msg', 'not JSON')}"
    else:
        # The message itself is the input of an error about it as a whole (its type, a
        # member it lacks); the first errors are often about one member's value.
        whole = next((e.get("input") for e in errors if isinstance(e, dict) and (
            len(e.get("loc", ())) <= 1 or (e.get("type") == "missing"
                                           and len(e.get("loc", ())) == 2))), None)
        if isinstance(whole, dict):
            notification = "method" in whole and "id" not in whole
            response = "method" not in whole and ("result" in whole or "error" in whole)
            if notification or response:
                return None  # nothing is owed to either
        code = INVALID_REQUEST
        request_id = _usable_id(whole.get("id")) if isinstance(whole, dict) else None
        message = "not a JSON-RPC request this server reads"
    error = types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(
        code=code, message=" ".join(message.split())[:300]))
    return SessionMessage(error)


def _usable_id(value: Any) -> int | str | None:
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    return None


def _request_id(text: str) -> int | str | None:
    """The top-level "id" of a JSON object's text, even when the whole does not parse
    (a value elsewhere too deep or too large for any parser): the object's members are
    walked at the first level, skipping strings and counting brackets."""
    import json

    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        pass
    else:
        return _usable_id(obj.get("id")) if isinstance(obj, dict) else None
    decoder = json.JSONDecoder()
    depth, i, n = 0, 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            try:
                key, i = decoder.raw_decode(text, i)
            except ValueError:
                return None
            if depth == 1 and key == "id":
                j = i
                while j < n and text[j] in " \t\r\n":
                    j += 1
                if j < n and text[j] == ":":
                    j += 1
                    while j < n and text[j] in " \t\r\n":
                        j += 1
                    try:
                        return _usable_id(decoder.raw_decode(text, j)[0])
                    except (ValueError, RecursionError):
                        return None
            continue
        if c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
        i += 1
    return None


def build_server(journal: mcp_recall.Journal) -> Any:
    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.shared.exceptions import MCPError

    tools = [types.Tool(name=name, description=spec["description"],
                        input_schema=spec["inputSchema"],
                        annotations=types.ToolAnnotations(read_only_hint=spec["readOnly"]))
             for name, spec in mcp_recall.TOOLS.items()]

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in mcp_recall.TOOLS:
            raise MCPError(types.INVALID_PARAMS, f"no such tool {params.name!r}; the tools are "
                           + ", ".join(mcp_recall.TOOLS))
        answer = _guarded(lambda: mcp_recall.call(journal, params.name, params.arguments))
        return types.CallToolResult(
            content=[types.TextContent(text=block) for block in answer.blocks],
            is_error=answer.is_error)

    digest_resource = types.Resource(name=mcp_recall.DIGEST_NAME, uri=mcp_recall.DIGEST_URI,
                                     description=mcp_recall.DIGEST_DESCRIPTION,
                                     mime_type="text/markdown")

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[digest_resource])

    def digest() -> str:
        try:
            return mcp_recall.digest_text(journal)
        except JournalError as exc:
            raise MCPError(types.INTERNAL_ERROR, exc.message) from None

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams
                            ) -> types.ReadResourceResult:
        if str(params.uri) != mcp_recall.DIGEST_URI:
            raise MCPError(types.INVALID_PARAMS, f"no such resource {params.uri}; the one "
                           f"resource is {mcp_recall.DIGEST_URI}")
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=mcp_recall.DIGEST_URI, mime_type="text/markdown", text=digest())])

    digest_prompt = types.Prompt(name=mcp_recall.DIGEST_NAME,
                                 description="Load the journal's digest to resume work.")

    async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[digest_prompt])

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams
                         ) -> types.GetPromptResult:
        if params.name != mcp_recall.DIGEST_NAME:
            raise MCPError(types.INVALID_PARAMS, f"no such prompt {params.name!r}; the one "
                           f"prompt is {mcp_recall.DIGEST_NAME}")
        return types.GetPromptResult(description=mcp_recall.DIGEST_DESCRIPTION, messages=[
            types.PromptMessage(role="user", content=types.TextContent(text=digest()))])

    return Server(SERVER_NAME, version=agent_journal.__version__,
                  instructions=mcp_recall.INSTRUCTIONS,
                  on_list_tools=list_tools, on_call_tool=call_tool,
                  on_list_resources=list_resources, on_read_resource=read_resource,
                  on_list_prompts=list_prompts, on_get_prompt=get_prompt)


def _guarded(run: Any) -> mcp_recall.Answer:
    try:
        answer: mcp_recall.Answer = run()
        return answer
    except Exception as exc:  # the agent gets one line; the server keeps serving
        sys.stderr.write(f"agent-journal mcp: internal error: {exc.__class__.__name__}: {exc}\n")
        return mcp_recall.Answer.error(f"internal error: {exc.__class__.__name__}: {exc}")
