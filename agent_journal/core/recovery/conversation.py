"""What the session said, in order: prompts, assistant messages, summaries, meta text.

Invariant: texts are the stored ones (facts caps them); what was said on an abandoned
branch of a rewound conversation is kept apart, never presented as current.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agent_journal.core.recovery.calls import Call, ordered

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable


@dataclass
class Said:
    id: str
    kind: str
    text: str
    ts: str
    session: str | None
    chars: int
    agent: str | None = None
    abandoned: bool = False
    source: str | None = None


@dataclass
class Conversation:
    prompts: list[Said] = field(default_factory=list)
    abandoned_prompts: list[Said] = field(default_factory=list)
    assistant: list[Said] = field(default_factory=list)
    summaries: list[Said] = field(default_factory=list)
    titles: list[Said] = field(default_factory=list)
    subagent_results: list[Said] = field(default_factory=list)
    meta: list[Said] = field(default_factory=list)


def conversation(calls: Iterable[Call]) -> Conversation:
    out = Conversation()
    for call in ordered(calls):
        kind, text = call.said, call.text
        if kind is None or not text:
            continue
        said = Said(call.id, kind, text, call.ts, call.session, int(call.get("chars") or 0),
                    call.get("agent"), bool(call.get("abandoned")), call.get("source"))
        if kind == "prompt":
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
