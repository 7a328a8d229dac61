"""digest: the recovery summary. Verbatim objectives, nothing tombstoned, nothing
retracted shown as live, bounded with an honest account of what was left out."""

from __future__ import annotations

import json

import pytest
from audit_scenario import (
    OBJECTIVE,
    RETRACTED_CLAIM,
    SECRET,
    at,
    build_scenario,
    check_golden,
    damage,
    entry,
    ev,
    normalise,
)
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agent_journal.core.derive import derive
from agent_journal.ops import digest as dg
from agent_journal.storage import segment_reader
from agent_journal.storage.root import Root
from agent_journal.storage.segment_reader import Peek

NO_DAMAGE = {"unreadable": [], "malformed": []}


@pytest.fixture
def cli(inproc):
    """In-process: these tests need no real process."""
    return inproc



def build(events, session=None, max_chars=dg.DEFAULT_MAX_CHARS):
    return dg.build(derive(events), workspace="ws", session=session, max_chars=max_chars,
                    damage=NO_DAMAGE)


def section(markdown: str, title: str) -> str:
    """The text of one `## title` section (empty when absent)."""
    start = markdown.find(f"\n## {title}\n")
    if start < 0:
        return ""
    end = markdown.find("\n## ", start + 1)
    return markdown[start:end if end >= 0 else len(markdown)]


def obs(obs_id, ts, tool, input_value, status="ok", exit_code=None, session="s1",
        kind="tool_call"):
    return ev("observation", kind, obs_id, ts, {"tool": tool, "callId": f"c-{obs_id}",
                                                "input": input_value, "status": status,
                                                "exitCode": exit_code}, session=session)


# -- the recovery test: a scripted session through the real CLI ------------------------------

MULTILINE_OBJECTIVE = ("Second objective, kept verbatim:\n## not a heading  \n"
                       "`code` and ``` fences, * stars * and trailing space ")


def test_recovery_after_compaction(cli, root):
    s1 = {"AGENT_JOURNAL_SESSION": "sess-1"}
    assert cli("record", "--kind", "objective", "--id", "o-1", "--text", OBJECTIVE).code == 0
    assert cli("record", "--kind", "objective", "--id", "o-2",
               "--text", MULTILINE_OBJECTIVE).code == 0
    assert cli("record", "--kind", "constraint", "--id", "c-1",
               "--text", "Do not touch the billing schema.").code == 0
    assert cli("observe", "--kind", "tool_call", "--id", "obs-ls", "--tool", "Bash",
               "--input", '{"command": "ls -la src"}', env=s1).code == 0
    assert cli("observe", "--kind", "tool_call", "--id", "obs-cat-env", "--tool", "Bash",
               "--input", json.dumps({"command": f"cat .env  # API_KEY={SECRET}"}),
               env=s1).code == 0
    assert cli("record", "--kind", "finding", "--id", "f-key", "--claim",
               f"the staging key is {SECRET}", "--anchor", "tool_use:obs-cat-env",
               env=s1).code == 0
    assert cli("record", "--kind", "finding", "--id", "f-wrong", "--claim", RETRACTED_CLAIM,
               "--anchor", "tool_use:obs-ls", env=s1).code == 0
    assert cli("record", "--kind", "decision", "--id", "d-1", "--question", "Which queue?",
               "--chosen", "the existing SQS queue", "--anchor", "tool_use:obs-ls",
               env=s1).code == 0
    assert cli("record", "--kind", "decision", "--id", "d-2", "--question", "Drop the cache?",
               "--chosen", "yes", "--depends-on", "f-wrong", env=s1).code == 0
    assert cli("invalidate", "f-wrong", "--reason", "the cache was off during the run").code == 0
    assert cli("tombstone", "obs-cat-env", "--reason", "printed a live key").code == 0
    assert cli("tombstone", "f-key", "--reason", "a live key in the claim").code == 0
    assert cli("observe", "--kind", "tool_call", "--id", "obs-migrate", "--tool", "Bash",
               "--input", '{"command": "./migrate.sh --apply"}', "--status", "started",
               env=s1).code == 0

    for extra in ([], ["--session", "sess-1"], ["--max-chars", "300"],
                  ["--max-chars", "1"]):
        result = cli("digest", *extra)
        assert result.code == 0, result.err
        out = result.out.encode()
        assert OBJECTIVE.encode() in out
        assert f"- o-1 (human): {OBJECTIVE}\n".encode() in out
        assert MULTILINE_OBJECTIVE.encode() in out
        assert b"Do not touch the billing schema." in out
        assert SECRET.encode() not in out
        live = section(result.out, "Live decisions and findings")
        assert RETRACTED_CLAIM not in live and "d-2" not in live
        assert RETRACTED_CLAIM not in result.out.replace(
            section(result.out, "Retracted entries"), "")

        as_json = cli("digest", "--json", *extra)
        assert as_json.code == 0
        assert SECRET not in as_json.out
        report = as_json.json()
        assert [o["text"] for o in report["objectives"]] == [OBJECTIVE, MULTILINE_OBJECTIVE]
        assert {e["id"] for e in report["liveEntries"]} <= {"d-1"}
        assert report["downgradedAnchors"] is None

    full = cli("digest").out
    assert "- decision d-1: Which queue? — chosen: the existing SQS queue" in full
    retracted = section(full, "Retracted entries")
    assert "f-wrong (invalidated: the cache was off during the run)" in retracted
    assert "d-2 (suppressed: depends on retracted f-wrong)" in retracted
    unfinished = section(full, "Unfinished tool calls")
    assert "Verify the workspace before acting; do not repeat them blindly." in unfinished
    assert "`./migrate.sh --apply`" in unfinished


