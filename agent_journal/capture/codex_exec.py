"""Codex's long-running commands, told whole: a command that outlives its call.

Codex's `exec_command` returns after a while with "Process running with session ID N";
the agent then polls with `write_stdin` (no characters) and each poll returns the next
chunk of output, the last one with "Process exited with code X".

Invariant: such a command is one call (its own id, its own command) whose output is every
chunk in order and whose status and exit code are those of the chunk that says it
exited; the polls are not calls of their own. A poll that sends characters is a call as
it stands (the agent typed into the process). A command still running when the file
ends is `started`, with what it printed so far. Every other call passes through as it is.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

_RUNNING = re.compile(r"(?:^|\n)Process running with session ID (\d+)")
# What Codex puts before a chunk's own output: a chunk id, the wall time, the exit code
# or the session still running, a token count, then `Output:`.
_HEADER = re.compile(r"\AChunk ID: \S+\n(?:[^\n]*\n){0,6}?Output:\n")


def status_of(code: int | None) -> str:
    return "error" if code not in (None, 0) else "ok"


class RunningCommands:
    """The commands still running, by Codex's session id, and what each printed so far."""

    def __init__(self) -> None:
        self.running: dict[str, tuple[dict[str, Any], list[str]]] = {}

    def step(self, call: dict[str, Any], raw: str | None) -> Iterator[dict[str, Any]]:
        """`call` as it should be journaled (nothing while its command still runs)."""
        session = _running_session(raw)
        polled = _polled_session(call)
        if polled is not None and polled in self.running:
            started, chunks = self.running.pop(polled)
            chunks.append(call["output"] or "")
            if session is None:  # it exited: the command, told whole
                yield dict(started, output="\n".join(c for c in chunks if c),
                           status=status_of(call["exitCode"]), exitCode=call["exitCode"],
                           endTs=call["endTs"])
            else:
                self.running[session] = (started, chunks)
            return
        if session is not None and call["tool"] == "Bash":
            self.running[session] = (call, [call["output"] or ""])
            return
        yield call

    def unfinished(self) -> Iterator[dict[str, Any]]:
        for started, _ in self.running.values():
            yield dict(started, output=None, status="started", exitCode=None, endTs=None)


def _running_session(raw: str | None) -> str | None:
    if not raw or not raw.startswith("Chunk ID: "):
        return None
    header = _HEADER.match(raw)
    found = _RUNNING.search(raw[:header.end()] if header else raw[:400])
    return found.group(1) if found else None


def _polled_session(call: dict[str, Any]) -> str | None:
    """The session a `write_stdin` with no characters polls."""
    value = call.get("input")
    if call.get("tool") != "write_stdin" or not isinstance(value, dict) or value.get("chars"):
        return None
    session = value.get("session_id")
    return str(session) if isinstance(session, int | str) else None
