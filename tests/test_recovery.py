"""The pure recovery derivations (core/recovery) on small synthetic inputs."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_journal.core.recovery.calls import Call
from agent_journal.core.recovery.checks import parse_run
from agent_journal.core.recovery.commits import commits
from agent_journal.core.recovery.facts import event_facts, shell_file_ops
from agent_journal.core.recovery.failures import failures
from agent_journal.core.recovery.files_touched import files_touched
from agent_journal.core.recovery.reasons import DENIED, REJECTED, error_reason, refusal
from agent_journal.core.recovery.test_runs import test_runs as runs_of


def test_runner_summaries():
    run = parse_run("FAILED tests/t.py::test_a - AssertionError: 1 != 2\n"
                    "=== 1 failed, 3 passed in 0.12s ===")
    assert (run.runner, run.ok, run.passed, run.failed) == ("pytest", False, 3, 1)
    assert run.failing == ["tests/t.py::test_a"] and run.first_failure == "AssertionError: 1 != 2"
    assert parse_run("173 passed in 4.2s").passed == 173
    ut = parse_run("FAIL: test_x (m.T)\n----\nRan 4 tests in 0.001s\n\nFAILED (failures=1)")
    assert (ut.runner, ut.ok, ut.failed, ut.failing) == ("unittest", False, 1, ["test_x (m.T)"])
    go = parse_run("--- FAIL: TestAdd (0.00s)\n    add_test.go:9: got 3\nFAIL\tex/m\t0.01s")
    assert (go.runner, go.ok, go.failing) == ("go test", False, ["TestAdd"])
    cargo = parse_run("test a::b ... FAILED\ntest result: FAILED. 4 passed; 1 failed; 0 ignored;")
    assert (cargo.passed, cargo.failed, cargo.failing) == (4, 1, ["a::b"])
    jest = parse_run("  ● Suite › adds\n\n    expect(received)\n"
                     "Tests:       1 failed, 5 passed, 6 total")
    assert (jest.runner, jest.failed, jest.failing) == ("jest", 1, ["Suite › adds"])
    assert parse_run(" Tests  2 passed (2)").runner == "vitest"
    mocha = parse_run("  3 passing (10ms)\n  1 failing\n\n  1) suite adds:\n     Error: no")
    assert (mocha.runner, mocha.ok, mocha.failing) == ("mocha", False, ["suite adds"])
    rspec = parse_run("rspec ./spec/a_spec.rb:3 # A adds\n5 examples, 1 failure")
    assert (rspec.runner, rspec.failed, rspec.failing) == ("rspec", 1, ["./spec/a_spec.rb:3"])
    assert parse_run("Success: no issues found in 3 source files").ok
    mypy = parse_run("a.py:1: error: bad\nFound 1 error in 1 file (checked 3 source files)")
    assert (mypy.runner, mypy.ok, mypy.first_failure) == ("mypy", False, "a.py:1: error: bad")
    pyright = parse_run("  a.py:1:2 - error: Type unknown\n1 error, 0 warnings, 0 informations ")
    assert (pyright.runner, pyright.errors, pyright.first_failure) == ("pyright", 1, "Type unknown")
    ruff = parse_run("a.py:1:1: F401 `os` imported but unused\nFound 1 error.")
    assert (ruff.runner, ruff.failing) == ("ruff", ["F401"])
    assert parse_run("All checks passed!").ok
    fmt = parse_run("[CI/test]   | 6 files would be reformatted, 10 files already formatted")
    assert (fmt.runner, fmt.ok) == ("ruff format", False)
    tsc = parse_run("src/a.ts(1,2): error TS2322: no\nFound 1 error.")
    assert (tsc.runner, tsc.errors) == ("tsc", 1)
    assert parse_run("✖ 2 problems (1 error, 1 warning)").runner == "eslint"
    assert parse_run("hello world") is None and parse_run(None) is None


def test_reasons_skip_noise_and_tell_refusals_apart():
    assert error_reason("Exit code 1\nOn branch master\nnothing to commit, working tree "
                        "clean") == "nothing to commit, working tree clean"
    assert error_reason('time="x" level=info msg="docker"\nError: Job \'test\' failed') \
        == "Error: Job 'test' failed"
    assert error_reason("Traceback (most recent call last):\n  File \"a\", line 1\n"
                        "AttributeError: 'str' object has no attribute 'get'") \
        == "AttributeError: 'str' object has no attribute 'get'"
    assert refusal("This command requires approval") == DENIED
    assert refusal("The user doesn't want to proceed with this tool use. ... the user said:\n"
                   "use uv") == REJECTED
    assert refusal("Exit code 1\nerror: denied nothing") is None


def test_shell_file_ops_only_plain_forms():
    assert shell_file_ops("git rm a.txt b.txt && mv c d") == [
        ["deleted", "a.txt"], ["deleted", "b.txt"], ["moved", "c", "d"]]
    assert shell_file_ops("rm -rf $DIR") == [] and shell_file_ops("rm *.pyc") == []
    assert shell_file_ops("git rm --cached a") == [] and shell_file_ops("echo rm a") == []


def call(i, tool, target, *, status="ok", output=None, exit_code=None):
    data = {"tool": tool, "input": {"command": target} if tool == "Bash"
            else {"file_path": target}, "output": output, "status": status,
            "exitCode": exit_code}
    return Call(f"c{i}", "tool_call", "s", f"2026-01-01T00:00:{i:02d}.000Z",
                f"2026-01-01T00:00:{i:02d}.000Z", event_facts("tool_call", data) or {})


def test_a_later_pass_fixes_an_earlier_failure():
    calls = [call(1, "Bash", "pytest", status="error", exit_code=1,
                  output="Exit code 1\nFAILED t.py::a - boom\n1 failed in 0.1s"),
             call(2, "Bash", "pytest 2>&1 | tail -5", output="2 passed in 0.1s")]
    [run] = runs_of(calls)
    assert run.passing and run.fixed and run.runs == 2
    [failure] = failures(calls)
    assert failure.resolved_by == "c2"
    assert not failures(calls[:1])[0].resolved


def test_commits_pushes_and_files():
    calls = [call(1, "Bash", "git commit -m x", output="[main abc1234] Add x\n 1 file changed"),
             call(2, "Bash", "git push", output="To github.com:a/b.git\n   1111111..abc1234  "
                                                  "main -> main"),
             call(3, "Write", "n.py", output="File created successfully at: n.py"),
             call(4, "Edit", "n.py"), call(5, "Bash", "git rm old.py", output="rm 'old.py'")]
    git = commits(calls)
    assert [(c.hash, c.subject, c.branch) for c in git.commits] == [("abc1234", "Add x", "main")]
    assert [(p.source, p.destination) for p in git.pushes] == [("main", "main")]
    assert [(f.path, f.state) for f in files_touched(calls)] == [("n.py", "created"),
                                                                ("old.py", "deleted")]


@settings(max_examples=50, deadline=None)
@given(st.permutations(range(6)))
def test_order_of_reading_does_not_matter(order):
    calls = [call(1, "Bash", "pytest", status="error", exit_code=1, output="1 failed in 1s"),
             call(2, "Write", "a.py", output="File created successfully"),
             call(3, "Bash", "git commit", output="[dev 1234567] s"),
             call(4, "Bash", "pytest", output="3 passed in 1s"),
             call(5, "Edit", "b.py", status="error", output="String to replace not found"),
             call(6, "Bash", "rm a.py")]
    shuffled = [calls[i] for i in order]
    assert runs_of(shuffled) == runs_of(calls)
    assert failures(shuffled) == failures(calls)
    assert files_touched(shuffled) == files_touched(calls)
    assert commits(shuffled) == commits(calls)


def test_one_output_with_several_runners_keeps_each_verdict():
    text = ("[CI/test]   | 63 passed in 0.52s\n"
            "[CI/test]   | 6 files would be reformatted, 10 files already formatted\n"
            "[CI/test]   |   a.py:1:2 - error: Type unknown\n"
            "[CI/test]   | 1 error, 0 warnings, 0 informations \n"
            "Error: Job 'test' failed")
    run = parse_run(text)
    assert run.runner == "pytest + pyright + ruff format" or set(run.runner.split(" + ")) == {
        "pytest", "pyright", "ruff format"}
    assert not run.ok and run.passed == 63
    assert "63 passed" in run.summary and "6 files would be reformatted" in run.summary
    assert run.first_failure == "Type unknown"
    assert parse_run("1 error, 0 warnings, 0 informations").runner == "pyright"
