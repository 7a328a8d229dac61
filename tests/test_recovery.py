"""The pure recovery derivations (core/recovery) on small synthetic inputs."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_journal.core.recovery.calls import Call
from agent_journal.core.recovery.checks import parse_run
from agent_journal.core.recovery.commits import commits
from agent_journal.core.recovery.facts import event_facts
from agent_journal.core.recovery.failures import failures
from agent_journal.core.recovery.files_touched import files_touched
from agent_journal.core.recovery.reasons import DENIED, REJECTED, error_reason, refusal
from agent_journal.core.recovery.shell_words import shell_file_ops
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


def test_calls_that_failed_one_after_another_the_same_way_are_one_resolved_problem():
    from agent_journal.ops.digest_lines import resolved_item, same_way_groups

    why = "SyntaxError: Export named 'x' not found in module dist/index.js"
    calls = [call(n, "Bash", f"bun cli.ts {sub} --help", status="error", exit_code=1,
                  output=why) for n, sub in ((1, "grade"), (2, "prepare"), (3, "score"))]
    calls += [call(4, "Bash", "bun run build", output="built"),
              call(5, "Bash", "bun cli.ts grade --help", output="usage"),
              call(6, "Bash", "bun cli.ts prepare --help", output="usage"),
              call(7, "Bash", "bun cli.ts score --help", output="usage")]
    groups = same_way_groups([f for f in failures(calls) if f.resolved])
    assert [[f.call_id for f in g] for g in groups] == [["c1", "c2", "c3"]]
    item, line = resolved_item(groups[0], None)
    assert [e["id"] for e in item["sameWay"]] == ["c1", "c2"] and item["id"] == "c3"
    assert line.count("SyntaxError") == 1
    assert "`bun cli.ts grade --help`, `bun cli.ts prepare --help` failed the same way" in line


def test_branches_deleted_are_named_as_git_printed_them():
    from agent_journal.ops.digest_lines import operation_items

    loop = call(1, "Bash", 'for b in feat/a fix/b; do git branch -D "$b"; done',
                output="Deleted branch feat/a (was 1a2b3c4d).\nDeleted branch fix/b (was 9f8e7d6).")
    remote = call(2, "Bash", "git push origin --delete feat/a",
                  output="To github.com:o/r.git\n - [deleted]         feat/a")
    git = commits([loop, remote])
    assert [op[0] for op in git.operations] == [
        "deleted branches: feat/a (was 1a2b3c4d), fix/b (was 9f8e7d6)"]
    assert operation_items(git.operations)[0][1].endswith(
        " deleted branches: feat/a (was 1a2b3c4d), fix/b (was 9f8e7d6)\n")
    [push] = git.pushes
    assert (push.remote, push.source, push.destination) == (
        "github.com:o/r.git", "(delete)", "feat/a")


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
    from agent_journal.ops.digest_lines import _failure_line

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

    from agent_journal.capture.claude_code_transcript import read_transcript

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


# -- what a resuming agent is told beyond the runs: rules, plans, patches, reads, merges ---

def split_call(i, tool, tool_input, output, *, status="ok", exit_code=None):
    """A call as an import stores it: its input on the start event, its output on the end."""
    from agent_journal.core.recovery.calls import fold

    start = event_facts("tool_call", {"tool": tool, "input": tool_input, "status": "started"})
    end = event_facts("tool_call", {"tool": tool, "input": None, "output": output,
                                    "status": status, "exitCode": exit_code})
    ts = f"2026-01-01T00:00:{i:02d}.000Z"
    return fold(f"c{i}", "tool_call", "s", [(ts, start), (ts, end)])


def test_linter_summaries_with_what_is_left():
    fixed = parse_run("a.py:454:9: F811 Redefinition of unused `visit_Call`\n"
                      "Found 6 errors (3 fixed, 3 remaining).")
    assert (fixed.runner, fixed.ok, fixed.errors, fixed.failing) == ("ruff", False, 3, ["F811"])
    assert parse_run("a.py:1:1: F401 x\nFound 2 errors (2 fixed, 0 remaining).").ok
    pyrefly = parse_run("ERROR Could not find import of `conftest` [missing-import]\n"
                        " INFO 58 errors (1 suppressed)")
    assert (pyrefly.runner, pyrefly.ok, pyrefly.errors) == ("pyrefly", False, 58)
    assert parse_run(" INFO 0 errors").ok
    vitest = parse_run(" ❯ t/report.test.ts (12 tests | 1 failed)\n   × report > since 4ms\n"
                       "      Tests  1 failed | 11 passed (12)")
    assert vitest.failing == ["report > since"]


def test_a_passing_chain_resolves_the_failures_of_its_parts():
    calls = [call(1, "Bash", "uv run ruff check .", status="error", exit_code=1,
                  output="a.py:1:1: F401 x\nFound 1 error."),
             call(2, "Bash", "uv run ruff check . && uv run pytest -q",
                  output="All checks passed!\n3 passed in 0.1s")]
    ruff = next(r for r in runs_of(calls) if r.command == "uv run ruff check .")
    assert ruff.passing and ruff.fixed
    assert failures(calls)[0].resolved_by == "c2"
    # `a; b` and `a || b` say nothing about a: the failure stays open.
    for chain in ("uv run ruff check . ; uv run pytest -q", "uv run ruff check . || true"):
        other = [calls[0], call(2, "Bash", chain, output="3 passed in 0.1s")]
        assert not failures(other)[0].resolved


def test_patches_change_the_files_they_name():
    from agent_journal.core.recovery.patches import patch_file_ops

    patch = ("*** Begin Patch\n*** Add File: src/new.ts\n+x\n*** Update File: src/a.ts\n@@\n-a\n"
             "+b\n*** Update File: old.ts\n*** Move to: moved.ts\n*** Delete File: gone.ts\n"
             "*** End Patch\n")
    assert patch_file_ops(patch) == [["created", "src/new.ts"], ["edited", "src/a.ts"],
                                     ["moved", "old.ts", "moved.ts"], ["deleted", "gone.ts"]]
    assert patch_file_ops({"changes": [{"path": "/t/h.txt", "kind": "add"}]}) == [
        ["created", "/t/h.txt"]]
    assert patch_file_ops("no patch here") == [] and patch_file_ops(None) == []
    calls = [split_call(1, "apply_patch", patch, "Success. Updated the following files:"),
             split_call(2, "apply_patch", "*** Add File: never.ts\n", "failed", status="error")]
    assert [(f.path, f.state) for f in files_touched(calls)] == [
        ("gone.ts", "deleted"), ("moved.ts", "created"), ("old.ts", "moved"),
        ("src/a.ts", "edited"), ("src/new.ts", "created")]
    assert calls[0].target == "src/new.ts, src/a.ts, moved.ts, gone.ts"


def test_a_patch_says_what_it_changed_in_each_file_as_an_edit_does():
    patch = ("*** Begin Patch\n*** Update File: src/a.ts\n@@ ctx\n const keep = 1;\n"
             "-  metadata: { id }\n+  metadata: { id, trace_path }\n*** Add File: src/n.ts\n"
             "+export {}\n*** Update File: src/b.ts\n@@\n-same\n+same\n*** End Patch\n")
    calls = [split_call(1, "apply_patch", patch, "Success. Updated the following files:")]
    changed = {f.path: f.last_change for f in files_touched(calls)}
    assert changed == {"src/a.ts": ["metadata: { id, trace_path }", "metadata: { id }"],
                       "src/n.ts": None, "src/b.ts": None}


def test_files_read_are_those_never_changed():
    from agent_journal.core.recovery.files_touched import files_read
    from agent_journal.core.recovery.shell_words import shell_reads

    assert shell_reads("sed -n 1,80p src/a.ts") == ["src/a.ts"]
    assert shell_reads("head -n 5 a.txt | grep x") == ["a.txt"]
    assert shell_reads("cat $F") == [] and shell_reads("sed -i s/a/b/ f") == []
    assert shell_reads("cat > f") == []
    calls = [call(1, "Read", "a.py"), call(2, "Read", "b.py"), call(3, "Edit", "b.py"),
             call(4, "Bash", "cat c.md", output="text"), call(5, "Read", "a.py"),
             call(6, "Read", "d.py", status="error", output="File does not exist.")]
    assert [(f.path, f.reads) for f in files_read(calls)] == [("c.md", 1), ("a.py", 2)]


def test_standing_instructions_are_rules_not_questions():
    from agent_journal.core.recovery.conversation import Said
    from agent_journal.core.recovery.instructions import is_instruction, standing_instructions

    for rule in ("Always run make lint before committing.", "Never touch legacy.py.",
                 "Don't edit the generated files under src/gen/.", "Use pnpm, not npm.",
                 "From now on, run everything through uv run.", "Please make sure to rebase.",
                 "Run the linter before you commit.", "No force pushes on main, ever.",
                 "Rebase on origin/main instead."):
        assert is_instruction(rule), rule
    for text in ("Does it always fail?", "The test never finishes.", "Fix the bug in a.py.",
                 ""):
        assert not is_instruction(text), text

    def said(i, text, agent=None):
        return Said(f"p{i}", "prompt", text, f"2026-01-01T00:00:{i:02d}Z", "s", len(text),
                    agent)

    prompts = [said(1, "Fix the parser. Never touch legacy.py, it is vendored."),
               said(2, "Always run tests first.", agent="a1"),  # a subagent's task
               said(3, "```\nnever do this\n```\n> always quoted"),
               said(4, "never touch legacy.py, it is vendored.")]
    rules = standing_instructions(prompts)
    assert [(r.text, r.prompt_id) for r in rules] == [
        ("never touch legacy.py, it is vendored.", "p4")]


def test_a_merge_commit_is_named_by_the_next_log():
    merge = split_call(1, "Bash", {"command": 'git merge --no-ff a b -m "merge round 1: a, b"'},
                       {"stdout": "Merge made by the 'octopus' strategy.\n x | 1 +"})
    log = split_call(2, "Bash", {"command": "git log --oneline --graph -5"},
                     {"stdout": "*-.   1b6c52f merge round 1: a, b\n|\\ \\\n| * e081dab b\n"
                                "* 04752c6 Add intent"})
    other = split_call(3, "Bash", {"command": "cat notes.txt"},
                       {"stdout": "1b6c52f merge round 1: a, b"})
    git = commits([merge, log, other])
    assert [(c.hash, c.subject, c.call_id) for c in git.commits] == [
        ("1b6c52f", "merge round 1: a, b", "c1")]
    assert git.log_call == "c2"
    assert commits([log]).commits == [] and commits([merge]).commits == []


def test_pasted_output_and_look_alike_words_are_not_instructions():
    from agent_journal.core.recovery.conversation import Said
    from agent_journal.core.recovery.instructions import is_instruction, standing_instructions

    assert not is_instruction("nevertheless you seem well calibrated.")
    assert not is_instruction("Onlyfans is not a tool.") and is_instruction("Only use uv.")
    text = ("Maybe use the https address?\n01:12:38.300\nHost key verification failed.\n"
            "Please make sure you have the correct access rights")
    prompt = Said("p1", "prompt", text, "2026-01-01T00:00:01Z", "s", len(text))
    assert standing_instructions([prompt]) == []
    after = Said("p2", "prompt", "Never push.\nTraceback (most recent call last):\n"
                 "Always x", "2026-01-01T00:00:02Z", "s", 30)
    assert [r.text for r in standing_instructions([after])] == ["Never push."]


def test_an_edit_is_told_by_its_first_added_and_removed_line():
    from agent_journal.core.recovery.facts import edit_change

    assert edit_change({"old_string": "a\n  run: pyright\n  continue-on-error: true",
                        "new_string": "a\n  run: pyright"}) == [None, "continue-on-error: true"]
    assert edit_change({"edits": [{"old_string": "x = 1", "new_string": "x = cast(int, y)"}]}) \
        == ["x = cast(int, y)", "x = 1"]
    assert edit_change({"old_string": "same", "new_string": "same"}) is None
    calls = [call(1, "Edit", "a.py"), call(2, "Write", "a.py", output="File updated")]
    calls[0].facts["change"] = ["x", None]
    assert files_touched(calls[:1])[0].last_change == ["x", None]
    assert files_touched(calls)[0].last_change is None  # the latest change was no edit


def test_a_run_is_one_history_whatever_its_options():
    from agent_journal.core.recovery.test_runs import check_key

    assert check_key("uv run pytest -x --tb=short -q") == "uv run pytest"
    assert check_key("npx tsc --noEmit") == check_key("pnpm tsc")
    calls = [call(1, "Bash", "ruff check --fix .", status="error", exit_code=1,
                  output="a.py:1:1: F811 x\nFound 2 errors (1 fixed, 1 remaining)."),
             call(2, "Bash", "ruff check .", output="All checks passed!")]
    [run] = runs_of(calls)
    assert run.fixed and run.runs == 2
    assert failures(calls)[0].resolved_by == "c2"
    # A passing chain adds a run only to a command whose latest run failed.
    passing = [call(1, "Bash", "pytest", output="3 passed in 1s"),
               call(2, "Bash", "pytest && ruff check .", output="3 passed in 1s\n"
                                                                "All checks passed!")]
    assert [r.runs for r in runs_of(passing)] == [1, 1]


def test_a_python_run_that_printed_a_traceback_failed_though_it_exited_0():
    crash = ("Traceback (most recent call last):\n  File \"<string>\", line 3, in <module>\n"
             "AttributeError: 'str' object has no attribute 'get'\nTranscript exists: True")
    calls = [call(1, "Bash", "uv run python -c 'import a; a.run()'", output=crash),
             call(2, "Bash", "cat crash.log", output=crash),  # a log read, not a run
             call(3, "Bash", "uv run pytest -q", output=crash + "\n1 passed in 0.1s")]
    [failure] = failures(calls)
    assert (failure.call_id, failure.kind, failure.reason) == (
        "c1", "traceback", "AttributeError: 'str' object has no attribute 'get'")
    assert not failure.resolved
    again = [*calls, call(4, "Bash", "uv run python -c 'import a; a.run()'", output="done")]
    assert failures(again)[0].resolved_by == "c4"


def test_git_operations_are_the_repository_changes_that_succeeded():
    from agent_journal.core.recovery.commits import git_operations

    assert git_operations("git submodule deinit -f t && git rm -f t 2>&1") == [
        "git submodule deinit -f t", "git rm -f t"]
    assert git_operations("git status && git log --oneline && git stash list") == []
    assert git_operations("git tag -l") == [] and git_operations("git rebase main") == [
        "git rebase main"]
    calls = [call(1, "Bash", "git submodule add https://x/t.git t", output="Cloning"),
             call(2, "Bash", "git rebase main", status="error", exit_code=1,
                  output="CONFLICT (content): Merge conflict in a"),
             call(3, "Bash", 'git merge --no-ff b -m "merge b"',
                  output="Merge made by the 'ort' strategy."),
             call(4, "Bash", "git log --oneline -1", output="1b6c52f merge b")]
    git = commits(calls)
    assert [op[0] for op in git.operations] == ["git submodule add https://x/t.git t"]
    assert [c.hash for c in git.commits] == ["1b6c52f"]  # the merge is told by its commit


# -- the gate before the parsers ----------------------------------------------------------------

_SUMMARY_LINES = [
    "===== 3 passed, 1 skipped in 0.52s =====", "1 failed, 2 passed in 1.10s",
    "===== no tests ran in 0.01s =====", "FAILED tests/t.py::test_a - AssertionError: x",
    "E       assert 1 == 2", "Ran 4 tests in 0.001s", "OK", "FAILED (failures=1, errors=2)",
    "FAIL: test_x (m.T)", "--- FAIL: TestAdd (0.00s)", "ok  \tex/m\t0.01s",
    "FAIL\tex/m\t(cached)", "test result: ok. 3 passed; 0 failed; 1 ignored",
    "test it::works ... FAILED", "Tests:       1 failed, 4 passed, 5 total",
    "  ● suite › case", " Tests  2 failed | 3 passed (5)", " × adds numbers 3ms",
    "  5 passing (20ms)", "  1 failing", "  1) adds:", "4 examples, 1 failure, 1 pending",
    "rspec ./spec/a_spec.rb:3 # A works", "Found 2 errors in 1 file (checked 3 source files)",
    "Success: no issues found in 3 source files", "m.py:3: error: Bad",
    "2 errors, 0 warnings, 0 informations", "  a.py:1:2 - error: Nope",
    "Found 6 errors (3 fixed, 3 remaining).", "a.py:1:1: F401 unused", "All checks passed!",
    "2 files would be reformatted, 3 files already formatted", "1 file left unchanged",
    " INFO 3 errors (1 suppressed)", "ERROR bad thing [kind]",
    "src/a.ts(3,4): error TS2322: Type", "Found 1 error in src/a.ts.",
    "\u2716 3 problems (2 errors, 1 warning)", "   1:2  error  Bad  rule",
    "Traceback (most recent call last):", "ValueError: nope", "panicked at src/lib.rs",
    "42 runs, 97 assertions, 2 failures, 1 errors, 0 skips", "Failure:", "A#test_b [a.rb:1]:",
    "  1 failed", "    [chromium] › a.spec.ts:1:2 › works", "  11 passed (21.0s)",
    "  48 did not run", "=== RUN   TestB", "    b_test.go:3: boom",
    "BenchmarkX-8   \t 12\t 98 ns/op\t 4 allocs/op",
]
_NOISE = ["", "building...", "ok", "done in 3s", "Error: x", "warning: y", "make: *** [all]",
          "passed", "in 0.3s", "12 files", "PASS src/a.test.ts", "3 passed", "1 failed, 2 passed",
          "2 errors", "3 passed, in 0.2s"]


@given(st.lists(st.sampled_from(_SUMMARY_LINES + _NOISE), max_size=12),
       st.sampled_from(["", "\x1b[32m", "[job] | ", "\x1b[1m[ci]   | "]))
@settings(max_examples=400, deadline=None)
def test_the_gate_never_hides_a_summary_the_parsers_find(lines, prefix):
    from agent_journal.core.recovery import checks, run_output

    text = "\n".join(prefix + line + ("\x1b[0m" if "\x1b" in prefix else "") for line in lines)
    ungated = checks._parse_lines(run_output.output_lines(run_output.plain(text)))
    assert parse_run(text) == ungated


def test_a_failure_told_in_content_blocks_or_a_result_field_has_its_reason():
    """An MCP tool's or a subagent's answer is a list of content blocks, a WebFetch's a
    `result` string: a failed call's reason comes from their text as from a shell's."""
    from agent_journal.core.recovery.facts import output_text

    blocks = [{"type": "text", "text": "Error: connection refused to db:5432"},
              {"type": "image", "source": {"data": "AAAA"}}]
    for output in (blocks, {"content": blocks}, {"result": blocks[0]["text"]}):
        assert output_text(output) == "Error: connection refused to db:5432"
        facts = event_facts("tool_call", {"tool": "mcp__db__query", "input": {"sql": "x"},
                                          "output": output, "status": "error"})
        assert facts is not None and "connection refused" in facts.get("reason", ""), facts
    assert output_text([{"type": "image"}]) is None
    assert output_text({"content": [], "stdout": "ok"}) == "ok"


def test_compaction_whose_logical_parent_is_not_in_the_file_is_not_a_rewind():
    # Claude Code 2.1.x can name as a boundary's logical parent a record it never wrote
    # (seen in a real transcript): the conversation before it is still the current one.
    import json

    from agent_journal.capture.claude_code_transcript import read_transcript

    boundary = json.dumps({"type": "system", "subtype": "compact_boundary", "uuid": "u2",
                           "parentUuid": None, "logicalParentUuid": "never-written",
                           "sessionId": "s", "timestamp": "2026-01-01T00:00:02.000Z",
                           "content": "Conversation compacted"})
    lines = [_said(1, "first task"), boundary, _said(3, "second task")]
    said = [o for o in read_transcript(lines, conversation=True) if o["kind"] == "prompt"]
    assert [o["data"].get("branch") for o in said] == [None, None]
    # A `progress` record just before the boundary that names the same unwritten parent
    # (the cipher-box e2e session): the conversation still continues from the last turn.
    progress = json.dumps({"type": "progress", "uuid": "p1", "parentUuid": "never-written",
                           "sessionId": "s", "timestamp": "2026-01-01T00:00:01.500Z"})
    lines = [_said(1, "first task"), progress, boundary, _said(3, "second task")]
    said = [o for o in read_transcript(lines, conversation=True) if o["kind"] == "prompt"]
    assert [o["data"].get("branch") for o in said] == [None, None]


def test_gits_global_options_do_not_make_another_command():
    from agent_journal.core.recovery.failures import head

    assert head("git -C /w/app add a.ts b.ts") == head("git add c.ts") == "git add"
    assert head("git -c core.editor=true commit -m x") == "git commit"
    calls = [call(1, "Bash", "git -C /w add x.ts", status="error", exit_code=2,
                  output="error: unexpected argument '-C' found"),
             call(2, "Bash", "git add x.ts", output="")]
    assert failures(calls)[0].resolved_by == "c2"
