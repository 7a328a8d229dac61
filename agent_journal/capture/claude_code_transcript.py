"""Claude Code session transcripts, replayed as observation dicts.

Invariant: the same as capture.claude_code's: every dict this module returns has passed
through the redactor, so no caller can persist a Claude Code transcript without redaction;
every dict has exactly the keys of OBSERVATION_KEYS plus `ts` and `endTs`, with None where a
field does not apply. Parsing is strict (see strictjson), input that is not a transcript
raises NotATranscriptError with a one-line message, and nothing here reads files: callers
pass lines.
"""

from __future__ import annotations

from agent_journal.capture.claude_code import exit_code as _exit_code
from agent_journal.capture.observation import (
    ASSISTANT,
    COMPACT,
    OBSERVATION_KEYS,
    PROMPT,
    SESSION_EVENT,
    SUBAGENT,
    NotATranscriptError,
    said_id,
)
from agent_journal.capture.observation import json_type as _json_type
from agent_journal.capture.observation import str_or_none as _str_or_none
from agent_journal.capture.redact import default_redactor
from agent_journal.capture.strictjson import StrictJSONError, loads

# Annotations only: typing costs milliseconds to import.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from typing import Any

    from agent_journal.capture.redact import Redactor

__all__ = ["AWAY_SUMMARY", "NotATranscriptError", "read_transcript"]

# Transcript record fields worth keeping as context on each replayed call.
_TRANSCRIPT_CONTEXT = ("cwd", "gitBranch", "version", "isSidechain", "agentId")


def read_transcript(
    lines: Iterable[str | bytes], redactor: Redactor | None = None, *,
    conversation: bool = False,
) -> Iterator[dict[str, Any]]:
    """Replay a transcript's tool calls as redacted observation dicts, one per tool_use.

    `lines` are the JSONL lines of a `~/.claude/projects/<dir>/<session>.jsonl` file (or a
    subagent's `<session>/subagents/agent-<id>.jsonl`), in file order. Each call is yielded
    when its tool_result arrives: status "error" when the result says is_error, else "ok";
    `ts` is the tool_use record's timestamp and `endTs` the tool_result record's. Calls with no
    result by the end (an interrupted or still-running session) follow, status "started",
    output and endTs None. A tool_use id met again (a resumed session repeating history) is
    replayed once.

    Raises NotATranscriptError at the first line that is not a transcript record, or at the end
    if no line carried a session id. A final line that is cut off mid-write (a live file) is
    ignored when earlier lines were valid. Observations yielded before an error are sound.

    With `conversation`, what the session said follows the calls (see `_Conversation`):
    prompts, assistant messages, compaction summaries, meta messages and subagent results,
    with id `said_id(...)`, `text`, and `data` the record's context.
    """
    redact = (redactor or default_redactor()).redact_value
    said = _Conversation() if conversation else None
    pending: dict[str, dict[str, Any]] = {}
    done: set[str] = set()
    recognised = False
    deferred_error: str | None = None
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        if deferred_error is not None:
            raise NotATranscriptError(deferred_error)
        try:
            record = loads(raw, lone_surrogates="replace")
        except StrictJSONError as exc:
            message = f"not a Claude Code transcript: line {number} is not JSON ({exc})"
            complete = raw.endswith(b"\n") if isinstance(raw, bytes) else raw.endswith("\n")
            if recognised and not complete:
                # Possibly the last line of a file still being written: fail only if more
                # lines follow it.
                deferred_error = message
                continue
            raise NotATranscriptError(message) from None
        kind = _check_record(record, number)
        if isinstance(record.get("sessionId"), str) or (
            kind == "summary" and "leafUuid" in record
        ):
            recognised = True
        if said is not None:
            said.add(record, kind)
        if kind == "assistant":
            _collect_tool_uses(record, pending, done)
        elif kind == "user":
            for observation in _finish_tool_uses(record, pending, done):
                yield _redacted_call(redact, observation)
    if not recognised:
        raise NotATranscriptError(
            "not a Claude Code transcript: no record carries a sessionId "
            "(expected the JSONL of a ~/.claude/projects session)"
        )
    for call_id, started in pending.items():
        yield _redacted_call(redact, _call(call_id, started, None, None, "started", None))
    if said is not None:
        yield from said.observations(redact)


