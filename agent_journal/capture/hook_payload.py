"""An agent's hook payload (one JSON object on the hook's stdin) as one observation dict.

Agents that run hooks send much the same payload: an event name, a session, and for a tool
event the call's id, tool, input and, once it ended, its response. What differs from agent
to agent (which events start, end or fail a call, which field holds the output, the kinds
of session events, what was said, how a call's status is read) is a `HookFormat`, one
record per agent (capture/claude_code.py, capture/codex.py); `HookFormat.observation` is
the one normaliser.

Invariant: every dict returned has passed the redactor and has exactly OBSERVATION_KEYS,
with None where a field does not apply; parsing is strict (see strictjson), and a payload
that is not what it claims to be raises HookPayloadError with a one-line message. Pure, and
on the hook's path: nothing here reads files or imports `re` or `json`.
"""

from __future__ import annotations

from agent_journal.capture.observation import (
    OBSERVATION_KEYS,
    json_type,
    said_id,
    str_or_none,
)
from agent_journal.capture.redact import default_redactor
from agent_journal.capture.strictjson import StrictJSONError, loads

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from agent_journal.capture.redact import Redactor

    # (event, payload, observation): sets the call's status and exit code from the payload
    Outcome = Callable[[str, dict[str, Any], dict[str, Any]], None]

EVENT_FIELD = "hook_event_name"
# An event name becomes part of a kind (`hook_<name>`), so it must be a plain identifier.
_EVENT_NAME = r"[A-Za-z][A-Za-z0-9_]{0,63}"
_EVENT_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


class HookPayloadError(ValueError):
    """Hook stdin that is not a usable agent hook payload; the message says why."""


class HookFormat:
    """What one agent's hook payloads call things, and how a call's end is read.

    `tool_events`: the events of one tool call and the status each gives it (started, ok,
    error). `output_fields`: the payload field each finishing event hands over as the
    call's output. `lifted`: the fields lifted into `input`/`output` (with the event's own
    output field), kept out of `data`. `session_kinds`: the kind of each session-level
    event (any other is `hook_<event>`). `said`: the events that carry something the session
    said, the field holding it and its kind. `outcome(event, payload, observation)`, run on
    a tool event before redaction, reads what the payload says of how the call ended (an
    exit code, an interrupt). The rest are the payload's field names, and `cut_short`,
    whether the output handed over is not the whole output.
    """

    def __init__(self, *, tool_events: dict[str, str], output_fields: dict[str, str],
                 lifted: frozenset[str], session_kinds: dict[str, str],
                 said: dict[str, tuple[str, str]], outcome: Outcome | None = None,
                 session: str = "session_id", call: str = "tool_use_id",
                 tool: str = "tool_name", tool_input: str = "tool_input",
                 duration: str = "duration_ms", agent: str = "agent_id",
                 interrupt: str = "is_interrupt") -> None:
        self.tool_events = tool_events
        self.output_fields = output_fields
        self.lifted = lifted
        self.session_kinds = session_kinds
        self.said = said
        self.outcome = outcome
        self.session = session
        self.call = call
        self.tool = tool
        self.tool_input = tool_input
        self.duration = duration
        self.agent = agent
        self.interrupt = interrupt

    def observation(self, payload: dict[str, Any], redactor: Redactor | None = None
                    ) -> dict[str, Any]:
        """One hook payload as a redacted observation dict (keys: OBSERVATION_KEYS).

        Tool events become kind `tool_call` with id and callId = the call's id, so the start
        and the end of one call share an id. Something said becomes its `said` kind, the
        text lifted into `text` (stored, and when large kept as an artifact, once) and its
        id made from the redacted text (said_id). Every other event becomes a session-level
        kind with id None (the caller assigns one) and the whole payload as `data`.
        `redactor` defaults to the built-in rules; pass one built with the user's
        configured patterns.
        """
        check_payload(payload)
        event = payload[EVENT_FIELD]
        session = str_or_none(payload.get(self.session))
        observation: dict[str, Any] = dict.fromkeys(OBSERVATION_KEYS)
        observation["session"] = session
        status = self.tool_events.get(event)
        said = self.said.get(event)
        if said is not None and isinstance(payload.get(said[0]), str):
            field, kind = said
            observation["kind"] = kind
            observation["text"] = payload[field]
            observation["data"] = {k: v for k, v in payload.items() if k != field}
        elif status is None:
            observation["kind"] = self.session_kinds.get(event, f"hook_{event}")
            observation["data"] = dict(payload)
        else:
            call_id = str_or_none(payload.get(self.call))
            lifted = self.output_fields.get(event)
            observation.update(
                id=call_id,
                kind="tool_call",
                tool=str_or_none(payload.get(self.tool)),
                callId=call_id,
                input=payload.get(self.tool_input),
                output=payload.get(lifted) if lifted is not None else None,
                status=status,
                durationMs=_duration(payload.get(self.duration)),
                data={k: v for k, v in payload.items()
                      if k not in self.lifted and k != lifted},
            )
            if self.outcome is not None:
                self.outcome(event, payload, observation)
        observation = (redactor or default_redactor()).redact_value(observation)
        if observation["text"] is not None:
            data = observation["data"]
            observation["id"] = said_id(observation["kind"], session, observation["text"],
                                        str_or_none(data.get(self.agent)))
        return observation  # type: ignore[no-any-return]

    def cut_short(self, output: Any, payload: dict[str, Any]) -> bool:
        """Whether the agent says the output it handed over is not the whole output."""
        if payload.get(self.interrupt) is True:
            return True
        return isinstance(output, dict) and (output.get("interrupted") is True
                                             or output.get("truncated") is True)


def parse_hook_payload(text: str | bytes) -> dict[str, Any]:
    """Parse hook stdin strictly; the result is a dict with a valid `hook_event_name`.

    Two flaws cost a character each instead of the whole observation: a lone surrogate (a
    JavaScript producer that cut a string inside a surrogate pair) and a byte that is not
    UTF-8 (a tool's raw output passed through by a wrapper); each becomes U+FFFD.
    """
    if isinstance(text, bytes | bytearray):
        raw = text
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("utf-8", errors="replace")
    try:
        payload = loads(text, lone_surrogates="replace")
    except StrictJSONError as exc:
        raise HookPayloadError(f"hook payload is not valid JSON: {exc}") from None
    check_payload(payload)
    return payload  # type: ignore[no-any-return]


def check_payload(payload: Any) -> None:
    if not isinstance(payload, dict):
        raise HookPayloadError(f"hook payload must be a JSON object, got {json_type(payload)}")
    name = payload.get(EVENT_FIELD)
    if name is None:
        raise HookPayloadError("hook payload has no hook_event_name")
    if not isinstance(name, str) or not is_event_name(name):
        # Redacted before it is cut: a cut through a secret leaves a prefix no rule knows.
        shown = default_redactor().redact_text(repr(name))[:80]
        raise HookPayloadError(
            f"hook_event_name must be an identifier of at most 64 characters, got {shown}")


def is_event_name(name: str) -> bool:
    # _EVENT_NAME without the regex: compiling it cost the hook a millisecond per call.
    return (0 < len(name) <= 64 and name[0].isascii() and name[0].isalpha()
            and all(ch in _EVENT_NAME_CHARS for ch in name))


def _duration(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    # The comparison is also false for NaN; the bound keeps round() away from infinity.
    return round(value) if 0 <= value <= 2**53 else None
