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


# -- search (issue 7) -------------------------------------------------------------------

def search_lines(report: dict[str, Any]) -> None:
    """One line per hit (score, id, type/kind, ts, retraction mark), its snippet below."""
    hits = report["hits"]
    if not hits:
        emit_line("no matches")
        return
    for hit in hits:
        mark = f"  [{hit['outcome']}]" if hit["outcome"] not in (None, "live") else ""
        emit_line(f"{hit['score']:8.3f}  {hit['id']}  {hit['type']}/{hit['kind']}  "
                  f"{hit['ts']}{mark}")
        emit_line(f"          {hit['snippet']}")


# -- capture ----------------------------------------------------------------------------

def emit_raw(data: bytes) -> None:
    """Exact bytes on stdout (get prints stored evidence verbatim, no newline added)."""
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def progress(done: int, total: int, what: str) -> None:
    """One rewritten status line on stderr (called only when stderr is a terminal)."""
    end = "\n" if done >= total else ""
    sys.stderr.write(f"\r{what}: {done}/{total}{end}")
    sys.stderr.flush()


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
