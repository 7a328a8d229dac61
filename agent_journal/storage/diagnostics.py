"""Facts about the storage engine and the disk, for `doctor`.

Invariant: read-only; opens no segment for writing and creates nothing.
"""

from __future__ import annotations

import os
import shutil
import sqlite3

from agent_journal.storage.connection import JOURNAL_MODE, connect


def sqlite_version() -> str:
    return sqlite3.sqlite_version


def intended_journal_mode() -> str:
    return JOURNAL_MODE


def segment_journal_mode(path: str) -> str | None:
    """The journal mode a segment file is in (None when it cannot be read)."""
    try:
        conn = connect(path, readonly=True)
        try:
            row = conn.execute("PRAGMA journal_mode").fetchone()
        finally:
            conn.close()
    except sqlite3.Error:
        return None
    return str(row[0]) if row else None


def free_bytes(path: str) -> int:
    """Free space on the file system that holds `path` (or its nearest existing folder)."""
    folder = path
    while not os.path.exists(folder):
        folder = os.path.dirname(folder)
    return shutil.disk_usage(folder).free
