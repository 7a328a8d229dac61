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


def _call_event(ws, millis: int, obs_id: str, status: str, exit_code: int | None):
    """A Bash call's start (`started`, with its command) or finish, stamped `millis` after
    the hour's start."""
    from agent_journal.core import model

    return model.Event(
        event_id=model.new_event_id(), type="observation", kind="tool_call", id=obs_id,
        ts=f"2026-05-01T12:{millis // 60000 % 60:02d}:{millis // 1000 % 60:02d}."
           f"{millis % 1000:03d}Z", author="agent", session="s", replica=ws.root.replica_id,
        data={"tool": "Bash", "input": {"command": f"run {obs_id}"} if status == "started"
              else None, "status": status, "exitCode": exit_code})


def _calls_journal(base: Path, plan: list[tuple[int, bool, bool]]):
    """Calls made from a plan: (gap in ms, finishes at once, fails). A call that
    finishes at once after a gap of 3 has its finish stamped before its start
    (the clocks of the two hook processes disagree)."""
    from agent_journal.storage.root import Root

    ws = Root.open(str(base / "j"), create=True).workspace("ws")
    events, clock, pending = [], 0, []

    def ev(obs_id: str, status: str, exit_code: int | None) -> None:
        events.append(_call_event(ws, 1_000_000 + clock, obs_id, status, exit_code))

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


# -- issue 33: calls run in parallel, columns that fit, sessions told apart ---------------

def _observe(cli, obs_id: str, second: int, status: str, *, session: str = "sess-aaaa1111",
             command: str | None = None, kind: str = "tool_call", exit_code: int = 0) -> None:
    args = ["observe", "--kind", kind, "--id", obs_id, "--status", status, "--session", session]
    if kind == "tool_call":
        args += ["--tool", "Bash"]
    if command is not None:
        args += ["--input", json.dumps({"command": command})]
    if status not in ("started", "ok") or exit_code:
        args += ["--exit-code", str(exit_code)]
    assert cli(*args, env=at(second)).code == 0


def test_calls_run_in_parallel_are_one_line_each(cli):
    """Two calls started together and finished in turn (Claude Code runs independent
    calls in parallel): two lines, each its start and finish, at the starts' places."""
    _observe(cli, "a", 0, "started", command="pytest tests/test_a.py")
    _observe(cli, "b", 1, "started", command="pytest tests/test_b.py")
    _observe(cli, "a", 5, "ok")
    _observe(cli, "b", 7, "error", exit_code=1)
    objects = [json.loads(x) for x in cli("timeline", "--json").out.splitlines()]
    assert [(o["id"], o["status"], o["target"], o["durationMs"] is None, len(o["eventIds"]),
             o["ts"][17:19], o["endTs"][17:19]) for o in objects] == [
        ("a", "ok", "pytest tests/test_a.py", True, 2, "00", "05"),
        ("b", "error", "pytest tests/test_b.py", True, 2, "01", "07")]
    rows = lines_of(cli("timeline"))
    assert len(rows) == 2 and "5.0s" in rows[0] and "error exit 1" in rows[1]
    for n in (1, 2):
        assert [json.loads(x)["id"] for x in cli("timeline", "--json", "--last", str(n))
                .out.splitlines()] == ["a", "b"][-n:]


def test_kinds_statuses_and_durations_are_never_cut(cli):
    _observe(cli, "s1", 0, "ok", kind="session_start")
    _observe(cli, "p1", 1, "ok", kind="user_prompt")
    _observe(cli, "x1", 2, "cancelled", command="sleep 100", exit_code=130)
    assert cli("record", "--kind", "assumption", "--id", "a1", "--text", "CI is Linux",
               env=at(3)).code == 0
    rows = lines_of(cli("timeline"))
    assert [r.split()[3] for r in rows] == ["session_start", "user_prompt", "Bash",
                                           "assumption"]
    assert "cancelled exit 130" in rows[2]
    # One column each: the kinds line up, so the targets start in one column.
    starts = {r.index(word) for r, word in zip(rows, ("session_start", "user_prompt", "Bash",
                                                      "assumption"), strict=True)}
    assert len(starts) == 1
    assert len({r.index("sleep 100") for r in rows[2:3]} | {rows[3].index("a1:")}) == 1


def test_codex_sessions_begun_together_are_told_apart(cli):
    """Codex's session ids are UUIDv7: their first 8 characters are a clock, the same
    for sessions begun within a minute. They show as their last characters, and
    --session takes that form."""
    first = "019a2d7a-41c4-78b1-b7cc-a45d62a89cd5"
    second = "019a2d7a-6455-7170-a661-c6d8b94c630a"
    _observe(cli, "c1", 0, "ok", session=first, command="ls")
    _observe(cli, "c2", 1, "ok", session=second, command="ls -la")
    _observe(cli, "c3", 2, "ok", session="sess-aaaa1111", command="make")
    _observe(cli, "c4", 3, "ok", session="sess-aaaa2222", command="make test")
    rows = lines_of(cli("timeline"))
    assert [r.split()[2] for r in rows] == ["…62a89cd5", "…b94c630a", "sess-aaaa1",
                                           "sess-aaaa2"]
    for typed, expected in (("…62a89cd5", ["c1"]), ("b94c630a", ["c2"]),
                           ("019a2d7a", ["c1", "c2"]), ("sess-aaaa2", ["c4"]),
                           (second, ["c2"])):
        out = cli("timeline", "--json", "--session", typed).out.splitlines()
        assert [json.loads(x)["id"] for x in out] == expected, typed


