"""An agent's long message cut to a bound by keeping its densest sentences, not its head.

Invariants: `condense(text, limit)` returns the text on one line unchanged when it fits;
else whole sentences of it (a line, a list item, or a sentence of a paragraph), in their
order, joined by ` … `, never longer than `limit`. The first sentence is always kept (it
says what the message is about, clipped to a third of the room); the rest
are chosen by density: the names a reader can look up (code spans, paths, identifiers
with a dot, an underscore, inner capitals or digits, hashes, numbers) per character, the
densest first, so a sentence that names `setConfigFlag` in `config_export_image.go` wins
over one that says "Getting there turned up two things worth reporting." Pure: the same
text and limit give the same answer.
"""

from __future__ import annotations

import re

from agent_journal.core.recovery.text import clip

JOIN = " … "
_LINE = re.compile(r"\s*\n\s*")
_SENTENCE = re.compile(r"(?<=[.!?:])\s+(?=[A-Z`*\[(\"'])")
_MARKUP = re.compile(r"^(?:[-*+]|\d+[.)]|#+)(?:\s+|$)")


def condense(text: str, limit: int) -> str:
    """`text` within `limit` characters: its first sentence and its densest others."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    pieces = sentences(text)
    if len(pieces) < 2:
        return clip(flat, limit)
    first = clip(pieces[0], max(limit // 3, 1))
    room = limit - len(first)
    dense = [density(p) for p in pieces]
    order = sorted(range(1, len(pieces)), key=lambda i: (-dense[i], i))
    chosen: list[int] = []
    for i in order:
        cost = len(pieces[i]) + len(JOIN)
        if cost <= room and dense[i] > 0:
            chosen.append(i)
            room -= cost
    kept = [first] + [pieces[i] for i in sorted(chosen)]
    return JOIN.join(kept) if chosen else clip(flat, limit)


def sentences(text: str) -> list[str]:
    """The message's lines (list markers and heading marks dropped, a code fence's marker
    line left out), each split into its sentences; ones without a letter left out."""
    out: list[str] = []
    for line in _LINE.split(text.strip()):
        line = line.strip()
        if line.startswith("```"):
            continue  # a code fence's marker line, its language named or not
        line = _MARKUP.sub("", line)
        if not line or set(line) <= set("-*_=`#> |"):
            continue
        # A piece without a letter (`1.` split off `1. Setup`) says nothing.
        out.extend(s.strip() for s in _SENTENCE.split(line) if any(c.isalpha() for c in s))
    return out


def density(sentence: str) -> float:
    """Names a reader can look up, per character: each code span counts two, and each
    word outside them that is a path or an identifier (a dot, slash, underscore, colon or
    hash inside it, digits, inner capitals) or a number counts one. Plain string tests,
    no regular expression: a digest condenses dozens of messages every time it prints."""
    parts = sentence.split("`")
    names = 2 * ((len(parts) - 1) // 2)
    for prose in parts[::2]:
        for word in prose.split():
            word = word.strip(_PUNCTUATION)
            if word and _is_name(word):
                names += 1
    return names / (len(sentence) + 40)


_PUNCTUATION = "`*()[]{}<>,;!?\"'."
_INNER = frozenset("._/\\:#@=")
_DIGITS = frozenset("0123456789")


def _is_name(word: str) -> bool:
    if not _INNER.isdisjoint(word[1:-1]) or "_" in word or not _DIGITS.isdisjoint(word):
        return True
    rest = word[1:]
    # inner capitals: camelCase, or an acronym (HTTP, CI)
    return rest != rest.lower()
