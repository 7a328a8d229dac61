"""The project file, `.agent-journal.toml`: which workspace (and root) a project writes to.

Invariants:
- It is found from a folder upwards, the nearest one wins; a folder without one costs one
  failed stat per level. The plain form `render` writes is read without `tomllib` or `re`
  (the installed hook reads the file on every tool call); anything else goes to tomllib.
- It holds only string keys: `workspace` (a valid id), `root`, and the team's sync remote
  `remote` with its `remote-endpoint-url` (spec/SYNC.md; never credentials: a file can
  hold no other key, and sync refuses a URL that carries any); anything else in it, or a
  file that is not TOML, is refused with its path (and line, where TOML says), never
  guessed at.
- A relative `root` is relative to the folder holding the file, so the file means the same
  thing from every subfolder.
- Written only by `render` (a fixed two-line writer), so what install writes, uninstall can
  recognise byte for byte.
"""

from __future__ import annotations

import os

from agent_journal.core.errors import JournalError, UsageError
from agent_journal.core.model import validate_id

TYPE_CHECKING = False  # typing is costly on the write path; mypy reads this as True
if TYPE_CHECKING:
    pass

NAME = ".agent-journal.toml"
KEYS = ("workspace", "root", "remote", "remote-endpoint-url")
HEADER = "# agent-journal: where this project's journal lives (written by `hooks install`)\n"


class ProjectFile:
    """A project file found on disk: its path, folder and the values it holds."""

    def __init__(self, path: str, workspace: str | None, root: str | None, text: str,
                 remote: str | None = None, remote_endpoint: str | None = None) -> None:
        self.path = path
        self.folder = os.path.dirname(path)
        self.workspace = workspace
        self.root = root
        self.text = text
        self.remote = remote  # checked where it is used (ops/remotes.py), not here
        self.remote_endpoint = remote_endpoint

    def root_path(self) -> str | None:
        """`root` made absolute against the file's folder (None when the file names none)."""
        if self.root is None:
            return None
        return os.path.normpath(os.path.join(self.folder, os.path.expanduser(self.root)))


def find(start: str | None = None) -> ProjectFile | None:
    """The nearest project file from `start` (default: the current folder) upwards."""
    try:
        folder = os.path.abspath(start if start is not None else os.getcwd())
    except OSError:  # the current folder was removed under us
        return None
    while True:
        path = os.path.join(folder, NAME)
        if os.path.isfile(path):
            return load(path)
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def load(path: str) -> ProjectFile:
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise JournalError(f"cannot read project file {path}: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise JournalError(f"project file {path} is not UTF-8 text") from None
    data = _read_simple(text)
    if data is None:
        # Anything but the plain `key = "string"` lines render writes: the real TOML parser
        # (which imports `typing`, so the write path does not load it for the common case).
        import tomllib

        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise JournalError(f"project file {path} is not valid TOML: {exc}") from None
    unknown = sorted(set(data) - set(KEYS))
    if unknown:
        raise JournalError(f"project file {path} has unknown key(s) {', '.join(unknown)}; "
                           f"it may hold only {', '.join(KEYS)}")
    values: dict[str, str | None] = {}
    for key in KEYS:
        value = data.get(key)
        if value is not None and (not isinstance(value, str) or value == ""):
            raise JournalError(f"project file {path}: {key} must be a non-empty string")
        if key == "workspace" and value is not None:
            try:  # the file is wrong, not the command line: exit 1, naming the file
                validate_id(value, key)
            except UsageError as exc:
                raise JournalError(f"project file {path}: {exc.message}") from None
        values[key] = value
    return ProjectFile(path, values["workspace"], values["root"], text, values["remote"],
                       values["remote-endpoint-url"])


# The characters a key may hold in the plain form render writes (a TOML bare key).
_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_HEX = frozenset("0123456789abcdefABCDEF")


def _read_simple(text: str) -> dict[str, str] | None:
    """The file's keys when every line is blank, a comment or `key = "basic string"` with
    only the escapes render writes (\\", \\\\, \\uXXXX), each key once; else None (let
    tomllib decide). Read without `re`: the hook reads this file on every tool call."""
    data: dict[str, str] = {}
    # TOML ends lines at \n (or \r\n) only; splitlines() would also split at \x85 and
    # friends, which may stand inside a string.
    for line in text.split("\n"):
        stripped = line.removesuffix("\r").strip(" \t")
        if not stripped or stripped.startswith("#"):
            continue
        key, eq, rest = stripped.partition("=")
        key = key.rstrip(" \t")
        if not eq or not key or not set(key) <= _KEY_CHARS or key in data:
            return None
        value = _basic_string(rest.lstrip(" \t"))
        if value is None:
            return None
        data[key] = value
    return data


def _basic_string(text: str) -> str | None:
    """The value of `text` when it is one TOML basic string and nothing after it but blanks
    (already stripped), holding no control character and no escape but \\", \\\\ and
    \\uXXXX; else None."""
    if not text.startswith('"'):
        return None
    out: list[str] = []
    i, end = 1, len(text)
    while i < end:
        ch = text[i]
        if ch == '"':
            return "".join(out) if i == end - 1 else None
        if ch < " " or ch == "\x7f":
            return None
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        escaped = text[i + 1:i + 2]
        if escaped in ('"', "\\"):
            out.append(escaped)
            i += 2
        elif escaped == "u" and len(text[i + 2:i + 6]) == 4 and set(text[i + 2:i + 6]) <= _HEX:
            out.append(chr(int(text[i + 2:i + 6], 16)))
            i += 6
        else:
            return None
    return None


def render(workspace: str, root: str | None) -> str:
    """The file's text: a header, then `workspace` and `root` as TOML basic strings."""
    lines = [HEADER, f"workspace = {_toml_string(workspace)}\n"]
    if root is not None:
        lines.append(f"root = {_toml_string(root)}\n")
    return "".join(lines)


def _toml_string(value: str) -> str:
    out = ['"']
    for ch in value:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)
