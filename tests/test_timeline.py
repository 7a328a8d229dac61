"""`timeline`: one line per event in time order, filters, failures with their
whole (verified) output, JSON lines, colour, tombstones, streaming."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import CLI, REPO, clean_env

TRANSCRIPT = (REPO / "tests/data/claude-code/transcripts/DRMacIver-claude-reliability/"
              "coverage-test-fix/transcript.jsonl")
T0 = {"AGENT_JOURNAL_NOW": "2026-05-01T12:00:00Z"}


def at(seconds: int) -> dict[str, str]:
    return {"AGENT_JOURNAL_NOW": f"2026-05-01T12:{seconds // 60:02d}:{seconds % 60:02d}Z"}


def call(cli, obs_id: str, command: str, start: int, *, status: str = "ok", exit_code: int = 0,
         output: str | None = None, tmp: Path | None = None, session: str = "sess-aaaa1111",
         tool: str = "Bash", env: dict[str, str] | None = None) -> None:
    key = "command" if tool == "Bash" else "file_path"
    assert cli("observe", "--kind", "tool_call", "--id", obs_id, "--tool", tool, "--input",
               json.dumps({key: command}), "--status", "started", "--session", session,
               env=at(start)).code == 0
    extra: list[str] = []
    if output is not None:
        assert tmp is not None
        path = tmp / f"{obs_id}.out"
        path.write_text(output)
        extra = ["--output", str(path)]
    assert cli("observe", "--kind", "tool_call", "--id", obs_id, "--tool", tool, "--status",
               status, "--exit-code", str(exit_code), "--session", session, *extra,
               env={**at(start + 1), **(env or {})}).code == 0


@pytest.fixture
def journal(cli, tmp_path):
    call(cli, "o1", "ls", 0)
    call(cli, "o2", "src/app.py", 10, tool="Edit")
    call(cli, "o3", "pytest -q", 20, status="error", exit_code=1, tmp=tmp_path,
         output="FAILED test_x\n1 failed, 3 passed in 0.1s\n")
    assert cli("record", "--kind", "finding", "--id", "f1", "--claim", "pytest fails",
               "--anchor", "tool_use:o3", env=at(30)).code == 0
    call(cli, "o4", "make", 40, session="sess-bbbb2222")
    return cli


def lines_of(result) -> list[str]:
    assert result.code == 0, result.err
    body = result.out.split("\n\n", 1)[1]
    return [line for line in body.splitlines() if line]


def test_one_line_per_event_in_time_order_with_a_header(journal):
    result = journal("timeline")
    rows = lines_of(result)
    assert [r.split()[3] for r in rows] == ["Bash", "Edit", "Bash", "finding", "Bash"]
    assert "error exit 1" in rows[2] and rows[2].rstrip().endswith("pytest -q")
    assert "sess-aaa" in rows[0] and "sess-bbb" in rows[4]
    header = result.out.split("\n\n", 1)[0]
    assert "lines: 5 (entry 1, observation 4); failed: 1; sessions: 2" in header
    assert "2026-05-01T12:00:00.000Z .. 2026-05-01T12:00:41.000Z" in header
    assert "src/app.py" in header  # files changed
    assert "FAIL pytest -q" in header and "1 failed, 3 passed" in header
    assert "\033[" not in result.out  # a pipe gets no colour


def test_json_lines_one_object_per_line(journal):
    result = journal("timeline", "--json")
    objects = [json.loads(line) for line in result.out.splitlines()]
    assert [o["id"] for o in objects] == ["o1", "o2", "o3", "f1", "o4"]
    o3 = objects[2]
    assert o3["status"] == "error" and o3["exitCode"] == 1 and o3["failed"] is True
    assert o3["target"] == "pytest -q" and o3["tool"] == "Bash" and len(o3["eventIds"]) == 2
    assert o3["ts"] == "2026-05-01T12:00:20.000Z" and o3["endTs"] == "2026-05-01T12:00:21.000Z"
    assert objects[3]["type"] == "entry" and objects[3]["text"] == "pytest fails"


def test_a_finish_stamped_before_its_start_is_one_call(cli):
    """Two hook processes' clocks disagree: the finish is stamped a second before
    the start. One line, finished, at the finish's place, 0 ms unless recorded."""
    for obs_id, start, duration in (("o1", 5, None), ("o2", 10, 1200)):
        assert cli("observe", "--kind", "tool_call", "--id", obs_id, "--tool", "Bash",
                   "--input", json.dumps({"command": f"make {obs_id}"}), "--status",
                   "started", env=at(start)).code == 0
        finish = ["--status", "ok", "--exit-code", "0"]
        if duration is not None:
            finish += ["--duration-ms", str(duration)]
        assert cli("observe", "--kind", "tool_call", "--id", obs_id, "--tool", "Bash",
                   *finish, env=at(start - 1)).code == 0
    objects = [json.loads(line) for line in cli("timeline", "--json").out.splitlines()]
    assert [(o["id"], o["status"], o["target"], o["durationMs"], len(o["eventIds"]))
            for o in objects] == [("o1", "ok", "make o1", 0, 2), ("o2", "ok", "make o2", 1200, 2)]
    assert objects[0]["ts"] == objects[0]["endTs"] == "2026-05-01T12:00:04.000Z"
    rows = lines_of(cli("timeline"))
    assert len(rows) == 2 and "0ms" in rows[0] and "1.2s" in rows[1]
    assert "lines: 2 (observation 2); failed: 0" in cli("timeline").out
    assert [json.loads(line)["id"] for line in
            cli("timeline", "--json", "--last", "1").out.splitlines()] == ["o2"]