# Text blocks Claude Code adds to a user turn on its own (the file open in the IDE, system
# reminders): context, not the user's words.
_INJECTED_TAGS = ("ide_opened_file", "ide_selection", "system-reminder")
# The fixed notice Claude Code writes before a local command's output; it says nothing.
_CAVEAT = "<local-command-caveat>"
AWAY_SUMMARY = "away_summary"
_LOCAL_OUTPUT = "<local-command-stdout>"
_CLIENT_NOTES = (_LOCAL_OUTPUT, "<task-notification>", "<bash-notification>",
                 "<local-command-stderr>")


class _Conversation:
    """What a transcript's records said, and which branch of the conversation is current.

    A rewind (or an edited prompt) starts a new branch from an earlier record: records
    chain by `parentUuid` (across a compaction by `logicalParentUuid`, or, when that is
    missing or names no record of the file, to the last turn before the compaction
    boundary), and the current
    branch is the chain that ends at the last user or assistant record of the file.
    What was said off that branch is kept, marked `"branch": "abandoned"` in `data`.
    A sidechain's (subagent's) last assistant message is its result (`subagent_result`).
    Records without a timestamp (`summary` records) take the file's first timestamp.
    """

    def __init__(self) -> None:
        self.items: list[tuple[dict[str, Any], str, str]] = []
        self.parents: dict[str, str | None] = {}
        # compaction boundary -> the record written before it: its parent when its logical
        # parent names no record of the file (Claude Code does not always write that one)
        self.before_boundary: dict[str, str | None] = {}
        self.leaf: str | None = None
        self.previous: str | None = None
        self.first_ts: str | None = None
        self.session: str | None = None
        self.prompts: set[str] = set()  # the texts of the prompts recorded as turns

    def add(self, record: dict[str, Any], kind: str) -> None:
        uuid = record.get("uuid")
        if isinstance(uuid, str):
            parent = record.get("parentUuid")
            if parent is None:
                parent = record.get("logicalParentUuid")
            if record.get("subtype") == "compact_boundary":
                # A compaction continues the conversation, never rewinds it: without its
                # logical parent it follows the last turn before it (not a `progress`
                # record, whose own parent may be the logical parent Claude Code never
                # wrote).
                self.before_boundary[uuid] = self.leaf or self.previous
                if parent is None:
                    parent = self.leaf or self.previous
            self.parents[uuid] = parent if isinstance(parent, str) else None
            self.previous = uuid
            if kind in ("user", "assistant"):
                self.leaf = uuid
        if self.first_ts is None and isinstance(record.get("timestamp"), str):
            self.first_ts = record["timestamp"]
        if self.session is None and isinstance(record.get("sessionId"), str):
            self.session = record["sessionId"]
        if kind == "summary" and isinstance(record.get("summary"), str):
            self.items.append((record, COMPACT, record["summary"]))
        elif kind == "assistant":
            text = _texts(record["message"].get("content"), user=False)
            if text:
                self.items.append((record, ASSISTANT, text))
        elif kind == "user":
            self._user(record)
        elif kind == "queue-operation" and record.get("operation") == "enqueue":
            self._queued(record)
        elif kind == "system" and record.get("subtype") == AWAY_SUMMARY and isinstance(
                record.get("content"), str) and record["content"].strip():
            # Claude Code's recap of the session, written when the user comes back to it.
            self.items.append((record, COMPACT, record["content"].strip()))

    def _user(self, record: dict[str, Any]) -> None:
        text = _texts(record["message"].get("content"), user=True)
        if not text or text.startswith(_CAVEAT):
            return
        command = None
        if text.startswith("<"):  # the client's own records; loaded only when one is here
            from agent_journal.capture.client_turns import slash_command

            command = slash_command(text)
        if record.get("isCompactSummary") is True:
            said = COMPACT
        elif command is not None:
            # `/clear` is something the session did; `/review 183` something the user asked.
            text, said = command, PROMPT if " " in command else SESSION_EVENT
            self.prompts.add(text)  # its queued copy, if any, is not said again
        elif record.get("isMeta") is True or text.startswith(_CLIENT_NOTES):
            # Written into the user's turn by the client (a local command's output, a
            # background task's notification): not what the user asked.
            from agent_journal.capture.client_turns import local_output

            note = local_output(text)
            if note is None:
                return
            text, said = note, SESSION_EVENT
        else:
            said = PROMPT
        if said == PROMPT:
            self.prompts.add(text)
        self.items.append((record, said, text))

    def _queued(self, record: dict[str, Any]) -> None:
        """A prompt the user typed while the agent worked: Claude Code queues it and hands
        it over inside a tool result, so the queue is where its words are. A queued
        background task (a JSON object) and a prompt also recorded as a turn are not; a
        queued slash command alone (`/model`, `/clear`) is something the session did."""
        text = record.get("content")
        if not isinstance(text, str) or not text.strip() or text.lstrip().startswith("{"):
            return
        text = text.strip()
        bare_command = text.startswith("/") and " " not in text and "\n" not in text
        self.items.append((record, SESSION_EVENT if bare_command else PROMPT, text))

    def current(self) -> set[str]:
        seen: set[str] = set()
        node = self.leaf
        while node is not None and node not in seen:
            seen.add(node)
            parent = self.parents.get(node)
            if parent is not None and parent not in self.parents:
                parent = self.before_boundary.get(node, parent)
            node = parent
        return seen

    def observations(self, redact: Any) -> Iterator[dict[str, Any]]:
        current = self.current()
        last_of_agent: dict[str, int] = {}
        for index, (record, kind, _) in enumerate(self.items):
            if kind == ASSISTANT and record.get("isSidechain") is True:
                last_of_agent[str(record.get("agentId"))] = index
        results = set(last_of_agent.values())
        seen: dict[tuple[str, str | None, str | None, str], int] = {}
        for index, (record, kind, text) in enumerate(self.items):
            if record.get("type") == "queue-operation" and (
                    text in self.prompts or text.startswith(_CLIENT_NOTES)):
                continue  # delivered as a turn too, or the client's own note
            if index in results:
                kind = SUBAGENT
            context = {key: record[key] for key in _TRANSCRIPT_CONTEXT if key in record}
            uuid = record.get("uuid")
            if isinstance(uuid, str) and uuid not in current and kind != COMPACT:
                context["branch"] = "abandoned"
            if record.get("type") == "summary":
                context["source"] = "summary"
            elif record.get("subtype") == AWAY_SUMMARY:
                context["source"] = AWAY_SUMMARY
            session = record.get("sessionId") if isinstance(record.get("sessionId"), str) \
                else self.session
            observation = dict.fromkeys(OBSERVATION_KEYS)
            observation.update(kind=kind, session=session, text=text, data=context,
                               ts=_str_or_none(record.get("timestamp")) or self.first_ts,
                               endTs=None)
            observation = redact(observation)
            agent = _str_or_none(context.get("agentId"))
            key = (kind, observation["session"], agent, observation["text"])
            seen[key] = seen.get(key, 0) + 1
            observation["id"] = said_id(kind, observation["session"], observation["text"],
                                        agent, seen[key])
            yield observation


