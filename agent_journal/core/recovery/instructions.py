"""Standing instructions: the sentences of the user's prompts that set a rule for the rest
of the session ("always run make lint before committing", "never touch legacy.py",
"use pnpm, not npm", "from now on ...").

Invariants: an instruction is a sentence of a current-branch prompt the user typed (never a
subagent's task prompt, a compaction summary or Claude Code's own text), quoted verbatim
(only whitespace collapsed); it is recognised by its wording alone: a sentence that opens
with a rule word (always, never, don't, do not, make sure, remember to, only, avoid, stop,
no more, from now on, ...), that says "X, not Y" / "X instead of Y" about a tool, that
holds "from now on", "going forward", "every time", "before committing", or that ends in
", ever" or "instead". Questions are never instructions, nor is quoted, fenced or
indented text, nor anything after a line that reads as pasted program output (a log
timestamp, a traceback, an `error:` line). The same sentence said twice is one
instruction, at its latest time.
"""

from __future__ import annotations

import re

from agent_journal.core.recovery.record import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    from agent_journal.core.recovery.conversation import Said

SENTENCE_CHARS = 300
_MAX = 20
_SPLIT = re.compile(r"(?<=[.!;])\s+(?=[A-Z`\"'(])")
_OPENERS = re.compile(
    r"^(?:(?:please|and|also|but|so|ok(?:ay)?|note|important|remember)[,:]?\s+)*"
    r"(?:always|never|don'?t|do not|must(?: not)?|make sure|be sure|remember to|ensure|"
    r"only (?:use|run|edit|touch|change|commit|push)|avoid|stop (?:using|running)|no more|"
    r"from now on|going forward|from here on|in (?:the )?future|keep (?:using|the)|"
    r"use \S+(?: \S+)?,? (?:not|instead of|rather than)|prefer|do(?: not|n'?t) ever)\b",
    re.IGNORECASE)
# A line that reads as program output (a log's timestamp, a traceback, an error line, a
# shell prompt): from there on the prompt holds pasted text, not the user's rules.
_PASTED = re.compile(
    r"^\s*(?:\[?\d{1,2}:\d{2}:\d{2}|\[?\d{4}-\d{2}-\d{2}[T ]\d|Traceback \(|File \"|"
    r"at \S+ \(|(?:error|fatal|warning|ERROR|FATAL|FAIL(?:ED)?)\b\s*[:\[]|\$ |>>> |"
    r"[A-Z][A-Za-z]*(?:Error|Exception):)")
_ANYWHERE = re.compile(
    r"\b(?:from now on|going forward|from here on|every time you|each time you|whenever you|"
    r"before (?:you )?(?:commit(?:ting)?|push(?:ing)?|each commit|merging)|"
    r"(?:instead of|rather than) (?:npm|pnpm|yarn|pip|poetry|uv|python|make|docker)\b|"
    r", ever[.!]?$|\binstead[.!]?$)",
    re.IGNORECASE)


class Instruction(Record):
    __slots__ = ("text", "ts", "prompt_id")
    text: str
    ts: str
    prompt_id: str


def _sentences(text: str) -> Iterable[str]:
    fence = False
    for line in text.splitlines():
        if line.strip().startswith("```"):
            fence = not fence
            continue
        if fence or not line.strip() or line.startswith((">", "    ", "\t", "|")):
            continue  # quoted or indented text, not the user's rule
        if _PASTED.match(line):
            return  # pasted output from here on
        for part in _SPLIT.split(line.strip()):
            if part.strip():
                yield " ".join(part.strip().lstrip("-*• ").split())


def is_instruction(sentence: str) -> bool:
    """Whether one sentence reads as a standing rule (see the module docstring)."""
    if not sentence or sentence.endswith("?") or len(sentence) > SENTENCE_CHARS:
        return False
    return bool(_OPENERS.match(sentence) or _ANYWHERE.search(sentence))


class InstructionsFold:
    """standing_instructions as a step-and-state fold over prompts in (ts, id) order: the
    latest _MAX distinct sentences, each at its latest saying (one said again moves to
    the end, so the ones dropped could only come back by being said again)."""

    __slots__ = ("found",)

    def __init__(self) -> None:
        self.found: dict[str, Instruction] = {}

    def step(self, prompt: Said) -> None:
        if prompt.agent is not None or prompt.abandoned:
            return
        if prompt.text.lstrip().startswith("<"):
            return  # a command or tag Claude Code wrote into the prompt
        found = self.found
        for sentence in _sentences(prompt.text):
            if is_instruction(sentence):
                key = sentence.casefold().rstrip(".! ")
                found.pop(key, None)
                found[key] = Instruction(sentence, prompt.ts, prompt.id)
        while len(found) > _MAX:
            del found[next(iter(found))]

    def result(self) -> list[Instruction]:
        return list(self.found.values())

    def packed(self) -> list[Any]:
        return [[k, list(i.fields())] for k, i in self.found.items()]

    @classmethod
    def unpacked(cls, packed: list[Any]) -> InstructionsFold:
        fold = cls()
        fold.found = {k: Instruction(*i) for k, i in packed}
        return fold


def standing_instructions(prompts: Iterable[Said]) -> list[Instruction]:
    """The user's standing instructions, oldest first, each at its latest saying."""
    fold = InstructionsFold()
    for prompt in prompts:
        fold.step(prompt)
    return fold.result()
