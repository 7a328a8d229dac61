"""The digest never states red where the latest relevant evidence is green (issue 27).

A failure is open only while no later run covers it: the same command, a broader
selection of its runner (run_coverage), a pipeline whose head is such a run and whose
output reported a pass. A passing wrapper (`make test`, `mise run test:integration`) is
suggestive only: the run is then neither open nor fixed, and the line says "may cover".
Laws: appending a later covering pass never leaves the failure open; appending unrelated
calls never changes any run's verdict.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_run_coverage import call

from agent_journal.core.recovery.failures import failures
from agent_journal.core.recovery.test_runs import check_key, command_key
from agent_journal.core.recovery.test_runs import test_runs as runs_of
from agent_journal.core.recovery.wrappers import wrapper_scope

GO_FAIL = ("--- FAIL: TestParse (0.00s)\n    parse_test.go:12: want 1 got 2\n"
           "FAIL\texample.com/m/pkg/parse\t0.01s\nFAIL")
GO_OK = "ok  \texample.com/m/pkg/parse\t0.01s\nok  \texample.com/m/cmd\t0.02s"
PY_FAIL = "FAILED tests/test_x.py::test_a - assert 1 == 2\n1 failed, 3 passed in 0.2s"
BUN_FAIL = "(fail) parse > reads [1.00ms]\n\n 3 pass\n 1 fail\nRan 4 tests across 2 files."
BUN_OK = " 4 pass\n 0 fail\nRan 4 tests across 2 files. [20.00ms]"
LINT_FAIL = ("x.go:3:2: Error return value of `f` is not checked (errcheck)\n1 issues:\n"
             "* errcheck: 1")


def _run(calls, command):
    """The run history `command` belongs to (shown by its latest command)."""
    key = check_key(command_key(command))
    return {check_key(command_key(r.command)): r for r in runs_of(calls)}[key]


def test_a_pipeline_whose_output_shows_the_suite_passing_covers_the_failure():
    calls = [call(1, "go test ./pkg/parse", status="error", output=GO_FAIL),
             call(2, "go test -json ./... | python3 -c 'import json,sys; print(1)'",
                  output="Total: 254\nPassed: 254, Failed: 0")]
    run = _run(calls, "go test ./pkg/parse")
    assert run.passing and run.fixed and not run.unresolved
    assert failures(calls)[0].resolved


def test_the_same_command_through_a_filter_covers_itself():
    calls = [call(1, "go test ./...", status="error", output=GO_FAIL),
             call(2, "go test ./... | grep -v '^='", output=GO_OK)]
    assert _run(calls, "go test ./...").passing


def test_bun_test_whole_suite_covers_a_file_run_and_golangci_lint_fixes_itself():
    calls = [call(1, "bun test src/parse.test.ts", status="error", output=BUN_FAIL),
             call(2, "golangci-lint run ./...", status="error", output=LINT_FAIL),
             call(3, "bun test", output=BUN_OK),
             call(4, "golangci-lint run ./...", output="0 issues.")]
    assert _run(calls, "bun test src/parse.test.ts").passing
    lint = _run(calls, "golangci-lint run ./...")
    assert lint.passing and lint.fixed
    assert not [f for f in failures(calls) if not f.resolved]


@pytest.mark.parametrize("wrapper", ["mise run test:integration", "make test", "just test",
                                     "npm run test:unit", "tox -e py312", "./scripts/test.sh",
                                     "task ci", "pnpm run check"])
def test_a_passing_wrapper_may_cover_a_failing_run_and_says_so(wrapper):
    calls = [call(1, "go test ./pkg/parse", status="error", output=GO_FAIL),
             call(2, wrapper, output="done")]
    run = _run(calls, "go test ./pkg/parse")
    assert not run.passing and not run.unresolved and not run.fixed
    assert run.maybe_covered_by is not None and run.maybe_covered_by.summary == wrapper


@pytest.mark.parametrize(("wrapper", "cwd"), [
    ("make lint", "/repo"),  # a lint target does not run the tests
    ("make test", "/repo/other"),  # another folder
    ("make build", "/repo"),  # nothing in its name says tests
    ("make test && rm -rf x", "/repo"),  # not a plain invocation
])
def test_a_wrapper_that_cannot_run_the_tests_says_nothing(wrapper, cwd):
    calls = [call(1, "pytest tests/test_x.py::test_a", status="error", output=PY_FAIL),
             call(2, wrapper, output="ok", cwd=cwd)]
    run = _run(calls, "pytest tests/test_x.py::test_a")
    assert run.unresolved and run.maybe_covered_by is None


def test_a_later_failure_takes_the_maybe_back():
    calls = [call(1, "go test ./pkg/parse", status="error", output=GO_FAIL),
             call(2, "make test", output="done"),
             call(3, "go test ./pkg/parse", status="error", output=GO_FAIL)]
    run = _run(calls, "go test ./pkg/parse")
    assert run.unresolved and run.maybe_covered_by is None


def test_wrapper_scopes():
    assert wrapper_scope("make test") == "test"
    assert wrapper_scope("make lint") == "check"
    assert wrapper_scope("make ci") == "all"
    assert wrapper_scope("mise run test:integration") == "test"
    assert wrapper_scope("bun test") is None  # a runner, not a wrapper
    assert wrapper_scope("make") is None
    assert wrapper_scope("cat Makefile") is None


# -- laws ------------------------------------------------------------------------------

FAILING = [("pytest tests/test_x.py::test_a", PY_FAIL), ("go test ./pkg/parse", GO_FAIL),
           ("bun test src/parse.test.ts", BUN_FAIL), ("golangci-lint run ./...", LINT_FAIL)]
COVERING = {
    "pytest tests/test_x.py::test_a": ["pytest", "pytest tests/", "python -m pytest -q",
                                       "pytest tests/test_x.py::test_a -x",
                                       "pytest tests 2>&1 | tail -5"],
    "go test ./pkg/parse": ["go test ./...", "go test ./pkg/parse -v",
                            "go test -json ./... | python3 -c 'x'"],
    "bun test src/parse.test.ts": ["bun test", "bun test src/parse.test.ts"],
    "golangci-lint run ./...": ["golangci-lint run ./..."],
}
PASS_OUTPUT = {"pytest": "60 passed in 3.1s", "go": GO_OK + "\nPassed: 254, Failed: 0",
               "bun": BUN_OK, "golangci-lint": "0 issues."}
UNRELATED = [("Read", None), ("Bash", "ls -la"), ("Bash", "git status"),
             ("Bash", "cat README.md"), ("Bash", "npm run build"), ("Bash", "echo hi")]


def _unrelated(i, which):
    tool, target = UNRELATED[which]
    if tool == "Read":
        c = call(i, "cat x")
        c.facts.update(tool="Read", target="/repo/x.py")
        c.facts.pop("reads", None)
        return c
    return call(i, target, output="fine")


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_appending_a_covering_pass_never_leaves_the_failure_open(data):
    command, output = data.draw(st.sampled_from(FAILING))
    later = data.draw(st.sampled_from(COVERING[command]))
    noise = data.draw(st.lists(st.integers(0, len(UNRELATED) - 1), max_size=6))
    calls = [call(1, command, status="error", output=output)]
    calls += [_unrelated(2 + n, w) for n, w in enumerate(noise)]
    calls.append(call(20, later, output=PASS_OUTPUT[later.split()[0] if later.split()[0]
                                                   in PASS_OUTPUT else "pytest"]))
    run = _run(calls, command)
    assert run.passing and not run.unresolved
    assert all(f.resolved for f in failures(calls) if f.target == command)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_unrelated_calls_never_change_a_verdict(data):
    runs = data.draw(st.lists(st.sampled_from(FAILING + [("pytest", "60 passed in 3.1s"),
                                                         ("make test", "ok")]),
                              min_size=1, max_size=5))
    base = [call(2 * n + 1, cmd, status="error" if "fail" in out.lower()
                 and "0 fail" not in out else "ok", output=out)
            for n, (cmd, out) in enumerate(runs)]
    noise = data.draw(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 5)), max_size=8))
    noisy = base + [_unrelated(41 + k, w) for k, (_, w) in enumerate(noise)]
    verdict = {r.command: (r.passing, r.unresolved, r.maybe_covered_by is not None)
               for r in runs_of(base)}
    assert {r.command: (r.passing, r.unresolved, r.maybe_covered_by is not None)
            for r in runs_of(noisy)} == verdict


def test_biome_and_a_fix_script_are_one_history():
    lint_fail = ("$ biome check --error-on-warnings\nChecked 277 files in 114ms. No fixes "
                 "applied.\nFound 1 error.\nerror: script \"lint\" exited with code 1")
    fix_fail = "$ biome check --write\nChecked 278 files in 128ms. Fixed 3 files.\nFound 1 error."
    clean = "$ biome check --error-on-warnings\nChecked 278 files in 106ms. No fixes applied."
    calls = [call(1, "bun run lint 2>&1", status="error", output=lint_fail),
             call(2, "bun run lint:fix 2>&1", status="error", output=fix_fail),
             call(3, "bun run lint 2>&1", output=clean)]
    run = _run(calls, "bun run lint")
    assert run.passing and run.fixed and run.runs == 3
    assert all(f.resolved for f in failures(calls))


EXPORT = "./bin/tool config export image --output /tmp/hero.svg --data-only"


@pytest.mark.parametrize("later", [
    f"go build -o ./bin/tool . && cd site && {EXPORT} 2>&1 | head -3; grep -o vb /tmp/hero.svg",
    f"make tool; {EXPORT}; ls -la /tmp/hero.svg",
])
def test_the_same_invocation_run_again_inside_a_passing_compound_may_have_fixed_it(later):
    # Its exit status may be a later command's: neither open nor fixed outright, said so.
    failed = f"cd site && {EXPORT} 2>&1 | head -5; ls -la /tmp/hero.svg && head -c 300 x"
    calls = [call(1, failed, status="error", output="no config found, please provide one"),
             call(2, later, output="viewBox")]
    [failure] = failures(calls)
    assert failure.resolved and failure.maybe == calls[1].ts


@pytest.mark.parametrize("later", [
    # another invocation of the same program, a test run whose verdict is its own output's,
    # and the invocation after an `||` (it ran only if something failed first)
    "make tool; ./bin/tool config export image --output /tmp/other.svg; ls",
    "true || ./bin/tool config export image --output /tmp/hero.svg --data-only; ls",
])
def test_only_the_very_invocation_counts(later):
    calls = [call(1, f"{EXPORT} | head -5; ls x", status="error", output="no config"),
             call(2, later, output="fine")]
    assert not failures(calls)[0].resolved


def test_a_test_run_inside_a_compound_with_a_later_status_is_no_evidence():
    run = "pnpm --filter e2e test -- tests/full.spec.ts"
    calls = [call(1, f"{run} 2>&1 | tail -30", status="error", output="test-failed-1.png"),
             call(2, f"git stash && {run} 2>&1 | tail -30; git stash pop", output="x")]
    assert not failures(calls)[0].resolved


def test_a_failing_chain_passes_once_each_of_its_commands_has_passed_since():
    lint_fail = "Checked 278 files in 112ms. No fixes applied.\nFound 4 errors."
    calls = [call(1, "bun run lint && bun test", status="error", output=lint_fail),
             call(2, "bun test", output=BUN_OK),
             call(3, "bun run lint", output="Checked 278 files in 134ms. No fixes applied.")]
    chain = _run(calls, "bun run lint && bun test")
    assert chain.passing and chain.fixed and chain.maybe_covered_by is None
    # One of them only, or one that passed before the chain failed, is not enough.
    assert not _run(calls[:2], "bun run lint && bun test").passing
    early = [call(0, "bun run lint", output="Checked 278 files in 99ms. No fixes applied."),
             calls[0], calls[1]]
    assert not _run(early, "bun run lint && bun test").passing


def test_a_failure_is_known_by_the_invocation_it_was_run_for():
    # Not by a lookup, a sourced file or a variable set on the way.
    calls = [call(1, "git mv a.go b.go && git status --short", status="error",
                  output="fatal: not under version control"),
             call(2, "git add c.go && git status --short", output=" M c.go"),
             call(3, ". ./env.sh\nFOO=1\nmake gen | tail -3", status="error", output="boom"),
             call(4, ". ./env.sh; make lint-free-thing", output="ok")]
    moved, generated = failures(calls)
    assert not moved.resolved and not generated.resolved
    calls.append(call(5, "FOO=1; make gen 2>&1 | tail -1; ls out", output="done"))
    assert failures(calls)[1].maybe == calls[-1].ts
