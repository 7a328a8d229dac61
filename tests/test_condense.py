"""condense: an agent's long message cut to its first and densest sentences (laws), what
was done after a failure (remedies.action_of), and runs held inside a composite command
(run_coverage.embedded_runs)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agent_journal.core.recovery.calls import Call
from agent_journal.core.recovery.condense import JOIN, condense, sentences
from agent_journal.core.recovery.remedies import action_of
from agent_journal.core.recovery.run_coverage import embedded_runs, holds_runs
from agent_journal.core.recovery.test_runs import TestRunsFold as RunsFold

WORDS = st.sampled_from(["the", "fix", "`setConfigFlag`", "src/cli/x.go", "works", "666",
                         "Done.", "It", "passes.", "now", "gapRun", "\n", "- ", "**A**"])
TEXT = st.lists(WORDS, max_size=80).map(" ".join)


@given(TEXT, st.integers(min_value=20, max_value=400))
def test_condense_is_bounded_and_keeps_whole_sentences_in_order(text, limit):
    out = condense(text, limit)
    assert len(out) <= limit
    assert out == condense(text, limit)
    flat = " ".join(text.split())
    if len(flat) <= limit:
        assert out == flat
    elif JOIN in out:
        parts = out.split(JOIN)
        whole = sentences(text)
        positions = [whole.index(p) for p in parts[1:]]
        assert positions == sorted(positions) and 0 not in positions


def test_condense_prefers_the_sentences_that_name_things():
    text = ("You were right. Getting there turned up two things worth reporting. "
            "The fix is in `primary.go`: a `gapRun(1)` beside `e.currentLineLength++`. "
            "It was a long and winding road with many turns and no names at all in it.")
    out = condense(text, 120)
    assert out.startswith("You were right.") and "gapRun(1)" in out
    assert "winding" not in out and len(out) <= 120


def call(tool, target, status="ok", **facts):
    return Call("c", "tool_call", "s", "2026-01-01T00:00:00Z", None,
                {"tool": tool, "target": target, "status": status, **facts})


def test_an_action_is_a_change_that_succeeded_never_a_lookup_or_a_failure():
    assert action_of(call("Bash", "bun install")) == "ran `bun install`"
    assert action_of(call("Edit", "/w/src/app.ts")) == "edited app.ts"
    assert action_of(call("Bash", "cd web && npm run lint:fix")) == "ran `npm run lint:fix`"
    assert action_of(call("Bash", "grep -rn x src")) is None
    assert action_of(call("Read", "/w/a.py")) is None
    assert action_of(call("Bash", "make", status="error")) is None


def test_runs_inside_a_loop_or_a_substitution_are_found():
    loop = ('for c in $(git rev-list HEAD); do git checkout -q $c; '
            'out=$(cd src && go test ./... 2>&1 | grep -E "^(FAIL|---)" | head -2); done')
    assert embedded_runs(loop) == ["go test ./..."]
    assert holds_runs(["go test ./..."], 'go test ./prompt/ -run "A|B" 2>&1 | tail -2')
    assert not holds_runs(["go test ./prompt/"], "go test ./...")
    assert embedded_runs("echo go test is fun") == []


def run_call(cid, ts, target, ok, status="ok"):
    check = {"runner": "go test", "ok": ok, "summary": "go test: 1 failed" if not ok else "ok"}
    return Call(cid, "tool_call", "s", ts, None,
                {"tool": "Bash", "target": target, "status": status, "check": check})


def test_a_quiet_pass_holding_the_failing_run_may_cover_it_and_an_unrelated_one_does_not():
    fold = RunsFold()
    fold.step(run_call("a", "2026-01-01T00:00:01Z", "go test ./prompt/", False, "error"))
    fold.step(call("Bash", "go test ./... 2>&1 | grep -v ok; echo done"))
    (run,) = fold.result()
    assert run.maybe_covered_by is not None and not run.unresolved
    fold = RunsFold()
    fold.step(run_call("a", "2026-01-01T00:00:01Z", "go test ./prompt/", False, "error"))
    fold.step(call("Bash", "go test ./svg/ 2>&1 | grep -v ok"))
    (run,) = fold.result()
    assert run.maybe_covered_by is None and run.unresolved


def test_packages_are_named_as_their_manager_printed_them_and_nothing_else_is():
    from agent_journal.core.recovery.dependencies import installed

    assert installed("bun add @chakra-ui/react", "installed @chakra-ui/react@3.33.0\n") == [
        "@chakra-ui/react@3.33.0"]
    assert installed("pnpm add zod", "dependencies:\n+ zod 3.23.8\n") == ["zod@3.23.8"]
    assert installed(None, "Successfully installed certifi-2024.2.2 requests-2.31.0") == [
        "certifi-2024.2.2", "requests-2.31.0"]
    assert installed("npm install lodash -D", "added 1 package in 1s") == ["lodash"]
    assert installed("cargo add serde", "      Adding serde v1.0.219 to dependencies") == [
        "serde@1.0.219"]
    assert installed("go get x.org/y", "go: added x.org/y v0.1.0") == ["x.org/y@v0.1.0"]
    assert installed("git diff", "@@ -1 +1 @@\n+ item 5 of the list\n") is None
    assert installed("ls", "added 3 packages") is None  # counted, and the command names none


def test_code_fences_and_bare_list_numbers_are_no_sentences():
    from agent_journal.core.recovery.condense import condense, sentences

    report = ("Perfect! Now I have all the information I need.\n\n### 1. Upload flow\n"
              "```typescript\nconst x = 1;\n```\n1.\n- The API answers 500 when "
              "`IPFS_LOCAL_API_URL` is unreachable (see `ipfs.module.ts` line 18).\n"
              + "Filler. " * 40)
    pieces = sentences(report)
    assert "```typescript" not in pieces and "1." not in pieces and "Upload flow" in pieces
    short = condense(report, 200)
    assert "IPFS_LOCAL_API_URL" in short and "```" not in short


def test_a_subagents_answer_keeps_its_findings_not_its_opening():
    from agent_journal.core.recovery.facts import event_facts

    answer = "Perfect! Let me write it up.\n" + "Some context here. " * 60 + \
        "Root cause: `pinFile` in `ipfs.service.ts` throws when the node is down."
    facts = event_facts("tool_call", {"tool": "Task", "input": {"description": "find it"},
                                      "output": answer, "status": "ok"})
    assert "pinFile" in facts["result"] and len(facts["result"]) <= 600
