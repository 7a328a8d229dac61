"""What push, pull and remote status share: the opened remote, the key layout, the
local state folders, the test hook that kills a push.

Invariants:
- A remote is checked (bucket or folder exists, credentials work) before
  anything is written locally; `sync` checks it once for its pull and its push.
- A replica's keys are below `<workspace>/<replica>/` of the remote.
- Every staging folder is named after the process that made it, so a later
  sync (or compact --apply) removes those a killed process left and no other.
- No push writes to a bucket whose server does not enforce conditional writes
  (probed once per remote, URL and endpoint, and remembered in
  `remotes/<name>/probe.json`), unless the user opted in
  (ENV_ALLOW_UNCONDITIONAL); a refused server leaves nothing written locally.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from typing import NamedTuple

from agent_journal.core.errors import RemoteError
from agent_journal.core.push_plan import PushMemory, Signature
from agent_journal.ops import remotes
from agent_journal.ops.context import Context
from agent_journal.storage.files import make_private_dirs, write_file_atomic
from agent_journal.storage.locks import process_alive
from agent_journal.storage.remote import Remote
from agent_journal.storage.workspace import Workspace

Progress = Callable[[str], None] | None

STATE_DIR = "remotes"
STATE_NAME = "state.json"
PUSH_CACHE = "pushed.json"
PROBE_NAME = "probe.json"
# Set to 1: push to a bucket whose server does not enforce conditional writes
# (its manifest is then compared by reading its etag just before each write).
ENV_ALLOW_UNCONDITIONAL = "AGENT_JOURNAL_ALLOW_UNCONDITIONAL_WRITES"
# Tests only: SIGKILL this process just before its N-th write to the remote
# (objects, manifest, deletes counted together), to prove every point safe; or
# at a named point: "before-manifest" (push memory saved, manifest not written),
# "after-manifest" (manifest written, nothing after it done).
ENV_KILL_AT = "AGENT_JOURNAL_TEST_PUSH_KILL_AT"


def say(progress: Progress, text: str) -> None:
    if progress is not None:
        progress(text)


def replica_prefix(workspace: str, replica: str) -> str:
    return f"{workspace}/{replica}/"


class Opened(NamedTuple):
    """A configured remote, its backend checked to answer."""

    spec: remotes.RemoteSpec
    remote: Remote


def open_checked(ctx: Context, name: str | None, *, listing_first: bool = False) -> Opened:
    """The remote, checked to answer (the bucket or folder exists, the credentials
    work) before anything is written. With `listing_first` (the caller's first request
    is the workspace's listing, which refuses what `check` would, in the same words:
    Remote.listing_checks), that listing is the check: a pull with nothing new then
    costs its listing alone."""
    spec = remotes.resolve(ctx, name)
    remote = remotes.open_remote(spec)
    if not (listing_first and remote.listing_checks):
        remote.check()
    return Opened(spec, remote)


def check_conditional_writes(ws_path: str, workspace: str, replica: str,
                             opened: Opened) -> None:
    """RemoteError, nothing written here, unless the bucket's server enforces the
    conditional writes push relies on (or the user opted in): probed under a fresh
    key of the own prefix, once per remote, URL and endpoint."""
    spec, remote = opened
    if not spec.url.startswith("s3://"):
        return  # a folder enforces them itself
    path = os.path.join(state_dir(ws_path, spec.name), PROBE_NAME)
    about = {"url": spec.url, "endpointUrl": spec.endpoint_url}
    allowed = os.environ.get(ENV_ALLOW_UNCONDITIONAL) == "1"
    remembered = _read_probe(path)
    if remembered == dict(about, conditionalWrites="enforced"):
        return
    if allowed and remembered == dict(about, conditionalWrites="ignored"):
        remote.without_conditions()
        return
    key = replica_prefix(workspace, replica) + f"probe/{os.getpid()}-{os.urandom(8).hex()}"
    why = remote.probe_conditional_writes(key)
    if why is not None and not allowed:
        raise RemoteError(f"refusing to push: {why}, so two roots could replace each "
                          "other's manifest unseen; nothing was pushed (set "
                          f"{ENV_ALLOW_UNCONDITIONAL}=1 to push there anyway)")
    if why is not None:
        remote.without_conditions()
    make_private_dirs(os.path.dirname(path))
    body = dict(about, conditionalWrites="enforced" if why is None else "ignored")
    write_file_atomic(path, json.dumps(body, sort_keys=True).encode("utf-8"))


def _read_probe(path: str) -> object:
    try:
        with open(path, "rb") as fh:
            return json.loads(fh.read())
    except (OSError, ValueError, RecursionError):
        return None  # lost or damaged: probed again


class Killer:
    """The test hook of ENV_KILL_AT (inert unless the variable is set)."""

    def __init__(self) -> None:
        self.raw = os.environ.get(ENV_KILL_AT) or ""
        self.at = int(self.raw) if self.raw.isdigit() else 0
        self.count = 0

    def step(self) -> None:
        self.count += 1
        if self.at and self.count == self.at:
            self._die()

    def point(self, name: str) -> None:
        if self.raw == name:
            self._die()

    def _die(self) -> None:
        import signal

        os.kill(os.getpid(), signal.SIGKILL)


class LoadedMemory(NamedTuple):
    """A push memory (`remotes/<name>/pushed.json`) as read."""

    memory: PushMemory
    raw: bytes | None  # the file's bytes: a memory that says the same is not written again


def load_push_memory(path: str) -> LoadedMemory:
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
        return LoadedMemory(PushMemory.parse(json.loads(raw)), raw)
    except (OSError, ValueError, RecursionError):
        return LoadedMemory(PushMemory(), None)  # lost or damaged: snapshots are taken again


def segment_signature(path: str) -> Signature | None:
    """What changes when a segment does: the file and its WAL (inode, size, mtime)."""
    out: list[int] = []
    for p in (path, path + "-wal"):
        try:
            st = os.stat(p)
        except FileNotFoundError:
            out += [0, 0, 0]
            continue
        except OSError:
            return None
        out += [st.st_ino, st.st_size, st.st_mtime_ns]
    return tuple(out)


def state_dir(ws_path: str, name: str) -> str:
    return os.path.join(ws_path, STATE_DIR, name)


def new_stage(ws: Workspace, name: str, what: str) -> str:
    """A new private folder for one push or pull (`what`), after removing those whose
    process is gone."""
    folder = state_dir(ws.path, name)
    make_private_dirs(folder)
    for entry in os.listdir(folder):
        if entry.startswith(f".{what}-"):
            pid = entry.split("-")[1]
            if pid.isdigit() and not process_alive(int(pid)):
                shutil.rmtree(os.path.join(folder, entry), ignore_errors=True)
    path = os.path.join(folder, f".{what}-{os.getpid()}-{os.urandom(4).hex()}")
    make_private_dirs(path)
    return path


def remove_dead_stages(ws: Workspace) -> list[str]:
    """Delete what killed syncs left under the workspace: push and pull stages of every
    remote (`remotes/<name>/.push-<pid>-*`, `.pull-<pid>-*`) and `remote status` scan
    folders (`.status-<pid>-*`, or the pid-less `.status-*` of older versions) whose
    process is gone. They hold segment snapshots and fetched objects, which a tombstone
    can name: compact --apply calls this so its erasure reaches them."""
    found: list[str] = []
    state = os.path.join(ws.path, STATE_DIR)
    try:
        for remote in os.listdir(state):
            folder = os.path.join(state, remote)
            if os.path.isdir(folder) and not os.path.islink(folder):
                found += [os.path.join(folder, e) for e in os.listdir(folder)
                          if e.startswith((".push-", ".pull-"))]
    except FileNotFoundError:
        pass
    try:
        found += [os.path.join(ws.path, e) for e in os.listdir(ws.path)
                  if e.startswith(".status-")]
    except FileNotFoundError:
        pass
    removed = []
    for path in found:
        pid = os.path.basename(path).split("-")[1]
        if pid.isdigit() and process_alive(int(pid)):
            continue
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed
