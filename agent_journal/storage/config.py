"""The root's own files besides the journal: config.json, thesaurus.json and the private logs.

Invariants:
- A missing config costs one failed open (the hook asks on every call).
- thesaurus.json (spec/SEARCH.md) is read whole on every search and replaced whole
  (temporary file, fsync, rename, 0600) by `alias`: a search sees one version or the next.
- Logs are 0600, append-only lines, and keep one previous file past 1 MiB.
"""

from __future__ import annotations

import os

from agent_journal.core.errors import JournalError, StorageError
from agent_journal.storage.files import (
    FILE_MODE,
    check_confined,
    make_private_dirs,
    write_file_atomic,
)

CONFIG_NAME = "config.json"
THESAURUS_NAME = "thesaurus.json"
LOGS_DIR = "logs"
LOG_MAX_BYTES = 1024 * 1024


def read_root_config(root_path: str) -> tuple[str, bytes] | None:
    """(path, bytes) of <root>/config.json, or None when there is none.

    One failed open is all a missing file costs: the hook asks on every call.
    """
    path = os.path.join(root_path, CONFIG_NAME)
    check_confined(path)
    try:
        with open(path, "rb") as fh:
            return path, fh.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise JournalError(f"cannot read {path}: {exc.strerror}") from None


def write_root_config(root_path: str, data: bytes) -> None:
    """Replace <root>/config.json whole (temporary file, fsync, rename): a reader
    sees the old settings or the new ones, never a mix."""
    path = os.path.join(root_path, CONFIG_NAME)
    try:
        write_file_atomic(path, data)
    except OSError as exc:  # a read-only root, a full disk: one line, the old file kept
        raise StorageError(f"cannot write {path}: {exc.strerror or exc}") from None


def read_thesaurus(root_path: str) -> tuple[str, bytes | None]:
    """(path, bytes) of <root>/thesaurus.json; None for the bytes when there is none.
    A file that cannot be read raises OSError (the caller counts it as broken)."""
    path = os.path.join(root_path, THESAURUS_NAME)
    check_confined(path)
    try:
        with open(path, "rb") as fh:
            return path, fh.read()
    except FileNotFoundError:
        return path, None


def write_thesaurus(root_path: str, data: bytes) -> None:
    """Replace <root>/thesaurus.json whole and privately (the root is made if need be)."""
    path = os.path.join(root_path, THESAURUS_NAME)
    try:
        make_private_dirs(root_path)
        write_file_atomic(path, data)
    except OSError as exc:
        raise StorageError(f"cannot write {path}: {exc.strerror or exc}") from None


def append_private_log(root_path: str, name: str, line: str, *, folder: str = LOGS_DIR
                       ) -> None:
    """Append one line to <root>/<folder>/<name> (0600), keeping one previous file past
    1 MiB. UnsafeRootError when the folder or the file is a symbolic link."""
    folder = os.path.join(root_path, folder) if folder else root_path
    make_private_dirs(folder)
    path = os.path.join(folder, name)
    check_confined(path)
    check_confined(path + ".1")
    try:
        if os.stat(path).st_size > LOG_MAX_BYTES:
            os.replace(path, path + ".1")
    except FileNotFoundError:
        pass
    # O_NOFOLLOW: a link planted after the check still does not carry the line elsewhere.
    fd = os.open(path, os.O_CREAT | os.O_APPEND | os.O_WRONLY | os.O_NOFOLLOW, FILE_MODE)
    try:
        os.write(fd, line.encode("utf-8", errors="replace") + b"\n")
    finally:
        os.close(fd)
