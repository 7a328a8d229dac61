"""Clipping text for display: at a word boundary, and always marked.

Invariant: `clip` returns the text unchanged when it fits, else a prefix of it (cut at a
space when one falls in the second half) followed by `…`, never longer than the limit.
`clip_middle` returns it unchanged when it fits, else its head and its tail with ` … `
between them (the tail a third of the room), never longer than the limit.
"""

from __future__ import annotations

DIAGNOSIS_CHARS = 600  # of the agent's words kept after a failure (its diagnosis)


def clip(text: str, limit: int) -> str:
    """`text` cut at a word boundary to at most `limit` characters, marked with `…`."""
    text = text.strip()
    if len(text) <= limit:
        return text
    cut = text[:max(1, limit - 1)]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip() + "…"


def clip_middle(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters by leaving out its middle, marked ` … `:
    for a prompt that pastes a log or a spec, whose request often comes after it."""
    text = text.strip()
    if len(text) <= limit:
        return text
    if limit < 60:
        return clip(text, limit)
    room = limit - 3
    tail_room = room // 3
    tail = text[len(text) - tail_room:]
    space = tail.find(" ")
    if 0 <= space < tail_room // 2:
        tail = tail[space + 1:]
    head = clip(text[:room - len(tail)], room - len(tail)).rstrip("…").rstrip()
    return f"{head} … {tail.lstrip()}"
