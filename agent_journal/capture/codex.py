"""Codex CLI hook payloads, session files and `codex exec --json` streams, normalised.

Invariant: the same as capture.claude_code's, whose shapes these are: every dict returned has
passed the redactor and has exactly OBSERVATION_KEYS (plus `ts` and `endTs` for replays),
with None where a field does not apply; input that is not what it claims to be raises
HookPayloadError or NotATranscriptError with a one-line message; nothing here reads files.

Sources of the formats:
- Hook payloads: openai/codex `codex-rs/hooks/schema/generated/*.command.input.schema.json`
  (common `session_id`, `turn_id`, `cwd`, `model`, `transcript_path`; tool events add
  `tool_name`, `tool_use_id`, `tool_input`, `tool_response`; SessionStart has `source`,
  PreCompact/PostCompact `trigger`, Stop `last_assistant_message`). They are Claude Code's
  payloads in all that matters here, so its record, `HOOK`, is Claude Code's but for
  PostCompact (a session event, no summary) and `outcome` (the exit code is in the text).
- Session files (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`): one `{"timestamp", "type",
  "payload"}` per line (openai/codex `RolloutLine` / `RolloutItem`); tool calls are
  `response_item` payloads of type `function_call` / `custom_tool_call` / `local_shell_call`
  and their `*_output`, matched by `call_id`; an `event_msg` `turn_aborted` with reason
  `interrupted` (the user stopped the turn) is the prompt INTERRUPTED, as Claude Code
  writes its user's interrupt; a shell call keeps the `workdir` it ran in.
- `codex exec --json`: `thread.started` (thread_id), then `item.started` / `item.completed`
  events whose item is a `command_execution`, `file_change`, `mcp_tool_call`, `web_search`,
  ... (real streams in tests/data/claude-code/codex/).
"""

from __future__ import annotations

from agent_journal.capture.claude_code import (
    LIFTED,
    OUTPUT_FIELDS,
    SAID,
    SESSION_KINDS,
    TOOL_EVENTS,
)
from agent_journal.capture.claude_code import outcome as claude_code_outcome
from agent_journal.capture.hook_payload import HookFormat, HookPayloadError, parse_hook_payload
from agent_journal.capture.observation import (
    ASSISTANT,
    COMPACT,
    OBSERVATION_KEYS,
    PROMPT,
    NotATranscriptError,
    code_at,
    said_id,
)
from agent_journal.capture.redact import default_redactor
from agent_journal.capture.strictjson import StrictJSONError, loads

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re
    from collections.abc import Iterable, Iterator
    from typing import Any

    from agent_journal.capture.redact import Redactor

__all__ = ["HOOK", "HookPayloadError", "NotATranscriptError", "codex_hook_to_observation",
           "parse_codex_payload", "read_codex_session"]

# How Codex reports a shell command's end in the text a tool call returns (`shell`, and
# the unified `exec_command`): a line that starts with one of these, then the code.
_EXIT_LINE = r"(?:^|\n)(?:Exit code:|Process exited with code) (\d{1,9})\b"
_EXIT_PREFIXES = ("Exit code: ", "Process exited with code ")
_RUNNING = "Process running with session ID "
# Item types of an exec stream that are tool calls, and the tool name the hooks give them.
_STREAM_TOOLS = {"command_execution": "Bash", "file_change": "apply_patch",
                 "mcp_tool_call": None, "web_search": "web_search"}
_SHELL_TOOLS = frozenset({"shell", "container.exec", "exec_command", "local_shell"})
# A turn the user aborted is written as Claude Code writes its user's interrupt.
INTERRUPTED = "[Request interrupted by user]"


def outcome(event: str, payload: dict[str, Any], observation: dict[str, Any]) -> None:
    """How a Codex tool event says the call ended: as Claude Code's does, and a command's
    exit code from the text its PostToolUse hands over (`_EXIT_LINE`), which decides the
    status (the payload has no exit code of its own); a command still running when its
    call returned has not ended (`started`)."""
    claude_code_outcome(event, payload, observation)
    if event == "PostToolUse":
        output = observation["output"]
        code = _exit_code(output)
        if code is not None:
            observation["exitCode"] = code
            observation["status"] = "ok" if code == 0 else "error"
        elif isinstance(output, str) and _RUNNING in output[:400]:
            # The command outlived its call: it has not ended, whatever the call did. The
            # Stop hook tells how it ended, from the rollout (rollout_outcomes).
            observation["status"] = "started"