# -- content rules ------------------------------------------------------------------------

def test_main_input_per_tool():
    assert dg.main_input("Bash", {"command": "rm -rf build", "timeout": 5}) == "rm -rf build"
    for tool in ("Read", "Write", "Edit", "MultiEdit"):
        assert dg.main_input(tool, {"file_path": "/a b/c.py", "content": "x"}) == "/a b/c.py"
    assert dg.main_input("NotebookEdit", {"notebook_path": "n.ipynb"}) == "n.ipynb"
    assert dg.main_input("Grep", {"pattern": "a|b", "path": "src"}) == "a|b"
    assert dg.main_input("Glob", {"pattern": "**/*.py"}) == "**/*.py"
    assert dg.main_input("Task", {"b": 1, "a": "é"}) == '{"a":"é","b":1}'
    assert dg.main_input("Bash", {"cmd": "x"}) == '{"cmd":"x"}'
    assert dg.main_input("Odd", "plain text") == "plain text"
    assert dg.main_input("Odd", None) is None
    long = dg.main_input("Task", {"prompt": "p" * 500})
    assert long is not None and long.endswith("... (313 more characters)")
    assert dg.main_input("Bash", {"command": "c" * 5000}) == "c" * 5000  # verbatim, uncut


@pytest.mark.parametrize("text", ["ls", "a `b` c", "`lead", "trail`", " pad ", "x``y",
                                  "two\nlines", "```\nfenced\n```"])
def test_code_keeps_the_bytes(text):
    rendered = dg.code(text)
    runs = [len(r) for r in "".join(c if c == "`" else " " for c in text).split()] or [0]
    longest = max(runs)
    if "\n" in text:
        _, fence, *body, closing = rendered.split("\n")
        assert fence == closing and set(fence) == {"`"} and len(fence) > max(longest, 2)
        assert "\n".join(body) == text
    else:
        ticks = "`" * (longest + 1)
        assert rendered.startswith(ticks) and rendered.endswith(ticks)
        inner = rendered[len(ticks):-len(ticks)]
        padded = text[0] in "` " or text[-1] in "` "
        assert inner == (f" {text} " if padded else text)


