"""The Codex CLI hook: one payload on stdin becomes one observation event.

Invariants: those of claude_code_hook, whose journalling it shares (fail-open through the
command table, redaction before anything is written, the SessionStart context as
`hookSpecificOutput.additionalContext`, which Codex's session-start output schema takes as
Claude Code's does); only the normalisation (capture.codex) is Codex's own, and what a
Stop or SessionStart reads off the rollout (`rollout_endings`): apply_patch gets no
PostToolUse, and a command's PostToolUse may carry no exit code, so without it a patch
would stay an unfinished call and a failed command would read as ok.
"""

from __future__ import annotations

from agent_journal.agents.claude_code_hook import HookResult, journal_payload, read_payload
from agent_journal.capture.claude_code import OBSERVATION_KEYS
from agent_journal.capture.codex import codex_hook_to_observation, parse_codex_payload
from agent_journal.core.errors import JournalError

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any, BinaryIO


# How much of the rollout's end a Stop or SessionStart hook reads for what the tool
# events left unsaid: a turn's calls are near its end.
ROLLOUT_TAIL_BYTES = 4 << 20


def codex(stdin: BinaryIO, *, root: str | None, workspace: str | None) -> HookResult:
    """Journal one Codex hook payload read from `stdin`."""
    if stdin.isatty():
        raise JournalError("no hook payload: stdin is a terminal")
    payload = parse_codex_payload(read_payload(stdin))
    return journal_payload(payload, codex_hook_to_observation, root=root, workspace=workspace,
                           more=rollout_endings)


def rollout_endings(payload: dict[str, Any], redactor: Any) -> list[dict[str, Any]]:
    """At the end of a turn (Stop) or a resume (SessionStart), what the rollout at
    `transcript_path` says that Codex's tool hooks did not: how each apply_patch ended
    (it gets no PostToolUse), and each failed command's exit code (its PostToolUse may
    carry none). One observation per such call, its event id derived from the session
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
        if not patch and not (isinstance(code, int) and code != 0):
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
