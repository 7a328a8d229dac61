"""The remote interface: where replicas meet (a bucket or a shared folder), and its URLs.

Invariants:
- A remote is a flat space of keys holding immutable byte strings, with one
  exception the callers name explicitly: `put_bytes` with `if_match` replaces
  a key only when it still holds what the caller read (the manifest). Objects
  are created whole or not at all (`put_file` never replaces a key).
- Every failure of the service or the folder is a `RemoteError` carrying one
  line; a key that is not there is `ObjectMissing`, so callers can tell "gone"
  from "broken", and one whose object is not a plain file is `ObjectUnusable`
  (the caller refuses that object and goes on).
- URLs are checked here, before any backend is loaded (ops.remotes.open_remote
  picks the backend): a malformed one is a UsageError.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple

from agent_journal.core.errors import RemoteError, UsageError

Progress = Callable[[int], None] | None

_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_PART = re.compile(r"^[A-Za-z0-9!_.*'()=+,;@&$-]{1,255}$")
_REMOTE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
_ENDPOINT = re.compile(r"^https?://[^\s/?#]+(:\d+)?/?$")


class ObjectMissing(RemoteError):
    """A key that is not in the remote."""


class ObjectUnusable(RemoteError):
    """A key whose object cannot be one this journal wrote (in a shared folder: a folder,
    a FIFO, a device or a symbolic link where a file should be): refused, not read."""


class PreconditionFailed(RemoteError):
    """A conditional write found the key changed (or present) since it was read."""


class Tops(NamedTuple):
    """What `Remote.list_tops` found."""

    etags: dict[str, str | None]  # key -> its etag
    rolled: list[str]  # the prefixes the other keys rolled up into


class Remote:
    """What sync needs from a remote. Keys are relative to the URL's prefix."""

    url = ""
    # Whether a listing refuses a missing bucket or refused credentials with the very
    # line `check` gives, so that a command whose first request is a listing need not
    # check first (a folder's listing of a missing folder would be empty: no).
    listing_checks = False

    def check(self) -> None:
        """Raise RemoteError unless the bucket or folder exists and answers."""
        raise NotImplementedError

    def list_keys(self, prefix: str) -> dict[str, int]:
        """Every key below `prefix` (a folder-like path ending in '/') -> its size."""
        raise NotImplementedError

    def list_tops(self, prefix: str, delimiter: str) -> Tops:
        """One listing below `prefix` that rolls keys up at `delimiter`, as S3's
        ListObjectsV2 does: the keys in which `delimiter` does not occur after `prefix`
        (with their etags, None for an object that is not a plain file), and each
        prefix up to and including the first `delimiter` of every other key. A
        service that refuses the delimiter answers as for '/', which rolls up more."""
        raise NotImplementedError

    def get_bytes(self, key: str, *, if_none_match: str | None = None
                  ) -> tuple[bytes, str] | None:
        """(bytes, etag) of a key; None when `if_none_match` still matches.
        Raises ObjectMissing."""
        raise NotImplementedError

    def download(self, key: str, dest: str, *, progress: Progress = None) -> tuple[int, str]:
        """Write a key's bytes into the new file `dest`; returns their file_digest
        (taken as they were written). Raises ObjectMissing."""
        raise NotImplementedError

    def put_file(self, key: str, path: str, *, progress: Progress = None) -> bool:
        """Create a key from a file; False (nothing changed) when it already exists."""
        raise NotImplementedError

    def put_bytes(self, key: str, data: bytes, *, if_match: str | None) -> str:
        """Write a small key conditionally: replace it only while it holds `if_match`,
        or create it only when absent (`if_match` None). Returns the new etag.
        Raises PreconditionFailed."""
        raise NotImplementedError

    def delete(self, key: str) -> None:
        """Remove a key; a key already gone is not an error."""
        raise NotImplementedError

    def versioning(self) -> str | None:
        """'Enabled' or 'Suspended' when the service keeps old versions of keys."""
        return None

    def probe_conditional_writes(self, key: str) -> str | None:
        """Whether the service enforces the conditions of `put_bytes` and `put_file`:
        None when it does, else one line saying what it did instead. May write and
        then deletes `key` (a fresh key of the caller's own). A folder enforces them
        itself (link never replaces; the manifest is compared under a lock file)."""
        return None

    def without_conditions(self) -> None:
        """Go on with a service that does not enforce conditional writes (the user
        chose to): each conditional replace compares the key's current etag first."""


def check_remote_name(name: str | None) -> str:
    if name is None or not _REMOTE_NAME.match(name):
        raise UsageError(f"bad remote name {name!r}: use 1-64 letters, digits, '_', '.' or "
                         "'-', starting with a letter, digit or '_'")
    return name


# Said instead of the URL (which is never echoed) when it carries credentials.
_NO_SECRETS = ("it carries credentials, which agent-journal never stores (a remote is "
               "written to config.json or a committed project file): remove them, and give "
               "them through the standard AWS chain instead (AWS_ACCESS_KEY_ID and "
               "AWS_SECRET_ACCESS_KEY, AWS_PROFILE and ~/.aws, or an instance role)")


def _carries_secret(url: str) -> bool:
    """user:password@ in the authority, or a query (a signed or keyed URL)."""
    if not isinstance(url, str):
        return False
    _, sep, rest = url.partition("://")
    authority = rest.split("/", 1)[0] if sep else ""
    return "@" in authority or ("?" in url and "=" in url.split("?", 1)[1])


def check_endpoint(url: str | None) -> str | None:
    if url is None:
        return None
    if _carries_secret(url):
        raise UsageError(f"bad endpoint URL: {_NO_SECRETS}")
    if not _ENDPOINT.match(url):
        raise UsageError(f"bad --endpoint-url {url!r}: expected http(s)://HOST[:PORT]")
    return url.rstrip("/")


def parse_url(url: str) -> tuple[str, str, str]:
    """('s3', bucket, prefix) or ('file', absolute folder, ''); UsageError otherwise (never
    echoing a URL that carries credentials)."""
    if _carries_secret(url):
        raise UsageError(f"bad remote URL: {_NO_SECRETS}")
    if not isinstance(url, str) or url != url.strip() or any(c in url for c in "?#\\\0\n\r\t"):
        raise UsageError(f"bad remote URL {url!r}: no spaces, '?', '#' or backslashes")
    if url.startswith("s3://"):
        rest = url[len("s3://"):].rstrip("/")
        bucket, _, prefix = rest.partition("/")
        if not _BUCKET.match(bucket) or ".." in bucket:
            raise UsageError(f"bad remote URL {url!r}: the bucket name must be 3-63 lower-case "
                             "letters, digits, '.' or '-'")
        parts = prefix.split("/") if prefix else []
        for part in parts:
            if part in ("", ".", "..") or not _PART.match(part):
                raise UsageError(f"bad remote URL {url!r}: unusable prefix part {part!r}")
        return "s3", bucket, "/".join(parts)
    if url.startswith("file://"):
        path = url[len("file://"):]
        if not path.startswith("/"):
            raise UsageError(f"bad remote URL {url!r}: expected file:///ABSOLUTE/PATH "
                             "(no host)")
        parts = [p for p in path.split("/") if p]
        if any(p in (".", "..") for p in parts):
            raise UsageError(f"bad remote URL {url!r}: no '.' or '..' in the path")
        return "file", "/" + "/".join(parts), ""
    raise UsageError(f"bad remote URL {url!r}: expected s3://BUCKET[/PREFIX] or "
                     "file:///PATH")
