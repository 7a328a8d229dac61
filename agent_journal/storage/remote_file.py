"""A remote that is a plain folder (a mounted or synced share): `file:///path`.

Invariants:
- An object appears whole or not at all: it is written under a hidden
  temporary name in its final folder, fsynced, then hard-linked to its key
  (link never replaces a key, so an object once written keeps its bytes) and
  the folder fsynced. Readers skip names starting with '.'.
- A conditional replace (the manifest) compares and renames under a lock file
  beside it, so two writers cannot both pass the same comparison.
- Files and folders get the permission bits of the remote folder (less the
  execute bits for files): who may read the share is its owner's choice.
- The remote folder itself must exist; it is never created here.
- Reading a key opens only a regular file, never through a symbolic link in its
  last part and without waiting on a FIFO: anyone who can write the share could
  put a FIFO or a link to /dev/zero where an object belongs (ObjectUnusable).
  Replica folders that are symbolic links are not listed.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import BinaryIO

from agent_journal.core.errors import RemoteError
from agent_journal.storage.files import RunningDigest, open_private_new
from agent_journal.storage.locks import FileLock
from agent_journal.storage.remote import (
    ObjectMissing,
    ObjectUnusable,
    PreconditionFailed,
    Progress,
    Remote,
    Tops,
)

_CHUNK = 1 << 20


def _etag(st: os.stat_result) -> str:
    return f"{st.st_ino:x}-{st.st_size:x}-{st.st_mtime_ns:x}"


class FolderRemote(Remote):
    def __init__(self, url: str, folder: str) -> None:
        self.url = url
        self.folder = folder
        self._dir_mode = 0o700
        self._file_mode = 0o600

    def _path(self, key: str) -> str:
        return os.path.join(self.folder, *key.split("/"))

    def _open_object(self, key: str) -> BinaryIO:
        """The regular file at `key`, open for reading. Raises ObjectMissing,
        ObjectUnusable or RemoteError."""
        flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | \
            getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(self._path(key), flags)
        except FileNotFoundError:
            raise ObjectMissing(f"remote {self.url} has no {key}") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise ObjectUnusable(f"remote {self.url}: {key} is a symbolic link") from None
            raise self._fail(f"read {key}", exc) from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ObjectUnusable(f"remote {self.url}: {key} is not a regular file")
            os.set_blocking(fd, True)
            return os.fdopen(fd, "rb")
        except BaseException:
            os.close(fd)
            raise

    def _fail(self, what: str, exc: OSError) -> RemoteError:
        return RemoteError(f"remote {self.url}: cannot {what}: {exc.strerror or exc}")

    def check(self) -> None:
        try:
            st = os.stat(self.folder)
        except FileNotFoundError:
            raise RemoteError(f"remote folder {self.folder} does not exist") from None
        except OSError as exc:
            raise self._fail("reach the folder", exc) from None
        if not os.path.isdir(self.folder):
            raise RemoteError(f"remote {self.url} is not a folder")
        self._dir_mode = st.st_mode & 0o777
        self._file_mode = st.st_mode & 0o666

    def _makedirs(self, folder: str) -> None:
        missing = []
        while not os.path.isdir(folder):
            missing.append(folder)
            folder = os.path.dirname(folder)
        for f in reversed(missing):
            try:
                os.mkdir(f)
            except FileExistsError:
                continue
            os.chmod(f, self._dir_mode)

    def list_keys(self, prefix: str) -> dict[str, int]:
        base = self._path(prefix)
        out: dict[str, int] = {}
        try:
            for dirpath, _dirs, files in os.walk(base):
                rel = os.path.relpath(dirpath, self.folder).replace(os.sep, "/")
                for name in files:
                    try:
                        out[f"{rel}/{name}"] = os.lstat(os.path.join(dirpath, name)).st_size
                    except FileNotFoundError:
                        continue
        except OSError as exc:
            raise self._fail(f"list {prefix}", exc) from None
        return out

    def list_tops(self, prefix: str, delimiter: str) -> Tops:
        # The keys S3 would list, found by walking only folders whose path holds no
        # `delimiter` (a rolled-up folder is named, never entered). Names starting
        # with '.' (temporary files, the lock) are skipped, and a link is not followed.
        etags: dict[str, str | None] = {}
        rolled: set[str] = set()

        def walk(under: str) -> None:
            try:
                with os.scandir(self._path(under)) as it:
                    entries = [e for e in it if not e.name.startswith(".")]
            except FileNotFoundError:
                return  # removed while listed, as a key may be
            for e in entries:
                path = under + e.name + ("/" if e.is_dir(follow_symlinks=False) else "")
                cut = path.find(delimiter, len(prefix))
                if cut >= 0:
                    rolled.add(path[:cut + len(delimiter)])
                elif path.endswith("/"):
                    walk(path)
                else:
                    try:
                        st = e.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue
                    etags[path] = _etag(st) if stat.S_ISREG(st.st_mode) else None

        try:
            walk(prefix)
        except OSError as exc:
            raise self._fail(f"list {prefix}", exc) from None
        return Tops(etags, sorted(rolled))

    def get_bytes(self, key: str, *, if_none_match: str | None = None
                  ) -> tuple[bytes, str] | None:
        fh = self._open_object(key)
        try:
            with fh:
                etag = _etag(os.fstat(fh.fileno()))
                if if_none_match is not None and etag == if_none_match:
                    return None
                return fh.read(), etag
        except OSError as exc:
            raise self._fail(f"read {key}", exc) from None

    def download(self, key: str, dest: str, *, progress: Progress = None) -> tuple[int, str]:
        src = self._open_object(key)
        digest = RunningDigest()
        try:
            with src, open_private_new(dest) as out:
                while chunk := src.read(_CHUNK):
                    out.write(chunk)
                    digest.update(chunk)
                    if progress is not None:
                        progress(len(chunk))
        except OSError as exc:
            raise self._fail(f"read {key}", exc) from None
        return digest.result()

    def _write_temp(self, final: str, write: object) -> str:
        folder = os.path.dirname(final)
        self._makedirs(folder)
        tmp = os.path.join(folder, f".{os.path.basename(final)}.{os.getpid()}."
                                   f"{os.urandom(4).hex()}.tmp")
        fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, self._file_mode)
        try:
            with os.fdopen(fd, "wb") as out:
                write(out)  # type: ignore[operator]
                out.flush()
                os.fsync(out.fileno())
            os.chmod(tmp, self._file_mode)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        return tmp

    def _sync_dir(self, folder: str) -> None:
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def put_file(self, key: str, path: str, *, progress: Progress = None) -> bool:
        final = self._path(key)
        if os.path.exists(final):
            return False

        def copy(out: object) -> None:
            with open(path, "rb") as src:
                while chunk := src.read(_CHUNK):
                    out.write(chunk)  # type: ignore[attr-defined]
                    if progress is not None:
                        progress(len(chunk))

        try:
            tmp = self._write_temp(final, copy)
            try:
                os.link(tmp, final)
                created = True
            except FileExistsError:
                created = False  # the same key is the same bytes
            finally:
                os.unlink(tmp)
            self._sync_dir(os.path.dirname(final))
        except OSError as exc:
            raise self._fail(f"write {key}", exc) from None
        return created

    def put_bytes(self, key: str, data: bytes, *, if_match: str | None) -> str:
        final = self._path(key)
        try:
            self._makedirs(os.path.dirname(final))
            with FileLock(os.path.join(os.path.dirname(final), ".lock")):
                try:
                    current: str | None = _etag(os.stat(final))
                except FileNotFoundError:
                    current = None
                if current != if_match:
                    raise PreconditionFailed(f"remote {self.url}: {key} changed while this "
                                             "push ran")
                tmp = self._write_temp(final, lambda out: out.write(data))
                os.replace(tmp, final)
                self._sync_dir(os.path.dirname(final))
                return _etag(os.stat(final))
        except OSError as exc:
            raise self._fail(f"write {key}", exc) from None

    def delete(self, key: str) -> None:
        try:
            os.unlink(self._path(key))
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise self._fail(f"delete {key}", exc) from None
