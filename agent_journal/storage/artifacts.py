"""The artifact store: content-addressed blobs under <workspace>/artifacts.

Invariants:
- A blob's reference is `xxh3-128:<32 hex>` of its exact bytes; it lives at
  <root>/workspaces/<ws>/artifacts/<first 2 hex>/<32 hex>, 0600 in 0700 folders
  (spec/FORMAT.md, "Artifacts"). A reference is validated before it becomes a
  path: references arrive in events, and events arrive from other replicas.
- A blob is written whole (temp file, fsync, rename) before any event cites it.
- A blob that an event still cites is never deleted, even by a compaction that
  runs while the event is being written. Blobs are shared by content, so a new
  capture of bytes an old, purged capture held names the same file. The two
  sides meet on a `flock` of the blob file itself: a writer holds it shared
  from the moment it has made sure the file is there until its event has
  committed (`BlobHolds`), and compaction deletes a blob only while holding it
  exclusively, after looking once more for rows that cite it (`erase_blobs`).
  A writer that finds its file unlinked under it writes it again.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from agent_journal.core.errors import JournalError
from agent_journal.storage.files import check_confined, make_private_dirs, write_file_atomic

TYPE_CHECKING = False  # typing is costly on the hook path; mypy reads this as True
if TYPE_CHECKING:

    from agent_journal.storage.workspace import Workspace

ARTIFACTS_DIR = "artifacts"
ARTIFACT_ALGO = "xxh3-128"
_HEX = frozenset("0123456789abcdef")


def _is_hex32(text: str) -> bool:
    """32 lowercase hex digits: an xxh3-128 digest as blobs are named (no regex: `re`
    costs the hook milliseconds to import)."""
    return len(text) == 32 and _HEX.issuperset(text)


def artifact_ref(data: bytes) -> str:
    """The content address of `data`."""
    import xxhash

    return f"{ARTIFACT_ALGO}:{xxhash.xxh3_128_hexdigest(data)}"


def blob_matches_ref(path: str, ref: str) -> bool:
    """Whether the file at `path` holds the bytes `ref` names (a blob that arrived from
    elsewhere, before it is stored under that name)."""
    import xxhash

    algo, sep, hexdigest = ref.partition(":") if isinstance(ref, str) else ("", "", "")
    if not sep or algo != ARTIFACT_ALGO or not _is_hex32(hexdigest):
        return False
    digest = xxhash.xxh3_128()
    try:
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                digest.update(chunk)
    except OSError:
        return False
    return digest.hexdigest() == hexdigest


def artifact_path(ws: Workspace, ref: str) -> str:
    """Where the blob with reference `ref` lives; JournalError for anything but a valid ref."""
    algo, sep, hexdigest = ref.partition(":") if isinstance(ref, str) else ("", "", "")
    if not sep or algo != ARTIFACT_ALGO or not _is_hex32(hexdigest):
        raise JournalError(f"not an artifact reference: {str(ref)[:80]!r}")
    return os.path.join(ws.path, ARTIFACTS_DIR, hexdigest[:2], hexdigest)


class BlobHolds:
    """Shared locks on the blobs a writer is about to cite, held until its event
    has committed (use as a context manager around the capture and the append).

    While one is held, `erase_blobs` cannot take the blob: a compaction either
    saw the committed event before it locked the blob, or locks it only after
    the writer is done, and then finds the event when it looks again.
    """

    def __init__(self) -> None:
        self.fds: list[int] = []

    def __len__(self) -> int:
        return len(self.fds)

    def release(self) -> None:
        fds, self.fds = self.fds, []
        for fd in fds:
            os.close(fd)  # closing the descriptor releases its flock

    def __enter__(self) -> BlobHolds:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


# A blob unlinked under a writer this many times in a row (a compaction per
# attempt) is reported as a failed capture rather than retried for ever.
_WRITE_ATTEMPTS = 8


def _flock(fd: int, exclusive: bool, *, wait: bool) -> bool:
    """Take the lock; False when `wait` is off and someone else holds it. A
    filesystem without flock (some network mounts) counts as locked: there
    both sides go on as they did before the lock existed."""
    import fcntl

    flags = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
    try:
        fcntl.flock(fd, flags if wait else flags | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError:
        return True
    return True


def _read_fd(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def write_artifact(ws: Workspace, data: bytes, holds: BlobHolds | None = None) -> str:
    """Store `data` as a blob (temp file, fsync, rename, fsync folder); return its ref.

    Content-addressed, so writing the same bytes twice is one file. An existing
    file is kept only if its bytes are exactly `data`; anything else there
    (damage, a hand edit) is replaced whole. With `holds`, the blob is left
    locked shared in it (see BlobHolds), and only once it is known to be linked
    under its name. OSError propagates: the caller records the capture as failed.
    """
    ref = artifact_ref(data)
    path = artifact_path(ws, ref)
    check_confined(path)
    for _ in range(_WRITE_ATTEMPTS):
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            fd = -1
        if fd >= 0:
            try:
                _flock(fd, False, wait=True)
                # Unlinked between the open and the lock: a compaction took it.
                if os.fstat(fd).st_nlink > 0 and _read_fd(fd) == data:
                    if holds is not None:
                        holds.fds.append(fd)
                        fd = -1
                    return ref
            finally:
                if fd >= 0:
                    os.close(fd)
        make_private_dirs(os.path.dirname(path))
        try:
            write_file_atomic(path, data)
        except FileNotFoundError:
            continue  # a compaction swept the temp file (or the folder) meanwhile
        if holds is None:
            return ref
    raise OSError(f"blob {ref} kept being deleted while it was written")


def read_artifact(ws: Workspace, ref: str) -> bytes:
    """The blob's bytes as stored; FileNotFoundError when it is not there. Verifies nothing."""
    path = artifact_path(ws, ref)
    check_confined(path)
    with open(path, "rb") as fh:
        return fh.read()


