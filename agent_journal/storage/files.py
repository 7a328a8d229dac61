"""Files under the root: private modes, atomic writes, durable renames.

Invariants:
- Folders are created 0700 and files 0600, whatever the caller's umask.
- A file that must be whole is written to a temporary name, fsynced, renamed
  into place and its folder fsynced: a reader sees the old bytes or the new.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from agent_journal.core import codec

DIR_MODE = 0o700
FILE_MODE = 0o600


def make_private_dirs(path: str) -> None:
    missing: list[str] = []
    current = path
    while not os.path.exists(current):
        missing.append(current)
        current = os.path.dirname(current)
    for folder in reversed(missing):
        try:
            os.mkdir(folder, DIR_MODE)
        except FileExistsError:
            continue
        os.chmod(folder, DIR_MODE)  # mkdir's mode is filtered by the umask


def create_private_file(path: str) -> bool:
    """Create an empty 0600 file; False when it already exists."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, FILE_MODE)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def write_file_atomic(path: str, data: bytes, *, mode: int = FILE_MODE) -> None:
    """Temp file, fsync, rename, fsync folder: a reader sees the old file or the whole new one.

    The temporary name is unique per call, so concurrent writers of the same
    path never share a half-written file; a failed write leaves no temp file.
    """
    folder, name = os.path.split(path)
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, FILE_MODE)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if mode != FILE_MODE:
                os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    dfd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def read_text(path: str) -> str:
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def remove_files(paths: Iterable[str]) -> list[str]:
    removed = []
    for path in paths:
        try:
            os.unlink(path)
        except FileNotFoundError:
            continue
        removed.append(path)
    return removed


_COPY_CHUNK = 1 << 20


def fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def rename_durable(tmp: str, final: str, *, clobber: bool = True) -> None:
    """Rename a fully written, fsynced temp file into place and persist the rename.

    With clobber=False an existing `final` is an error (FileExistsError),
    never silently replaced.
    """
    if clobber:
        os.replace(tmp, final)
    else:
        os.link(tmp, final)
        os.unlink(tmp)
    fsync_path(os.path.dirname(final) or ".")


def file_digest(path: str) -> tuple[int, str]:
    """(byte count, `xxh3-64:` checksum) of a file, read in chunks."""
    import xxhash

    h = xxhash.xxh3_64()
    size = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(_COPY_CHUNK):
            h.update(chunk)
            size += len(chunk)
    return size, codec.CHECKSUM_PREFIX + h.hexdigest()


def unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def copy_file_verified(src: str, dest: str, *, size: int, checksum: str) -> bool:
    """Copy `src` to `dest` atomically if its bytes match `size` and `checksum`.

    Returns False (and leaves `dest` untouched) when `src` is missing or differs.
    """
    import xxhash

    make_private_dirs(os.path.dirname(dest))
    tmp = os.path.join(os.path.dirname(dest), f".{os.path.basename(dest)}.{os.getpid()}.tmp")
    h = xxhash.xxh3_64()
    total = 0
    try:
        src_fh = open(src, "rb")
    except OSError:
        return False
    try:
        fd = os.open(tmp, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, FILE_MODE)
        try:
            while chunk := src_fh.read(_COPY_CHUNK):
                h.update(chunk)
                total += len(chunk)
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
    finally:
        src_fh.close()
    if total != size or codec.CHECKSUM_PREFIX + h.hexdigest() != checksum:
        unlink_quietly(tmp)
        return False
    rename_durable(tmp, dest)
    return True
