"""Redaction on every write path, and the user's patterns from <root>/config.json.

The decisive test plants a secret of every rule through the hook, observe, record,
invalidate, tombstone and import, then reads every byte of every file under the root
(segments, journals, artifacts, logs): no secret may be found, and every rule's marker must
be (so the secrets really went through).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import all_bytes_under
from test_redact import (
    ANTHROPIC,
    AWS,
    AWS_SECRET,
    AWS_SESSION,
    AZURE_KEY,
    BASIC,
    GH,
    GH_PAT,
    GITLAB,
    GOOGLE,
    GOOGLE_ACCESS,
    GOOGLE_CLIENT_SECRET,
    HF,
    JWT,
    NPM,
    OPAQUE,
    OPENAI_PROJ,
    PYPI,
    SAS_SIG,
    SENDGRID,
    SLACK,
    SLACK_HOOK,
    SLACK_HOOK_PATH,
    STRIPE,
    STRIPE_WH,
    TWILIO_KEY,
    TWILIO_TOKEN,
    pem,
)

from agent_journal.capture.redact import RULE_NAMES

PASSWORD = "Pw-7q2ZkXv9Lm"
PEM = pem("OPENSSH PRIVATE KEY")
PEM_BODY = PEM.splitlines()[1]
CUSTOM = "ACME-987654"

# Each planted secret, and the text searched for in the raw bytes afterwards.
PLANTED = {
    "aws": AWS, "github": GH["p"], "github-pat": GH_PAT, "gitlab": GITLAB,
    "slack": SLACK["b"], "slack-webhook": SLACK_HOOK, "stripe": STRIPE["sk_live"],
    "stripe-webhook": STRIPE_WH, "google": GOOGLE, "google-oauth-secret": GOOGLE_CLIENT_SECRET,
    "google-oauth-token": GOOGLE_ACCESS, "openai": OPENAI_PROJ,
    "anthropic": ANTHROPIC, "jwt": JWT, "npm": NPM, "pypi": PYPI, "hf": HF,
    "sendgrid": SENDGRID, "pem": PEM, "bearer": f"Bearer {OPAQUE}",
    "basic": f"Authorization: Basic {BASIC}", "url": f"postgres://app:{PASSWORD}@db:5432/x",
    "custom": CUSTOM,
}
# Secrets found by the name they are given, planted under it; the needle is the value.
KEYED = {
    "aws-secret": ("aws_secret_access_key = ", AWS_SECRET),
    "aws-session": ("AWS_SESSION_TOKEN=", AWS_SESSION),
    "azure-key": ("DefaultEndpointsProtocol=https;AccountName=x;AccountKey=", AZURE_KEY),
    "twilio-key": ("TWILIO_API_KEY=", TWILIO_KEY),
    "twilio-token": ("TWILIO_AUTH_TOKEN=", TWILIO_TOKEN),
    "azure-sas": ("https://x.blob.core.windows.net/c?sv=2022-11-02&sig=", SAS_SIG),
}
PLANTED.update({label: name + value for label, (name, value) in KEYED.items()})
NEEDLES = {
    **{k: v for k, v in PLANTED.items() if k not in ("pem", "bearer", "basic", "url",
                                                     "slack-webhook", *KEYED)},
    "pem": PEM_BODY, "bearer": OPAQUE, "basic": BASIC, "url": PASSWORD,
    "slack-webhook": SLACK_HOOK_PATH,
    **{label: value for label, (_, value) in KEYED.items()},
}
ALL = "\n".join(PLANTED.values())
# Large enough to become an artifact. Joined by newlines: a key glued to the end of another
# token (`...654AKIA...`) is the middle of an identifier to the prefix-anchored rules.
BIG = "\n".join([ALL] * 20)
CONFIG = {"redact": {"patterns": [{"name": "acme-order", "regex": r"ACME-[0-9]{6}"}]}}


def write_config(root: Path, config: Any) -> None:
    root.mkdir(mode=0o700, exist_ok=True)
    text = config if isinstance(config, str) else json.dumps(config)
    (root / "config.json").write_text(text)


def hook(cli, payload: dict[str, Any], **kw: Any):
    return cli("hook", "claude-code", input=json.dumps(payload), **kw)


def tool(event: str, call_id: str, **extra: Any) -> dict[str, Any]:
    return {"session_id": "s1", "cwd": "/x/ws", "hook_event_name": event, "tool_name": "Bash",
            "tool_use_id": call_id, **extra}


def transcript(tmp_path: Path) -> Path:
    records = [
        {"type": "assistant", "sessionId": "sess-1", "timestamp": "2025-01-01T00:00:00.000Z",
         "message": {"role": "assistant", "content": [
             {"type": "tool_use", "id": "toolu_imp1", "name": "Bash",
              "input": {"command": f"deploy --key {AWS}", "env": ALL}}]}},
        {"type": "user", "sessionId": "sess-1", "timestamp": "2025-01-01T00:00:01.000Z",
         "message": {"role": "user", "content": [
             {"type": "tool_result", "tool_use_id": "toolu_imp1", "content": BIG}]}},
        {"type": "assistant", "sessionId": "sess-1", "timestamp": "2025-01-01T00:00:02.000Z",
         "message": {"role": "assistant", "content": [
             {"type": "tool_use", "id": "toolu_imp2", "name": "Read",
              "input": {"file_path": "/srv/.env"}}]}},
        {"type": "user", "sessionId": "sess-1", "timestamp": "2025-01-01T00:00:03.000Z",
         "message": {"role": "user", "content": [
             {"type": "tool_result", "tool_use_id": "toolu_imp2",
              "content": [{"type": "text", "text": ALL}]}]}},
    ]
    path = tmp_path / "secrets.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_no_planted_secret_reaches_any_file_under_the_root(cli, root, tmp_path):
    write_config(root, CONFIG)
    env = {"AGENT_JOURNAL_ARTIFACT_THRESHOLD": "4096"}
    # The hook: tool input, small and large responses, a failure, prompts, session events.
    results = [
        hook(cli, tool("PreToolUse", "t1", tool_input={"command": ALL}), env=env),
        hook(cli, tool("PostToolUse", "t1", tool_input={"command": ALL},
                       tool_response={"stdout": BIG, "stderr": ALL}), env=env),
        hook(cli, tool("PostToolUse", "t2", tool_response=ALL), env=env),
        hook(cli, tool("PostToolUseFailure", "t3", error="Exit code 1\n" + BIG), env=env),
        hook(cli, {"session_id": "s1", "cwd": "/x/ws", "hook_event_name": "UserPromptSubmit",
                   "prompt": ALL}),
        hook(cli, {"session_id": "s1", "cwd": "/x/ws", "hook_event_name": "Stop",
                   "last_assistant_message": ALL}),
        hook(cli, {"session_id": "s1", "cwd": "/x/ws", "hook_event_name": "FutureEvent",
                   "detail": {"nested": [ALL], ALL: "a key"}}),
    ]
    # Payloads the hook refuses: the log line must not carry the secret either.
    bad = ('{"hook_event_name": "Stop", "' + AWS + '": 1, "' + AWS + '": 2}').encode()
    results.append(cli("hook", "claude-code", input=bad))
    results.append(cli("hook", "claude-code", input=json.dumps({"hook_event_name": ANTHROPIC})))
    assert all(r.code == 0 for r in results)
    assert len((root / "logs" / "hook.log").read_text().splitlines()) == 2
    # observe, record, invalidate, tombstone.
    big = tmp_path / "out.txt"
    big.write_text(BIG)
    results = [
        cli("observe", "--kind", "tool_call", "--id", "o1", "--tool", "Bash",
            "--input", json.dumps({"command": ALL}), "--output", str(big), env=env),
        cli("observe", "--kind", "tool_call", "--id", "o2", "--output", "-", input=ALL),
        cli("record", "--kind", "finding", "--id", "f1", "--claim", ALL, "--subject", ALL,
            "--anchor", f"url:https://u:{PASSWORD}@example.com/x", "--anchor", "tool_use:o1"),
        cli("record", "--kind", "decision", "--id", "d1", "--question", ALL, "--chosen", ALL),
        cli("record", "--kind", "constraint", "--id", "c1", "--text", ALL),
        cli("record", "--kind", "objective", "--id", "obj", "--text", ALL),
        cli("invalidate", "f1", "--reason", ALL),
        cli("tombstone", "d1", "--reason", ALL),
        cli("import", "claude-code", str(transcript(tmp_path)), env=env),
    ]
    assert all(r.code == 0 for r in results), [r.err for r in results]
    # SessionStart prints context built from what is stored: redacted too.
    start = hook(cli, {"session_id": "s1", "cwd": "/x/ws", "hook_event_name": "SessionStart",
                       "source": "compact"})
    context = json.loads(start.out)["hookSpecificOutput"]["additionalContext"]
    assert "[REDACTED:" in context
    raw = all_bytes_under(root)
    artifacts = list((root / "workspaces" / "ws" / "artifacts").rglob("*"))
    assert len([p for p in artifacts if p.is_file()]) >= 3  # same bytes share a blob
    for label, needle in NEEDLES.items():
        assert needle.encode() not in raw, label
        assert needle not in context, label
        assert needle not in cli("show", "--json", "--observations").out, label
    for rule in (*RULE_NAMES, "acme-order"):
        assert f"[REDACTED:{rule}]".encode() in raw, rule


def test_ids_are_keys_and_are_not_rewritten(cli):
    cli("record", "--kind", "note", "--id", "n1", "--text", "see", "--anchor",
        "tool_use:toolu_01ABC", "--depends-on", "f-1")
    (entry,) = cli("show", "--json").json()["entries"]
    assert entry["anchors"] == ["tool_use:toolu_01ABC"] and entry["dependsOn"] == ["f-1"]


def test_human_text_survives_byte_for_byte(cli, root):
    texts = {
        "objective": "Ship it. token: ORDER-4471-ZULU  \u00e9\u65e5\t(keep spacing)",
        "constraint": "password: see vault; api_key = changeme; commit 5ea305f67ff76bfb",
        "note": "trace 550e8400-e29b-41d4-a716-446655440000 via https://user@example.com/",
    }
    for kind, text in texts.items():
        assert cli("record", "--kind", kind, "--id", kind, "--text", text).code == 0
    shown = {e["id"]: e["fields"]["text"] for e in cli("show", "--json").json()["entries"]}
    assert shown == texts
    for kind, text in texts.items():
        assert json.loads(cli("get", "--json", kind).out)["fields"]["text"] == text
    raw = all_bytes_under(root)
    assert all(json.dumps(t, ensure_ascii=False)[1:-1].encode() in raw for t in texts.values())
    assert b"REDACTED" not in raw


# -- configured patterns ------------------------------------------------------------------

def test_configured_patterns_apply_to_every_write_path(cli, root, tmp_path):
    write_config(root, CONFIG)
    assert cli("record", "--kind", "note", "--id", "n", "--text", f"order {CUSTOM}").code == 0
    assert cli("observe", "--kind", "tool_call", "--id", "o", "--output", "-",
               input=f"made {CUSTOM}").code == 0
    assert hook(cli, {"session_id": "s", "cwd": "/x", "hook_event_name": "UserPromptSubmit",
                      "prompt": f"check {CUSTOM}"}).code == 0
    assert cli("import", "claude-code", str(transcript(tmp_path))).code == 0
    raw = all_bytes_under(root)
    assert CUSTOM.encode() not in raw
    assert raw.count(b"[REDACTED:acme-order]") >= 4
    assert cli("get", "--json", "n").json()["fields"]["text"] == "order [REDACTED:acme-order]"


BAD_CONFIGS = {
    "not json": ("{redact", "invalid JSON"),
    "duplicate key": ('{"redact": {}, "redact": {}}', "duplicate key"),
    "nan": ('{"redact": NaN}', "NaN"),
    "not an object": ("[]", "expected a JSON object"),
    "redact not an object": ('{"redact": []}', '"redact" must be an object'),
    "misspelt key": ('{"redact": {"pattern": []}}', 'unknown key "redact.pattern"'),
    "patterns not a list": ('{"redact": {"patterns": {}}}', '"redact.patterns" must be a list'),
    "item shape": ('{"redact": {"patterns": [{"name": "x"}]}}', "redact.patterns[0] must be"),
    "bad regex": ('{"redact": {"patterns": [{"name": "x", "regex": "("}]}}', "invalid regex"),
    "bad name": ('{"redact": {"patterns": [{"name": "X Y", "regex": "a"}]}}',
                 "redaction rule name"),
    "empty match": ('{"redact": {"patterns": [{"name": "x", "regex": "a*"}]}}',
                    "matches the empty string"),
}


@pytest.mark.parametrize("label", sorted(BAD_CONFIGS))
def test_bad_config_fails_closed_for_commands_and_the_hook_keeps_journaling(cli, root, tmp_path,
                                                                           label):
    text, message = BAD_CONFIGS[label]
    write_config(root, text)
    for args in (["record", "--kind", "note", "--id", "n", "--text", "t"],
                 ["observe", "--kind", "tool_call", "--id", "o"],
                 ["tombstone", "x", "--reason", "r"],
                 ["import", "claude-code", str(transcript(tmp_path))]):
        result = cli(*args)
        assert result.code == 1, args
        assert "bad config" in result.err and "config.json" in result.err
        assert message in result.err, (args, result.err)
    result = hook(cli, {"session_id": "s", "cwd": "/x", "hook_event_name": "UserPromptSubmit",
                        "prompt": "p"})
    assert (result.code, result.out) == (0, "")
    # The hook must not lose the agent's work to a config problem: it journals with the
    # built-in rules (and any usable pattern) and logs the problem.
    (line,) = (root / "logs" / "hook.log").read_text().splitlines()
    assert "bad config" in line and message in line
    assert _rows(root) == 1


def _rows(root: Path) -> int:
    import sqlite3

    total = 0
    for seg in (root / "workspaces").rglob("*.sqlite"):
        with sqlite3.connect(seg) as conn:
            total += conn.execute("SELECT count(*) FROM events").fetchone()[0]
    return total


def test_a_config_without_redact_section_is_fine(cli, root):
    write_config(root, {})
    assert cli("record", "--kind", "note", "--id", "n", "--text", AWS).code == 0
    assert cli("get", "--json", "n").json()["fields"]["text"] == "[REDACTED:aws-access-key]"
