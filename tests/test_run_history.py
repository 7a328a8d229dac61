"""A run line's earlier runs (core/recovery/test_runs.earlier_runs): the latest passing run
under a failing one, the first run when it reported a figure the line does not, and
neither when they would say nothing new; under a tight bound they go before any item."""

from __future__ import annotations

from agent_journal.core.recovery.calls import Call
from agent_journal.core.recovery.facts import event_facts
from agent_journal.core.recovery.failures import failures
from agent_journal.core.recovery.shell_words import piped
from agent_journal.core.recovery.test_runs import SILENT_PASS, figures
from agent_journal.core.recovery.test_runs import test_runs as runs_of
from agent_journal.ops import digest as dg


def call(i, command, output, *, ok=True, cwd="/repo"):
    data = {"tool": "Bash", "input": {"command": command}, "output": output,
            "status": "ok" if ok else "error", "exitCode": 0 if ok else 1,
            "hook": {"cwd": cwd}}
    ts = f"2026-01-01T10:{i:02d}:00.000Z"
    return Call(f"c{i}", "tool_call", "s", ts, ts, event_facts("tool_call", data) or {})


PASS = "10 passed in 1.20s"
FAIL = "FAILED t.py::test_a - boom\n1 failed, 9 passed in 1.31s"


def test_a_run_that_passed_then_failed_shows_its_last_pass():
    [run] = runs_of([call(1, "pytest", "9 passed in 1s"), call(2, "pytest -x", PASS),
                     call(3, "pytest", FAIL, ok=False)])
    assert not run.passing
    assert (run.last_passed.summary, run.last_passed.call_id) == ("10 passed in 1.20s", "c2")
    # The first run's 9 passed is in the latest's summary (9 passed): nothing new.
    assert run.first is None


def test_a_run_that_only_ever_failed_shows_no_pass():
    calls = [call(1, "pytest", FAIL, ok=False), call(2, "pytest", FAIL, ok=False)]
    [run] = runs_of(calls)
    assert run.last_passed is None and run.first is None
    # A first failure with other counts is kept: how it stood before the work began.
    calls[0] = call(1, "pytest", "3 failed, 7 passed in 1.1s", ok=False)
    [run] = runs_of(calls)
    assert run.last_passed is None
    assert (run.first.summary, run.first.ok) == ("3 failed, 7 passed in 1.1s", False)


def test_a_pass_then_a_pass_shows_nothing_extra():
    # Only the duration differs: no figure the latest run does not report.
    [run] = runs_of([call(1, "pytest", "10 passed in 3.50s"), call(2, "pytest", PASS)])
    assert run.passing and run.last_passed is None and run.first is None
    assert figures("10 passed in 3.50s") == figures(PASS) == {("10", "passed")}


def test_a_benchmark_keeps_its_first_figures():
    bench = "BenchmarkEncode-8   \t 1000\t {} ns/op\t 512 B/op\nok  \tx/codec\t1.2s"
    [run] = runs_of([call(1, "go test -bench=. ./codec", bench.format(982311)),
                     call(2, "go test -bench=. ./codec", bench.format(318877))])
    assert run.passing and run.last_passed is None
    assert "982311 ns/op" in run.first.summary and run.first.ok
    # The first run that is also the last pass shows once, as the last pass.
    [run] = runs_of([call(1, "go test -bench=. ./codec", bench.format(982311)),
                     call(2, "go test ./codec", "--- FAIL: TestX (0.00s)\nFAIL\tx/codec\t0.1s",
                          ok=False)])
    assert run.last_passed.call_id == "c1" and run.first is None


def test_a_silent_pass_and_a_passing_chain_are_passing_runs():
    tsc_fail = "src/a.ts(1,2): error TS2304: Cannot find name 'x'."
    [run] = runs_of([call(1, "npx tsc --noEmit", tsc_fail, ok=False),
                     call(2, "npx tsc --noEmit", ""),
                     call(3, "npx tsc --noEmit", tsc_fail, ok=False)])
    assert run.last_passed.summary == SILENT_PASS and run.last_passed.call_id == "c2"
    runs = {r.command: r for r in runs_of([
        call(1, "ruff check .", "a.py:1:1: F401 x\nFound 1 error.", ok=False),
        call(2, "ruff check . && pytest", f"All checks passed!\n{PASS}"),
        call(3, "ruff check .", "a.py:1:1: F401 x\nFound 1 error.", ok=False)])}
    assert runs["ruff check ."].last_passed.call_id == "c2"


def test_a_broader_passing_run_still_resolves_and_is_the_last_pass():
    narrow = "pytest tests/test_x.py::test_a"
    calls = [call(1, narrow, FAIL, ok=False), call(2, "pytest tests/", "40 passed in 2s")]
    runs = {r.command: r for r in runs_of(calls)}
    assert runs[narrow].passing and runs[narrow].fixed and runs[narrow].last_passed is None
    assert failures(calls)[0].resolved_by == "c2"
    runs = {r.command: r for r in runs_of([*calls, call(3, narrow, FAIL, ok=False)])}
    assert runs[narrow].last_passed.summary == "40 passed in 2s"


def _section(runs):
    tests = dg.Section("testRuns", "Test and check runs", "commands")
    for r in runs:
        tests.add(*dg.run_item(r))
    return tests


