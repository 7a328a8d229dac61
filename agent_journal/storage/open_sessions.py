"""Sessions a hook saw start and not yet end: which transcripts may still hold calls the
capture hooks did not journal.

Claude Code's capture hooks run in the background and are ended with the session, so the
last calls of a session (or of one killed outright) may reach the journal only through its
transcript. SessionStart notes its session here; SessionEnd completes the session from
its transcript and forgets it; a note left behind (the session crashed, or its SessionEnd
was cut off) is completed by a later SessionStart.

Invariants:
- One private file per session, `<root>/sessions/<workspace>/<session>`, holding the
  transcript's path and nothing else (no content of the session); written atomically.
- Bounded work: at most MAX_NOTES are kept (the oldest go first), and a note whose
  transcript has not changed for STALE_SECONDS is forgotten once completed.
"""

from __future__ import annotations

import os

from agent_journal.storage.files import make_private_dirs, write_file_atomic

SESSIONS_DIR = "sessions"
MAX_NOTES = 64
# A transcript unchanged this long belongs to a session that is over.
STALE_SECONDS = 3600.0


def folder(root_path: str, workspace: str) -> str:
    return os.path.join(root_path, SESSIONS_DIR, workspace)


def note(root_path: str, workspace: str, session: str, transcript: str) -> None:
    """Remember that `session` (a safe id) started, writing to `transcript`."""
    where = folder(root_path, workspace)
    make_private_dirs(where)
    path = os.path.join(where, session)
    try:
        with open(path, "rb") as fh:
            if fh.read().decode("utf-8", "replace") == transcript:
                return  # already noted (a resume, a compaction, a clear)
    except OSError:
        pass
    write_file_atomic(path, transcript.encode("utf-8"))
    names = listed(root_path, workspace)
    for old, _ in names[: max(0, len(names) - MAX_NOTES)]:
        forget(root_path, workspace, old)


def listed(root_path: str, workspace: str) -> list[tuple[str, str]]:
    """(session, transcript path) of every note, the oldest first."""
    where = folder(root_path, workspace)
    try:
        names = os.listdir(where)
    except (FileNotFoundError, NotADirectoryError):
        return []
    found: list[tuple[float, str, str]] = []
    for name in names:
        path = os.path.join(where, name)
        try:
            with open(path, "rb") as fh:
                found.append((os.fstat(fh.fileno()).st_mtime, name,
                              fh.read(8192).decode("utf-8", "replace")))
        except OSError:
            continue
    return [(name, transcript) for _, name, transcript in sorted(found)]


def forget(root_path: str, workspace: str, session: str) -> None:
    try:
        os.unlink(os.path.join(folder(root_path, workspace), session))
    except (FileNotFoundError, NotADirectoryError):
        pass


def settled(transcript: str, now: float) -> bool:
    """Whether the transcript is gone or has not changed for STALE_SECONDS."""
    try:
        return now - os.stat(transcript).st_mtime > STALE_SECONDS
    except OSError:
        return True
