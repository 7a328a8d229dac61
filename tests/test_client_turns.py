"""What Claude Code writes into the user's turn on its own (capture/client_turns.py): a bare
slash command is something the session did, one with arguments what the user asked, and
a local command that printed nothing says nothing."""

from __future__ import annotations

import json

from agent_journal.capture.claude_code_transcript import read_transcript
from agent_journal.capture.client_turns import local_output, slash_command


def test_slash_command_records_read_as_typed():
    clear = ("<command-name>/clear</command-name>\n            <command-message>clear"
             "</command-message>\n            <command-args></command-args>")
    assert slash_command(clear) == "/clear"
    review = ("<command-message>review is running…</command-message>\n"
              "<command-name>/review</command-name>\n<command-args>183</command-args>")
    assert slash_command(review) == "/review 183"
    assert slash_command("fix the <command-name> parser") is None
    assert local_output("<local-command-stdout></local-command-stdout>") is None
    assert local_output("<local-command-stdout>Set model to opus</local-command-stdout>") \
        == "Set model to opus"
    assert local_output("<task-notification>done</task-notification>") \
        == "<task-notification>done</task-notification>"


def _user(n: int, text: str) -> dict:
    return {"type": "user", "uuid": f"u{n}", "parentUuid": f"u{n - 1}" if n > 1 else None,
            "sessionId": "s1", "timestamp": f"2026-02-21T22:3{n}:00.000Z",
            "message": {"role": "user", "content": text}}


def test_the_first_prompt_is_the_users_words_not_clear():
    records = [
        _user(1, "<command-name>/clear</command-name>\n<command-message>clear</command-message>"
                 "\n<command-args></command-args>"),
        _user(2, "<local-command-stdout></local-command-stdout>"),
        _user(3, "ok the e2e tests are still failing - can we run them locally"),
        _user(4, "<command-name>/review</command-name>\n<command-args>183</command-args>"),
    ]
    lines = [json.dumps(r) for r in records]
    said = [(o["kind"], o["text"]) for o in read_transcript(lines, conversation=True)
            if o["kind"] != "tool_call"]
    assert said == [("session_event", "/clear"),
                    ("prompt", "ok the e2e tests are still failing - can we run them locally"),
                    ("prompt", "/review 183")]


def test_a_queued_slash_command_is_no_request():
    queued = [{"type": "queue-operation", "operation": "enqueue", "sessionId": "s1",
               "timestamp": "2026-02-21T22:30:00.000Z", "content": "/model"},
              {"type": "queue-operation", "operation": "enqueue", "sessionId": "s1",
               "timestamp": "2026-02-21T22:39:00.000Z", "content": "/clear"},
              {"type": "queue-operation", "operation": "enqueue", "sessionId": "s1",
               "timestamp": "2026-02-21T22:39:30.000Z", "content": "also run the linter"}]
    records = [queued[0],
               _user(1, "<command-name>/model</command-name>\n<command-args></command-args>"),
               _user(2, "fix the e2e tests"), *queued[1:]]
    said = [(o["kind"], o["text"]) for o in read_transcript(
        [json.dumps(r) for r in records], conversation=True) if o["kind"] != "tool_call"]
    assert said == [("session_event", "/model"), ("prompt", "fix the e2e tests"),
                    ("session_event", "/clear"), ("prompt", "also run the linter")]
