"""The general rules the blind recall set (tests/data/recall-blind) showed the digest was
missing, each on a small constructed case, and the set's own floor."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from audit_scenario import at, ev
from test_digest import build, obs, said, section

from agent_journal.core.recovery.checks import parse_run
from agent_journal.core.recovery.reasons import error_reason

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def cli(inproc):
    return inproc


def rollout(tmp_path, *items):
    """A Codex session file of `items` ((type, payload) pairs), a second apart."""
    lines = [{"timestamp": "2026-04-08T15:00:00.000Z", "type": "session_meta",
              "payload": {"id": "sess-1", "cwd": "/w"}}]
    for n, (kind, payload) in enumerate(items, 1):
        lines.append({"timestamp": f"2026-04-08T15:00:{n:02d}.000Z", "type": kind,
                      "payload": payload})
    path = tmp_path / "rollout.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def user(text):
    return ("response_item", {"type": "message", "role": "user",
                              "content": [{"type": "input_text", "text": text}]})


# -- what the conversation says ---------------------------------------------------------

def test_a_subagents_brief_is_not_a_user_request():
    events = [said("p1", at(1), "prompt", "Find the slow commit."),
              said("p2", at(2), "prompt", "Run git bisect between v1 and HEAD.",
                   agentId="a1", isSidechain=True),
              said("p3", at(3), "prompt", "Then fix it.")]
    markdown, report = build(events)
    asked = section(markdown, "What the user asked since")
    assert "Then fix it." in asked and "git bisect" not in asked
    assert [p["text"] for p in report["asked"]] == ["Then fix it."]


def test_a_resumed_transcripts_copy_of_the_conversation_counts_once():
    # `claude --resume` writes a new file under a new session id that starts with a copy
    # of what was said before, at the same times.
    def saying(obs_id, ts, kind, text, session):
        return ev("observation", kind, obs_id, ts, {"text": text, "transcript": {}},
                  session=session)

    events = [saying("p1", at(1), "prompt", "Upgrade Rails.", "s1"),
              saying("a1", at(2), "assistant_message", "Rails is upgraded.", "s1"),
              saying("p1-copy", at(1), "prompt", "Upgrade Rails.", "s2"),
              saying("a1-copy", at(2), "assistant_message", "Rails is upgraded.", "s2"),
              saying("p2", at(3), "prompt", "Continue.", "s2"),
              saying("a2", at(4), "assistant_message", "Done.", "s2"),
              saying("p3", at(5), "prompt", "Upgrade Rails.", "s2")]  # said again: kept
    markdown, report = build(events)
    assert [p["text"] for p in report["asked"]] == ["Continue.", "Upgrade Rails."]
    assert markdown.count("Rails is upgraded.") == 1


# -- runners' summaries -----------------------------------------------------------------

def test_minitest_summary_and_the_tests_it_names():
    run = parse_run("Failure:\nBookTest#test_slug [test/models/book_test.rb:12]:\n"
                    "Expected: \"my-book\"\n\nError:\nReviewsControllerTest#test_create:\n"
                    "NoMethodError: undefined method `content_type'\n\n"
                    "42 runs, 97 assertions, 1 failures, 1 errors, 0 skips")
    assert (run.runner, run.ok, run.failed, run.errors) == ("minitest", False, 1, 1)
    assert run.failing == ["BookTest#test_slug", "ReviewsControllerTest#test_create"]
    assert run.first_failure == "Expected: \"my-book\""
    assert parse_run("42 runs, 100 assertions, 0 failures, 0 errors, 0 skips").ok


def test_playwright_summary_and_the_tests_it_lists_as_failed():
    run = parse_run("  ✘  12 [chromium] › a.spec.ts:18:3 › uploads (0.3s)\n\n"
                    "    Error: ENOENT: no such file\n\n  1 failed\n"
                    "    [chromium] › a.spec.ts:18:3 › uploads\n  48 did not run\n"
                    "  11 passed (21.0s)\n")
    assert (run.runner, run.ok, run.passed, run.failed) == ("playwright", False, 11, 1)
    assert run.failing == ["[chromium] › a.spec.ts:18:3 › uploads"]
    assert run.first_failure == "Error: ENOENT: no such file"
    assert parse_run("Running 60 tests using 2 workers\n\n  60 passed (1.4m)\n").ok
    assert parse_run("  3 passed") is None  # counts without the run's duration: no summary


def test_go_test_v_message_and_benchmark_figures():
    verbose = ("=== RUN   TestA\n--- PASS: TestA (0.00s)\n=== RUN   TestB\n"
               "    b_test.go:31: unexpected tag\n--- FAIL: TestB (0.00s)\n=== RUN   TestC\n"
               "--- PASS: TestC (0.00s)\nFAIL\nFAIL\tex/m\t0.41s\n")
    run = parse_run(verbose)
    assert run.failing == ["TestB"] and run.first_failure == "b_test.go:31: unexpected tag"
    plain = parse_run("--- FAIL: TestB (0.00s)\n    b_test.go:31: unexpected tag\nFAIL\n"
                      "FAIL\tex/m\t0.41s\n")
    assert plain.first_failure == "b_test.go:31: unexpected tag"
    bench = parse_run("BenchmarkEncode-8   \t 1204\t  982311 ns/op\t  412 allocs/op\nPASS\n"
                      "ok  \tex/m\t2.36s\n")
    assert bench.ok and bench.summary.endswith("BenchmarkEncode-8 982311 ns/op 412 allocs/op")


# -- why a call failed ------------------------------------------------------------------

def test_the_reason_is_the_missing_symbol_not_the_linker_drivers_line():
    out = ("[150/212] Linking C executable packer\n/usr/bin/ld: libp.a(s.o): in function "
           "`flush':\ns.c:(.text+0x1a4): undefined reference to `ZSTD_compressStream2'\n"
           "collect2: error: ld returned 1 exit status\ngmake: *** [all] Error 2")
    assert error_reason(out) == "s.c:(.text+0x1a4): undefined reference to `ZSTD_compressStream2'"


def test_a_heading_line_is_joined_to_the_line_it_heads():
    assert error_reason("Exit code 1\nRun options: --seed 1\n\nFailure:\n"
                        "AuthorTest#test_full_name [test/a.rb:8]:\nExpected") \
        == "Failure: AuthorTest#test_full_name [test/a.rb:8]:"


def test_a_long_prompt_keeps_its_head_and_its_tail():
    pasted = "".join(f"[{n:3d}/212] Building C object part{n:03d}.c.o\n" for n in range(300))
    text = "CI fails. The log:\n```\n" + pasted + "```\nFix it without bumping CMake 3.16."
    markdown, report = build([said("p1", at(1), "prompt", text)])
    goal = section(markdown, "Goal")
    assert "> CI fails. The log:" in goal and "Fix it without bumping CMake 3.16." in goal
    assert " … " in goal and len(goal) < 2000
    stored = report["goal"]["text"]
    assert len(stored) <= 4000 and stored.endswith("Fix it without bumping CMake 3.16.")


# -- Codex session files ----------------------------------------------------------------

def test_a_codex_turn_the_user_aborted_is_an_interrupt(cli, tmp_path):
    path = rollout(tmp_path, user("Rename the flag."),
                   ("event_msg", {"type": "turn_aborted", "reason": "interrupted"}),
                   user("Scratch that: keep the old flag."),
                   ("event_msg", {"type": "turn_aborted", "reason": "replaced"}))
    assert cli("import", "codex", str(path)).code == 0
    asked = section(cli("digest").out, "What the user asked since")
    assert "[Request interrupted by user]" in asked and "Scratch that" in asked
    assert asked.count("interrupted") == 1  # a turn replaced by another is no interrupt


def test_a_codex_shell_call_in_another_directory_says_where_it_ran(cli, tmp_path):
    def call(n, args):
        return [("response_item", {"type": "function_call", "name": "shell",
                                   "call_id": f"c{n}", "arguments": json.dumps(args)}),
                ("response_item", {"type": "function_call_output", "call_id": f"c{n}",
                                   "output": json.dumps({"output": "x", "metadata": {
                                       "exit_code": 0}})})]

    path = rollout(tmp_path, user("Look at the seeds."),
                   *call(1, {"command": ["bash", "-lc", "cat test/seed.sql"],
                             "workdir": "/w/api"}),
                   *call(2, {"command": ["bash", "-lc", "cat README.md"], "workdir": "/w"}))
    assert cli("import", "codex", str(path)).code == 0
    markdown = cli("digest").out
    assert "Bash `cat test/seed.sql` in `/w/api` -> ok" in markdown
    assert "Bash `cat README.md` -> ok" in markdown  # the session's own directory: unsaid
    read = section(markdown, "Files read, not changed")
    assert "- api/test/seed.sql, README.md" in read


# -- files ------------------------------------------------------------------------------

def test_a_file_put_back_with_git_is_reverted_and_relative_shell_paths_join_edits():
    def bash(obs_id, ts, command, output=""):
        return ev("observation", "tool_call", obs_id, ts, {
            "tool": "Bash", "callId": obs_id, "input": {"command": command},
            "output": output, "status": "ok", "transcript": {"cwd": "/w"}}, session="s1")

    def write(obs_id, ts, tool, path):
        return ev("observation", "tool_call", obs_id, ts, {
            "tool": tool, "callId": obs_id, "input": {"file_path": path}, "status": "ok",
            "transcript": {"cwd": "/w"}}, session="s1")

    events = [write("w1", at(1), "Write", "/w/q/redis_client.py"),
              write("e1", at(2), "Edit", "/w/q/settings.py"),
              bash("b1", at(3), "rm q/redis_client.py"),
              bash("b2", at(4), "git checkout -- q/settings.py"),
              bash("b3", at(5), "git clean -fd config", "Removing config/new_defaults.rb\n"),
              bash("b4", at(6), "make clean", "Removing build/out.o\n"),  # not git clean
              bash("b5", at(7), "cd sub && rm x.py")]  # another directory: left as named
    markdown, report = build(events)
    states = {f["path"]: f["state"] for f in report["files"]}
    assert states == {"/w/q/redis_client.py": "deleted", "/w/q/settings.py": "reverted",
                      "/w/config/new_defaults.rb": "deleted", "x.py": "deleted"}
    assert "- `q/settings.py`: reverted (2 change(s)" in section(markdown, "Files changed")


def test_a_rejection_without_words_is_not_given_claude_codes_stock_text_as_reason():
    stock = ("The user doesn't want to proceed with this tool use. The tool use was rejected "
             "(eg. if it was a file edit, the new_string was NOT written to the file). STOP "
             "what you are doing and wait for the user to tell you how to proceed.")
    events = [obs("e1", at(1), "Edit", {"file_path": "/w/a.py"}, status="error"),
              obs("e2", at(2), "Edit", {"file_path": "/w/b.py"}, status="error")]
    events[0].data["output"] = stock
    events[1].data["output"] = stock.split(" STOP")[0] + " To tell you how to proceed, the " \
        "user said:\nkeep the TTL"
    problems = section(build(events)[0], "Open problems")
    assert "`/w/a.py` -> rejected by the user [" in problems and "STOP" not in problems
    assert "`/w/b.py` -> rejected by the user: keep the TTL [" in problems


# -- the blind set's own floor ----------------------------------------------------------

def test_the_blind_recall_set_keeps_its_score():
    """scripts/bench_recall.py over tests/data/recall-blind: at least what the digest
    answered when these rules went in (88 of 90; 86 of 90 within --max-chars 4000)."""
    for extra, floor in (([], 88), (["--max-chars", "4000"], 86)):
        done = subprocess.run([sys.executable, str(REPO / "scripts" / "bench_recall.py"),
                               "--set", "recall-blind", "--json", *extra],
                              capture_output=True, text=True, timeout=600, cwd=REPO)
        assert done.returncode == 0, done.stderr
        figures = json.loads(done.stdout)
        errors = [t["error"] for t in figures["transcripts"] if t["error"]]
        assert not errors
        missed = {t["name"]: t["missed"] for t in figures["transcripts"] if t["missed"]}
        assert figures["overall"]["answered"] >= floor, (extra, missed)


def test_under_a_tight_bound_the_first_prompt_takes_at_most_a_fifth():
    text = "Please fix the build. " + "pasted log line\n" * 300 + "Keep CMake 3.16."
    events = [said("p1", at(1), "prompt", text),
              obs("e1", at(2), "Edit", {"file_path": "/w/CMakeLists.txt"})]
    for bound, most in ((4000, 800), (10_000, 1500)):
        markdown, _ = build(events, max_chars=bound)
        goal = section(markdown, "Goal")
        quoted = "".join(line[2:] for line in goal.splitlines(True) if line.startswith("> "))
        assert most - 100 < len(quoted) <= most + 20, (bound, len(quoted))
        assert "Keep CMake 3.16." in goal
        assert "CMakeLists.txt" in section(markdown, "Files changed")
