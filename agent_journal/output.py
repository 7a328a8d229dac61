"""Rendering: the one place that writes to stdout and stderr.

Invariant: machine-facing output is JSON with the camelCase keys documented in
spec/cli-json.md, printed as one document; human lines are short and exact;
warnings and errors go to stderr, never mixed into a JSON document.
"""

from __future__ import annotations

import json
import sys

TYPE_CHECKING = False  # `typing` costs ~5 ms to import; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any


def to_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def emit_json(value: Any) -> None:
    sys.stdout.write(to_json(value) + "\n")


def emit_line(text: str) -> None:
    sys.stdout.write(text + "\n")


def emit_text(text: str) -> None:
    """A document that carries its own line endings (the digest's Markdown)."""
    sys.stdout.write(text)


def warn(text: str) -> None:
    sys.stderr.write(f"WARNING: {text}\n")


def error(text: str) -> None:
    sys.stderr.write(f"error: {text}\n")


def floor_warning(unreadable: list[Any], malformed: list[Any]) -> None:
    """Every read on a damaged journal says so, and says what it means."""
    if unreadable or malformed:
        warn(f"{len(unreadable)} unreadable segment(s), {len(malformed)} malformed row(s): "
             "this result is a floor, not a total")