def test_tool_call_classes_and_files():
    events = [
        obs("o1", at(1), "Write", {"file_path": "a.py"}),
        obs("o2", at(2), "Edit", {"file_path": "a.py"}),
        obs("o3", at(3), "Edit", {"file_path": "b.py"}, status="error"),
        obs("o4", at(4), "Bash", {"command": "make"}, exit_code=2),
        obs("o5", at(5), "Bash", {"command": "sleep 9"}, status="cancelled"),
        obs("o6", at(6), "Bash", {"command": "deploy"}, status="started"),
        obs("o7", at(7), "NotebookEdit", {"notebook_path": "n.ipynb"}),
        obs("o8", at(8), None, {"prompt": "hi"}, kind="user_prompt"),
    ]
    _, report = build(events)
    assert [c["id"] for c in report["failedToolCalls"]] == ["o3", "o4", "o5"]
    assert [c["id"] for c in report["succeededToolCalls"]] == ["o1", "o2", "o7"]
    assert [c["id"] for c in report["unfinishedToolCalls"]] == ["o6"]
    assert report["unfinishedInstruction"] == dg.WATERMARK
    assert report["filesTouched"] == [
        {"path": "a.py", "tools": {"Edit": 1, "Write": 1}, "count": 2, "lastTs": at(2)},
        {"path": "n.ipynb", "tools": {"NotebookEdit": 1}, "count": 1, "lastTs": at(7)},
    ]
    assert [c["id"] for c in report["recentActivity"]] == [f"o{i}" for i in range(1, 9)]


def test_a_finished_call_is_no_longer_unfinished():
    started = obs("o1", at(1), "Bash", {"command": "deploy"}, status="started")
    done = ev("observation", "tool_call", "o1", at(2), {"status": "ok", "exitCode": 0},
              session="s1")
    _, before = build([started])
    _, after = build([started, done])
    assert [c["id"] for c in before["unfinishedToolCalls"]] == ["o1"]
    assert after["unfinishedToolCalls"] == [] and after["unfinishedInstruction"] is None
    assert [c["mainInput"] for c in after["succeededToolCalls"]] == ["deploy"]


def test_session_scopes_tool_calls_but_not_entries():
    events = [
        obs("mine", at(1), "Bash", {"command": "a"}, session="s1"),
        obs("theirs", at(2), "Bash", {"command": "b"}, session="s2", status="error"),
        entry("f-s2", at(3), session="s2"),
    ]
    markdown, report = build(events, session="s1")
    assert [c["id"] for c in report["recentActivity"]] == ["mine"]
    assert report["failedToolCalls"] == []
    assert [e["id"] for e in report["liveEntries"]] == ["f-s2"]
    assert "Tool calls: session s1. Entries: all sessions." in markdown


def test_tombstoned_content_never_renders():
    events = [
        obs("o-secret", at(1), "Bash", {"command": "echo SECRET-1"}, status="started"),
        entry("f-secret", at(2), fields={"claim": "SECRET-2"}, anchors=["tool_use:o-secret"]),
        entry("o-goal", at(3), kind="objective", fields={"text": "SECRET-3"}),
        entry("f-ok", at(4), anchors=["tool_use:o-secret"]),
        ev("tombstone", "tombstone", "o-secret", at(5), {"reason": "r"}),
        ev("tombstone", "tombstone", "f-secret", at(5), {"reason": "r"}),
        ev("tombstone", "tombstone", "o-goal", at(5), {"reason": "r"}),
    ]
    markdown, report = build(events)
    text = markdown + json.dumps(report)
    for secret in ("SECRET-1", "SECRET-2", "SECRET-3", "f-secret", "o-goal"):
        assert secret not in text
    assert "`tool_use:o-secret` unknown (tombstoned)" in markdown
    assert report["objectives"] == [] and report["unfinishedToolCalls"] == []


