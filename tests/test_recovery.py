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


# -- general outcome rules (spec/INVARIANTS.md, recovery reads rule 11) ----------------------

def test_benign_noop_is_not_a_problem():
    noop = call(1, "Bash", "git commit -am wip", status="error", exit_code=1,
                output="Exit code 1\nOn branch main\nnothing to commit, working tree clean")
    assert noop.get("noop") and failures([noop]) == []
    # An error ahead of the benign line keeps it a failure.
    real = call(2, "Bash", "git add x; git commit", status="error", exit_code=1,
                output="fatal: pathspec 'x' did not match any files\nnothing to commit, "
                       "working tree clean")
    assert not real.get("noop") and [f.call_id for f in failures([real])] == ["c2"]


def test_reason_prefers_the_precise_line():
    assert error_reason("error: could not apply 1234567... x\nCONFLICT (content): Merge "
                        "conflict in a.go") == "CONFLICT (content): Merge conflict in a.go"
    assert error_reason("To g:a/b.git\n ! [rejected]        main -> main (non-fast-forward)\n"
                        "error: failed to push some refs").startswith("! [rejected]")


def test_push_rejection_is_listed_with_its_reason():
    pushed = call(1, "Bash", "git push", status="error", exit_code=1,
                  output="To g:a/b.git\n ! [rejected]        main -> main (fetch first)\n"
                         "error: failed to push some refs to 'g:a/b.git'")
    [rej] = commits([pushed]).rejected
    assert (rej.remote, rej.source, rej.destination, rej.why) == ("g:a/b.git", "main", "main",
                                                                  "fetch first")
    assert commits([pushed]).pushes == []


def test_package_managers_share_one_run_history_and_silent_passes_count():
    jest_fail = ("Tests:       1 failed, 3 passed, 4 total")
    calls = [call(1, "Bash", "npm test", status="error", exit_code=1, output=jest_fail),
             call(2, "Bash", "pnpm test", output="Tests:       4 passed, 4 total"),
             call(3, "Bash", "npx tsc --noEmit", status="error", exit_code=2,
                  output="src/a.ts(1,2): error TS2304: Cannot find name 'x'."),
             call(4, "Bash", "pnpm tsc --noEmit", output=""),
             call(5, "Bash", "ls", output="")]
    runs = {r.command: r for r in runs_of(calls)}
    assert set(runs) == {"pnpm test", "pnpm tsc --noEmit"}
    assert all(r.passing and r.fixed for r in runs.values())
    assert all(f.resolved for f in failures(calls))


def test_rejection_shows_the_users_words_and_runs_their_first_failure():
    from agent_journal.ops.digest import _failure_line

    rejected = call(1, "Edit", "m/1.sql", status="error",
                    output="The user doesn't want to proceed with this tool use. The tool use "
                           "was rejected. To tell you how to proceed, the user said:\nleave m/")
    [f] = failures([rejected])
    assert _failure_line(f, with_id=False).endswith("rejected by the user: leave m/\n")
    go = call(2, "Bash", "go test ./...", status="error", exit_code=1,
              output="--- FAIL: TestX (0.01s)\n    x_test.go:9: want 1, got 2\nFAIL\n"
                     "FAIL\tex/x\t0.01s")
    [f] = failures([go])
    assert "first failure: x_test.go:9: want 1, got 2" in _failure_line(f, with_id=False)


def _said(i, text, *, meta=False):
    import json

    rec = {"type": "user", "sessionId": "s", "uuid": f"u{i}",
           "parentUuid": f"u{i - 1}" if i > 1 else None,
           "timestamp": f"2026-01-01T00:00:{i:02d}.000Z", "message": {"role": "user",
                                                                     "content": text}}
    if meta:
        rec["isMeta"] = True
    return json.dumps(rec)


def test_compaction_without_logical_parent_is_not_a_rewind():
    import json

    from agent_journal.capture.claude_code import read_transcript

    boundary = json.dumps({"type": "system", "subtype": "compact_boundary", "uuid": "u2",
                           "parentUuid": None, "sessionId": "s",
                           "timestamp": "2026-01-01T00:00:02.000Z",
                           "content": "Conversation compacted"})
    lines = [_said(1, "first task"), boundary, _said(3, "second task")]
    said = [o for o in read_transcript(lines, conversation=True) if o["kind"] == "prompt"]
    assert [o["data"].get("branch") for o in said] == [None, None]


def test_session_messages_are_not_where_it_stopped():
    from audit_scenario import ev

    from agent_journal.core.derive import derive
    from agent_journal.ops import digest as dg

    hook = "Stop hook feedback: run the checks"
    events = [ev("observation", "session_event", f"o{i}", f"2026-01-01T00:00:0{i}.000Z",
                 {"text": hook}, session="s1") for i in (1, 2)]
    events.append(ev("observation", "assistant_message", "o3", "2026-01-01T00:00:03.000Z",
                     {"text": "done"}, session="s1"))
    md, report = dg.build(derive(events), workspace="ws", session=None, max_chars=10_000,
                          damage={"unreadable": [], "malformed": []})
    stopped = md.split("## Where it stopped\n")[1].split("\n## ")[0]
    assert hook not in stopped and md.count(hook) == 1
    assert [m["text"] for m in report["sessionMessages"]] == [hook]
