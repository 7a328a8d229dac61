"""push, pull or sync with a bound on how long the caller waits (`--within SECONDS`), as an
agent's session hooks run them (spec/SYNC.md, "Syncing from an agent's hooks").

Invariants:
- The command runs in a process of its own, in a session of its own (an agent that ends
  the hook's process group does not end it), its stdin closed and its output appended
  to `<root>/logs/sync.log` (0600; the previous one kept as sync.log.1 past 1 MiB).
- The caller waits at most the bound, then returns and the command goes on: killed or
  not, a push or pull is safe at every point (spec/SYNC.md), so nothing needs it to end
  before the caller does.
- It never fails the caller: what the command did, or that it goes on, is the report;
  its failure is a line of it (and of the log), never an exit code.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from agent_journal.core import clock
from agent_journal.storage.files import FILE_MODE, make_private_dirs
from agent_journal.storage.root import resolve_root

LOG = "sync.log"
_LOG_MAX_BYTES = 1 << 20


def run_within(command: str, argv: list[str], seconds: float, root: str | None
               ) -> dict[str, Any]:
    """Start `agent-journal ARGV` (ARGV without --within), wait at most `seconds`."""
    folder = os.path.join(resolve_root(root), "logs")
    make_private_dirs(folder)
    log = os.path.join(folder, LOG)
    try:
        if os.path.getsize(log) > _LOG_MAX_BYTES:
            os.replace(log, log + ".1")
    except OSError:
        pass
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, FILE_MODE)
    try:
        os.write(fd, f"{clock.now_ts()} agent-journal {' '.join(argv)}\n".encode())
        proc = subprocess.Popen([sys.executable, "-m", "agent_journal", *argv],
                                stdin=subprocess.DEVNULL, stdout=fd, stderr=fd,
                                start_new_session=True, close_fds=True)
    finally:
        os.close(fd)
    try:
        code: int | None = proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        code = None
    report: dict[str, Any] = {"command": command, "pid": proc.pid, "finished": code is not None,
                              "exitCode": code, "log": log, "warnings": []}
    if code is None:
        report["warnings"].append(f"{command} goes on in the background (pid {proc.pid}) "
                                  f"past {seconds:g} s; its output goes to {log}")
    elif code != 0:
        report["warnings"].append(f"{command} failed (exit {code}): {_last_line(log)} "
                                  f"(see {log})")
    return report


def _last_line(log: str) -> str:
    try:
        with open(log, "rb") as fh:
            fh.seek(max(0, os.path.getsize(log) - 4096))
            lines = fh.read().decode("utf-8", "replace").strip().splitlines()
    except OSError:
        return "its output could not be read"
    return lines[-1] if lines else "no output"