# Codex's payloads are Claude Code's in all that matters here; it has no PostCompact
# summary, and its PostCompact is a session event of its own.
HOOK = HookFormat(
    tool_events=TOOL_EVENTS, output_fields=OUTPUT_FIELDS, lifted=LIFTED,
    session_kinds={**SESSION_KINDS, "PostCompact": "post_compact"},
    said={k: v for k, v in SAID.items() if k != "PostCompact"}, outcome=outcome)


def parse_codex_payload(text: str | bytes) -> dict[str, Any]:
    return parse_hook_payload(text)


def codex_hook_to_observation(payload: dict[str, Any], redactor: Redactor | None = None
                              ) -> dict[str, Any]:
    """One Codex hook payload as a redacted observation dict (keys: OBSERVATION_KEYS)."""
    return HOOK.observation(payload, redactor)


def read_codex_session(lines: Iterable[str | bytes], redactor: Redactor | None = None
                       ) -> Iterator[dict[str, Any]]:
    """Replay a Codex session file or exec stream's tool calls, one dict per call.

    The format is told by the first record. Calls are yielded when they finish; calls with
    no end by the end of the input follow with status "started". Raises NotATranscriptError
    at the first line that is not a record of that format.
    """
    redact = (redactor or default_redactor()).redact_value
    records = _records(lines)
    first = next(records, None)
    if first is None:
        raise NotATranscriptError("not a Codex session: the file is empty")
    number, record = first
    if "payload" in record and isinstance(record.get("timestamp"), str):
        replay = _rollout
    elif isinstance(record.get("type"), str) and "." in record["type"]:
        replay = _stream
    else:
        raise NotATranscriptError(
            f"not a Codex session: line {number} is neither a session-file record "
            '({"timestamp", "type", "payload"}) nor a `codex exec --json` event')
    seen: dict[tuple[str, str], int] = {}
    for call in replay(_chain(first, records)):
        observation = redact(call)
        if observation["kind"] != "tool_call":
            # What was said is known by its redacted text, as the hook and Claude Code's
            # import know it (said_id); a text said again is numbered.
            key = (observation["kind"], observation["text"])
            seen[key] = seen.get(key, 0) + 1
            observation["id"] = said_id(key[0], observation["session"], key[1], None,
                                        seen[key])
        yield observation


def _records(lines: Iterable[str | bytes]) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            record = loads(raw, lone_surrogates="replace")
        except StrictJSONError as exc:
            raise NotATranscriptError(
                f"not a Codex session: line {number} is not JSON ({exc})") from None
        if not isinstance(record, dict) or not isinstance(record.get("type"), str):
            raise NotATranscriptError(
                f'not a Codex session: line {number} is not an object with a "type"')
        yield number, record


def _chain(first: tuple[int, dict[str, Any]], rest: Iterator[tuple[int, dict[str, Any]]]
           ) -> Iterator[tuple[int, dict[str, Any]]]:
    yield first
    yield from rest


def _call(call_id: str, session: str | None, tool: str | None, tool_input: Any,
          output: Any, status: str, exit_code: int | None, context: dict[str, Any],
          ts: str | None, end_ts: str | None) -> dict[str, Any]:
    return {"id": call_id, "kind": "tool_call", "session": session, "tool": tool,
            "callId": call_id, "input": tool_input, "output": output, "status": status,
            "durationMs": None, "exitCode": exit_code, "text": None, "data": context, "ts": ts,
            "endTs": end_ts}


# -- session files ----------------------------------------------------------------------