def test_short_sessions_are_the_shortest_that_differ():
    from agent_journal.core.timeline import short_session, short_sessions

    table = short_sessions(["abcdefgh-1", "abcdefgh-2", "zz", "0123456789abcdef",
                            "019a2d7a-41c4-78b1-b7cc-a45d62a89cd5",
                            "019a2d7a-6455-7170-a661-c6d862a89cd5",
                            "019a2d7b-0000-7000-8000-00000000abcd"])
    assert table["abcdefgh-1"] == "abcdefgh-1" and table["zz"] == "zz"
    assert table["0123456789abcdef"] == "01234567"
    # Two tails alike in their last 8: one more character each.
    assert table["019a2d7a-41c4-78b1-b7cc-a45d62a89cd5"] == "…d62a89cd5"
    assert table["019a2d7a-6455-7170-a661-c6d862a89cd5"] == "…862a89cd5"
    assert table["019a2d7b-0000-7000-8000-00000000abcd"] == "…0000abcd"
    assert short_session(None) == "-"
    assert short_session("c64cc478-3430-40fe-8e9c-4ee9986e9754") == "c64cc478"  # v4


def _interleaved_journal(base: Path, plan: list[tuple[int, int, bool]], tombstoned: set[int]):
    """Calls from a plan of (how many later starts come before its finish, skew, fails):
    finishes land several events after their starts, some before them (clock skew), and
    the events of a tombstoned call are hidden."""
    from agent_journal.core import model
    from agent_journal.storage.root import Root

    ws = Root.open(str(base / "j"), create=True).workspace("ws")
    slots: list[tuple[int, str, str, int | None]] = []  # (millis, obs, status, exit)
    for i, (delay, skew, fails) in enumerate(plan):
        start = 10 * i
        finish = start + 10 * delay + 5 - (7 if skew and delay == 0 else 0)
        slots.append((start, f"o{i}", "started", None))
        slots.append((finish, f"o{i}", "error" if fails else "ok", 1 if fails else 0))
    events = []
    for millis, obs_id, status, exit_code in slots:
        events.append(_call_event(ws, millis + 1_000_000, obs_id, status, exit_code))
    for i in sorted(tombstoned):
        events.append(model.Event(
            event_id=model.new_event_id(), type="tombstone", kind="tombstone", id=f"o{i}",
            ts="2026-05-01T13:00:00.000Z", author="human", session=None,
            replica=ws.root.replica_id, data={"reason": "r", "purged": False}))
    ws.append(events)
    return str(base / "j")


@settings(max_examples=40, deadline=None)
@given(plan=st.lists(st.tuples(st.integers(0, 6), st.booleans(), st.booleans()), min_size=3,
                     max_size=30),
       hidden=st.sets(st.integers(0, 29), max_size=5), window=st.integers(1, 4),
       failures=st.booleans())
def test_last_n_is_the_tail_with_calls_far_apart(plan, hidden, window, failures):
    """With a small merge window, so that calls finish both inside and outside it and the
    backward read's chunks cut between a start and its finish: --last N is still the tail
    of the forward timeline, for every N."""
    import shutil
    import tempfile
    from unittest import mock

    from agent_journal.core import timeline as core_timeline
    from agent_journal.ops import timeline as ops_timeline
    from agent_journal.ops.context import Context
    from agent_journal.ops.timeline import Filters, Timeline

    base = Path(tempfile.mkdtemp())
    try:
        root = _interleaved_journal(base, plan, hidden)

        def run(n: int | None) -> list[tuple]:
            with Timeline(Context(root, "ws"), Filters(failures_only=failures),
                          last=n) as timeline:
                return [(ln.id, ln.status, ln.target, tuple(ln.event_ids))
                        for ln in timeline.lines()]

        with mock.patch.object(core_timeline, "MERGE_WINDOW", window), \
                mock.patch.object(ops_timeline, "MERGE_WINDOW", window):
            whole = run(None)
            for n in range(1, len(whole) + 2):
                assert run(n) == whole[-n:], n
    finally:
        shutil.rmtree(base)


def test_text_shows_a_window_unless_every_line_is_asked_for(inproc, monkeypatch):
    import json as _json

    from agent_journal.cli import handlers as cli_handlers

    for n in range(3):
        assert inproc("observe", "--kind", "tool_call", "--id", f"w{n}", "--tool", "Bash",
                      "--input", _json.dumps({"command": f"echo N{n}"}),
                      "--status", "ok").code == 0
    monkeypatch.setattr(cli_handlers, "TIMELINE_WINDOW", 2)
    text = inproc("timeline").out
    assert "echo N0" not in text and "echo N2" in text
    assert "(the last 2 lines: `--last N` for more, `--all` for every line)" in text
    every = inproc("timeline", "--all").out
    assert "echo N0" in every and "the last 2 lines" not in every
    assert len([ln for ln in inproc("timeline", "--json").out.splitlines() if ln]) == 3
    assert inproc("timeline", "--all", "--last", "2").code == 2
