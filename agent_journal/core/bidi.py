"""Bidirectional-text controls made visible in text a person reads. Pure; no I/O.

Invariant: `visible` changes nothing but the Unicode bidi controls (the embeddings and
overrides U+202A-U+202E, the isolates U+2066-U+2069, the marks U+200E, U+200F and
U+061C), each of which becomes the marker `<U+XXXX>`: none is dropped and none is left
to reorder what a reader sees, so a stored command cannot read as another one. Text
holding none is returned as it is. A marker holds no control, so marking twice changes
nothing more. Every human-facing rendering (the terminal and HTML timelines, `show` and
the other read texts, search hits, the digest as printed, stderr messages) goes through
it where it escapes text; JSON never does: it keeps the stored text exact.
"""

from __future__ import annotations

import re

__all__ = ["BIDI_CONTROLS", "MARKERS", "visible"]

BIDI_CONTROLS = frozenset(chr(code) for code in (
    *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C))
# For str.translate: code point -> marker.
MARKERS = {ord(ch): f"<U+{ord(ch):04X}>" for ch in sorted(BIDI_CONTROLS)}
_FIND = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def visible(text: str) -> str:
    """`text` with each bidi control shown as `<U+XXXX>` (the same object when it has none)."""
    if _FIND.search(text) is None:
        return text
    return text.translate(MARKERS)