def test_retracted_objective_and_constraint_are_not_live():
    events = [
        entry("o-old", at(1), kind="objective", fields={"text": "old goal"}),
        entry("c-old", at(2), kind="constraint", fields={"text": "old rule"},
              depends_on=["o-old"]),
        ev("invalidation", "invalidation", "o-old", at(3), {"reason": "replaced"}),
    ]
    markdown, report = build(events)
    assert report["objectives"] == [] and report["liveConstraints"] == []
    assert "(none recorded)" in section(markdown, "Objectives")
    assert [(r["id"], r["outcome"]) for r in report["retracted"]] == [
        ("o-old", "invalidated"), ("c-old", "suppressed")]


# -- the bound -----------------------------------------------------------------------------

def busy_journal(n: int = 120) -> list:
    events = [entry("o-1", at(0), kind="objective", fields={"text": "the goal"}),
              entry("c-1", at(0), kind="constraint", fields={"text": "the rule"})]
    for i in range(n):
        status = "error" if i % 7 == 0 else ("started" if i % 31 == 0 else "ok")
        events.append(obs(f"obs-{i:03d}", at(i + 1), "Edit" if i % 3 else "Bash",
                          {"file_path": f"src/m{i % 40}.py", "command": f"step {i}"},
                          status=status))
        if i % 10 == 0:
            events.append(entry(f"f-{i:03d}", at(i + 1), anchors=[f"tool_use:obs-{i:03d}"]))
    return events


def test_trims_least_important_first_and_says_so():
    events = busy_journal()
    full, full_report = build(events, max_chars=10**6)
    assert full_report["trimmedToFit"] == {}
    order = ["unfinishedToolCalls", "liveEntries", "retracted", "failedToolCalls",
             "succeededToolCalls", "filesTouched", "recentActivity"]
    previous_trimmed: dict[str, int] = {}
    for bound in range(len(full), 0, -97):
        markdown, report = build(events, max_chars=bound)
        assert len(markdown) <= bound or report["overBound"]
        assert report["chars"] == len(markdown)
        assert "- o-1 (human): the goal\n" in markdown and "- c-1 (human): the rule\n" in markdown
        trimmed = report["trimmedToFit"]
        if trimmed:
            assert f"_Left out to fit --max-chars {bound}, least important first:" in markdown
        # a section loses items only once every less important one is empty
        for i, key in enumerate(order):
            if trimmed.get(key):
                for later in order[i + 1:]:
                    assert report[later] == [], (bound, key, later)
        # monotone: a smaller bound never shows more of any section
        for key, count in previous_trimmed.items():
            assert trimmed.get(key, 0) >= count
        previous_trimmed = trimmed


def test_caps_report_what_they_hide():
    markdown, report = build(busy_journal(), max_chars=10**6)
    assert len(report["recentActivity"]) == dg.CAPS["recentActivity"]
    assert report["notShown"]["recentActivity"] == 120 - dg.CAPS["recentActivity"]
    assert "- ... and 100 earlier observations not shown\n" in markdown


def test_objectives_alone_over_the_bound_are_printed_whole():
    goal = "x" * 500
    markdown, report = build([entry("o", at(1), kind="objective", fields={"text": goal}),
                              obs("a", at(2), "Bash", {"command": "ls"})], max_chars=100)
    assert f"- o (human): {goal}\n" in markdown
    assert report["overBound"] is True and report["recentActivity"] == []
    assert "alone exceed --max-chars 100; they are printed whole" in markdown


# -- laws -----------------------------------------------------------------------------------

POOL = [f"e{i}" for i in range(6)]


