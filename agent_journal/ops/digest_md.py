"""Markdown pieces the digest is built from: code spans that keep bytes, quotes, clipping.

Invariant: `code` never changes the text it wraps (fences outgrow any backtick run), and
`quote` keeps every line of the text it quotes; only `clip` shortens, at a word boundary,
and always marks the cut with `…`.
"""

from __future__ import annotations

from agent_journal.core.recovery.text import clip

__all__ = ["clip", "code", "hhmm", "one_line", "quote"]


def _longest_backtick_run(text: str) -> int:
    longest = run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    return longest


def code(text: str) -> str:
    """`text` as Markdown code, its bytes unchanged (fences outgrow any backtick run).

    Multi-line text becomes a fenced block that starts on its own line.
    """
    if text == "":
        return "(empty)"
    ticks = _longest_backtick_run(text) + 1
    if "\n" in text or "\r" in text:
        fence = "`" * max(3, ticks)
        return f"\n{fence}\n{text}\n{fence}"
    pad = " " if text[0] in "` " or text[-1] in "` " else ""
    return f"{'`' * ticks}{pad}{text}{pad}{'`' * ticks}"


def one_line(text: str, limit: int) -> str:
    """`text` on one line (newlines shown as ` ⏎ `), clipped at a word boundary."""
    flat = " ⏎ ".join(part.strip() for part in text.strip().splitlines() if part.strip())
    return clip(flat, limit)


def quote(text: str, limit: int) -> str:
    """`text` clipped to `limit` characters as a Markdown block quote."""
    body = clip(text, limit)
    return "\n".join("> " + line if line.strip() else ">" for line in body.splitlines()) + "\n"


def hhmm(ts: str) -> str:
    """The `HH:MM` of a journal timestamp (UTC)."""
    return ts[11:16] if len(ts) >= 16 else ts
