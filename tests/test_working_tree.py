"""Each checkout's working tree as its latest `git status` listed it
(core/recovery/working_tree.py), shown under "Where it stopped" only while no git command
changed it since."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_journal.core.recovery.calls import Call
from agent_journal.core.recovery.facts import event_facts
from agent_journal.core.recovery.git_output import working_tree as listed
from agent_journal.core.recovery.working_tree import working_tree
from agent_journal.ops.digest_lines import tree_item, tree_line

LONG = ("On branch main\nChanges not staged for commit:\n  (use \"git add <file>...\")\n"
        "\tmodified:   docs/coding-agents.mdx\n\tdeleted:    old.txt\n\nUntracked files:\n"
        "  (use \"git add <file>...\")\n\t.husky/commit-msg\n\nno changes added to commit\n")


def call(i: int, command: str, output: str = "", ok: bool = True, cwd: str | None = None
         ) -> Call:
    data = {"tool": "Bash", "input": {"command": command}, "output": output,
            "status": "ok" if ok else "error", "exitCode": 0 if ok else 1}
    ts = f"2026-01-01T10:{i:02d}:00.000Z"
    facts = event_facts("tool_call", data) or {}
    if cwd is not None:
        facts["cwd"] = cwd
    return Call(f"c{i}", "tool_call", "s", ts, ts, facts)


def test_git_status_is_read_in_its_long_and_short_forms_and_nothing_else_is():
    assert listed(LONG) == [("modified", "docs/coding-agents.mdx"), ("deleted", "old.txt"),
                            ("untracked", ".husky/commit-msg")]
    assert listed(" M a.ts\n?? b.md\nA  c.py\n") == [("modified", "a.ts"),
                                                    ("untracked", "b.md"), ("added", "c.py")]
    assert listed("On branch main\nnothing to commit, working tree clean\n") == []
    assert listed("## main...origin/main\n") == []
    assert listed("total 8\n-rw-r--r-- 1 a b 0 x\n") is None
    assert tree_line("2026-01-01T10:05:00Z", [["modified", "a.ts"], ["untracked", "b"]]) == \
        "- working tree at 10:05 (git status): modified `a.ts`; untracked `b`\n"


def test_a_listing_stands_until_a_git_command_changes_the_tree():
    status = call(1, "git status", LONG)
    assert working_tree([status])[0][2] == [["modified", "docs/coding-agents.mdx"],
                                         ["deleted", "old.txt"],
                                         ["untracked", ".husky/commit-msg"]]
    # A commit that printed no hash, a rebase, a stash: the listing is history then.
    for change in ("git commit -m \"$(cat <<'EOF'\nx\nEOF\n)\"", "git rebase -i HEAD~3",
                   "git stash", "cd w && git add -A"):
        assert working_tree([status, call(2, change, "")]) == []
    assert working_tree([status, call(2, "git status --short", " M a.ts\n")])[0][2] == [
        ["modified", "a.ts"]]
    # A status that failed, or output that is no status, lists nothing.
    assert working_tree([call(1, "git status", "fatal: not a git repository", ok=False)]) \
        == []


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(["ls", "git log --oneline", "git diff", "pytest -q",
                                 "echo done"]), max_size=6))
def test_lookups_after_a_listing_change_nothing(others):
    status = call(1, "git status", LONG)
    noise = [call(10 + i, c, "ok") for i, c in enumerate(others)]
    assert working_tree([status, *noise]) == working_tree([status])


def test_each_checkout_keeps_its_own_listing_and_a_change_drops_only_its_own():
    main = call(1, "git status --short", " M docs/coding-agents.mdx\n", cwd="/r/agentv")
    tree = call(2, "git -C /r/agentv.worktrees/trace status --short", " M src/a.ts\n",
                cwd="/r/agentv")
    both = working_tree([main, tree])
    assert [t[3] for t in both] == ["/r/agentv.worktrees/trace", "/r/agentv"]
    # A commit in the worktree leaves the main checkout's listing standing...
    commit = call(3, "cd /r/agentv.worktrees/trace && git commit -m x", "", cwd="/r/agentv")
    assert [t[3] for t in working_tree([main, tree, commit])] == ["/r/agentv"]
    # ...and one in a folder inside the checkout (or a checkout inside it) drops it.
    inner = call(4, "cd docs && git add coding-agents.mdx", "", cwd="/r/agentv")
    assert working_tree([main, tree, commit, inner]) == []
    item = tree_item(both[0], "/r/agentv")
    assert item[0]["folder"] == "/r/agentv.worktrees/trace"
    assert item[1].startswith("- working tree of `/r/agentv.worktrees/trace` at 10:02")
    assert tree_item(both[1], "/r/agentv")[1].startswith("- working tree at 10:01")