@st.composite
def journals(draw):
    events = []
    kinds = ["finding", "decision", "objective", "constraint", "note"]
    for eid in POOL:
        if draw(st.booleans()):
            kind = draw(st.sampled_from(kinds))
            fields = ({"question": f"q<{eid}>", "chosen": f"c<{eid}>"} if kind == "decision"
                      else {"claim": f"text<{eid}>"} if kind == "finding"
                      else {"text": f"text<{eid}>"})
            events.append(entry(eid, at(draw(st.integers(0, 9))), kind=kind, fields=fields,
                                anchors=[f"tool_use:o{i}" for i in draw(
                                    st.lists(st.integers(0, 5), max_size=2))],
                                depends_on=draw(st.lists(st.sampled_from(POOL), max_size=2))))
    for i in range(draw(st.integers(0, 6))):
        events.append(obs(f"o{i}", at(draw(st.integers(0, 9))), "Bash",
                          {"command": f"cmd<o{i}>"},
                          status=draw(st.sampled_from(["started", "ok", "error"])),
                          session=draw(st.sampled_from(["s1", "s2"]))))
    targets = draw(st.lists(st.sampled_from(POOL + [f"o{i}" for i in range(6)]),
                            max_size=4))
    for target in targets:
        events.append(ev("tombstone", "tombstone", target, at(10), {"reason": "gone"}))
    for target in draw(st.lists(st.sampled_from(POOL), max_size=2)):
        events.append(ev("invalidation", "invalidation", target, at(11), {"reason": "wrong"}))
    return events, set(targets)


@settings(max_examples=150, deadline=None)
@given(journals(), st.integers(1, 3000), st.sampled_from([None, "s1"]),
       st.randoms(use_true_random=False))
def test_digest_laws(journal, bound, session, rnd):
    events, tombstoned = journal
    markdown, report = build(events, session=session, max_chars=bound)
    text = markdown + json.dumps(report, ensure_ascii=False)
    d = derive(events)
    for target in tombstoned:
        assert f"<{target}>" not in text
    for entry_id, event in d.entry_events.items():
        if d.is_live(entry_id) and event.kind in ("objective", "constraint"):
            assert f"- {entry_id} (human): text<{entry_id}>\n" in markdown
    live_ids = {e["id"] for e in report["liveEntries"]}
    assert all(d.is_live(i) for i in live_ids)
    assert all(not d.is_live(r["id"]) for r in report["retracted"])
    if report["overBound"]:
        assert all(report[key] == [] for key in dg.CAPS)
    else:
        assert len(markdown) <= bound
    shuffled = list(events)
    rnd.shuffle(shuffled)
    assert build(shuffled, session=session, max_chars=bound) == (markdown, report)


# -- the command -----------------------------------------------------------------------------

def test_golden_digest(cli, root):
    build_scenario(root)
    markdown = cli("digest")
    assert markdown.code == 0 and markdown.err == ""
    check_golden("digest.md", normalise(markdown.out, root))
    as_json = cli("digest", "--json")
    assert as_json.code == 0
    check_golden("digest.json", normalise(as_json.out, root))
    assert OBJECTIVE in markdown.out and SECRET not in markdown.out + as_json.out


def test_damage_is_reported_in_the_digest_and_warned(cli, root):
    build_scenario(root)
    damage(root)
    result = cli("digest")
    assert result.code == 0
    assert "WARNING: 1 unreadable segment(s), 1 malformed row(s): this digest is a floor" \
        in result.out
    assert "floor, not a total" in result.err
    report = cli("digest", "--json").json()
    assert len(report["unreadable"]) == 1 and len(report["malformed"]) == 1


@pytest.mark.parametrize("args", [["--max-chars", "0"], ["--max-chars", "ten"],
                                  ["--max-chars"], ["--json", "yes"], ["--session", ""],
                                  ["--session", "a/b"]])
def test_usage_errors(cli, args):
    result = cli("digest", *args)
    assert result.code == 2, (args, result)
    assert result.out == ""


def test_writing_session_variable_does_not_scope_the_digest(cli, root):
    build_scenario(root)
    scoped = cli("digest", "--json", env={"AGENT_JOURNAL_SESSION": "s2"}).json()
    assert scoped["session"] is None
    assert {c["session"] for c in scoped["recentActivity"]} == {"s1", "s2"}


