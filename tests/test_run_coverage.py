"""A later passing run that provably holds a failing run's selection resolves it; any
doubt (a name filter in the broad run, another runner, another directory, an option no
rule knows) leaves the failure open."""

from __future__ import annotations

import pytest

from agent_journal.core.recovery.calls import Call
from agent_journal.core.recovery.facts import event_facts
from agent_journal.core.recovery.failures import failures
from agent_journal.core.recovery.run_coverage import covers
from agent_journal.core.recovery.test_runs import test_runs as runs_of

HOLDS = [
    ("pytest", "pytest tests/test_x.py::test_a"),
    ("pytest tests/", "pytest tests/test_x.py::test_a"),
    ("pytest tests/test_x.py -q", "pytest tests/test_x.py::TestA::test_a -x"),
    ("pytest", "pytest -k name"),
    ("python -m pytest -q", "pytest --lf"),
    ("uv run pytest tests", "uv run pytest tests/a -m slow"),
    ("go test ./...", "go test ./pkg/..."),
    ("go test ./pkg/...", "go test -run TestA ./pkg/sub"),
    ("go test -v", "go test -run TestA"),
    ("cargo test", "cargo test parse_"),
    ("cargo test -q", "cargo test parse_ -- --exact"),
    ("npm test", "npx jest src/a.test.js"),
    ("npx vitest run", "npx vitest run src/a -t adds"),
]
NEVER = [
    ("pytest -k other", "pytest tests/x.py::test_a"),  # a name filter proves nothing
    ("pytest --lf", "pytest tests/x.py"),
    ("pytest tests/other", "pytest tests/x.py"),
    ("pytest tests/x.py", "pytest tests/x_more.py"),
    ("pytest tests", "pytest ../elsewhere/tests"),
    ("pytest", "pytest -p plugin tests"),  # an option no rule knows
    ("pytest tests/x.py::test_a", "pytest tests/x.py"),
    ("DB=pg pytest", "pytest tests/x.py"),
    ("go test ./pkg", "go test ./pkg/sub"),
    ("go test ./...", "go test -bench . ./pkg"),
    ("go test -short ./...", "go test ./pkg"),
    ("go test -tags e2e ./...", "go test ./pkg"),
    ("cargo test -p core", "cargo test parse_"),
    ("cargo test --release", "cargo test parse_"),
    ("cargo test", "cargo test -- --ignored"),
    ("npm test -- src", "npx jest src/a"),
    ("npx jest -t adds", "npx jest src/a"),
    ("make", "make lint"),
    ("mypy .", "mypy agent_journal/x.py"),
    ("cd build && pytest", "pytest tests/x.py"),
    ("pytest 'tests'", "pytest tests/x.py"),
]


@pytest.mark.parametrize(("broad", "narrow"), HOLDS)
def test_a_broader_selection_holds_the_narrow_one(broad, narrow):
    assert covers(broad, narrow)


@pytest.mark.parametrize(("broad", "narrow"), NEVER)
def test_no_proof_no_cover(broad, narrow):
    assert not covers(broad, narrow)


COMMANDS = sorted({c for pair in HOLDS + NEVER for c in pair})


def test_commands_that_cover_each_other_select_the_same_tests():
    # Containment is one way up to equivalence: two commands may hold each other only
    # when they select the same tests (`pytest` and `python -m pytest -q`), and then
    # each covers exactly what the other covers. Checked over every pair, not sampled,
    # so the law cannot pass or fail by the luck of a draw.
    mutual = [(a, b) for a in COMMANDS for b in COMMANDS if covers(a, b) and covers(b, a)]
    assert ("pytest", "python -m pytest -q") in mutual  # the law is not vacuous
    for a, b in mutual:
        for c in COMMANDS:
            if c not in (a, b):
                assert covers(a, c) == covers(b, c), (a, b, c)
                assert covers(c, a) == covers(c, b), (a, b, c)


def call(i, target, *, status="ok", output=None, cwd="/repo"):
    data = {"tool": "Bash", "input": {"command": target}, "output": output, "status": status,
            "exitCode": 1 if status == "error" else 0, "cwd": cwd}
    facts = event_facts("tool_call", data) or {}
    facts.setdefault("cwd", cwd)
    return Call(f"c{i}", "tool_call", "s", f"2026-01-01T00:00:{i:02d}.000Z",
                f"2026-01-01T00:00:{i:02d}.000Z", facts)


FAIL = "FAILED tests/test_x.py::test_a - assert 1 == 2\n1 failed, 3 passed in 0.2s"


def _failing_then(later):
    return [call(1, "pytest tests/test_x.py::test_a", status="error", output=FAIL), later]


def test_a_passing_whole_suite_resolves_the_narrow_failure():
    calls = _failing_then(call(2, "pytest -q", output="60 passed in 3.1s"))
    runs = {r.command: r for r in runs_of(calls)}
    narrow = runs["pytest tests/test_x.py::test_a"]
    assert narrow.passing and narrow.fixed and narrow.call_id == "c2"
    [failure] = failures(calls)
    assert failure.resolved_by == "c2"


@pytest.mark.parametrize("later", [
    call(2, "pytest -k other", output="5 passed in 0.1s"),  # a filter
    call(2, "pytest -q", output="60 passed in 3.1s", cwd="/other"),  # another directory
    call(2, "mypy tests", output="Success: no issues found in 9 source files"),  # runner
    call(2, "pytest", status="error", output="1 failed, 59 passed in 3.1s"),  # still red
])
def test_no_proven_cover_leaves_the_failure_open(later):
    calls = _failing_then(later)
    narrow = {r.command: r for r in runs_of(calls)}["pytest tests/test_x.py::test_a"]
    assert not narrow.passing
    assert not failures(calls)[0].resolved


def test_cover_counts_for_go_and_cargo():
    go = [call(1, "go test ./pkg/...", status="error",
               output="--- FAIL: TestA (0.00s)\nFAIL\texample.com/m/pkg\t0.01s"),
          call(2, "go test ./...", output="ok  \texample.com/m/pkg\t0.01s\n"
                                          "ok  \texample.com/m/cmd\t0.02s")]
    assert failures(go)[0].resolved_by == "c2"
    cargo = [call(1, "cargo test parse_", status="error",
                  output="test parse_a ... FAILED\ntest result: FAILED. 0 passed; 1 failed; "
                         "0 ignored; 0 measured; 9 filtered out"),
             call(2, "cargo test", output="test result: ok. 10 passed; 0 failed; 0 ignored; "
                                          "0 measured; 0 filtered out")]
    assert failures(cargo)[0].resolved_by == "c2"
