"""digest: the recovery summary. Verbatim objectives, nothing tombstoned, nothing
retracted shown as live, bounded with an honest account of what was left out."""

from __future__ import annotations

import json
from pathlib import Path

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
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_journal.core.derive import derive
from agent_journal.core.recovery.facts import target_of
from agent_journal.ops import digest as dg

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

def test_target_per_tool():
    assert target_of("Bash", {"command": "rm -rf build", "timeout": 5}) == "rm -rf build"
    for tool in ("Read", "Write", "Edit", "MultiEdit"):
        assert target_of(tool, {"file_path": "/a b/c.py", "content": "x"}) == "/a b/c.py"
    assert target_of("NotebookEdit", {"notebook_path": "n.ipynb"}) == "n.ipynb"
    assert target_of("Grep", {"pattern": "a|b", "path": "src"}) == "a|b"
    assert target_of("Task", {"description": "look", "prompt": "p"}) == "look"
    assert target_of("Odd", "plain text") is None
    assert target_of("Bash", {"command": "c" * 5000}) == "c" * 5000  # verbatim, uncut


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
        obs("o8", at(8), "Edit", {"file_path": "b.py"}),
    ]
    _, report = build(events)
    assert [c["id"] for c in report["openProblems"]] == ["o4", "o5"]
    assert [(c["id"], c["resolvedBy"]) for c in report["resolvedProblems"]] == [("o3", "o8")]
    assert [c["id"] for c in report["unfinishedToolCalls"]] == ["o6"]
    assert report["unfinishedInstruction"] == dg.WATERMARK
    assert [(f["path"], f["state"], f["changes"]) for f in report["files"]] == [
        ("a.py", "edited", 2), ("n.ipynb", "edited", 1), ("b.py", "edited", 1)]


def test_a_finished_call_is_no_longer_unfinished():
    started = obs("o1", at(1), "Bash", {"command": "deploy"}, status="started")
    done = ev("observation", "tool_call", "o1", at(2), {"status": "ok", "exitCode": 0},
              session="s1")
    _, before = build([started])
    _, after = build([started, done])
    assert [c["id"] for c in before["unfinishedToolCalls"]] == ["o1"]
    assert after["unfinishedToolCalls"] == [] and after["unfinishedInstruction"] is None
    assert "deploy" in json.dumps(after["stopped"])


def test_session_scopes_tool_calls_but_not_entries():
    events = [
        obs("mine", at(1), "Bash", {"command": "a"}, session="s1"),
        obs("theirs", at(2), "Bash", {"command": "b"}, session="s2", status="error"),
        entry("f-s2", at(3), session="s2"),
    ]
    markdown, report = build(events, session="s1")
    assert "mine" in json.dumps(report) and "theirs" not in json.dumps(report)
    assert report["openProblems"] == []
    assert [e["id"] for e in report["liveEntries"]] == ["f-s2"]
    assert "Observations: session s1. Entries: all sessions." in markdown


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
    assert "Objectives: (none recorded)" in section(markdown, "Goal")
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


def short_note(bound: int) -> str:
    """The shortest note of what was left out (digest_page._assemble)."""
    return (f"_More was left out to fit --max-chars {bound}: `agent-journal digest` "
            "prints more._\n")


def test_trims_least_important_first_and_says_so():
    events = busy_journal()
    full, full_report = build(events, max_chars=10**6)
    assert full_report["trimmedToFit"] == {}
    order = list(dg.CAPS)  # the sections' priority order, most important first
    previous_trimmed: dict[str, int] = {}
    for bound in range(len(full), 0, -97):
        markdown, report = build(events, max_chars=bound)
        assert len(markdown) <= bound or report["overBound"]
        assert report["chars"] == len(markdown)
        assert "- o-1 (human): the goal\n" in markdown and "- c-1 (human): the rule\n" in markdown
        trimmed = report["trimmedToFit"]
        if trimmed and not report["overBound"]:
            # the note says what was left out, or (a bound too small for it) that more was
            assert (f"_Left out to fit --max-chars {bound}, least important first:" in markdown
                    or f"_More was left out to fit --max-chars {bound}" in markdown
                    or len(markdown) + len(short_note(bound)) > bound)
        # a section loses items above its floor only once every less important one is
        # down to its floor, and below its floor only once every less important one is empty
        for i, key in enumerate(order):
            if trimmed.get(key):
                below = len(report[key]) < dg.FLOORS.get(key, 0)
                for later in order[i + 1:]:
                    room = 0 if below else dg.FLOORS.get(later, 0)
                    assert len(report[later]) <= room, (bound, key, later)
        # monotone: a smaller bound never shows more of any section
        for key, count in previous_trimmed.items():
            assert trimmed.get(key, 0) >= count
        previous_trimmed = trimmed


