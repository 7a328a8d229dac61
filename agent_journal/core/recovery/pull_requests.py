"""Pull requests the session worked on, as `gh` named them.

Invariant: a pull request is listed only when a `gh` call that succeeded named it: by
number (`gh pr view 183`, `gh pr checks 183`, `gh api repos/o/r/pulls/183/comments`) or
by the URL that `gh pr create` or `gh pr view` printed; its URL is kept once known. The
latest named are kept, in the order of their latest naming. Unrelated calls change nothing.
"""

from __future__ import annotations

import re

from agent_journal.core import tools

TYPE_CHECKING = False
if TYPE_CHECKING:
    from agent_journal.core.recovery.calls import Call

KEPT = 3
_SHELLS = frozenset({tools.SHELL, tools.OTHER_SHELL})  # kinds of tool (core/tools.py)
_BY_NUMBER = re.compile(
    r"\bgh pr (?:view|checks|diff|merge|comment|review|edit|ready|close|reopen|checkout)"
    r"(?:\s+-{1,2}[\w-]+(?:[ =](?!\d)\S+)?)*\s+#?(\d+)\b"
    r"|\bgh api\s+(?:-\S+\s+)*/?repos/[\w.-]+/[\w.-]+/pulls/(\d+)\b")
_PRINTS_URL = re.compile(r"\bgh pr (?:create|view)\b")
URL = re.compile(r"https://github\.com/[\w.-]+/[\w.-]+/pull/(\d+)\b")


def urls_in(text: str) -> list[str]:
    """The pull request URLs an output printed (at most KEPT), for the facts."""
    if "/pull/" not in text:
        return []
    return list(dict.fromkeys(m.group(0) for m in URL.finditer(text)))[:KEPT]


class PullRequestsFold:
    """number -> URL (or None) of the pull requests named, the latest named last."""

    __slots__ = ("named",)

    def __init__(self) -> None:
        self.named: dict[str, str | None] = {}

    def step(self, call: Call) -> None:
        if not call.succeeded or tools.kind_of(call.tool) not in _SHELLS or not call.target \
                or "gh " not in call.target:
            return
        found: dict[str, str | None] = {}
        for m in _BY_NUMBER.finditer(call.target):
            found[m.group(1) or m.group(2)] = None
        if _PRINTS_URL.search(call.target):
            for url in call.get("pullUrls") or ():
                found[URL.match(url).group(1)] = url  # type: ignore[union-attr]
        for number, url in found.items():
            known = self.named.pop(number, None)
            self.named[number] = url or known
        while len(self.named) > KEPT:
            del self.named[next(iter(self.named))]

    def packed(self) -> list[list[str | None]]:
        return [[n, u] for n, u in self.named.items()]

    @classmethod
    def unpacked(cls, packed: list[list[str | None]]) -> PullRequestsFold:
        fold = cls()
        fold.named = {str(n): u for n, u in packed}
        return fold


def pull_requests(calls: list[Call]) -> dict[str, str | None]:
    """The pull requests `calls` (in (ts, id) order) named: number -> URL or None."""
    fold = PullRequestsFold()
    for call in calls:
        fold.step(call)
    return fold.named
