"""A scripted stand-in model on 127.0.0.1 for the real agent clients (issue 28).

It speaks the two streamed APIs the clients use, with just enough of each for a headless
session: Anthropic's Messages API (`POST /v1/messages`, server-sent events; Claude Code)
and OpenAI's Responses API (`POST /v1/responses`, server-sent events; Codex). Every
request body is recorded (`requests`), so a test reads exactly what the model was given:
the SessionStart context a hook injected, the tools offered, the tool results.

The replies follow a script and no state: a `Script` names a marker (the word a user's
prompt begins with; context a client or hook adds, in tagged blocks, is not the prompt)
and its turns; each turn is a list of tool calls or a final text. Which turn to answer is
read off the conversation the request carries (the turns the model already took since
the prompt that begins with the marker), so a retried request, a
side request or a resumed session gets the same answer it would in a fresh run. A
request that matches no script (the clients' own side queries: titles, summaries,
safety checks) gets a short plain text.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Call:
    """One tool call the model makes: the client's tool `name` and its `input`.

    `raw`, for Codex's freeform tools (apply_patch), is the text input itself; `id` is
    made from the script's marker and the call's position unless given."""

    name: str
    input: dict[str, Any] = field(default_factory=dict)
    id: str | None = None
    raw: str | None = None


Turn = Sequence[Call] | str  # tool calls, or the final text that ends the session's turn


@dataclass
class Script:
    marker: str
    turns: list[Turn]

    def call_ids(self, prefix: str = "toolu_") -> list[str]:
        """The ids the server gives the script's calls (Anthropic's `toolu_`, OpenAI's
        `call_`), in order."""
        found = []
        for t, turn in enumerate(self.turns):
            if isinstance(turn, str):
                continue
            found += [call_id(self.marker, t, c, call, prefix) for c, call in enumerate(turn)]
        return found


def call_id(marker: str, turn: int, index: int, call: Call, prefix: str = "toolu_") -> str:
    return call.id or f"{prefix}{marker}_{turn}_{index}"


FALLBACK_TEXT = "ok"


class ModelServer:
    """`with ModelServer([Script(...), ...]) as server:` serves on server.base_url."""

    def __init__(self, scripts: Sequence[Script] = (), *,
                 on_request: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.scripts = list(scripts)
        self.requests: list[dict[str, Any]] = []
        self.on_request = on_request
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                owner._record(self, None)
                path = self.path.split("?")[0]
                if path.endswith("/models"):
                    self._json({"object": "list", "data": [], "models": []})
                else:
                    self._json({}, 404)

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"_unparsed": raw.decode("utf-8", "replace")}
                owner._record(self, body)
                path = self.path.split("?")[0]
                if path.endswith("/messages/count_tokens"):
                    self._json({"input_tokens": 100})
                elif path.endswith("/messages"):
                    self._sse(owner._anthropic(body))
                elif path.endswith("/responses"):
                    self._sse(owner._openai(body))
                else:
                    self._json({}, 404)

            def _json(self, value: Any, status: int = 200) -> None:
                data = json.dumps(value).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _sse(self, events: list[tuple[str, dict[str, Any]]]) -> None:
                data = b"".join(f"event: {name}\ndata: {json.dumps(value)}\n\n".encode()
                                for name, value in events)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                self.wfile.flush()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    # -- running ------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> ModelServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _record(self, handler: BaseHTTPRequestHandler, body: Any) -> None:
        entry = {"method": handler.command, "path": handler.path, "body": body,
                 "at": time.monotonic()}
        with self._changed:
            self.requests.append(entry)
            self._changed.notify_all()
        if self.on_request is not None:
            self.on_request(entry)

    def wait_for(self, predicate: Callable[[list[dict[str, Any]]], bool],
                 timeout: float = 120.0) -> bool:
        """Wait until `predicate(requests)` holds (True) or `timeout` passes (False)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate(self.requests):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
        return True

    # -- choosing the turn --------------------------------------------------------------

    def _script_for(self, prompt: str) -> Script | None:
        for script in self.scripts:
            if prompt.lstrip().startswith(script.marker):
                return script
        return None

    def _turn(self, prompts: list[tuple[str, int]]) -> tuple[Script, int] | None:
        """(script, turn) for the newest prompt, from (prompt text, model turns taken
        since it) in conversation order; None when it begins with no script's marker
        (a client's own request in the conversation, such as a compaction's)."""
        if not prompts:
            return None
        text, taken = prompts[-1]
        script = self._script_for(text)
        if script is None:
            return None
        return script, min(taken, len(script.turns) - 1)

    # -- Anthropic Messages -------------------------------------------------------------

    def _anthropic(self, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        found = None
        if body.get("tools"):  # the agent's own loop; side queries offer no tools
            found = self._turn(anthropic_prompts(body.get("messages") or []))
        return self._reply(found, body.get("model") or "claude-stand-in", anthropic_stream)

    # -- OpenAI Responses ---------------------------------------------------------------

    def _openai(self, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        found = self._turn(openai_prompts(body.get("input") or []))
        return self._reply(found, body.get("model") or "gpt-stand-in", openai_stream, "call_")

    @staticmethod
    def _reply(found: Any, model: str, stream: Any, prefix: str = "toolu_"
               ) -> list[tuple[str, dict[str, Any]]]:
        """The scripted turn `found` (or the fallback text) as one API's stream: its text,
        or its tool calls with ids the client hands back (call_id, `prefix`)."""
        if found is None:
            return stream(model, FALLBACK_TEXT, [])
        script, t = found
        turn = script.turns[t]
        if isinstance(turn, str):
            return stream(model, turn, [])
        return stream(model, None, [(call_id(script.marker, t, c, call, prefix), call)
                                    for c, call in enumerate(turn)])


# -- reading a conversation -------------------------------------------------------------

def _text_of(content: Any) -> str:
    """What the user typed: the last text block that is not context the client or a hook
    added (those come as tagged blocks, `<system-reminder>`, `<environment_context>`...)."""
    blocks = [content] if isinstance(content, str) else [
        b.get("text", "") for b in content if isinstance(b, dict)
        and b.get("type") in ("text", "input_text")] if isinstance(content, list) else []
    typed = [b for b in blocks if isinstance(b, str) and not b.lstrip().startswith("<")]
    return typed[-1] if typed else ""


def anthropic_prompts(messages: list[dict[str, Any]]) -> list[tuple[str, int]]:
    """Each user message that carries text (a prompt, not only tool results), with the
    number of assistant messages after it."""
    found: list[list[Any]] = []
    for message in messages:
        if message.get("role") == "assistant":
            if found:
                found[-1][1] += 1
            continue
        if message.get("role") != "user":
            continue  # Claude Code also sends its environment as a "system" message
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks):
            continue
        text = _text_of(content)
        if text:  # a message of context alone (a reminder the client added) is no prompt
            found.append([text, 0])
    return [(text, n) for text, n in found]


def openai_prompts(items: list[dict[str, Any]]) -> list[tuple[str, int]]:
    """Each user message, with the number of model turns (runs of calls or a message)
    after it."""
    found: list[list[Any]] = []
    last_was_model = False
    for item in items:
        kind = item.get("type", "message")
        role = item.get("role")
        if kind == "message" and role == "user":
            text = _text_of(item.get("content"))
            if text:  # <environment_context> and the like are no prompt
                found.append([text, 0])
                last_was_model = False
        elif kind in ("function_call", "custom_tool_call", "local_shell_call") or (
                kind == "message" and role == "assistant"):
            if found and not last_was_model:
                found[-1][1] += 1
            last_was_model = True
        elif kind in ("function_call_output", "custom_tool_call_output"):
            last_was_model = False
    return [(text, n) for text, n in found]


# -- the streams ------------------------------------------------------------------------

def anthropic_stream(model: str, text: str | None, calls: list[tuple[str, Call]]
                     ) -> list[tuple[str, dict[str, Any]]]:
    usage = {"input_tokens": 100, "output_tokens": 1, "cache_creation_input_tokens": 0,
             "cache_read_input_tokens": 0}
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {
        "type": "message_start",
        "message": {"id": f"msg_{time.monotonic_ns()}", "type": "message",
                    "role": "assistant", "model": model, "content": [], "stop_reason": None,
                    "stop_sequence": None, "usage": usage}})]
    index = 0
    if text is not None:
        events += [
            ("content_block_start", {"type": "content_block_start", "index": index,
                                     "content_block": {"type": "text", "text": ""}}),
            ("content_block_delta", {"type": "content_block_delta", "index": index,
                                     "delta": {"type": "text_delta", "text": text}}),
            ("content_block_stop", {"type": "content_block_stop", "index": index})]
        index += 1
    for ident, call in calls:
        events += [
            ("content_block_start", {"type": "content_block_start", "index": index,
                                     "content_block": {"type": "tool_use", "id": ident,
                                                       "name": call.name, "input": {}}}),
            ("content_block_delta", {"type": "content_block_delta", "index": index,
                                     "delta": {"type": "input_json_delta",
                                               "partial_json": json.dumps(call.input)}}),
            ("content_block_stop", {"type": "content_block_stop", "index": index})]
        index += 1
    events += [
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": "tool_use" if calls else "end_turn",
                                     "stop_sequence": None},
                           "usage": {"output_tokens": 10}}),
        ("message_stop", {"type": "message_stop"})]
    return events