def test_caps_report_what_they_hide():
    markdown, report = build(busy_journal(), max_chars=10**6)
    assert len(report["recentActivity"]) == dg.CAPS["recentActivity"]
    hidden = report["notShown"]["recentActivity"]
    assert hidden > 0
    assert f"- ... and {hidden} earlier calls not shown\n" in markdown


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
    for i in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["prompt", "assistant_message", "compact_summary"]))
        # "Never ..." makes a prompt a standing instruction: it is bound by the same laws.
        events.append(ev("observation", kind, f"p{i}", at(draw(st.integers(0, 9))),
                         {"text": f"Never touch said<p{i}>.\n" + f"said<p{i}> " * draw(
                             st.integers(1, 300))},
                         session=draw(st.sampled_from(["s1", "s2"]))))
    targets = draw(st.lists(st.sampled_from(POOL + [f"o{i}" for i in range(6)]
                                            + [f"p{i}" for i in range(4)]), max_size=4))
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
    assert set(scoped["sessions"]) >= {"s1", "s2"}


def test_odd_values_from_newer_replicas_do_not_break_the_digest():
    events = [
        ev("observation", "tool_call", "o1", at(1), {"tool": {"name": "x"}, "input": [1],
                                                     "status": {"s": 1}, "exitCode": "2"}),
        ev("observation", "tool_call", "o2", at(2), {"tool": ["Edit"], "input": {"a": 1}}),
        entry("f1", at(3), kind="hunch", fields={"guess": "g", "why": 3}),
    ]
    markdown, report = build(events)
    assert "o1" in json.dumps(report) and "o2" in json.dumps(report)
    assert "- hunch f1: guess: g; why: 3\n" in markdown




def test_an_entry_whose_only_evidence_was_erased_says_so():
    events = [obs("o1", at(1), "Bash", {"command": "secret<o1>"}),
              obs("o2", at(2), "Bash", {"command": "b"}),
              entry("f1", at(3), anchors=["tool_use:o1"]),
              entry("f2", at(4), anchors=["tool_use:o1", "tool_use:o2"]),
              entry("f3", at(5), anchors=["tool_use:elsewhere"]),
              ev("tombstone", "tombstone", "o1", at(6), {"reason": "leaked"})]
    markdown, report = build(events)
    gone = {e["id"]: e["evidenceGone"] for e in report["liveEntries"]}
    assert gone == {"f1": True, "f2": False, "f3": False}
    assert markdown.count(dg.GONE_NOTE) == 1 and "secret<o1>" not in markdown


# -- what a resuming agent is told beyond runs and commits -----------------------------------

def said(obs_id, ts, kind, text, **context):
    return ev("observation", kind, obs_id, ts, {"text": text, "transcript": context},
              session="s1")


def test_rules_plan_todos_reads_and_recap_render():
    events = [
        said("p1", at(1), "prompt", "Port the loader. Always run make lint before committing."),
        said("p2", at(2), "prompt", "Does it always fail?"),
        obs("o-plan", at(3), "ExitPlanMode", {"plan": "# Plan\n1. Use tomllib"}),
        obs("o-todo", at(4), "TodoWrite", {"todos": [
            {"content": "switch loader", "status": "completed"},
            {"content": "document --strict", "status": "pending"}]}),
        obs("o-read", at(5), "Read", {"file_path": "/w/src/schema.py"}),
        obs("o-edit", at(6), "Edit", {"file_path": "/w/src/loader.py"}),
        obs("o-read2", at(7), "Read", {"file_path": "/w/src/loader.py"}),
        said("a1", at(8), "assistant_message", "Loader switched."),
        said("r1", at(9), "compact_summary", "You switched the loader; docs remain.",
             source="away_summary"),
    ]
    markdown, report = build(events)
    rules = section(markdown, "Standing instructions from the user")
    assert "Always run make lint before committing." in rules and "always fail" not in rules
    assert [r["text"] for r in report["standingInstructions"]] == [
        "Always run make lint before committing."]
    stopped = section(markdown, "Where it stopped")
    assert "- latest plan (19:00, approved):\n> # Plan\n> 1. Use tomllib\n" in stopped
    assert "remaining: [pending] document --strict; done: [completed] switch loader" in stopped
    assert "- recap (19:00): You switched the loader; docs remain." in stopped
    read = section(markdown, "Files read, not changed")
    # (every file lies in /w/src: the lists name them relative to it, the JSON whole)
    assert "Paths relative to `/w/src`.\n- schema.py\n" in read and "loader.py" not in read
    assert report["filesRead"] == [{"files": ["/w/src/schema.py"], "lastTs": at(5)}]


