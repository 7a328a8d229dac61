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


def warn(text: str) -> None:
    sys.stderr.write(f"WARNING: {text}\n")


def error(text: str) -> None:
    sys.stderr.write(f"error: {text}\n")


def floor_warning(unreadable: list[Any], malformed: list[Any]) -> None:
    """Every read on a damaged journal says so, and says what it means."""
    if unreadable or malformed:
        warn(f"{len(unreadable)} unreadable segment(s), {len(malformed)} malformed row(s): "
             "this result is a floor, not a total")


# -- progress ---------------------------------------------------------------------------

def progress_for_terminal() -> Any:
    """A progress callback for long commands when stderr is a terminal, else None.

    Progress is for a person watching; in a pipe or a log it would be noise.
    """
    if not sys.stderr.isatty():
        return None

    def show(text: str) -> None:
        sys.stderr.write("\r\033[K" + text)
        sys.stderr.flush()

    return show


def progress_done(progress: Any) -> None:
    if progress is not None:
        sys.stderr.write("\r\033[K")
        sys.stderr.flush()
