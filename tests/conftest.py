"""Shared fixtures: a private journal root and the real console script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

BIN = Path(sys.executable).parent
CLI = str(BIN / "agent-journal")
REPO = Path(__file__).resolve().parents[1]
# The shared data beside the checkout; a worktree elsewhere names it in this variable.
SHARED = Path(os.environ.get("AGENT_JOURNAL_TEST_SHARED") or REPO.parent / "shared")


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_JOURNAL_")}
    env.update(extra)
    return env


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A journal root path (not yet created) inside a private folder."""
    base = tmp_path / "private"
    base.mkdir(mode=0o700)
    os.chmod(base, 0o700)
    return base / "journal"


@pytest.fixture
def cli(root: Path):
    """Run the installed console script against `root` and workspace `ws`."""

    def run(*args: str, input: str | bytes | None = None, env: dict[str, str] | None = None,
            workspace: str | None = "ws", use_root: bool = True) -> Result:
        full_env = clean_env(**(env or {}))
        if use_root:
            full_env.setdefault("AGENT_JOURNAL_ROOT", str(root))
        if workspace is not None:
            full_env.setdefault("AGENT_JOURNAL_WORKSPACE", workspace)
        data = input.encode() if isinstance(input, str) else input
        proc = subprocess.run([CLI, *args], input=data, capture_output=True, env=full_env,
                              timeout=120)
        return Result(proc.returncode, proc.stdout.decode(), proc.stderr.decode())

    return run


def all_bytes_under(path: Path) -> bytes:
    """Every byte of every file under `path` (for erasure checks)."""
    chunks = []
    for p in sorted(path.rglob("*")):
        if p.is_file():
            chunks.append(p.read_bytes())
    return b"\n".join(chunks)


def run_on_a_terminal(cmd: list[str], env: dict[str, str], timeout: float
                      ) -> tuple[subprocess.CompletedProcess[bytes], bytes]:
    """Run `cmd` with stderr on a pseudo-terminal (stdout piped): the process and
    everything it wrote to the terminal."""
    master, slave = os.openpty()
    try:
        proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=slave,
                              timeout=timeout)
        os.close(slave)
        seen = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO once the terminal's other end is closed
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(master)
    return proc, seen