def openai_stream(model: str, text: str | None, calls: list[tuple[str, Call]]
                  ) -> list[tuple[str, dict[str, Any]]]:
    rid = f"resp_{time.monotonic_ns()}"
    response: dict[str, Any] = {"id": rid, "object": "response", "model": model,
                                "status": "in_progress", "output": []}
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"type": "response.created", "response": response})]
    output: list[dict[str, Any]] = []
    if text is not None:
        output.append({"type": "message", "id": f"msg_{rid}", "role": "assistant",
                       "status": "completed",
                       "content": [{"type": "output_text", "text": text, "annotations": []}]})
    for ident, call in calls:
        if call.raw is not None:
            output.append({"type": "custom_tool_call", "id": f"ctc_{ident}", "call_id": ident,
                           "name": call.name, "input": call.raw, "status": "completed"})
        else:
            output.append({"type": "function_call", "id": f"fc_{ident}", "call_id": ident,
                           "name": call.name, "arguments": json.dumps(call.input),
                           "status": "completed"})
    for i, item in enumerate(output):
        events.append(("response.output_item.added",
                       {"type": "response.output_item.added", "output_index": i,
                        "item": item}))
        events.append(("response.output_item.done",
                       {"type": "response.output_item.done", "output_index": i,
                        "item": item}))
    done = dict(response, status="completed", output=output,
                usage={"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
                       "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0},
                       "total_tokens": 110})
    events.append(("response.completed", {"type": "response.completed", "response": done}))
    return events
