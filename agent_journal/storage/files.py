"""Files under the root: private modes, atomic writes, durable renames, and the rule that
keeps every path inside its root.

Invariants:
- Folders are created 0700 and files 0600, whatever the caller's umask.
- A file that must be whole is written to a temporary name, fsynced, renamed
  into place and its folder fsynced: a reader sees the old bytes or the new.
- Nothing under a journal root is followed out of it. Every helper here that creates,
  opens, replaces or removes a path below a root this process opened (`confine_to`)
  first walks the path from that root with lstat (`check_confined`): a symbolic link on
  the way, or a folder others can write, is refused with UnsafeRootError naming it, so
  a planted `artifacts`, `logs`, `cache/...` or workspace link cannot carry a write (or
  a read) to another place. Code that opens files under a root goes through these
  helpers or calls `check_confined` itself (connection.connect does).
- A folder that cannot be made says why in one line (StorageError naming the path).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable

from agent_journal.core import codec
from agent_journal.core.errors import StorageError, UnsafeRootError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import BinaryIO

DIR_MODE = 0o700
FILE_MODE = 0o600


# Journal roots (absolute, normalised) whose contents must not lead out of them.
_ROOTS: set[str] = set()
_SHARED_WRITE = stat.S_IWGRP | stat.S_IWOTH


def confine_to(root: str) -> None:
    """From now on, refuse any path below `root` that a symlink would carry elsewhere."""
    _ROOTS.add(os.path.normpath(root))


def check_confined(path: str) -> None:
    """Raise UnsafeRootError if `path`, below a confined root, passes through a symbolic
    link or a group/world-writable folder (the root itself is checked by check_root).

    Components that do not exist yet end the walk: whoever creates them goes through
    this module. A few lstat calls: cheap enough for every open on the hook path.
    """
    if not _ROOTS:
        return
    path = os.path.normpath(path)
    root = os.path.dirname(path)
    while root not in _ROOTS:
        parent = os.path.dirname(root)
        if parent == root:
            return  # under no confined root
        root = parent
    current = root
    for part in path[len(root):].split(os.sep):
        if not part:
            continue
        current = os.path.join(current, part)
        try:
            st = os.lstat(current)
        except (FileNotFoundError, NotADirectoryError):
            return
        except OSError as exc:
            raise StorageError(f"cannot examine {current}: {exc.strerror}") from None
        if stat.S_ISLNK(st.st_mode):
            raise UnsafeRootError(
                f"refusing {current}: it is a symbolic link, and nothing under the journal "
                f"root {root} is followed out of it")
        if stat.S_ISDIR(st.st_mode) and st.st_mode & _SHARED_WRITE:
            raise UnsafeRootError(f"refusing {current}: it is group- or world-writable")


def make_private_dirs(path: str) -> None:
    check_confined(path)
    missing: list[str] = []
    current = path
    while True:
        try:
            st = os.stat(current)
        except (FileNotFoundError, NotADirectoryError):
            if os.path.islink(current):
                raise StorageError(f"cannot create folder {current}: it is a symbolic link "
                                   "to nothing") from None
            missing.append(current)
            current = os.path.dirname(current)
            continue
        except OSError as exc:
            raise StorageError(f"cannot create folder {path}: {exc.strerror} ({current})"
                               ) from None
        if not stat.S_ISDIR(st.st_mode):
            raise StorageError(f"cannot create folder {path}: {current} is not a folder")
        break
    for folder in reversed(missing):
        try:
            os.mkdir(folder, DIR_MODE)
        except FileExistsError:
            if os.path.isdir(folder):
                continue  # another process made it first
            raise StorageError(f"cannot create folder {folder}: something else is in the way"
                               ) from None
        except OSError as exc:
            raise StorageError(f"cannot create folder {folder}: {exc.strerror}") from None
        os.chmod(folder, DIR_MODE)  # mkdir's mode is filtered by the umask


def create_private_file(path: str) -> bool:
    """Create an empty 0600 file; False when it already exists."""
    check_confined(path)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, FILE_MODE)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def open_private_new(path: str) -> BinaryIO:
    """A new 0600 file open for writing (binary); FileExistsError if it exists.
    `open(path, "xb")` would take its mode from the umask."""
    check_confined(path)
    return os.fdopen(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, FILE_MODE), "wb")


def write_file_atomic(path: str, data: bytes, *, mode: int = FILE_MODE) -> None:
    """Temp file, fsync, rename, fsync folder: a reader sees the old file or the whole new one.

    The temporary name is unique per call, so concurrent writers of the same
    path never share a half-written file; a failed write leaves no temp file.
    """
    check_confined(path)
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
    check_confined(path)
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def remove_files(paths: Iterable[str]) -> list[str]:
    removed = []
    for path in paths:
        check_confined(path)
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


def rename_durable(tmp: str, final: str, *, clobber: bool = True,
                   sync_folder: bool = True) -> None:
    """Rename a fully written, fsynced temp file into place and persist the rename.

    With clobber=False an existing `final` is an error (FileExistsError),
    never silently replaced. With sync_folder=False the caller fsyncs the
    folder itself once it has renamed everything it publishes together.
    """
    check_confined(final)
    if clobber:
        os.replace(tmp, final)
    else:
        os.link(tmp, final)
        os.unlink(tmp)
    if sync_folder:
        fsync_path(os.path.dirname(final) or ".")


def file_digest(path: str) -> tuple[int, str]:
    """(byte count, `xxh3-64:` checksum) of a file, read in chunks."""
    check_confined(path)
    digest = RunningDigest()
    with open(path, "rb") as fh:
        while chunk := fh.read(_COPY_CHUNK):
            digest.update(chunk)
    return digest.result()


class RunningDigest:
    """`file_digest` of bytes as they are written, so they need not be read back."""

    def __init__(self) -> None:
        import xxhash

        self._h = xxhash.xxh3_64()
        self._size = 0

    def update(self, chunk: bytes) -> None:
        self._h.update(chunk)
        self._size += len(chunk)

    def result(self) -> tuple[int, str]:
        return self._size, codec.CHECKSUM_PREFIX + self._h.hexdigest()


def unlink_quietly(path: str) -> None:
    check_confined(path)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def remove_tree(path: str) -> None:
    """Remove a file, or a folder and everything in it; symlinks are removed, never
    followed; what is already gone is no error."""
    import shutil  # only a failed export needs it

    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    except FileNotFoundError:
        pass


def copy_file_verified(src: str, dest: str, *, size: int, checksum: str) -> bool:
    """Copy `src` to `dest` atomically if its bytes match `size` and `checksum`.

    Returns False (and leaves `dest` untouched) when `src` is missing or differs.
    A write that fails (a full disk) leaves no temporary file and raises
    StorageError naming `dest`.
    """
    import xxhash

    make_private_dirs(os.path.dirname(dest))
    check_confined(dest)
    check_confined(src)
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
    except OSError as exc:
        unlink_quietly(tmp)
        raise StorageError(f"cannot write {dest}: {exc.strerror}") from None
    finally:
        src_fh.close()
    if total != size or codec.CHECKSUM_PREFIX + h.hexdigest() != checksum:
        unlink_quietly(tmp)
        return False
    rename_durable(tmp, dest)
    return True