def test_the_note_names_the_commands_that_print_what_is_left_out():
    markdown, report = build(busy_journal(), max_chars=3000)
    assert report["trimmedToFit"] and len(markdown) <= 3000
    assert "`agent-journal timeline --workspace ws --failures-only`" in markdown
    assert "`agent-journal get --workspace ws ID`" in markdown
    small, _ = build(busy_journal(3), max_chars=10**6)
    assert "agent-journal timeline" not in small  # nothing left out, nothing to point at


CODEX = (Path(__file__).resolve().parent / "data" / "recall-heldout" / "transcripts"
         / "codex-ledger-since.jsonl")


def test_a_codex_session_fills_the_same_sections(cli, tmp_path):
    assert cli("import", "codex", str(CODEX)).code == 0
    markdown = cli("digest").out
    assert "Add a --since date filter to `ledger report`" in section(markdown, "Goal")
    assert "Use pnpm, not npm." in section(markdown, "Standing instructions from the user")
    assert "inclusive of the start date" in section(markdown, "What the user asked since")
    assert "environment_context" not in markdown
    assert "pull request is the next step" in section(markdown, "Where it stopped")
    files = section(markdown, "Files changed")
    assert "`src/filters/since.ts`: created" in files and "`src/report.ts`: edited" in files
    assert "src/gen/schema.ts" in section(markdown, "Files read, not changed")
    assert "9c1d2e3 report: add --since filter" in section(markdown, "Commits")
    assert "vitest.config.ts" in section(markdown, "Compaction summaries")
    # Each message once, though the file holds it as an item and as an event.
    assert markdown.count("The filter must be inclusive of the start date.") == 1


def test_a_codex_prompt_redacted_and_tombstoned_never_renders(cli, tmp_path):
    key = "AKIA" + "Q" * 16
    lines = [json.dumps({"timestamp": "2026-03-06T14:00:00.000Z", "type": "session_meta",
                         "payload": {"id": "sess-1", "cwd": "/w"}}),
             json.dumps({"timestamp": "2026-03-06T14:00:01.000Z", "type": "response_item",
                         "payload": {"type": "message", "role": "user", "content": [
                             {"type": "input_text", "text": f"Never print {key} again."}]}}),
             json.dumps({"timestamp": "2026-03-06T14:00:02.000Z", "type": "response_item",
                         "payload": {"type": "message", "role": "user", "content": [
                             {"type": "input_text", "text": "Always use pnpm."}]}})]
    path = tmp_path / "rollout.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert cli("import", "codex", str(path)).code == 0
    report = cli("digest", "--json").json()
    assert key not in json.dumps(report)
    [first, _] = [r["promptId"] for r in report["standingInstructions"]]
    assert cli("tombstone", first, "--reason", "held a key").code == 0
    markdown = cli("digest").out
    assert "Never print" not in markdown and "Always use pnpm." in markdown


def test_the_latest_summary_says_how_much_work_came_after_it():
    events = [said("s1", at(1), "compact_summary", "first summary"),
              obs("o1", at(2), "Read", {"file_path": "a.py"}),
              said("s2", at(3), "compact_summary", "second summary"),
              obs("o2", at(4), "Edit", {"file_path": "a.py"}),
              said("p1", at(5), "prompt", "go on")]
    summaries = section(build(events)[0], "Compaction summaries")
    assert "- 19:00:\n> first summary" in summaries
    assert "(the latest; after it: 1 tool call(s), 1 prompt(s)):\n> second summary" in summaries


def test_a_codex_exec_command_reports_its_exit_code(cli, tmp_path):
    lines = [{"timestamp": "2026-03-06T14:00:00.000Z", "type": "session_meta",
              "payload": {"id": "sess-2", "cwd": "/w"}},
             {"timestamp": "2026-03-06T14:00:01.000Z", "type": "response_item",
              "payload": {"type": "function_call", "name": "exec_command", "call_id": "x1",
                          "arguments": json.dumps({"cmd": "make build"})}},
             {"timestamp": "2026-03-06T14:00:02.000Z", "type": "response_item",
              "payload": {"type": "function_call_output", "call_id": "x1",
                          "output": "Chunk ID: 1\nWall time: 0.2 seconds\nProcess exited "
                                    "with code 2\nOutput:\nmake: *** No rule to make target"}}]
    path = tmp_path / "rollout.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert cli("import", "codex", str(path)).code == 0
    problems = section(cli("digest").out, "Open problems")
    assert "Bash `make build` -> failed (exit 2)" in problems