def _rollout(records: Iterator[tuple[int, dict[str, Any]]]) -> Iterator[dict[str, Any]]:
    session: str | None = None
    context: dict[str, Any] = {"agent": "codex"}
    pending: dict[str, tuple[str | None, Any, str | None]] = {}
    done: set[str] = set()
    said = _Said()
    from agent_journal.capture.codex_exec import RunningCommands, status_of

    running = RunningCommands()
    for number, record in records:
        payload = record.get("payload")
        if not isinstance(payload, dict) or not isinstance(record.get("timestamp"), str):
            raise NotATranscriptError(f"not a Codex session file: line {number} lacks "
                                      "timestamp or payload")
        ts = record["timestamp"]
        if record["type"] == "session_meta":
            session = _str(payload.get("id")) or session
            context.update({k: payload[k] for k in ("cwd", "cli_version", "originator")
                            if isinstance(payload.get(k), str)})
            git = payload.get("git")
            if isinstance(git, dict) and _str(git.get("branch")):
                context["gitBranch"] = git["branch"]
            if isinstance(git, dict) and _str(git.get("repository_url")):
                context["gitRepository"] = git["repository_url"]
            continue
        if record["type"] == "compacted":
            said.add(COMPACT, payload.get("message"), ts, "compacted")
            continue
        if record["type"] == "event_msg":
            if payload.get("type") == "turn_aborted" and payload.get("reason") == "interrupted":
                # The user stopped the agent mid-turn: the same event as Claude Code's
                # interrupt, so it is written as Claude Code writes that one.
                said.add(PROMPT, INTERRUPTED, ts, "aborted")
                continue
            said.add_event(payload, ts)
            continue
        if record["type"] != "response_item":
            continue
        kind = payload.get("type")
        if kind == "message":
            said.add_message(payload, ts)
            continue
        call_id = _str(payload.get("call_id"))
        if call_id is None or call_id in done:
            continue
        if kind in ("function_call", "custom_tool_call", "local_shell_call"):
            if call_id not in pending:
                pending[call_id] = (*_tool_and_input(payload), ts)
        elif kind in ("function_call_output", "custom_tool_call_output"):
            done.add(call_id)
            tool, tool_input, started = pending.pop(call_id, (None, None, ts))
            output, code = _output(payload.get("output"))
            call = _call(call_id, session, tool, tool_input, output, status_of(code), code,
                         dict(context), started, ts)
            yield from running.step(call, _raw_output(payload.get("output"))[0])
    for call_id, (tool, tool_input, started) in pending.items():
        yield _call(call_id, session, tool, tool_input, None, "started", None, dict(context),
                    started, None)
    yield from running.unfinished()
    yield from said.observations(session, context)


# Text Codex puts in a user message on its own (the environment, AGENTS.md, the user's
# instructions file): context for the model, not the user's words.
_INJECTED = (r"^\s*(?:<(environment_context|user_instructions|user_shell_command|"
             r"turn_aborted)>|# AGENTS\.md instructions)")
_compiled: dict[str, re.Pattern[str]] = {}


def _pattern(source: str) -> re.Pattern[str]:
    """`source` compiled on first use: `re` costs a hook that never needs it milliseconds."""
    found = _compiled.get(source)
    if found is None:
        import re

        found = _compiled[source] = re.compile(source)
    return found


class _Said:
    """What a session file says the user and the agent said, in order.

    Codex writes each message twice, as a `message` response item and as a `user_message`
    / `agent_message` event; the response items are the record, and the events stand in
    only for a role that has no response item at all (older or trimmed files).
    """

    def __init__(self) -> None:
        self.items: list[tuple[str, str, str, str]] = []  # (source, kind, text, ts)
        self.roles: set[str] = set()

    def add(self, kind: str, text: Any, ts: str, source: str) -> None:
        if isinstance(text, str) and text.strip():
            self.items.append((source, kind, text.strip(), ts))

    def add_message(self, payload: dict[str, Any], ts: str) -> None:
        role = payload.get("role")
        if role not in ("user", "assistant"):
            return  # developer and system messages are Codex's own instructions
        content = payload.get("content")
        parts = [b["text"] for b in content if isinstance(b, dict)
                 and b.get("type") in ("input_text", "output_text", "text")
                 and isinstance(b.get("text"), str)] if isinstance(content, list) else []
        text = "\n\n".join(p.strip() for p in parts if p.strip())
        if role == "user" and _pattern(_INJECTED).match(text):
            return
        self.roles.add(role)
        self.add(PROMPT if role == "user" else ASSISTANT, text, ts, "item")

    def add_event(self, payload: dict[str, Any], ts: str) -> None:
        kind = {"user_message": PROMPT, "agent_message": ASSISTANT}.get(
            str(payload.get("type")))
        if kind is not None and not (kind == PROMPT and _pattern(_INJECTED).match(
                str(payload.get("message")))):
            self.add(kind, payload.get("message"), ts, "event")

    def observations(self, session: str | None, context: dict[str, Any]
                     ) -> Iterator[dict[str, Any]]:
        for source, kind, text, ts in self.items:
            role = "user" if kind == PROMPT else "assistant"
            if source == "event" and kind != COMPACT and role in self.roles:
                continue
            observation = dict.fromkeys(OBSERVATION_KEYS)
            observation.update(kind=kind, session=session, text=text, data=dict(context),
                               ts=ts, endTs=None)
            yield observation  # its id is made from the redacted text (read_codex_session)