def test_odd_values_from_newer_replicas_do_not_break_the_digest():
    events = [
        ev("observation", "tool_call", "o1", at(1), {"tool": {"name": "x"}, "input": [1],
                                                     "status": {"s": 1}, "exitCode": "2"}),
        ev("observation", "tool_call", "o2", at(2), {"tool": ["Edit"], "input": {"a": 1}}),
        entry("f1", at(3), kind="hunch", fields={"guess": "g", "why": 3}),
    ]
    markdown, report = build(events)
    assert [c["id"] for c in report["recentActivity"]] == ["o1", "o2"]
    assert "- hunch f1: guess: g; why: 3\n" in markdown


# -- the peeked read classifies exactly as the parsed one -------------------------------------

odd_values = st.one_of(
    st.none(), st.booleans(), st.integers(-2, 2), st.sampled_from(
        ["started", "ok", "error", "cancelled", "", "Edit", "Write", "Bash", "NotebookEdit",
         "a \"quoted\" \\ path", "\u00e9t\u00e9.py"]),
    st.lists(st.integers(), max_size=2))
inputs = st.one_of(odd_values, st.dictionaries(
    st.sampled_from(["file_path", "notebook_path", "command", "content"]), odd_values,
    max_size=3))


@settings(max_examples=60, deadline=None)
@example([(0, 1, "tool_call", "s1", "started", None, "Edit", {"file_path": "a.py"}),
          (0, 2, "tool_call", "s1", "ok", 0, None, "not an object")], None)
@example([(0, 1, "tool_call", "s1", "ok", True, "Write", {"file_path": "b.py"}),
          (1, 2, "tool_call", "s2", None, 1, "NotebookEdit", {"notebook_path": "n.ipynb",
                                                              "file_path": 3})], "s2")
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 9), st.sampled_from(
    ["tool_call", "session_start"]), st.sampled_from(["s1", "s2", None]), odd_values,
    odd_values, odd_values, inputs), min_size=1, max_size=12), st.sampled_from([None, "s1"]))
def test_the_peeked_read_digests_exactly_as_the_parsed_read(tmp_path_factory, calls, session):
    """SQLite's peek at status, exit code, tool and input decides nothing the parsed
    body would decide otherwise: the same digest, from the same segment, either way."""
    from agent_journal.storage.root import Root
    from agent_journal.storage.segment_reader import Peek

    root = tmp_path_factory.mktemp("peek")
    ws = Root.open(str(root), create=True).workspace("ws")
    events = []
    for n, (obs_n, second, kind, sess, status, exit_code, tool, input_value) in enumerate(calls):
        data = {"status": status, "exitCode": exit_code, "tool": tool, "input": input_value}
        if n % 3 == 0:
            data = {k: v for k, v in data.items() if v is not None}
        events.append(ev("observation", kind, f"o{obs_n}", at(second), data, session=sess))
    ws.append(events)
    peeked = ws.read(peek=Peek(dg.PEEK_VALUES, dg.PEEK_TYPES)).events
    assert any(type(e).__name__ == "PeekedEvent" for e in peeked)
    assert build(peeked, session=session) == build(ws.read().events, session=session)


def test_no_peek_where_sqlite_json_is_looser_than_python(tmp_path, monkeypatch):
    """On a SQLite whose json_valid accepts JSON5 nothing is peeked: every
    observation is read lazily, and the digest is the same."""

    ws = Root.open(str(tmp_path / "r"), create=True).workspace("ws")
    ws.append([obs("o1", at(1), "Edit", {"file_path": "a.py"}),
               obs("o2", at(2), "Bash", {"command": "ls"}, status="error", exit_code=2)])
    peeked = ws.read(peek=Peek(dg.PEEK_VALUES, dg.PEEK_TYPES)).events
    monkeypatch.setattr(segment_reader, "json_check", lambda: None)
    lazy = ws.read(peek=Peek(dg.PEEK_VALUES, dg.PEEK_TYPES)).events
    assert {type(e).__name__ for e in peeked} == {"PeekedEvent"}
    assert {type(e).__name__ for e in lazy} == {"LazyEvent"}
    assert build(lazy) == build(peeked) == build(ws.read().events)
