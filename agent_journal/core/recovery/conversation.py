"""What the session said, in order: prompts, assistant messages, summaries, meta text.

Invariants: texts are the stored ones (facts caps them); what was said on an abandoned
branch of a rewound conversation is kept apart, never presented as current. A prompt a
subagent received (`agent` set) is its parent agent's brief, not the user's words: it is
no prompt of the session. A saying of the same kind, text, agent and time as the one of
that kind just before it is the same saying copied (`claude --resume` starts its new
transcript, under a new session id, with a copy of the conversation it resumes): it
counts once (`repeats`).
"""

from __future__ import annotations

from agent_journal.core.recovery.calls import Call, ordered
from agent_journal.core.recovery.record import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable


class Said(Record):
    __slots__ = ("id", "kind", "text", "ts", "session", "chars", "agent", "abandoned", "source")
    DEFAULTS = {"agent": None, "abandoned": False, "source": None}
    id: str
    kind: str
    text: str
    ts: str
    session: str | None
    chars: int
    agent: str | None
    abandoned: bool
    source: str | None


class Conversation(Record):
    __slots__ = (
        "prompts", "abandoned_prompts", "assistant", "summaries", "titles", "subagent_results",
        "meta"
    )
    DEFAULTS = {
        "prompts": list, "abandoned_prompts": list, "assistant": list, "summaries": list,
        "titles": list, "subagent_results": list, "meta": list
    }
    prompts: list[Said]
    abandoned_prompts: list[Said]
    assistant: list[Said]
    summaries: list[Said]
    titles: list[Said]
    subagent_results: list[Said]
    meta: list[Said]


def said_of(call: Call) -> Said | None:
    """What a call says, when it is something the session said with a text."""
    kind, text = call.said, call.text
    if kind is None or not text:
        return None
    return Said(call.id, kind, text, call.ts, call.session, int(call.get("chars") or 0),
                call.get("agent"), bool(call.get("abandoned")), call.get("source"))


def repeats(said: Said, last: dict[str, Said]) -> bool:
    """Whether `said` is a copy of the saying of its kind just before it (`last` holds the
    latest saying of each kind, and is updated)."""
    before = last.get(said.kind)
    last[said.kind] = said
    return (before is not None and before.ts == said.ts and before.text == said.text
            and before.agent == said.agent)


def conversation(calls: Iterable[Call]) -> Conversation:
    out = Conversation()
    last: dict[str, Said] = {}
    for call in ordered(calls):
        said = said_of(call)
        if said is None or repeats(said, last):
            continue
        kind = said.kind
        if kind == "prompt":
            if said.agent is not None:
                continue  # a subagent's brief
            (out.abandoned_prompts if said.abandoned else out.prompts).append(said)
        elif kind == "assistant_message":
            if not said.abandoned and said.agent is None:
                out.assistant.append(said)
        elif kind == "compact_summary":
            (out.titles if said.source == "summary" else out.summaries).append(said)
        elif kind == "subagent_result":
            out.subagent_results.append(said)
        elif kind == "session_event":
            out.meta.append(said)
    return out


_INTENT = None  # compiled on first use


def summary_parts(text: str) -> tuple[str, str]:
    """A compaction summary as (what the user asked, the rest): Claude Code's `Primary
    Request and Intent` section and what follows it; for a summary of another shape, the
    whole text and nothing. The client's opening sentence (`This session is being
    continued ...`) is left out."""
    import re

    global _INTENT
    if _INTENT is None:
        _INTENT = (re.compile(r"^\s*1\.\s*\**Primary Request and Intent:?\**:?\s*$",
                              re.MULTILINE | re.IGNORECASE),
                   re.compile(r"^\s*\d+\.\s*\*\*", re.MULTILINE))
    head, section = _INTENT
    found = head.search(text)
    if found is None:
        lines = text.strip().splitlines()
        if lines and lines[0].startswith("This session is being continued"):
            lines = lines[1:]
        return "\n".join(lines).strip(), ""
    after = text[found.end():]
    nxt = section.search(after)
    if nxt is None:
        return after.strip(), ""
    return after[:nxt.start()].strip(), after[nxt.start():].strip()