def test_filters(journal):
    def ids(*args: str) -> list[str]:
        out = journal("timeline", "--json", *args)
        assert out.code == 0, out.err
        return [json.loads(line)["id"] for line in out.out.splitlines()]

    assert ids("--last", "2") == ["f1", "o4"]
    assert ids("--session", "sess-bbbb") == ["o4"]
    assert ids("--tool", "Edit") == ["o2"]
    assert ids("--kind", "finding") == ["f1"] and ids("--kind", "entry") == ["f1"]
    assert ids("--since", "2026-05-01T12:00:15Z", "--until", "2026-05-01T12:00:35Z") == [
        "o3", "f1"]
    assert ids("--failures-only") == ["o3"]
    later = {"AGENT_JOURNAL_NOW": "2026-05-01T12:01:00Z"}
    out = journal("timeline", "--json", "--since", "30s", env=later).out.splitlines()
    assert [json.loads(line)["id"] for line in out] == ["f1", "o4"]
    assert ids("--last", "1", "--tool", "Bash", "--session", "sess-aaaa") == ["o3"]


def test_failures_only_prints_the_whole_output_from_the_artifact(cli, root, tmp_path):
    big = "".join(f"line {i} of the failure\n" for i in range(400))
    small = {"AGENT_JOURNAL_ARTIFACT_THRESHOLD": "1024"}
    call(cli, "o1", "pytest", 0, status="error", exit_code=2, tmp=tmp_path, output=big,
         env=small)
    call(cli, "o2", "ls", 5)
    result = cli("timeline", "--failures-only")
    assert result.code == 0
    assert "line 0 of the failure" in result.out and "line 399 of the failure" in result.out
    assert "ls" not in lines_of(result)[0]
    as_json = json.loads(cli("timeline", "--failures-only", "--json").out)
    assert as_json["output"] == big and as_json["outputProblem"] is None
    # A blob that no longer matches its checksum is never shown.
    [blob] = [p for p in (root / "workspaces" / "ws" / "artifacts").rglob("*") if p.is_file()]
    os.chmod(blob, 0o600)
    blob.write_text(big.replace("line 7 ", "line X "))
    result = cli("timeline", "--failures-only")
    assert result.code == 0 and "line X" not in result.out and "line 0 of" not in result.out
    assert "does not match its recorded checksum" in result.out


