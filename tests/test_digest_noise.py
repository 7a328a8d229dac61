"""Lines the digest spends its bound on say something: what a skill load, a Windows path, a
chained read, a git clean-up and a testify failure come to."""

from __future__ import annotations

from agent_journal.capture.client_turns import local_output
from agent_journal.core.recovery.checks import parse_run
from agent_journal.core.recovery.commits import git_operations
from agent_journal.core.recovery.shell_words import shell_reads
from agent_journal.ops.digest_lines import _relative, operation_items


def test_a_loaded_skill_reads_as_its_name_not_its_body() -> None:
    body = ("Base directory for this skill: D:\\repo\\.claude\\skills\\conventional-commit\n\n"
            "# Conventional Commit\n\n## Commit Message Structure\n" + "x" * 2000)
    assert local_output(body) == "skill loaded: conventional-commit"
    assert local_output("Base directory for this skill: /home/u/.claude/skills/tdd/\n\n#") \
        == "skill loaded: tdd"


def test_windows_paths_are_shown_relative_to_a_windows_folder() -> None:
    assert _relative("D:\\omp\\website\\sidebars.js", "D:\\omp") == "website\\sidebars.js"
    assert _relative("D:\\omp\\website\\sidebars.js", "D:\\omp\\") == "website\\sidebars.js"
    assert _relative("/w/a/b.py", "/w") == "a/b.py"
    assert _relative("D:\\other\\x.js", "D:\\omp") == "D:\\other\\x.js"


def test_a_read_ends_where_its_command_does_spaced_or_not() -> None:
    assert shell_reads("cat a.go; echo '=== goldens ==='; sed -n 1p b.go") == ["a.go"]
    assert shell_reads("cat a.go;echo hi") == ["a.go"]
    assert shell_reads("head -n 5 a b|grep x") == ["a", "b"]
    assert shell_reads("sed -n 1,80p src/x.go\nhead y") == ["src/x.go"]
    assert shell_reads("cat a 2>/dev/null") == []


def test_git_operations_split_at_line_ends_and_an_abort_is_not_one() -> None:
    script = "git cherry-pick --abort 2>/dev/null\ngit reset -q --hard\nsed -i s/a/b/ f"
    assert git_operations(script) == ["git reset -q --hard"]
    assert git_operations("git rebase --abort") == []
    assert git_operations("git stash pop") == ["git stash pop"]


def test_the_same_git_operation_in_a_row_is_one_line_with_its_count() -> None:
    ops = [("git reset --hard", "c1", "2026-01-01T06:00:00Z"),
           ("git reset --hard", "c2", "2026-01-01T06:05:00Z"),
           ("git stash pop", "c3", "2026-01-01T06:06:00Z"),
           ("git reset --hard", "c4", "2026-01-01T06:07:00Z")]
    items = operation_items(ops)
    assert [i["times"] for i, _ in items] == [2, 1, 1]
    assert items[0][0]["callId"] == "c2" and "(2 times)" in items[0][1]
    assert "times" not in items[1][1]


def test_a_testify_failure_says_its_error_not_only_where_it_failed() -> None:
    out = "\n".join([
        "--- FAIL: TestEncodeCursorWithoutAnchor (0.00s)",
        "    svg_test.go:520: ",
        "        \tError Trace:\tD:/omp/src/svg/svg_test.go:520",
        "        \tError:      \tShould be true",
        "        \tTest:       \tTestEncodeCursorWithoutAnchor",
        "FAIL",
        "FAIL\tgithub.com/x/omp/src/svg\t0.2s",
    ])
    run = parse_run(out)
    assert run is not None and not run.ok
    assert run.failing == ["TestEncodeCursorWithoutAnchor"]
    assert run.first_failure == "svg_test.go:520: Should be true"


def test_a_pasted_log_keeps_its_error_line_and_the_request_after_it() -> None:
    from agent_journal.core.recovery.text import clip_log

    noise = "\n".join(f"[Proxy] GET /api/x/{i} -> ok" for i in range(40))
    more = "\n".join(f"[Proxy] GET /api/y/{i}" for i in range(20))
    log = (f"I ran the job and got this:\n{noise}\n[Job] failed: git checkout failed "
           f"(exit 1): error: pathspec '.' did not match\n{more}\nCan you look at why?")
    clipped = clip_log(log, 500)
    assert len(clipped) <= 500
    assert clipped.startswith("I ran the job and got this:")
    assert "error: pathspec '.' did not match" in clipped
    assert clipped.endswith("Can you look at why?")
    assert clip_log("fix the test\nplease", 500) == "fix the test ⏎ please"
    plain = "word " * 300 + "and then commit"
    assert len(clip_log(plain, 500)) <= 500 and clip_log(plain, 500).endswith("commit")


