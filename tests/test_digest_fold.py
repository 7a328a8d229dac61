"""Laws of the digest's fold (core/recovery/digest_fold.py): it shows what every derivation
over every call showed (the oracle, tests/digest_oracle.py), its bound never changes what
the digest shows, and folding in pieces through its kept state equals folding all."""

from __future__ import annotations

import marshal
from contextlib import contextmanager
from typing import Any

from digest_oracle import oracle_collect
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_journal.core.derive import derive
from agent_journal.core.recovery.calls import Call
from agent_journal.core.recovery.digest_fold import DigestFold
from agent_journal.ops import digest as dg

SESSIONS = st.sampled_from([None, "s1", "s2"])
FILES = ["/w/a.py", "/w/b.py", "c.md"]
TEXTS = ["fix the parser", "Always run make lint before committing.", "never touch legacy.py",
         "Use pnpm, not npm. What next?", "<command-name>/clear</command-name>", "thanks"]


def _check(ok: bool, tests: int = 3) -> dict[str, Any]:
    # How many tests ran varies, so that an earlier run can report a figure the latest
    # does not (a run line's first run).
    return {"runner": "pytest", "ok": ok,
            "summary": f"{tests} passed" if ok else f"1 failed, {tests - 1} passed",
            "passed": tests if ok else tests - 1, "failed": None if ok else 1, "errors": None,
            "skipped": None, "failing": [] if ok else ["t.py::test_a"],
            "firstFailure": None if ok else "AssertionError"}


def _status(draw: Any) -> dict[str, Any]:
    status = draw(st.sampled_from(["ok", "ok", "ok", "error", "started"]))
    facts: dict[str, Any] = {"status": status}
    if status == "error":
        facts["exit"] = 1
        facts["reason"] = draw(st.sampled_from(["boom", "nothing to commit, working tree clean"]))
        if facts["reason"].startswith("nothing"):
            facts["noop"] = True
    return facts


@st.composite
def tool_facts(draw: Any) -> dict[str, Any]:
    kind = draw(st.sampled_from(["test", "bash", "git", "task", "edit", "write", "read",
                                 "todo", "plan", "reject", "patch"]))
    facts = _status(draw)
    if draw(st.booleans()):
        facts["cwd"] = draw(st.sampled_from(["/w", "/w/sub"]))
    if kind == "test":
        ok = draw(st.booleans())
        facts.update(tool="Bash", target=draw(st.sampled_from(
            ["pytest", "pytest -x", "npm test", "make lint && pytest", "ruff check ."])))
        if facts["status"] != "started" and draw(st.integers(0, 3)):
            facts["check"] = _check(ok, draw(st.sampled_from([3, 3, 4])))
            facts["status"] = "ok" if ok else "error"
            if not ok:
                facts["exit"] = 1
    elif kind == "bash":
        facts.update(tool="Bash", target=draw(st.sampled_from(
            ["ls", "python run.py", "cat c.md", "rm c.md"])))
        if draw(st.booleans()):
            facts["traceback"] = "ValueError: no"
        if facts["target"] == "cat c.md":
            facts["reads"] = ["c.md"]
        if facts["target"] == "rm c.md":
            facts["fileOps"] = [["deleted", "c.md"]]
    elif kind == "git":
        target = draw(st.sampled_from(["git commit -m x", "git push", "git log --oneline",
                                       "git merge feat -m 'Merge feat'", "git rebase main",
                                       "git checkout -b topic"]))
        facts.update(tool="Bash", target=target)
        n = draw(st.integers(0, 40))
        if target.startswith("git commit"):
            facts["commits"] = [[f"h{n}", f"subject {n}", "main"]]
        elif target == "git push":
            facts["pushes" if draw(st.booleans()) else "pushRejected"] = (
                [["origin", "main", "main"]] if draw(st.booleans()) else
                [["origin", "main", "main", "fetch first"]])
            if "pushRejected" in facts:
                facts["pushRejected"] = [["origin", "main", "main", "fetch first"]]
            else:
                facts["pushes"] = [["origin", "main", "main"]]
        elif target.startswith("git log"):
            facts["log"] = [[f"h{n}", f"subject {n}"], [f"m{n}", "Merge feat"]]
        elif target.startswith("git merge"):
            facts["merged"] = True
        elif target.startswith("git checkout"):
            facts["switched"] = "topic"
        if draw(st.booleans()):
            facts["branch"] = "main"
    elif kind == "task":
        facts.update(tool=draw(st.sampled_from(["Task", "Agent"])), target="explore")
        if facts["status"] == "ok":
            facts["result"] = draw(st.sampled_from(["found it", "nothing"]))
    elif kind in ("edit", "write", "read", "patch"):
        path = draw(st.sampled_from(FILES))
        tool = {"edit": "Edit", "write": "Write", "read": "Read", "patch": "apply_patch"}[kind]
        facts.update(tool=tool, target=path)
        if kind == "edit":
            facts["change"] = ["new line", "old line"]
        if kind == "write":
            facts["write"] = draw(st.sampled_from(["created", "updated"]))
        if kind == "patch":
            facts["fileOps"] = [["moved", path, "/w/moved.py"]]
    elif kind == "todo":
        facts.update(tool="TodoWrite", todos=[["pending", "a"], ["completed", "b"]])
    elif kind == "plan":
        facts.update(tool="ExitPlanMode", plan="the plan")
    else:
        facts.update(tool="Bash", target="rm -rf /", status="error", refusal="rejected",
                     words="no, do not", exit=1)
    return facts