def test_tombstoned_content_never_appears(journal):
    journal("observe", "--kind", "tool_call", "--id", "secret-call", "--tool", "Bash", "--input",
            '{"command": "echo hunter2"}', env=at(50))
    journal("record", "--kind", "note", "--id", "secret-note", "--text", "hunter2 again",
            env=at(51))
    journal("tombstone", "secret-call", "--reason", "credential", env=at(52))
    journal("tombstone", "secret-note", "--reason", "credential", env=at(53))
    for args in ((), ("--json",), ("--last", "3"), ("--kind", "note")):
        out = journal("timeline", *args)
        assert out.code == 0 and "hunter2" not in out.out, args
    lines = journal("timeline", "--json").out.splitlines()
    tombs = [json.loads(x) for x in lines if json.loads(x)["type"] == "tombstone"]
    assert [t["target"] for t in tombs] == ["secret-call", "secret-note"]
    assert tombs[0]["text"] == "credential"


def test_colour_on_a_terminal_and_never_with_no_color(journal, root):
    import pty

    def on_tty(extra: dict[str, str]) -> bytes:
        env = clean_env(AGENT_JOURNAL_ROOT=str(root), AGENT_JOURNAL_WORKSPACE="ws", **extra)
        master, slave = pty.openpty()
        proc = subprocess.Popen([CLI, "timeline"], stdout=slave, stderr=slave, env=env)
        os.close(slave)
        chunks = []
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        proc.wait(timeout=60)
        os.close(master)
        return b"".join(chunks)

    coloured = on_tty({})
    assert b"\033[31m" in coloured
    red = [line for line in coloured.splitlines() if b"\033[31m" in line and b"pytest" in line]
    assert red and all(b"ls" not in line.split(b"Bash")[-1] for line in red)
    assert b"\033[" not in on_tty({"NO_COLOR": "1"})


def test_real_imported_session(cli):
    report = cli("import", "claude-code", str(TRANSCRIPT), "--json").json()
    result = cli("timeline")
    rows = lines_of(result)
    objects = [json.loads(x) for x in cli("timeline", "--json").out.splitlines()]
    assert len(rows) == len(objects)
    assert sum(len(o["eventIds"]) for o in objects) == report["eventsWritten"]
    calls = [o for o in objects if o["kind"] == "tool_call"]
    assert len({o["id"] for o in calls}) == report["calls"]
    # What the session said is one line each, beside the calls.
    assert len({o["id"] for o in objects if o["kind"] != "tool_call"}) == report["messages"]
    # A start followed at once by its own finish is one line; calls made in
    # parallel show their starts on lines of their own.
    assert len(objects) < report["eventsWritten"] and sum(
        1 for o in calls if o["status"] == "started") == len(calls) - report["calls"]
    assert "git status" in result.out and "python -m pytest tests/test_math_utils.py" in result.out
    failures = cli("timeline", "--failures-only")
    assert "nothing to commit, working tree clean" in failures.out
    assert len(cli("timeline", "--last", "200", "--json").out.splitlines()) == len(objects)


def test_bad_input(journal, tmp_path):
    cases = [
        (("timeline", "--as-of", "no-such-checkpoint"), 1, "no checkpoint named"),
        (("timeline", "--as-of", "2999-01-01T00:00:00Z"), 2, "in the future"),
        (("timeline", "--as-of", "2026-13-45"), 2, "not a valid ISO 8601"),
        (("timeline", "--since", "yesterday"), 2, "--since takes"),
        (("timeline", "--until", "5x"), 2, "--until takes"),
        (("timeline", "--last", "0"), 2, "at least 1"),
        (("timeline", "--html", str(tmp_path / "missing" / "t.html")), 2, "does not exist"),
        (("timeline", "--html", str(tmp_path)), 2, "not a regular file"),
        (("timeline", "--since", "2026-05-02T00:00:00Z", "--until", "2026-05-01T00:00:00Z"),
         2, "is after"),
    ]
    before = sorted(p.name for p in tmp_path.iterdir())
    for args, code, words in cases:
        result = journal(*args)
        assert result.code == code, (args, result)
        assert words in result.err and result.out == "", (args, result.err)
        assert len(result.err.strip().splitlines()) == 1, result.err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_last_reads_only_the_bodies_it_shows(tmp_path, monkeypatch):
    """--last 20 over thousands of events decodes a few dozen bodies, not all."""
    from agent_journal.core import codec, model
    from agent_journal.ops.context import Context
    from agent_journal.ops.timeline import Filters, Timeline
    from agent_journal.storage.root import Root

    base = tmp_path / "private"
    base.mkdir(mode=0o700)
    ws = Root.open(str(base / "j"), create=True).workspace("ws")
    events = [model.Event(event_id=model.new_event_id(), type="observation", kind="tool_call",
                          id=f"o{i:05d}", ts=f"2026-05-01T12:{i // 6000 % 60:02d}:"
                          f"{i // 100 % 60:02d}.{i % 100:03d}Z", author="agent",
                          session="s", replica=ws.root.replica_id,
                          data={"tool": "Bash", "input": {"command": f"echo {i}"},
                                "status": "ok", "exitCode": 0})
              for i in range(3000)]
    ws.append(events)
    from agent_journal.storage import time_order

    decoded = []
    real = codec.decode_checked
    monkeypatch.setattr(codec, "decode_checked", lambda *a: decoded.append(1) or real(*a))
    # An observation in codec's layout is read by the layout's own decoder.
    in_layout = time_order.observation_event
    monkeypatch.setattr(time_order, "observation_event",
                        lambda *a: decoded.append(1) or in_layout(*a))
    with Timeline(Context(str(base / "j"), "ws"), Filters(), last=20) as timeline:
        shown = [line.id for line in timeline.lines()]
    assert shown == [f"o{i:05d}" for i in range(2980, 3000)]
    assert len(decoded) < 200, len(decoded)
    decoded.clear()
    with Timeline(Context(str(base / "j"), "ws"), Filters()) as timeline:
        assert sum(1 for _ in timeline.lines()) == 3000
    assert len(decoded) == 3000