def _tool_and_input(payload: dict[str, Any]) -> tuple[str | None, Any]:
    name = _str(payload.get("name"))
    if payload.get("type") == "local_shell_call":
        action = payload.get("action")
        command = action.get("command") if isinstance(action, dict) else None
        shell: dict[str, Any] = {"command": _shell_text(command)}
        if isinstance(action, dict) and isinstance(action.get("working_directory"), str):
            shell["workdir"] = action["working_directory"]
        return "Bash", shell
    raw = payload.get("arguments", payload.get("input"))
    tool_input: Any = raw
    if isinstance(raw, str):
        import json

        try:
            tool_input = json.loads(raw)
        except ValueError:
            tool_input = raw  # apply_patch's input is the patch text itself
    if name in _SHELL_TOOLS and isinstance(tool_input, dict):
        command = tool_input.get("command", tool_input.get("cmd"))
        return "Bash", {**tool_input, "command": _shell_text(command)}
    return name, tool_input


def _shell_text(command: Any) -> Any:
    """A command given as argv (["bash", "-lc", "ls"]) as the one line a person would type."""
    if isinstance(command, list) and all(isinstance(w, str) for w in command):
        if len(command) == 3 and command[1] in ("-lc", "-c"):
            return command[2]
        import shlex

        return " ".join(shlex.quote(w) for w in command)
    return command


# What Codex's exec_command puts before a command's own output: a chunk id, the wall time,
# the exit code, a token count, then `Output:`.
_EXEC_HEADER = r"\AChunk ID: \S+\n(?:[^\n]*\n){0,6}?Output:\n"


def _without_exec_header(text: str) -> str:
    """A command's output without exec_command's header (its exit code is read before)."""
    return _pattern(_EXEC_HEADER).sub("", text, count=1) if text.startswith("Chunk ID: ") \
        else text


def _output(value: Any) -> tuple[str | None, int | None]:
    """A call's output as text, without exec_command's header, and the exit code it
    reports, if any."""
    text, code = _raw_output(value)
    return (None if text is None else _without_exec_header(text)), code


def _raw_output(value: Any) -> tuple[str | None, int | None]:
    import json

    if isinstance(value, dict):
        text = value.get("content", value.get("output"))
        return (text if isinstance(text, str) else json.dumps(value, ensure_ascii=False),
                _exit_code(text))
    if not isinstance(value, str):
        return (None if value is None else json.dumps(value, ensure_ascii=False)), None
    # Older Codex wrote {"output": ..., "metadata": {"exit_code": N}} as a JSON string.
    if value.startswith("{"):
        try:
            decoded = json.loads(value)
        except ValueError:
            decoded = None
        if isinstance(decoded, dict) and isinstance(decoded.get("output"), str):
            meta = decoded.get("metadata")
            code = meta.get("exit_code") if isinstance(meta, dict) else None
            return decoded["output"], code if isinstance(code, int) else None
    return value, _exit_code(value)


def rollout_outcomes(lines: Iterable[str | bytes]) -> dict[str, dict[str, Any]]:
    """What a rollout's lines say of the calls they hold: call id -> {"tool", "output",
    "exitCode"} for every call whose output is among them (a function call's or a custom
    tool's, such as apply_patch). Lines that are not whole JSON records are skipped (a
    tail read from the middle of a file starts with part of one). A command that outlived
    its call is told whole once it exited (codex_exec: every chunk its polls returned,
    its exit code; `"told": True`), and nothing while it still runs."""
    import json

    from agent_journal.capture.codex_exec import RunningCommands

    names: dict[str, tuple[str | None, Any]] = {}
    found: dict[str, dict[str, Any]] = {}
    running = RunningCommands()
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        payload = record.get("payload") if isinstance(record, dict) else None
        if not isinstance(payload, dict) or not isinstance(payload.get("call_id"), str):
            continue
        kind, call_id = payload.get("type"), payload["call_id"]
        if kind in ("function_call", "custom_tool_call") and isinstance(payload.get("name"),
                                                                        str):
            # Only a poll's input is read (its session id): the rest need their names.
            name = payload["name"]
            names[call_id] = (name, _tool_and_input(payload)[1] if name == "write_stdin"
                              else None)
        elif kind in ("function_call_output", "custom_tool_call_output"):
            name, tool_input = names.get(call_id, (None, None))
            raw = payload.get("output")
            text, code = _output(raw)
            call = {"id": call_id, "tool": "Bash" if name in _SHELL_TOOLS else name,
                    "input": tool_input, "output": text, "exitCode": code, "endTs": None}
            for told in running.step(call, _raw_output(raw)[0]):
                found[told["id"]] = {"tool": names.get(told["id"], (None,))[0],
                                     "output": told["output"], "exitCode": told["exitCode"],
                                     "told": told["id"] != call_id}
    return found


