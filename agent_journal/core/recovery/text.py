"""Clipping text for display: at a word boundary, and always marked.

Invariant: `clip` returns the text unchanged when it fits, else a prefix of it (cut at a
space when one falls in the second half) followed by `…`, never longer than the limit.
`clip_middle` returns it unchanged when it fits, else its head and its tail with ` … `
between them (the tail a third of the room), never longer than the limit. `clip_log`
returns a prompt on one line the same way, keeping besides its head and tail up to two of
the error lines of what it pasted from between them; never longer than the limit.
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


_ERRORISH = None  # compiled on first use: most prompts fit and never need it
LOG_LINE_CHARS = 150  # of an error line kept from the middle of a pasted log


def clip_log(text: str, limit: int) -> str:
    """`text` on one line (newlines as ` ⏎ `) in at most `limit` characters: as it is
    when it fits, else its head, up to two error lines from what is left out (a pasted
    log's `error:`, `failed`, `Exception`...) and its tail (the request that often
    follows the paste), joined by ` … `."""
    import re

    global _ERRORISH
    lines = [x.strip() for x in text.strip().splitlines() if x.strip()]
    flat = " ⏎ ".join(lines)
    if len(flat) <= limit or limit < 120:
        return clip_middle(flat, limit)
    if _ERRORISH is None:
        _ERRORISH = re.compile(r"\b(?:error|errors|failed|failure|exception|fatal|panic|"
                               r"denied|refused|cannot|unable to)\b", re.IGNORECASE)
    tail = flat[len(flat) - limit // 4:]
    tail = tail[tail.find(" ") + 1:] if " " in tail[:limit // 8] else tail
    seen = flat[:limit // 2]
    found: list[str] = []
    for line in lines:
        if _ERRORISH.search(line) and line not in seen and line not in tail \
                and clip(line, LOG_LINE_CHARS) not in found:
            found.append(clip(line, LOG_LINE_CHARS))
            if len(found) == 2:
                break
    if not found:
        return clip_middle(flat, limit)
    middle = "".join(f" … {x}" for x in found)
    head = clip(flat, limit - len(middle) - len(tail) - 3).rstrip("…").rstrip()
    return f"{head}{middle} … {tail}"