def _texts(content: Any, *, user: bool) -> str:
    """The text blocks of a message joined by blank lines; a user's injected blocks
    (`_INJECTED_TAGS`) left out, images shown as `[image]`."""
    if isinstance(content, str):
        return content.strip()
    if not isinstance(content, list):
        return ""
    parts: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            text = block["text"].strip()
            if user and _is_injected(text):
                continue
            if text:
                parts.append(text)
        elif kind == "image" and user:
            parts.append("[image]")
        elif kind == "tool_result":
            return ""  # a tool's result, not something the user said
    return "\n\n".join(parts) if any(p != "[image]" for p in parts) else ""


def _is_injected(text: str) -> bool:
    for tag in _INJECTED_TAGS:
        if text.startswith(f"<{tag}>") and text.endswith(f"</{tag}>"):
            return True
    return False


def _check_record(record: Any, number: int) -> str:
    if not isinstance(record, dict):
        raise NotATranscriptError(
            f"not a Claude Code transcript: line {number} is a JSON {_json_type(record)}, "
            "not an object"
        )
    kind = record.get("type")
    if not isinstance(kind, str):
        raise NotATranscriptError(
            f'not a Claude Code transcript: line {number} has no "type" field'
        )
    if kind in ("user", "assistant") and not (
        isinstance(record.get("message"), dict) and isinstance(record.get("sessionId"), str)
    ):
        raise NotATranscriptError(
            f"not a Claude Code transcript: the {kind} record on line {number} lacks "
            "sessionId or message"
        )
    return kind


