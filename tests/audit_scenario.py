"""Shared by the audit read tests (trace, digest, coverage, decay): a scripted
journal with every case those reads must handle, event builders for pure tests,
and golden-file comparison with event and replica ids normalised."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from agent_journal.core.model import Event, new_event_id
from agent_journal.ops import context, writes
from agent_journal.storage.root import Root

GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE_ENV = "AGENT_JOURNAL_UPDATE_GOLDEN"
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")

BASE = "2026-03-10T19:00:00.000Z"
OBJECTIVE = "Ship the retry fix for the flaky upload test. Remember this token: ORDER-4471-ZULU"
SECRET = "sk-live-9f8e7d6c5b4a39281706"
RETRACTED_CLAIM = "the upload cache causes the flake"


def at(second: int) -> str:
    return f"2026-03-10T19:{second // 60:02d}:{second % 60:02d}.000Z"


def ev(type_: str, kind: str, subject: str, ts: str, data: dict[str, Any],
       session: str | None = None, event_id: str | None = None) -> Event:
    """An event for pure tests; entry data gets its required keys filled in."""
    if type_ == "entry":
        data = {"fields": {}, "anchors": [], "dependsOn": [], "subject": None, **data}
    if type_ == "tombstone":
        data = {"purged": False, **data}
    return Event(event_id=event_id or new_event_id(), type=type_, kind=kind, id=subject,
                 ts=ts, author="agent" if session else "human", session=session,
                 replica="r-test", data=data)


def entry(subject: str, ts: str, kind: str = "finding", fields: dict[str, str] | None = None,
          anchors: list[str] | None = None, depends_on: list[str] | None = None,
          about: str | None = None, session: str | None = None) -> Event:
    return ev("entry", kind, subject, ts, {
        "fields": fields if fields is not None else {"claim": f"claim of {subject}."},
        "anchors": anchors or [], "dependsOn": depends_on or [], "subject": about},
        session=session)


class Script:
    """Writes through the library with the clock fixed per step, one second apart."""

    def __init__(self, root: Path, workspace: str = "ws") -> None:
        self.root = str(root)
        self.workspace = workspace
        self.second = 0

    def _step(self) -> None:
        self.second += 1
        os.environ["AGENT_JOURNAL_NOW"] = at(self.second)

    def ctx(self, session: str | None) -> context.Context:
        return context.Context(self.root, self.workspace, session)

    def record(self, kind: str, entry_id: str, session: str | None = None, *,
               anchors: tuple[str, ...] = (), depends_on: tuple[str, ...] = (),
               subject: str | None = None, **fields: str) -> None:
        self._step()
        writes.record(self.ctx(session), kind=kind, entry_id=entry_id, fields=dict(fields),
                       anchors=list(anchors), depends_on=list(depends_on), subject=subject)

    def observe(self, obs_id: str, session: str | None, tool: str | None, input_value: Any,
                status: str = "ok", exit_code: int | None = None, kind: str = "tool_call"
                ) -> None:
        self._step()
        writes.observe(self.ctx(session), kind=kind, obs_id=obs_id, tool=tool,
                        call_id=f"call-{obs_id}", input_value=input_value, output=None,
                        status=status, exit_code=exit_code, duration_ms=None)

    def invalidate(self, target: str, reason: str) -> None:
        self._step()
        writes.invalidate(self.ctx(None), target, reason)

    def tombstone(self, target: str, reason: str) -> None:
        self._step()
        writes.tombstone(self.ctx(None), target, reason)

    def purged_tombstone(self, target: str, reason: str) -> None:
        """A tombstone compaction already acted on (its target's bytes are gone)."""
        self._step()
        ws = Root.open(self.root, create=True).workspace(self.workspace)
        ws.append([ev("tombstone", "tombstone", target, at(self.second),
                      {"reason": reason, "purged": True})])


def build_scenario(root: Path, workspace: str = "ws") -> Script:
    """A two-session journal touching every case the audit reads must handle."""
    saved = os.environ.get("AGENT_JOURNAL_NOW")
    s = Script(root, workspace)
    try:
        s.observe("obs-s1-start", "s1", None, {"source": "startup"}, kind="session_start")
        s.record("objective", "o-retry", text=OBJECTIVE)
        s.record("constraint", "c-main", text="Never push to main directly; open a PR.")
        s.observe("obs-read-app", "s1", "Read", {"file_path": "src/upload.py"})
        s.observe("obs-test-1", "s1", "Bash", {"command": "pytest -q tests/test_upload.py"},
                  status="error", exit_code=1)
        s.record("finding", "f-flaky", "s1", claim="test_upload fails on a race in the retry",
                 anchors=("tool_use:obs-test-1",), subject="test_upload")
        s.record("finding", "f-cache", "s1", claim=RETRACTED_CLAIM,
                 anchors=("tool_use:obs-read-app",), subject="test_upload")
        s.record("note", "n-cache-flag", "s1", text="turn the cache off in CI",
                 depends_on=("f-cache",))
        s.observe("obs-edit-app", "s1", "Edit",
                  {"file_path": "src/upload.py", "old_string": "a", "new_string": "b"})
        s.observe("obs-grep", "s1", "Grep", {"pattern": "retry_backoff", "path": "src"})
        s.observe("obs-test-2", "s1", "Bash", {"command": "pytest -q tests/test_upload.py"},
                  exit_code=0)
        s.record("decision", "d-backoff", "s1", question="How do we stop the race?",
                 chosen="retry with jittered backoff",
                 anchors=("tool_use:obs-test-2", "file:src/upload.py"),
                 depends_on=("f-flaky",))
        s.record("assumption", "a-ci", "s1", text="CI runs the same Python as local",
                 depends_on=("d-backoff",))
        s.invalidate("f-cache", "the cache was disabled in the failing run")
        s.observe("obs-env", "s1", "Bash", {"command": f"export API_KEY={SECRET}"})
        s.record("finding", "f-key", "s1", claim=f"the key {SECRET} works against staging",
                 anchors=("tool_use:obs-env",))
        s.tombstone("obs-env", "a live API key in a command")
        s.tombstone("f-key", "a live API key in the claim")
        s.record("finding", "f-vendor", "s1", claim="the vendor call adds 40ms p50",
                 anchors=("tool_use:obs-vendor-call",))
        s.purged_tombstone("obs-vendor-call", "the callId embeds a vendor account id")
        s.record("finding", "f-remote", "s1", claim="the remote runner is slower",
                 anchors=("tool_use:obs-remote-only",))
        s.observe("obs-s2-start", "s2", None, {"source": "compact"}, kind="session_start")
        s.observe("obs-write-notes", "s2", "Write", {"file_path": "NOTES.md", "content": "x"})
        s.observe("obs-deploy", "s2", "Bash", {"command": "make deploy ENV=staging"},
                  status="started")
    finally:
        if saved is None:
            os.environ.pop("AGENT_JOURNAL_NOW", None)
        else:
            os.environ["AGENT_JOURNAL_NOW"] = saved
    return s


def normalise(text: str, root: Path) -> str:
    """Replace event ids (in order of appearance) and the replica id with stable names."""
    seen: dict[str, str] = {}

    def name(m: re.Match[str]) -> str:
        return seen.setdefault(m.group(0), f"<event-{len(seen) + 1}>")

    replica = (root / "replica-id").read_text().strip()
    return UUID.sub(name, text.replace(replica, "<replica>"))


def check_golden(name: str, text: str) -> None:
    """Compare normalised output with tests/golden/NAME; set the env var to rewrite."""
    path = GOLDEN / name
    if os.environ.get(UPDATE_ENV):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    expected = path.read_text()
    if name.endswith(".json"):
        assert json.loads(text) == json.loads(expected), f"{name} differs from golden"
    assert text == expected, f"{name} differs from golden (set {UPDATE_ENV}=1 to rewrite)"


def segments_dir(root: Path, workspace: str = "ws") -> Path:
    return root / "workspaces" / workspace / "segments"


def damage(root: Path, workspace: str = "ws") -> None:
    """One malformed row (a body byte flipped) and one unreadable segment."""
    import sqlite3

    segment = sorted(segments_dir(root, workspace).glob("*.sqlite"))[0]
    conn = sqlite3.connect(segment)
    seq, body = conn.execute("SELECT seq, body FROM events ORDER BY seq LIMIT 1").fetchone()
    damaged = bytes(body).replace(b'"', b"'", 1)
    conn.execute("UPDATE events SET body = ? WHERE seq = ?", (damaged, seq))
    conn.commit()
    conn.close()
    junk = segments_dir(root, workspace) / "junk.sqlite"
    junk.write_bytes(b"this is not a database" * 100)
    os.chmod(junk, 0o600)
