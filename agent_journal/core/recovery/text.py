"""Clipping text for display: at a word boundary, and always marked.

Invariant: `clip` returns the text unchanged when it fits, else a prefix of it (cut at a
space when one falls in the second half) followed by `…`, never longer than the limit.
"""

from __future__ import annotations


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