def _calls_journal(base: Path, plan: list[tuple[int, bool, bool]]):
    """Calls made from a plan: (gap in ms, finishes at once, fails). A call that
    finishes at once after a gap of 3 has its finish stamped before its start
    (the clocks of the two hook processes disagree)."""
    from agent_journal.core import model
    from agent_journal.storage.root import Root

    ws = Root.open(str(base / "j"), create=True).workspace("ws")
    events, clock, pending = [], 0, []

    def ev(obs_id: str, status: str, exit_code: int | None) -> None:
        millis = 1_000_000 + clock
        events.append(model.Event(
            event_id=model.new_event_id(), type="observation", kind="tool_call", id=obs_id,
            ts=f"2026-05-01T12:{millis // 60000 % 60:02d}:{millis // 1000 % 60:02d}."
               f"{millis % 1000:03d}Z", author="agent", session="s", replica=ws.root.replica_id,
            data={"tool": "Bash", "input": {"command": f"run {obs_id}"} if status == "started"
                  else None, "status": status, "exitCode": exit_code}))

    for i, (gap, at_once, fails) in enumerate(plan):
        clock += gap + 1
        ev(f"o{i}", "started", None)
        pending.append((f"o{i}", fails))
        if at_once or len(pending) > 2:
            skewed = at_once and gap == 3 and len(pending) == 1
            clock += -1 if skewed else 1
            obs_id, failed = pending.pop(0)
            ev(obs_id, "error" if failed else "ok", 1 if failed else 0)
            clock += 2 if skewed else 0
    for obs_id, failed in pending:
        clock += 1
        ev(obs_id, "error" if failed else "ok", 1 if failed else 0)
    ws.append(events)
    return str(base / "j")


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=30, deadline=None)
@given(plan=st.lists(st.tuples(st.integers(0, 3), st.booleans(), st.booleans()), min_size=4,
                     max_size=40),
       last=st.integers(1, 6), failures=st.booleans())
def test_last_n_is_the_tail_of_the_whole_timeline(plan, last, failures):
    """However the backward read is chunked, --last N gives exactly the last N
    lines of the forward timeline, filters included."""
    import shutil
    import tempfile

    from agent_journal.ops.context import Context
    from agent_journal.ops.timeline import Filters, Timeline

    base = Path(tempfile.mkdtemp())
    try:
        root = _calls_journal(base, plan)

        def run(n: int | None) -> list[tuple]:
            with Timeline(Context(root, "ws"), Filters(failures_only=failures),
                          last=n) as timeline:
                return [(ln.id, ln.status, ln.target, tuple(ln.event_ids))
                        for ln in timeline.lines()]

        whole = run(None)
        assert run(last) == whole[-last:]
    finally:
        shutil.rmtree(base)