def _content_blocks(record: dict[str, Any]) -> list[dict[str, Any]]:
    content = record["message"].get("content")
    if not isinstance(content, list):
        return []
    return [block for block in content if isinstance(block, dict)]


def _collect_tool_uses(
    record: dict[str, Any], pending: dict[str, dict[str, Any]], done: set[str]
) -> None:
    for block in _content_blocks(record):
        call_id = block.get("id")
        if block.get("type") != "tool_use" or not isinstance(call_id, str):
            continue
        if call_id in pending or call_id in done:
            continue
        pending[call_id] = {
            "record": record,
            "tool": _str_or_none(block.get("name")),
            "input": block.get("input"),
        }


def _finish_tool_uses(
    record: dict[str, Any], pending: dict[str, dict[str, Any]], done: set[str]
) -> Iterator[dict[str, Any]]:
    for block in _content_blocks(record):
        call_id = block.get("tool_use_id")
        if block.get("type") != "tool_result" or not isinstance(call_id, str):
            continue
        if call_id in done:
            continue
        done.add(call_id)
        # A result whose tool_use is not in this file (it was in the session this one
        # resumed) is still evidence; it is replayed with tool and input unknown.
        started = pending.pop(call_id, None) or {"record": record, "tool": None, "input": None}
        output = _flatten(block.get("content"))
        is_error = block.get("is_error") is True
        yield _call(
            call_id,
            started,
            record,
            output,
            "error" if is_error else "ok",
            _exit_code(output) if is_error else None,
        )


def _call(
    call_id: str,
    started: dict[str, Any],
    finished: dict[str, Any] | None,
    output: str | None,
    status: str,
    exit_code: int | None,
) -> dict[str, Any]:
    begun = started["record"]
    context = {key: begun[key] for key in _TRANSCRIPT_CONTEXT if key in begun}
    return {
        "id": call_id,
        "kind": "tool_call",
        "session": begun.get("sessionId") or (finished or {}).get("sessionId"),
        "tool": started["tool"],
        "callId": call_id,
        "input": started["input"],
        "output": output,
        "status": status,
        "durationMs": None,
        "exitCode": exit_code,
        "text": None,
        "data": context,
        "ts": _str_or_none(begun.get("timestamp")),
        "endTs": _str_or_none(finished.get("timestamp")) if finished is not None else None,
    }


# The fields of a replayed call that come from the transcript; the others (its keys, kind,
# status, exit code) are this module's own words and numbers, not the agent's text, like
# the keys and phases the import writes around them.
_FROM_TRANSCRIPT = ("id", "session", "tool", "input", "output", "data", "ts", "endTs")


def _redacted_call(redact: Any, call: dict[str, Any]) -> dict[str, Any]:
    """The call with what came from the transcript redacted: each string is redacted
    alone, by the same rules, so this is `redact(call)` (for any rule that leaves this
    module's own words alone: every built-in one) with fewer strings scanned. `callId`
    is the call's id, redacted with it."""
    parts = [call[key] for key in _FROM_TRANSCRIPT]
    redacted = redact(parts)
    if redacted is parts:
        return call
    out = {**call, **dict(zip(_FROM_TRANSCRIPT, redacted, strict=True))}
    out["callId"] = out["id"]
    return out


def _flatten(content: Any) -> str | None:
    """A tool_result's content as one string: text blocks verbatim, other blocks as a tag."""
    if content is None or isinstance(content, str):
        return content
    import json

    if not isinstance(content, list):
        return json.dumps(content, sort_keys=True, ensure_ascii=False)
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif isinstance(block, dict) and block.get("type") == "tool_reference":
            parts.append(f"[tool_reference: {block.get('tool_name')}]")
        elif isinstance(block, dict):
            # Images and other binary blocks: their bytes are not text evidence.
            parts.append(f"[{block.get('type', 'block')}]")
        else:
            parts.append(json.dumps(block, ensure_ascii=False))
    return "\n".join(parts)