@st.composite
def said_facts(draw: Any) -> dict[str, Any]:
    said = draw(st.sampled_from(["prompt", "prompt", "assistant_message", "compact_summary",
                                 "subagent_result", "session_event"]))
    facts: dict[str, Any] = {"said": said, "text": draw(st.sampled_from(TEXTS)), "chars": 9}
    if draw(st.integers(0, 4)) == 0:
        facts["abandoned"] = True
    if draw(st.integers(0, 4)) == 0:
        facts["agent"] = "sub1"
    if said == "compact_summary":
        source = draw(st.sampled_from([None, "summary", "away_summary"]))
        if source:
            facts["source"] = source
    if draw(st.integers(0, 3)) == 0:
        facts["branch"] = "dev"
    return facts


@st.composite
def journeys(draw: Any) -> list[Call]:
    n = draw(st.integers(0, 140))
    calls = []
    for i in range(n):
        tool = draw(st.integers(0, 3)) > 0
        facts = draw(tool_facts()) if tool else draw(said_facts())
        kind = "tool_call" if tool else facts["said"]
        ts = f"2026-01-01T00:{draw(st.integers(0, 59)):02d}:00Z"
        calls.append(Call(f"c{i:03d}", kind, draw(SESSIONS), ts, ts, facts))
    calls.sort(key=lambda c: (c.ts, c.id))
    return calls


def _shown(collected: dict[str, Any]) -> list[Any]:
    return [collected["goal"], collected["where"], collected["sessions"],
            [(s.key, s.md, s.items, s.total, s.lean) for s in collected["sections"]]]


def _fold(calls: list[Call], tail: int | None) -> DigestFold:
    fold = DigestFold(tail)
    for call in calls:
        fold.step(call)
    return fold


EMPTY = derive([])


@settings(max_examples=40, deadline=None)
@given(journeys(), st.sampled_from([None, 8, 30, 60]))
def test_the_fold_shows_what_every_derivation_over_every_call_showed(calls, tail):
    expected = _shown(oracle_collect(EMPTY, calls))
    fold = _fold(calls, tail)
    if fold.sufficient():
        assert _shown(dg.collect(EMPTY, fold)) == expected
    assert _shown(dg.collect(EMPTY, _fold(calls, None))) == expected