def artifact_files(ws: Workspace, digests: Iterable[str]) -> dict[str, list[str]]:
    """Blob files under the workspace's artifact store named by each hex digest.

    The store is content-addressed, so a blob's path spells its digest (possibly
    split into fan-out folders); a digest shorter than 16 characters matches nothing.
    """
    wanted = {h.lower() for h in digests if len(h) >= 16}
    found: dict[str, list[str]] = {}
    top = os.path.join(ws.path, "artifacts")
    check_confined(top)
    if not wanted or not os.path.isdir(top):
        return found
    for folder, _dirs, files in os.walk(top):
        for name in files:
            path = os.path.join(folder, name)
            flat = os.path.relpath(path, top).replace(os.sep, "").lower()
            for digest in wanted:
                if digest in flat:
                    found.setdefault(digest, []).append(path)
    return found


# A blob no event cites is a writer's that has not committed yet, or one killed
# between its blob and its event. Only the second kind is older than this.
UNCITED_GRACE_S = 3600.0


def uncited_blobs(ws: Workspace, cited: set[str], *, now: float | None = None) -> set[str]:
    """Digests of the blob files (and writers' leftover temp files of them) under the
    workspace's store that `cited` does not name and that were last written more
    than UNCITED_GRACE_S ago. Nothing can tombstone such bytes (no event names
    them), so compaction erases them like a purged capture's (`erase_blobs`)."""
    import re
    import time

    hex32 = re.compile(r"[0-9a-f]{32}")
    top = os.path.join(ws.path, ARTIFACTS_DIR)
    check_confined(top)
    if not os.path.isdir(top):
        return set()
    limit = (time.time() if now is None else now) - UNCITED_GRACE_S
    found: set[str] = set()
    for folder, _dirs, files in os.walk(top):
        for name in files:
            named = hex32.search(name.lower())
            if named is None or named.group(0) in cited:
                continue
            try:
                if os.lstat(os.path.join(folder, name)).st_mtime < limit:
                    found.add(named.group(0))
            except FileNotFoundError:
                continue
    return found


# How long compaction waits for writers citing a blob to commit before it
# leaves that blob for the next run.
ERASE_WAIT_S = 10.0


def erase_blobs(files: dict[str, str], still_cited: Callable[[], set[str]], *,
                wait_s: float | None = None) -> tuple[list[str], list[str]]:
    """Delete blob files no event cites, without racing a writer about to cite one.

    `files` maps each blob file (or a writer's leftover temp file of it) to
    its digest. Every file free of writers is locked exclusively; then
    `still_cited()` looks once more at what was appended meanwhile, and only
    uncited files are unlinked, each while still locked, and the locks are
    let go at once. Files writers hold are tried again in later rounds, for
    up to `wait_s`: no lock is held while waiting, so a writer is never kept
    waiting longer than one look. Returns (paths removed, paths left because
    writers held them all along: their digests must be tried by a later run).
    """
    import time

    removed: list[str] = []
    remaining = sorted(files)
    deadline = time.monotonic() + (ERASE_WAIT_S if wait_s is None else wait_s)
    while remaining:
        held: dict[str, int] = {}
        busy: list[str] = []
        try:
            for path in remaining:
                try:
                    fd = os.open(path, os.O_RDONLY)
                except FileNotFoundError:
                    continue
                if _flock(fd, True, wait=False):
                    held[path] = fd
                else:
                    os.close(fd)
                    busy.append(path)
            cited = still_cited() if held else set()
            for path, fd in held.items():
                if files[path] in cited:
                    continue
                try:
                    # Only the very file locked: a name that now holds another
                    # file (written again after damage) is left to a later run.
                    if os.stat(path).st_ino != os.fstat(fd).st_ino:
                        continue
                    os.unlink(path)
                except FileNotFoundError:
                    continue
                removed.append(path)
        finally:
            for fd in held.values():
                os.close(fd)
        remaining = busy
        if remaining:
            if time.monotonic() >= deadline:
                break
            time.sleep(0.01)
    return removed, remaining


def blob_present(path: str) -> bool:
    """Whether a blob is there and will stay: looked at under a shared lock, so a
    compaction deleting it is either done (False: write it again) or has not
    begun its last look for citing rows, which then finds the caller's."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        _flock(fd, False, wait=True)
        return os.fstat(fd).st_nlink > 0
    finally:
        os.close(fd)
