"""Golden JSON: `show` output pinned byte for byte (event ids normalised)."""

import json
import os
import re
from pathlib import Path

GOLDEN = Path(__file__).parent / "golden"
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


def normalise(text: str) -> str:
    seen: dict[str, str] = {}
    return UUID.sub(lambda m: seen.setdefault(m.group(0), f"<event-{len(seen) + 1}>"), text)


def check(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text(), f"{name} changed; UPDATE_GOLDEN=1 rewrites it"


def test_show_golden(cli):
    now = {"AGENT_JOURNAL_NOW": "2026-05-01T12:00:00Z"}
    cli("record", "--kind", "objective", "--id", "obj", "--text", "ship v1", env=now)
    cli("record", "--kind", "constraint", "--id", "c1", "--text", "no force-push", env=now)
    cli("observe", "--kind", "tool_call", "--id", "o1", "--tool", "Bash", "--callId", "c-1",
        "--input", '{"command": "make"}', "--status", "started", "--session", "s1", env=now)
    cli("observe", "--kind", "tool_call", "--id", "o1", "--tool", "Bash", "--status", "ok",
        "--exit-code", "0", "--duration-ms", "1200", "--session", "s1",
        env={"AGENT_JOURNAL_NOW": "2026-05-01T12:00:01.5Z"})
    cli("record", "--kind", "finding", "--id", "f1", "--claim", "make passes",
        "--anchor", "tool_use:o1", "--subject", "build", "--session", "s1", env=now)
    cli("record", "--kind", "decision", "--id", "d1", "--question", "ship?", "--chosen",
        "yes", "--depends-on", "f1", "--session", "s1", env=now)
    cli("record", "--kind", "note", "--id", "secret", "--text", "pw", env=now)
    cli("invalidate", "f1", "--reason", "flaky", env=now)
    cli("tombstone", "secret", "--reason", "credential", env=now)
    out = cli("show", "--json", "--observations").out
    check("show.json", normalise(out))
    json.loads(out)
