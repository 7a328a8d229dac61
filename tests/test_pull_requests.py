"""The pull requests a session worked on (core/recovery/pull_requests.py): named by `gh`,
by number or by the URL `gh pr create` printed, shown on the digest's Where line."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_journal.core.recovery.calls import Call
from agent_journal.core.recovery.facts import event_facts
from agent_journal.core.recovery.pull_requests import pull_requests
from agent_journal.ops.digest_page import _pulls


def call(i: int, command: str, output: str = "", ok: bool = True) -> Call:
    data = {"tool": "Bash", "input": {"command": command}, "output": output,
            "status": "ok" if ok else "error", "exitCode": 0 if ok else 1}
    ts = f"2026-01-01T10:{i:02d}:00.000Z"
    return Call(f"c{i}", "tool_call", "s", ts, ts, event_facts("tool_call", data) or {})


NAMING = [call(1, "gh pr checks 183 2>/dev/null | head -20", "E2E Tests\tfail"),
          call(2, "gh api repos/FSM1/cipher-box/pulls/183/comments --jq '.[].id'", "1\n2"),
          call(3, "gh pr create --title 'Fix' --body 'x'",
               "https://github.com/FSM1/cipher-box/pull/190\n")]


def test_named_by_number_or_by_the_url_gh_printed():
    assert pull_requests(NAMING) == {"183": None,
                                     "190": "https://github.com/FSM1/cipher-box/pull/190"}
    assert _pulls([{"number": 190, "url": "https://github.com/o/r/pull/190"}]) == \
        "PR #190 (https://github.com/o/r/pull/190)"
    # A failed call, another command's URL, an issue: none names a PR of the session.
    assert pull_requests([call(1, "gh pr view 12", ok=False),
                          call(2, "cat CHANGELOG.md", "https://github.com/o/r/pull/9"),
                          call(3, "gh issue view 386")]) == {}


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(["ls", "git status", "pytest -q", "gh issue list"]),
                max_size=6), st.integers(0, 3))
def test_unrelated_calls_change_nothing(others, at):
    noise = [call(10 + i, c, "ok") for i, c in enumerate(others)]
    mixed = NAMING[:at] + noise + NAMING[at:]
    assert pull_requests(mixed) == pull_requests(NAMING)