def _exit_code(text: Any) -> int | None:
    """What `_EXIT_LINE` finds first in the text's first 4096 characters, read without the
    regex (`re` costs the hook milliseconds to import): at the start of the text or of a
    line, a prefix, then the code."""
    if not isinstance(text, str):
        return None
    window = text[:4096]
    start = 0
    while True:
        for prefix in _EXIT_PREFIXES:
            if window.startswith(prefix, start):
                code = code_at(window, start + len(prefix))
                if code is not None:
                    return code
        start = window.find("\n", start) + 1
        if not start:
            return None


# -- exec --json streams ----------------------------------------------------------------

def _stream(records: Iterator[tuple[int, dict[str, Any]]]) -> Iterator[dict[str, Any]]:
    thread: str | None = None
    pending: dict[str, dict[str, Any]] = {}
    done: set[str] = set()
    said: list[str] = []
    for _, record in records:
        kind = record["type"]
        if kind == "thread.started":
            thread = _str(record.get("thread_id")) or thread
            continue
        item = record.get("item")
        if kind == "item.completed" and isinstance(item, dict) and \
                item.get("type") == "agent_message" and _str(item.get("text")):
            said.append(item["text"].strip())
            continue
        if kind not in ("item.started", "item.updated", "item.completed") or \
                not isinstance(item, dict) or _str(item.get("type")) not in _STREAM_TOOLS:
            continue
        item_id = _str(item.get("id"))
        if item_id is None:
            continue
        # Item ids (item_0, item_1, ...) restart with every thread: the thread makes them one.
        call_id = f"{thread}:{item_id}" if thread else item_id
        if call_id in done:
            continue
        if kind != "item.completed":
            pending.setdefault(call_id, item)
            continue
        done.add(call_id)
        pending.pop(call_id, None)
        yield _stream_call(call_id, thread, item, finished=True)
    for call_id, item in pending.items():
        yield _stream_call(call_id, thread, item, finished=False)
    # A stream has no timestamps: its messages take the time of the import, in order.
    for text in said:
        observation = dict.fromkeys(OBSERVATION_KEYS)
        observation.update(kind=ASSISTANT, session=thread, text=text,
                           data={"agent": "codex"}, ts=None, endTs=None)
        yield observation


def _stream_call(call_id: str, thread: str | None, item: dict[str, Any], *, finished: bool
                 ) -> dict[str, Any]:
    kind = item["type"]
    tool = _STREAM_TOOLS[kind]
    output: Any = None
    code: int | None = None
    if kind == "command_execution":
        tool_input: Any = {"command": _shell_text(item.get("command"))}
        output = item.get("aggregated_output")
        raw_code = item.get("exit_code")
        code = raw_code if isinstance(raw_code, int) and not isinstance(raw_code, bool) else None
    elif kind == "file_change":
        tool_input = {"changes": item.get("changes")}
    elif kind == "mcp_tool_call":
        tool = f"mcp__{item.get('server')}__{item.get('tool')}"
        tool_input = item.get("arguments")
        output = item.get("result") if item.get("error") is None else item.get("error")
    else:
        tool_input = {"query": item.get("query")}
    if not finished:
        status = "started"
    elif item.get("status") == "failed" or code not in (None, 0):
        status = "error"
    else:
        status = "ok"
    if output is not None and not isinstance(output, str):
        import json

        output = json.dumps(output, ensure_ascii=False)
    return _call(call_id, thread, tool, tool_input, output if finished else None, status,
                 code if finished else None, {"agent": "codex", "item": item.get("id")},
                 None, None)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
