"""Codex CLI: its record (what its hooks and hooks.json are), and what its rollout says
that its tool hooks do not.

Scopes: `project` (<project>/.codex/hooks.json) and `user` (~/.codex/hooks.json, or
$CODEX_HOME/hooks.json when Codex is told to live elsewhere). The file has Claude Code's
shape, and Codex refuses one with any top-level key but `description` and `hooks`, so an
existing file with others is refused rather than edited, and install adds none. The command
string is the same on every install (no workspace in it; the project file names it),
because Codex asks the user to trust a hook again whenever its command changes.
SessionStart's handler raises Codex's `additionalContextLimit` (tokens; 2,500 by default,
past which the context is moved to a file) to fit the whole context the hook prints.

Invariant: no call reads as unfinished or ok when it was not. apply_patch gets no
PostToolUse, and a command's PostToolUse may carry no exit code, so a Stop or SessionStart
reads both off the rollout (`rollout_endings`).
"""

from __future__ import annotations

import os

from agent_journal.agents.agent import Agent, Target
from agent_journal.capture.codex import HOOK
from agent_journal.capture.observation import OBSERVATION_KEYS

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any

NAME = "codex"
# Codex's hook events (developers.openai.com/codex/hooks; openai/codex
# codex-rs/hooks/schema/generated/*.command.input.schema.json), in the order written.
EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PreCompact",
          "PostCompact", "Stop")
TIMEOUTS = {"SessionStart": 60}
DEFAULT_TIMEOUT = 30
# The SessionStart context is at most MAX_CONTEXT_CHARS (10,000) characters; at the usual
# three to four characters a token that is under 3,500 tokens.
CONTEXT_LIMIT_TOKENS = 4000
DESCRIPTION = "agent-journal: journals this Codex session (agent-journal hooks install codex)"


def codex_home() -> str:
    return os.environ.get("CODEX_HOME") or os.path.join(os.path.expanduser("~"), ".codex")


def settings_file(scope: str, folder: str | None) -> Target:
    if scope == "user":
        return Target(os.path.join(codex_home(), "hooks.json"), None, False)
    assert folder is not None
    return Target(os.path.join(folder, ".codex", "hooks.json"), folder, True)


# How much of the rollout's end a Stop or SessionStart hook reads for what the tool
# events left unsaid: a turn's calls are near its end.
ROLLOUT_TAIL_BYTES = 4 << 20


def rollout_endings(payload: dict[str, Any], redactor: Any) -> list[dict[str, Any]]:
    """At the end of a turn (Stop) or a resume (SessionStart), what the rollout at
    `transcript_path` says that Codex's tool hooks did not: how each apply_patch ended
    (it gets no PostToolUse), each failed command's exit code (its PostToolUse may
    carry none), and how a command that outlived its call ended (its PostToolUse said only
    "Process running"). One observation per such call, its event id derived from the session
    and the call, so reading the same rollout again adds nothing."""
    if payload.get("hook_event_name") not in ("Stop", "SessionStart"):
        return []
    path = payload.get("transcript_path")
    session = payload.get("session_id")
    if not isinstance(path, str) or not isinstance(session, str):
        return []
    from agent_journal.capture.codex import rollout_outcomes
    from agent_journal.core.model import derived_event_id

    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, 2)
            fh.seek(max(0, size - ROLLOUT_TAIL_BYTES))
            lines = fh.read().splitlines()
    except OSError:
        return []
    found = []
    for call_id, end in rollout_outcomes(lines).items():
        patch = end["tool"] == "apply_patch"
        code = end["exitCode"]
        if not patch and not end.get("told") and not (isinstance(code, int) and code != 0):
            continue  # a command that passed: its PostToolUse said all there is
        observation = dict.fromkeys(OBSERVATION_KEYS)
        observation.update(
            id=call_id, kind="tool_call", session=session, callId=call_id,
            tool="apply_patch" if patch else None, output=end["output"], exitCode=code,
            status="error" if isinstance(code, int) and code != 0 else "ok",
            data={"source": "rollout", "transcript_path": path})
        observation = redactor.redact_value(observation)
        observation["eventId"] = derived_event_id("codex-rollout", session, call_id)
        found.append(observation)
    return found


def pending_trust(scope: str) -> str:
    """Codex runs a new or changed hook only once the user has trusted it (by its hash,
    in /hooks), a project's hooks only in a trusted project, and `codex exec` skips an
    untrusted hook without a word."""
    project = (" and trust this folder when it asks (a project's hooks load only in a "
               "trusted project)") if scope == "project" else ""
    return ("Codex runs these hooks only once you trust them: start `codex` here and trust "
            f"them in /hooks{project}; until then `codex exec` skips them without a word "
            "(--dangerously-bypass-hook-trust runs them for one invocation)")


AGENT = Agent(name=NAME, payloads=HOOK, events=EVENTS, scopes=("project", "user"),
              settings=settings_file, timeouts=TIMEOUTS, default_timeout=DEFAULT_TIMEOUT,
              extra_keys={"SessionStart": {"additionalContextLimit": CONTEXT_LIMIT_TOKENS}},
              allowed_top=("description", "hooks"), new_file={"description": DESCRIPTION},
              more=rollout_endings, pending=pending_trust)
