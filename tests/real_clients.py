"""Driving the real agent clients (Claude Code, Codex CLI from npm; `make clients`) against
the scripted model server (tests/model_server.py), each in a sandbox of its own: a HOME,
a git repository as the project, this checkout's venv first on PATH, and nothing of the
machine's own agent settings or keys.

Used by tests/test_real_clients*.py and scripts/bench_real_clients.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from model_server import ModelServer

REPO = Path(__file__).resolve().parents[1]
CLIENTS = REPO / ".cache" / "clients" / "node_modules" / ".bin"
CLAUDE = CLIENTS / "claude"
CODEX = CLIENTS / "codex"
VENV_BIN = Path(sys.executable).parent
# The model Codex is told it talks to: one its catalogue knows, so it offers apply_patch.
CODEX_MODEL = "gpt-5.5"
# Generous: a loaded 2-core machine runs the clients, their hooks and other tests at once.
RUN_TIMEOUT = 240.0
WAIT_TIMEOUT = 120.0


def clients_missing() -> str | None:
    """Why the real clients cannot run here (None when they can)."""
    for exe in (CLAUDE, CODEX):
        if not os.access(exe, os.X_OK):
            return f"{exe} is missing: run `make clients`"
    return None


MISSING = clients_missing()
# Skipped only outside CI when `make clients` was not run; in CI a missing client fails.
needs_clients = pytest.mark.skipif(MISSING is not None and not os.environ.get("CI"),
                                   reason=f"{MISSING}")


def agent_requests(server: ModelServer, since: int = 0) -> list[dict[str, Any]]:
    """The agent loop's requests (those offering tools), not the client's side queries."""
    return [r for r in server.requests[since:] if (r["body"] or {}).get("tools")]


class Sandbox:
    """One scenario's world: `home`, `project` (a git repository), a journal root under
    HOME's default data folder, reached only through this checkout's agent-journal."""

    def __init__(self, base: Path, name: str = "proj") -> None:
        self.home = base / "home"
        self.project = self.home / name
        self.project.mkdir(parents=True)
        git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
        subprocess.run(git + ["init", "-q", "-b", "main", str(self.project)], check=True)
        (self.project / "README.md").write_text("# a project\n")
        subprocess.run(git + ["-C", str(self.project), "add", "README.md"], check=True)
        subprocess.run(git + ["-C", str(self.project), "commit", "-q", "-m", "start"],
                       check=True, env=self.env())

    def env(self, **extra: str) -> dict[str, str]:
        """A clean environment: none of the machine's agent, model or journal variables."""
        env = {"PATH": f"{VENV_BIN}:/usr/local/bin:/usr/bin:/bin", "HOME": str(self.home),
               "LANG": "C.UTF-8", "TERM": "dumb", "TZ": "UTC", "NO_COLOR": "1",
               "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
               "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
               # The whole digest at every session start, however loaded the machine
               # (past its budget a session gets a digest of the newest work instead).
               "AGENT_JOURNAL_SESSION_BUDGET_S": "60"}
        env.update(extra)
        return env

    # -- agent-journal ----------------------------------------------------------------

    def aj(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([str(VENV_BIN / "agent-journal"), *args], cwd=self.project,
                              env=self.env(), capture_output=True, text=True, timeout=120)
        if check and proc.returncode != 0:
            raise AssertionError(f"agent-journal {' '.join(args)}: {proc.returncode}\n"
                                 f"{proc.stdout}\n{proc.stderr}")
        return proc

    def install(self, agent: str, *extra: str) -> None:
        self.aj("hooks", "install", agent, "--project", str(self.project), *extra)

    def timeline(self) -> list[dict[str, Any]]:
        """The journal's timeline lines (each call's start and end folded into one)."""
        proc = self.aj("timeline", "--json", check=False)
        if proc.returncode != 0:
            return []  # no journal yet
        return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]

    # The workspace reads name, when the project has no .agent-journal.toml to name it.
    workspace: str | None = None

    def observations(self) -> list[dict[str, Any]]:
        """Every observation as the journal folds it (`show --observations --json`)."""
        named = ["--workspace", self.workspace] if self.workspace else []
        proc = self.aj("show", "--observations", "--json", *named, check=False)
        if proc.returncode != 0:
            return []  # no journal yet
        return [e for e in json.loads(proc.stdout)["entries"] if e["type"] == "observation"]

    def calls(self) -> dict[str, dict[str, Any]]:
        """Tool calls by id, each folded from its events (a finish outranks its start,
        whatever order the background hooks committed them in)."""
        return {o["id"]: o for o in self.observations() if o["kind"] == "tool_call"}

    def wait_for_calls(self, predicate: Callable[[dict[str, dict[str, Any]]], bool],
                       timeout: float = WAIT_TIMEOUT) -> dict[str, dict[str, Any]]:
        """Poll the journal until `predicate(calls())` holds; the last calls seen either
        way (the caller asserts on them: a timeout shows what was there)."""
        deadline = time.monotonic() + timeout
        while True:
            calls = self.calls()
            if predicate(calls) or time.monotonic() > deadline:
                return calls
            time.sleep(0.2)

    def hook_log(self) -> str:
        root = self.home / ".local" / "share" / "agent-journal"
        try:
            return (root / "logs" / "hook.log").read_text()
        except OSError:
            return ""

    # -- Claude Code ------------------------------------------------------------------

    def claude_env(self, server: ModelServer) -> dict[str, str]:
        return self.env(ANTHROPIC_BASE_URL=server.base_url,
                        ANTHROPIC_API_KEY="sk-ant-stand-in-0000",
                        # root may skip permissions only in a sandbox
                        IS_SANDBOX="1",
                        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
                        DISABLE_AUTOUPDATER="1", DISABLE_TELEMETRY="1",
                        DISABLE_ERROR_REPORTING="1",
                        # `claude -p` connects MCP servers in the background by default:
                        # one slow to start on a loaded machine is missing from the first
                        # turn's deferred tools and from ToolSearch. Wait for them instead
                        # (generously: MCP_TIMEOUT is in ms).
                        MCP_CONNECTION_NONBLOCKING="0", MCP_TIMEOUT="120000")

    def claude_argv(self, prompt: str, *extra: str) -> list[str]:
        return [str(CLAUDE), "-p", prompt, "--output-format", "json",
                "--dangerously-skip-permissions", *extra]

    def claude(self, server: ModelServer, prompt: str, *extra: str) -> dict[str, Any]:
        """One headless session; its JSON result."""
        proc = subprocess.run(self.claude_argv(prompt, *extra), cwd=self.project,
                              env=self.claude_env(server), capture_output=True, text=True,
                              timeout=RUN_TIMEOUT, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            raise AssertionError(f"claude exited {proc.returncode}\n{proc.stdout[-3000:]}\n"
                                 f"{proc.stderr[-3000:]}")
        return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]

    def start_claude(self, server: ModelServer, prompt: str, *extra: str
                     ) -> subprocess.Popen[bytes]:
        return subprocess.Popen(self.claude_argv(prompt, *extra), cwd=self.project,
                                env=self.claude_env(server), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    # -- Codex ------------------------------------------------------------------------

    def codex_config(self, server: ModelServer) -> None:
        """~/.codex/config.toml: our server as the model provider, this project trusted
        (Codex loads a project's .codex/ hooks only in a trusted project)."""
        folder = self.home / ".codex"
        folder.mkdir(exist_ok=True)
        (folder / "config.toml").write_text(
            f'model = "{CODEX_MODEL}"\n'
            'model_provider = "standin"\n'
            "check_for_update_on_startup = false\n"
            "[model_providers.standin]\n"
            'name = "stand-in"\n'
            f'base_url = "{server.base_url}/v1"\n'
            'wire_api = "responses"\n'
            "requires_openai_auth = false\n"
            "request_max_retries = 0\n"
            "stream_max_retries = 0\n"
            f'[projects."{self.project}"]\n'
            'trust_level = "trusted"\n')

    def codex_argv(self, prompt: str, *extra: str) -> list[str]:
        return [str(CODEX), "exec", "--dangerously-bypass-approvals-and-sandbox",
                "--dangerously-bypass-hook-trust", *extra, prompt]

    def start_codex(self, server: ModelServer, prompt: str, *extra: str
                    ) -> subprocess.Popen[bytes]:
        """Codex running in a process group of its own (its pid is the group's): `codex` is
        a node script that starts the native client, which a SIGKILL of the group ends."""
        self.codex_config(server)
        return subprocess.Popen(self.codex_argv(prompt, *extra), cwd=self.project,
                                env=self.env(), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)

    def codex(self, server: ModelServer, prompt: str, *extra: str
              ) -> subprocess.CompletedProcess[str]:
        self.codex_config(server)
        proc = subprocess.run(self.codex_argv(prompt, *extra), cwd=self.project,
                              env=self.env(), capture_output=True, text=True,
                              timeout=RUN_TIMEOUT, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            raise AssertionError(f"codex exited {proc.returncode}\n{proc.stdout[-3000:]}\n"
                                 f"{proc.stderr[-3000:]}")
        return proc


def kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the client alone (its hooks, in their own process groups, live on)."""
    try:
        os.kill(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=60)


def injected(request: dict[str, Any]) -> str:
    """Every text a request carries in its messages or input (where a hook's context lands)."""
    body = request.get("body") or {}
    texts: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            texts.append(value)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, dict):
            for key, item in value.items():
                if key not in ("tools",):
                    walk(item)

    walk(body.get("messages") or body.get("input") or [])
    return "\n".join(texts)
