"""Artifacts: large tool outputs kept whole, content-addressed, beside the segments.

Invariants:
- A blob's reference is `xxh3-128:<32 hex>` of its exact bytes; it lives at
  <root>/workspaces/<ws>/artifacts/<first 2 hex>/<32 hex>, 0600 in 0700 folders
  (spec/FORMAT.md, "Artifacts").
- A reference is validated before it becomes a path: references arrive in
  events, and events arrive from other replicas.
- A blob is written whole (temp file, fsync, rename) or not at all; an existing
  file is kept only when its bytes are exactly the ones being stored.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from agent_journal.core.errors import JournalError
from agent_journal.storage.files import make_private_dirs, write_file_atomic

TYPE_CHECKING = False  # typing is costly on the hook path; mypy reads this as True
if TYPE_CHECKING:

    from agent_journal.storage.workspace import Workspace

ARTIFACTS_DIR = "artifacts"
ARTIFACT_ALGO = "xxh3-128"
_ARTIFACT_HEX = re.compile(r"[0-9a-f]{32}")


def artifact_ref(data: bytes) -> str:
    """The content address of `data`."""
    import xxhash

    return f"{ARTIFACT_ALGO}:{xxhash.xxh3_128_hexdigest(data)}"


def artifact_path(ws: Workspace, ref: str) -> str:
    """Where the blob with reference `ref` lives; JournalError for anything but a valid ref."""
    algo, sep, hexdigest = ref.partition(":") if isinstance(ref, str) else ("", "", "")
    if not sep or algo != ARTIFACT_ALGO or not _ARTIFACT_HEX.fullmatch(hexdigest):
        raise JournalError(f"not an artifact reference: {str(ref)[:80]!r}")
    return os.path.join(ws.path, ARTIFACTS_DIR, hexdigest[:2], hexdigest)


def write_artifact(ws: Workspace, data: bytes) -> str:
    """Store `data` as a blob (temp file, fsync, rename, fsync folder); return its ref.

    Content-addressed, so writing the same bytes twice is one file. An existing
    file is kept only if its bytes are exactly `data`; anything else there
    (damage, a hand edit) is replaced whole. OSError propagates: the caller
    records the capture as failed.
    """
    ref = artifact_ref(data)
    path = artifact_path(ws, ref)
    try:
        with open(path, "rb") as fh:
            if fh.read() == data:
                return ref
    except FileNotFoundError:
        pass
    make_private_dirs(os.path.dirname(path))
    write_file_atomic(path, data)
    return ref


def read_artifact(ws: Workspace, ref: str) -> bytes:
    """The blob's bytes as stored; FileNotFoundError when it is not there. Verifies nothing."""
    with open(artifact_path(ws, ref), "rb") as fh:
        return fh.read()


def artifact_files(ws: Workspace, digests: Iterable[str]) -> dict[str, list[str]]:
    """Blob files under the workspace's artifact store named by each hex digest.

    The store is content-addressed, so a blob's path spells its digest (possibly
    split into fan-out folders); a digest shorter than 16 characters matches nothing.
    """
    wanted = {h.lower() for h in digests if len(h) >= 16}
    found: dict[str, list[str]] = {}
    top = os.path.join(ws.path, "artifacts")
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