def test_a_long_last_message_is_clipped_to_fit_rather_than_dropped():
    text = "The work is done: " + "details of what was done " * 100
    events = [said("p1", at(1), "prompt", "do the work"),
              said("a1", at(2), "assistant_message", text)]
    markdown, report = build(events, max_chars=1500)
    assert len(markdown) <= 1500
    stopped = section(markdown, "Where it stopped")
    assert "> The work is done: details" in stopped and "…" in stopped
    assert report["stopped"][-1]["text"] == text.strip()  # the JSON keeps the stored text


def test_codex_update_plan_is_the_todo_list():
    events = [obs("o1", at(1), "update_plan", {"explanation": "x", "plan": [
        {"step": "add the flag", "status": "completed"},
        {"step": "document it", "status": "pending"}]})]
    stopped = section(build(events)[0], "Where it stopped")
    assert "remaining: [pending] document it; done: [completed] add the flag" in stopped


def test_the_bound_is_hard_under_every_bound_without_objectives():
    # Issue 32: --max-chars 400 printed 836 characters on a journal with many sections.
    events = [e for e in busy_journal()
              if not (e.type == "entry" and e.kind in ("objective", "constraint"))]
    for bound in (60, 120, 250, 400, 600, 900):
        markdown, report = build(events, max_chars=bound)
        assert len(markdown) <= bound, (bound, len(markdown))
        assert report["overBound"] is False and report["chars"] == len(markdown)


SUMMARY = ("This session is being continued from a previous conversation that ran out of "
           "context.\n\nSummary:\n1. **Primary Request and Intent:**\n   Fix the parser's "
           "unicode escapes.\n\n2. **Key Technical Concepts:**\n   - the lexer\n\n"
           "9. **Optional Next Step:**\n   Run the lexer tests.")


def test_a_journal_that_begins_with_a_summary_takes_its_goal_from_it():
    events = [said("s1", at(1), "compact_summary", SUMMARY),
              obs("o1", at(2), "Read", {"file_path": "a.py"}),
              said("p1", at(3), "prompt", "go on with the lexer")]
    markdown, report = build(events)
    goal = section(markdown, "Goal")
    assert "Continued from an earlier conversation" in goal
    assert "Fix the parser's unicode escapes." in goal and "Key Technical" not in goal
    assert "This session is being continued" not in goal
    assert report["goal"]["kind"] == "compact_summary"
    assert "go on with the lexer" in section(markdown, "What the user asked since")
    summaries = section(markdown, "Compaction summaries")
    assert "Key Technical Concepts" in summaries and "Run the lexer tests." in summaries
    assert "unicode escapes" not in summaries


def test_a_summary_after_the_first_prompt_leaves_the_goal_alone():
    events = [said("p1", at(1), "prompt", "fix the parser"),
              said("s1", at(2), "compact_summary", SUMMARY)]
    markdown, report = build(events)
    assert "First prompt" in section(markdown, "Goal")
    assert "Primary Request" in section(markdown, "Compaction summaries")


def test_a_said_text_too_long_for_its_event_keeps_its_end():
    from agent_journal.core.recovery.facts import event_facts

    facts = event_facts("prompt", {"text": "log line\n" * 200, "artifact": {
        "ref": "r", "bytes": 40000, "tail": "last log line\nplease fix the parser"}})
    assert facts is not None and facts["text"].endswith("please fix the parser")
    assert facts["chars"] == 40000


def test_a_call_that_failed_again_the_same_way_is_one_open_problem():
    failed = {"status": "error", "exit_code": 1}
    events = [said("p1", at(1), "prompt", "edit the pull request"),
              obs("o1", at(2), "Bash", {"command": "gh pr edit 15 --body-file b.md"}, **failed),
              obs("o2", at(3), "Bash", {"command": "gh pr edit 15 --body-file b.md"}, **failed),
              obs("o3", at(4), "Bash", {"command": "gh pr edit 16 --body-file b.md"}, **failed)]
    markdown, report = build(events)
    problems = section(markdown, "Open problems")
    assert problems.count("gh pr edit 15") == 1 and "[o2]" in problems
    assert "gh pr edit 16" in problems
    assert [p["id"] for p in report["openProblems"]] == ["o2", "o3"]