@settings(max_examples=40, deadline=None)
@given(journeys(), st.data())
def test_folding_in_pieces_through_the_kept_state_equals_folding_all(calls, data):
    whole = _fold(calls, 30)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(calls)), max_size=3)))
    fold = DigestFold(30)
    done = 0
    for cut in [*cuts, len(calls)]:
        for call in calls[done:cut]:
            fold.step(call)
        done = max(done, cut)
        # Kept as the cache keeps it: plain values, marshalled.
        fold = DigestFold.unpacked(marshal.loads(marshal.dumps(fold.packed(), 2)))
    assert fold.packed() == whole.packed()
    assert fold.sufficient() == whole.sufficient()
    if whole.sufficient():
        assert _shown(dg.collect(EMPTY, fold)) == _shown(dg.collect(EMPTY, whole))


def test_the_state_stays_bounded_by_what_the_digest_shows():
    # Thousands of calls over a few commands and files: the state does not grow with them.
    sizes = []
    for n in (2_000, 8_000):
        fold = DigestFold()
        for i in range(n):
            ts = f"2026-01-01T{i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z"
            tool = ("Bash", "Read", "Edit", "Task")[i % 4]
            facts: dict[str, Any] = {"tool": tool, "target": f"/w/f{i % 7}.py",
                                     "status": "ok" if i % 5 else "error", "reason": "x"}
            if tool == "Bash":
                facts.update(target=f"pytest t{i % 5}.py", check=_check(i % 3 > 0))
            if tool == "Task":
                facts["result"] = f"result {i}"
            fold.step(Call(f"c{i:05d}", "tool_call", "s", ts, ts, facts))
            if i % 11 == 0:
                said = {"said": ("prompt", "assistant_message", "session_event")[i % 3],
                        "text": f"text {i}"}
                fold.step(Call(f"p{i:05d}", said["said"], "s", ts, ts, said))
        sizes.append(len(marshal.dumps(fold.packed(), 2)))
    # Only the distinct session messages (one text each here) grow with the calls.
    assert sizes[1] < sizes[0] * 1.5, sizes


@contextmanager
def _small_caps():
    """Every section's cap, and what the fold keeps for it, made small: the journeys
    then run past each bound."""
    import digest_oracle

    from agent_journal.core.recovery import digest_fold

    caps = {"asked": 3, "earlierMessages": 2, "summaries": 2, "subagents": 2, "rewound": 2,
            "sessionMessages": 1, "openProblems": 3, "resolvedProblems": 3, "commits": 4,
            "recentActivity": 4, "testRuns": 3, "files": 3, "filesRead": 2, "outcomes": 2}
    keep = {"asked": 3, "rejections": 3, "assistant": 5, "outcomes": 2, "summaries": 2,
            "subagents": 2,
            "rewound": 2, "meta": 1, "failures": 3, "git": 4, "recent": 4}
    from agent_journal.ops import digest_lines

    saved = (dict(dg.CAPS), dict(digest_fold.KEEP), digest_lines.GIT_OPERATIONS)
    dg.CAPS.update(caps)
    digest_fold.KEEP.update(keep)
    digest_lines.GIT_OPERATIONS = digest_oracle.GIT_OPERATIONS = 2
    try:
        yield
    finally:
        dg.CAPS.update(saved[0])
        digest_fold.KEEP.update(saved[1])
        digest_lines.GIT_OPERATIONS = digest_oracle.GIT_OPERATIONS = saved[2]


@settings(max_examples=50, deadline=None)
@given(journeys(), st.sampled_from([6, 12, 40]), st.data())
def test_past_every_bound_the_fold_still_shows_what_the_oracle_shows(calls, tail, data):
    with _small_caps():
        expected = _shown(oracle_collect(EMPTY, calls))
        fold = _fold(calls, tail)
        if fold.sufficient():
            assert _shown(dg.collect(EMPTY, fold)) == expected
        assert _shown(dg.collect(EMPTY, _fold(calls, None))) == expected
        cut = data.draw(st.integers(0, len(calls)))
        pieces = DigestFold.unpacked(marshal.loads(marshal.dumps(
            _fold(calls[:cut], tail).packed(), 2)))
        for call in calls[cut:]:
            pieces.step(call)
        assert pieces.packed() == fold.packed()