def test_a_file_written_from_a_heredoc_is_elided_and_the_command_after_it_is_what_ran():
    from agent_journal.core.recovery.facts import event_facts
    from agent_journal.core.recovery.failures import is_lookup
    from agent_journal.core.recovery.test_runs import core

    body = "## Summary\n" + "- a line of the pull request's body\n" * 20
    command = (f"cd /x && cat > /tmp/b.md <<'EOF'\n{body}EOF\n"
               "gh pr edit 1533 --body-file /tmp/b.md")
    facts = event_facts("tool_call", {"tool": "Bash", "input": {"command": command},
                                      "status": "error", "exitCode": 1,
                                      "output": "GraphQL: Projects (classic) is deprecated"})
    assert facts is not None
    assert facts["target"] == ("cd /x && cat > /tmp/b.md <<'EOF'\n…\nEOF\n"
                               "gh pr edit 1533 --body-file /tmp/b.md")
    assert core(facts["target"]) == "gh pr edit 1533 --body-file /tmp/b.md"
    assert not is_lookup("Bash", facts["target"])  # a failed edit, not a failed `cat`
    # A short heredoc stays as it is; a script fed to an interpreter is the command.
    short = "cat > a.txt <<EOF\nhi\nEOF\nwc -l a.txt"
    assert event_facts("tool_call", {"tool": "Bash", "input": {"command": short}})[
        "target"] == short
    script = "python3 - <<'PY'\n" + "print('x')\n" * 30 + "PY"
    assert "print('x')" in event_facts("tool_call", {"tool": "Bash",
                                                     "input": {"command": script}})["target"]



def _tool_call(i, tool, tool_input, *, status="ok", output="done"):
    from agent_journal.core.recovery.calls import Call
    from agent_journal.core.recovery.facts import event_facts

    facts = event_facts("tool_call", {"tool": tool, "input": tool_input, "status": status,
                                      "output": output}) or {}
    ts = f"2026-01-01T00:00:{i:02d}.000Z"
    return Call(f"c{i}", "tool_call", "s", ts, ts, facts)


def test_a_failed_mcp_call_is_resolved_by_a_later_success_of_the_same_server_only():
    from agent_journal.core.recovery.failures import failures

    calls = [_tool_call(1, "mcp__browser__find", {"query": "Add to Studio link"},
                        status="error", output="no read_page tree cached"),
             _tool_call(2, "mcp__github__get_issue", {"number": 3}),
             _tool_call(3, "mcp__browserx__find", {"query": "x"})]
    assert not failures(calls)[0].resolved  # another server, or one named alike
    calls.append(_tool_call(4, "mcp__browser__read_page", {"tabId": 1}))
    assert failures(calls)[0].resolved


def test_a_failing_run_names_its_tests_by_their_own_titles():
    from agent_journal.core.recovery.test_runs import failure_text

    check = {"failing": ["[chromium] › tests/share.spec.ts:338:3 › Sharing › 6.1 Alice "
                         "revokes access", "src/a.test.ts > parser > reads numbers",
                         "TestParse"],
             "firstFailure": "TypeError: Cannot read properties of undefined"}
    assert failure_text(check) == ("6.1 Alice revokes access, reads numbers, TestParse: "
                                   "TypeError: Cannot read properties of undefined")


def test_output_sent_to_dev_null_does_not_change_what_ran():
    from agent_journal.core.recovery.test_runs import command_key

    assert command_key("git cherry-pick -n 72247047 >/dev/null") == "git cherry-pick -n 72247047"
    assert command_key("pytest -q 2>/dev/null | tail -3") == "pytest -q"
    assert command_key("make > /dev/null 2>&1") == "make"
    assert command_key("ls /dev/nullable") == "ls /dev/nullable"


def test_an_edit_that_takes_a_definition_out_says_so_until_it_is_defined_again():
    from agent_journal.core.recovery.files_touched import files_touched

    old = "function chunkArray(a, n) {\n  return [];\n}\nexport const SIZE = 5;\n"
    first = _tool_call(1, "Edit", {"file_path": "/w/engine.ts", "old_string": old,
                                   "new_string": "export const SIZE = 5;\n"})
    assert first.get("undefines") == ["chunkArray"]
    [state] = files_touched([first])
    assert state.removes == ["chunkArray"] and state.defines == []
    again = _tool_call(2, "Edit", {"file_path": "/w/engine.ts", "old_string": "x",
                                   "new_string": "function chunkArray(a) {}\n"})
    [state] = files_touched([first, again])
    assert state.removes == [] and state.defines == ["chunkArray"]
    patch = ("*** Begin Patch\n*** Update File: a.py\n@@\n-def old_helper(x):\n"
             "-    return x\n+def new_helper(x):\n+    return x\n*** End Patch")
    facts = _tool_call(3, "apply_patch", {"input": patch})
    assert facts.get("undefines") == ["old_helper"] and facts.get("defines") == ["new_helper"]


