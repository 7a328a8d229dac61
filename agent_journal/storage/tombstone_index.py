"""Which subjects each segment's tombstone rows name, kept so a writer need not open
every segment to ask.

Every write of content first asks whether a tombstone names its subject
(Workspace.tombstoned_among). With a hundred segments that was a hundred SQLite opens per
hook. The index, `<root>/cache/tombstones/<ws>.json`, keeps per segment the subjects its
rows stored as tombstones name, under the segment's signature (verified_mark.signature:
its file, its WAL, its inode's change time).

Invariants:
- The answer is the one asking every segment gives: a segment whose signature differs from
  the one kept (it gained rows, was checkpointed, compacted or replaced), or that the index
  does not know, is asked again; the signature is taken before the rows are read, and one
  taken within RACY_NS of the file's newest change is not kept (the next writer asks
  again), so a row that landed meanwhile is never missed.
- A disposable projection: a missing, damaged or foreign file is an empty index; it is
  rewritten whole (atomically, private) only when it changed, and a failure to write it
  costs only time. It holds tombstone subjects alone, which outlive every compaction.
"""

from __future__ import annotations

import os
import stat
import time

from agent_journal.core import cjson
from agent_journal.core.errors import JournalError
from agent_journal.storage.files import FILE_MODE, make_private_dirs, unlink_quietly
from agent_journal.storage.verified_mark import signature, vouches

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

AREA = "tombstones"
FORMAT = 1
# json.dumps(..., sort_keys=True), without importing json (milliseconds on the hook path).
_encode = cjson.encoder(sort_keys=True)


def path_of(root_path: str, workspace: str) -> str:
    return os.path.join(root_path, "cache", AREA, workspace + ".json")


def tombstoned_among(root_path: str, workspace: str, paths: list[str], wanted: set[str],
                     ask: Callable[[str, set[str] | None], set[str] | None]) -> set[str]:
    """Which of `wanted` a tombstone row of the segments at `paths` names. `ask(path,
    subjects)` gives the subjects among `subjects` (None: all of them) that a segment's
    tombstone rows name (None: the segment could not be opened, which answers nothing,
    as a writer's look-up has always done). A segment whose answer will not be kept (its
    signature is too fresh: the one being written to) is asked about `wanted` alone,
    through its subject index; one whose answer is kept is asked for all."""
    kept = _load(root_path, workspace)
    fresh: dict[str, list[object]] = {}
    found: set[str] = set()
    for path in paths:
        name = os.path.basename(path)
        taken = time.time_ns()
        # (Only a regular file has a signature: opening a FIFO to read one would block. Not
        # a link either, so its lstat is its stat.)
        st = _regular(path)
        sig = signature(path, st) if st is not None else None
        held = kept.get(name)
        if sig is not None and isinstance(held, list) and len(held) == 2 \
                and held[0] == sig[0] and isinstance(held[1], list):
            subjects = held[1]
        else:
            keep = vouches(sig, taken)
            asked = ask(path, None if keep else wanted)
            if asked is None:
                continue
            subjects = sorted(asked)
            if keep and sig is not None:
                fresh[name] = [sig[0], subjects]
        found.update(wanted.intersection(subjects))
        if name not in fresh and isinstance(held, list) and subjects is held[1]:
            fresh[name] = held
    if fresh != kept:
        _save(root_path, workspace, fresh)
    return found


def _regular(path: str) -> os.stat_result | None:
    """The file's lstat when it is a regular file (no link, pipe or folder), else None."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st if stat.S_ISREG(st.st_mode) else None


def _load(root_path: str, workspace: str) -> dict[str, object]:
    try:
        with open(path_of(root_path, workspace), "rb") as fh:
            data = cjson.loads(fh.read().decode("utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("format") != FORMAT or \
            not isinstance(data.get("segments"), dict):
        return {}
    return data["segments"]


def _save(root_path: str, workspace: str, segments: dict[str, list[object]]) -> None:
    """Written whole under a temporary name and renamed over the old file; not fsynced:
    a file a crash tears is an empty index, which costs only time."""
    path = path_of(root_path, workspace)
    body = _encode({"format": FORMAT, "segments": segments}).encode()
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        make_private_dirs(os.path.dirname(path))
        fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, FILE_MODE)
        try:
            os.write(fd, body)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except (OSError, JournalError):
        unlink_quietly(tmp)  # only an accelerator: the next writer asks the segments again