def test_the_run_line_names_its_earlier_runs_and_a_tight_bound_drops_them_first():
    calls = [call(1, "pytest", "3 failed, 7 passed in 1s", ok=False), call(2, "pytest", PASS),
             call(3, "pytest", FAIL, ok=False), call(4, "ruff check .", "All checks passed!")]
    runs = runs_of(calls)
    item, md, _, lean = dg.run_item(runs[0])
    assert md == lean + ("  - last passing run (10:02): 10 passed in 1.20s\n"
                         "  - first run (10:01, failed): 3 failed, 7 passed in 1s\n")
    assert item["lastPassed"] == {"summary": PASS, "ts": "2026-01-01T10:02:00.000Z",
                                  "callId": "c2", "ok": True}
    assert item["firstRun"]["callId"] == "c1"
    assert dg.run_item(runs[1])[0]["lastPassed"] is None
    whole = len(_section(runs).render(2))
    tests = _section(runs)
    assert dg.fit("", [tests], whole) == [2] and tests.md[0] == md
    # One character short: the earlier runs go, every command's line stays.
    tests = _section(runs)
    assert dg.fit("", [tests], whole - 1) == [2]
    assert tests.md[0] == lean and "last passing" not in tests.render(2)


def _read(i, path):
    ts = f"2026-01-01T10:{i:02d}:00.000Z"
    facts = {"tool": "Read", "target": path, "status": "ok"}
    return Call(f"c{i}", "tool_call", "s", ts, ts, facts)


def _edit(i, path):
    ts = f"2026-01-01T10:{i:02d}:00.000Z"
    facts = {"tool": "Edit", "target": path, "status": "ok", "change": ["x", "y"]}
    return Call(f"c{i}", "tool_call", "s", ts, ts, facts)


def _prompt(i, text):
    ts = f"2026-01-01T10:{i:02d}:00.000Z"
    return Call(f"c{i}", "prompt", "s", ts, ts, {"said": "prompt", "text": text})


def test_a_pass_on_a_bare_re_run_after_a_failure_says_so():
    failing = call(1, "pytest", FAIL, ok=False)
    # Only reads between the failure and the pass: nothing the run depends on changed.
    for between in ([], [_read(2, "/repo/t.py"), call(3, "cat t.py", "x")]):
        [run] = runs_of([failing, *between, call(4, "pytest", PASS)])
        assert run.fixed and run.passed_on_rerun
        assert "flaky?" in dg.run_item(run)[1]
    # An edit, another command or a prompt between them: the pass may be the fix.
    for between in (_edit(2, "/repo/t.py"), call(2, "make db", "ok"), _prompt(2, "retry")):
        [run] = runs_of([failing, between, call(4, "pytest", PASS)])
        assert run.fixed and not run.passed_on_rerun
        assert "flaky?" not in dg.run_item(run)[1]
    # A pass after a pass, or a broader run's pass, is no re-run of a failure.
    [run] = runs_of([call(1, "pytest", PASS), call(2, "pytest", PASS)])
    assert not run.passed_on_rerun
    runs = {r.command: r for r in runs_of([
        call(1, "pytest tests/test_x.py", FAIL, ok=False), call(2, "pytest tests/", PASS)])}
    assert runs["pytest tests/test_x.py"].fixed
    assert not runs["pytest tests/test_x.py"].passed_on_rerun


def test_a_pipe_that_printed_no_summary_is_no_verdict():
    """`runner | head -40` exits with head's status: once it printed something and no
    summary, its exit 0 says nothing, so the failing run stays failing and open (a run
    that printed nothing, like a clean `tsc | head`, still passes)."""
    fail = call(1, "npx playwright test a.spec.ts",
                "Error: boom\n  1 failed\n  9 passed (3.1s)", ok=False)
    cut = call(2, "npx playwright test a.spec.ts --reporter=line 2>&1 | head -40",
               "Running 10 tests using 1 worker\n[1/10] a.spec.ts:3:1 > logs in")
    [run] = runs_of([fail, cut])
    assert not run.passing and run.call_id == "c1"
    [failure] = failures([fail, cut])
    assert not failure.resolved
    quiet = call(2, "npx playwright test a.spec.ts 2>&1 | head -40", "")
    [run] = runs_of([fail, quiet])
    assert run.passing and run.latest.summary == SILENT_PASS
    # Through pipefail the pipe exits with the runner's status; `||` is no pipe.
    assert not piped("set -o pipefail; npx playwright test a.spec.ts | head -40")
    assert not piped("pytest || true") and piped("pytest |& tail -3")


def test_a_pipe_filtered_to_failures_may_cover_and_a_piped_lookup_still_resolves():
    fail = call(1, "go test ./svg/", "--- FAIL: TestA (0.00s)\nFAIL\tx/svg\t0.1s", ok=False)
    grep = call(2, 'go test ./... 2>&1 | grep -vE "^ok|no test files"; echo "=== done ==="',
                "=== done ===")
    [run] = runs_of([fail, grep])
    maybe = run.maybe_covered_by
    assert not run.passing and maybe is not None and maybe.call_id == "c2"
    # A failed pipeline that is no test run is resolved by its own later success.
    jq = call(1, "curl -s https://x/api | jq '.a + 1'", "jq: error: cannot add", ok=False)
    again = call(2, "curl -s https://x/api | jq '.a'", "1")
    assert failures([jq, again])[0].resolved