def test_keeping_the_task_list_between_a_failure_and_a_rerun_changes_nothing():
    from agent_journal.core.recovery.test_runs import quiet

    for tool, value in (("TodoWrite", {"todos": []}), ("update_plan", {"plan": []}),
                        ("TaskUpdate", {"taskId": "1", "status": "completed"}),
                        ("TaskCreate", {"subject": "x"}), ("web_search", {"query": "x"})):
        assert quiet(_tool_call(1, tool, value)), tool
    assert not quiet(_tool_call(1, "Edit", {"file_path": "a", "old_string": "a",
                                            "new_string": "b"}))


def test_an_http_client_that_exits_0_on_an_error_answer_failed():
    from agent_journal.core.recovery.http_errors import http_error

    body = ('{"message":"Failed to pin file to IPFS: fetch failed",'
            '"error":"Internal Server Error","statusCode":500}')
    verbose = "* Trying ::1\n< HTTP/1.1 100 Continue\n< HTTP/1.1 502 Bad Gateway\r\n< X: y\n"
    assert http_error(body) == "HTTP 500: Failed to pin file to IPFS: fetch failed"
    assert http_error(verbose) == "HTTP 502: Bad Gateway"
    assert http_error('{"message": "Not Found", "status": 404}') is None  # a lookup's no
    assert http_error('{"status": 500}') is None  # a field of data, not an answer
    assert http_error('{"items": [], "status": "completed"}') is None
    curl = _tool_call(1, "Bash", {"command": "curl -s -X POST http://x/upload"}, output=body)
    assert curl.failed and curl.get("reason").startswith("HTTP 500: Failed to pin")
    # The same output from a command that is no HTTP client is its own business.
    cat = _tool_call(2, "Bash", {"command": "cat response.json"}, output=body)
    assert cat.succeeded


def test_a_failure_reason_is_never_a_test_the_runner_reports_passing():
    from agent_journal.core.recovery.reasons import error_reason

    bun = ("(pass) grade > fails clearly when the manifest is missing [2854.95ms]\n"
           "(fail) grade > grades assertions from a trace [12.00ms]\n"
           "error: expect(received).toMatchObject(expected)\n 3 pass\n 2 fail\n")
    assert error_reason(bun) == "(fail) grade > grades assertions from a trace [12.00ms]"
    vitest = " ✓ src/a.test.ts > handles failures (3ms)\n × src/b.test.ts > parses\n"
    assert error_reason(vitest) == "× src/b.test.ts > parses"


def test_a_failure_reason_is_never_a_line_of_source_the_runner_quotes():
    from agent_journal.core.recovery.reasons import error_reason

    frame = ("1 | // When the subprocess fails, this is the error instance returned.\n"
             "2 | export class Failed {}\n"
             "error: expect(received).toMatchObject(expected)\n")
    assert error_reason(frame) == "error: expect(received).toMatchObject(expected)"
    assert error_reason("> 52 |     throw new CryptoError('Key unwrapping failed')\n"
                        "CryptoError: Key unwrapping failed\n") == \
        "CryptoError: Key unwrapping failed"


def test_a_run_piped_into_tail_failed_when_its_runner_printed_so():
    from agent_journal.core.recovery.exit_lines import failed_line

    pnpm = ("> @c/e2e@0.14.0 test /w/tests/e2e\n> playwright test -- --grep 'Sharing'\n\n"
            "Error: No tests found.\nMake sure that arguments are regular expressions.\n\n"
            " ERR_PNPM_RECURSIVE_RUN_FIRST_FAIL  @c/e2e@0.14.0 test: `playwright test`\n"
            "Exit status 1\n")
    assert failed_line(pnpm) == "ERR_PNPM_RECURSIVE_RUN_FIRST_FAIL  @c/e2e@0.14.0 test: " \
        "`playwright test`"
    assert failed_line("make: *** [Makefile:12: test] Error 2\n").startswith("make: ***")
    assert failed_line('error: script "test" exited with code 1\n') is not None
    assert failed_line("error Command failed with exit code 2.\n") is not None
    assert failed_line("all good\nExit status 0\n") is None
    assert failed_line("the docs say npm error codes look like E404\n") is None
    piped = _tool_call(1, "Bash", {"command": "pnpm --filter e2e test 2>&1 | tail -60"},
                       output=pnpm)
    assert piped.failed and piped.get("reason") == "Error: No tests found."
    # Not piped: the exit status is the command's own, and it said 0.
    plain = _tool_call(2, "Bash", {"command": "pnpm --filter e2e test || true"}, output=pnpm)
    assert plain.succeeded
