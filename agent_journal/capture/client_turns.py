"""What Claude Code writes into the user's turn on its own: a slash command's record and a
local command's output, read for what they say.

Invariant: a slash command's record (`<command-name>/x</command-name>` with its
`<command-args>`) reads as the user typed it, `/x args`; a local command's output reads as
its text without the tags, and one that printed nothing says nothing (None); a skill the
client loaded into the turn reads as `skill loaded: name`, not as its whole body. Text of
any other shape is returned unchanged.
"""

from __future__ import annotations

import re

_TAG = re.compile(r"<(command-name|command-args|local-command-stdout|local-command-stderr)>"
                  r"(.*?)</\1>", re.DOTALL)


def slash_command(text: str) -> str | None:
    """`/name args` for a slash command's record, else None."""
    if not text.startswith(("<command-name>", "<command-message>")):
        return None
    found = {m.group(1): m.group(2).strip() for m in _TAG.finditer(text)}
    name = found.get("command-name")
    if not name:
        return None
    return f"{name} {found.get('command-args', '')}".strip()


_SKILL = re.compile(r"Base directory for this skill: (\S+)")


def local_output(text: str) -> str | None:
    """A local command's output without its tags (None when it printed nothing); a loaded
    skill's body as the skill's name; any other note unchanged."""
    skill = _SKILL.match(text)
    if skill:
        return "skill loaded: " + re.split(r"[\\/]", skill.group(1).rstrip("\\/"))[-1]
    if not text.startswith(("<local-command-stdout>", "<local-command-stderr>")):
        return text
    said = "\n".join(m.group(2).strip() for m in _TAG.finditer(text)).strip()
    return said or None
