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
from hypothesis import HealthCheck, is_hypothesis_test, settings

BIN = Path(sys.executable).parent
CLI = str(BIN / "agent-journal")
REPO = Path(__file__).resolve().parents[1]
# Real public test material, copied into the repo with its provenance (tests/data/README.md).
DATA = REPO / "tests" / "data"


# -- Hypothesis profiles (issue 32) ------------------------------------------------------
#
# "ci", the default (and what CI=true gets): the same examples on every run
# (derandomize, no example database), no deadline and no too_slow health check, since a
# loaded machine must not fail a law, and a failure's blob printed so it can be replayed.
# "soak" (`make soak`, or HYPOTHESIS_PROFILE=soak): random examples, SOAK_SCALE times as
# many, for every Hypothesis test, those that set their own max_examples included.
# Loaded here, before any test module builds its @settings, which inherit from it.
SOAK_SCALE = int(os.environ.get("AJ_SOAK_SCALE", "10"))
settings.register_profile("ci", deadline=None, derandomize=True, database=None,
                          print_blob=True, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("soak", deadline=None, max_examples=100 * SOAK_SCALE,
                          print_blob=True, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or "ci")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test's own @settings replaces the profile's health-check list and example count:
    add the profile's suppressed checks back (a test that suppresses another check would
    otherwise fail too_slow on a loaded machine), and under "soak" scale an explicit
    max_examples up. (Hypothesis's pytest plugin adjusts the same attribute the same way.)"""
    profile = settings.get_profile(settings.get_current_profile_name())
    soak = settings.get_current_profile_name() == "soak"
    for item in items:
        fn = getattr(getattr(item, "obj", None), "__func__", getattr(item, "obj", None))
        if fn is None or not is_hypothesis_test(fn) or getattr(fn, "_aj_profiled", False):
            continue
        own = fn._hypothesis_internal_use_settings
        changes: dict[str, Any] = {"suppress_health_check": sorted(
            set(own.suppress_health_check) | set(profile.suppress_health_check),
            key=lambda check: check.value)}
        if soak and own.max_examples != profile.max_examples:
            changes["max_examples"] = own.max_examples * SOAK_SCALE
        fn._hypothesis_internal_use_settings = settings(own, **changes)
        fn._aj_profiled = True


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


@pytest.fixture
def inproc(root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """Run the CLI in this process (same argv, environment and exit code as the
    console script): for help, usage errors and rendering, which need no real
    process. Concurrency, crash, latency and hook tests use `cli`."""
    from agent_journal.cli.main import main

    def run(*args: str, input: str | bytes | None = None, env: dict[str, str] | None = None,
            workspace: str | None = "ws", use_root: bool = True) -> Result:
        import io
        import sys

        data = input.encode() if isinstance(input, str) else (input or b"")
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
        # The product's variables are cleared; the suite's own switch to rewrite
        # goldens is not one of them and must reach check_golden.
        for key in [k for k in os.environ if k.startswith("AGENT_JOURNAL_")
                    and k != "AGENT_JOURNAL_UPDATE_GOLDEN"]:
            monkeypatch.delenv(key)
        wanted = dict(env or {})
        if use_root:
            wanted.setdefault("AGENT_JOURNAL_ROOT", str(root))
        if workspace is not None:
            wanted.setdefault("AGENT_JOURNAL_WORKSPACE", workspace)
        for key, value in wanted.items():
            monkeypatch.setenv(key, value)
        capsys.readouterr()
        code = main(list(args))
        out, err = capsys.readouterr()
        return Result(code, out, err)

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


# -- a real S3 server (tests/s3_support.py) -----------------------------------------------

@pytest.fixture(scope="module")
def s3(request, tmp_path_factory):
    """moto's S3 server on a free 127.0.0.1 port, one per test module that asks; a test
    parametrized with `ON_BOTH_SERVERS` runs on SeaweedFS as well (one per module)."""
    from s3_support import MotoServer, SeaweedServer

    kind = getattr(request, "param", "moto")
    server = MotoServer().start() if kind == "moto" else \
        SeaweedServer(str(tmp_path_factory.mktemp("seaweedfs"))).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def aws(monkeypatch):
    """The test credentials in this process too (the library calls use them)."""
    from s3_support import aws_env

    for key in list(os.environ):
        if key.startswith("AWS_"):
            monkeypatch.delenv(key)
    for key, value in aws_env().items():
        if key.startswith("AWS_") or key.lower() == "no_proxy":
            monkeypatch.setenv(key, value)


@pytest.fixture
def box(tmp_path: Path) -> Any:
    """One real-client scenario's Sandbox (tests/real_clients.py): its own HOME, git project
    and journal root. In CI a missing client fails (`make test` installs them)."""
    from real_clients import MISSING, Sandbox

    if MISSING is not None:
        pytest.fail(MISSING)
    return Sandbox(tmp_path)
