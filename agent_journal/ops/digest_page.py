"""The digest's page: sections of rendered items, fitted to a bound.

Invariants:
- Bounded and hard: the Markdown fits `max_chars`, the note of what was left out
  included, by dropping first every run line's earlier runs (Section.lean), then the least
  important sections' oldest items, each section first down to its floor (FLOORS) while
  a less important one still has items to give up, then below; under a bound too small
  for the notes a short one or none is printed, then the first prompt's quote goes, then
  the header is cut a line at a time. Only objectives and constraints that alone exceed
  the bound are printed whole, and the digest says so.
- Whenever an item is not shown, the note names the commands that print it.
"""

from __future__ import annotations

from agent_journal.core.recovery.conversation import summary_parts
from agent_journal.core.recovery.text import clip_middle
from agent_journal.ops.digest_lines import GOAL_CHARS
from agent_journal.ops.digest_md import code, quote

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any


# How many items each section keeps as candidates before the bound is applied; the rest
# are counted as "earlier, not shown".
CAPS = {  # in the sections' priority order, most important first (collect)
    "standingInstructions": 20,
    "asked": 12,
    "stopped": 8,
    "unfinishedToolCalls": 30,
    "openProblems": 20,
    "commits": 30,
    "outcomes": 10,
    "testRuns": 12,
    "files": 40,
    "liveEntries": 200,
    "retracted": 30,
    "resolvedProblems": 20,
    "subagents": 10,
    "summaries": 3,
    "earlierMessages": 12,
    "filesRead": 12,
    "sessionMessages": 2,
    "rewound": 6,
    "recentActivity": 25,
    "failedLookups": 8,
}


# How many of its newest items each section keeps while a less important section still
# has items to give up (fit): what a resuming agent asks first, in every section.
FLOORS = {
    "standingInstructions": 20, "asked": 12, "stopped": 8, "unfinishedToolCalls": 5,
    "openProblems": 6, "testRuns": 10, "commits": 30, "files": 15, "liveEntries": 10,
    "retracted": 3, "resolvedProblems": 4, "subagents": 3, "summaries": 1, "filesRead": 2,
    "earlierMessages": 3, "outcomes": 4,
}


SHRINK_MIN = 300  # an item clipped to fit the bound keeps at least this much


class Section:
    """One trimmable part of the digest: rendered items, oldest first."""

    __slots__ = ("key", "title", "intro", "noun", "md", "items", "total", "shrink", "same",
                 "lean")

    def __init__(self, key: str, title: str, noun: str, intro: str | None = None) -> None:
        self.key = key
        self.title = title
        self.intro = intro
        self.noun = noun
        self.md: list[str] = []
        self.items: list[dict[str, Any]] = []
        self.total = 0
        # item index -> how to render it within N characters, for an item worth clipping
        # rather than dropping when it is all the bound leaves of its section.
        self.shrink: dict[int, Any] = {}
        # item index -> what it says, for items that may say what another says (a Task's
        # answer and its subagent's own last message): such an item shows once.
        self.same: dict[int, str] = {}
        # item index -> its rendering without the detail a tight bound drops before any
        # item (a run line's earlier runs).
        self.lean: dict[int, str] = {}

    def add(self, item: dict[str, Any], md: str, shrink: Any = None,
            lean: str | None = None, *, same: str | None = None) -> None:
        if shrink is not None:
            self.shrink[len(self.md)] = shrink
        if same:
            self.same[len(self.md)] = same
        if lean is not None:
            self.lean[len(self.md)] = lean
        self.items.append(item)
        self.md.append(md)
        self.total += 1

    def fill(self, items: list[Any], render: Any, same: Any = None) -> None:
        """Render only the newest CAPS[key] of `items` (oldest first); count them all.
        `same(x)`: what an item says, for items that may repeat one another (see add)."""
        for x in items[-CAPS[self.key]:]:
            self.add(*render(x), same=same(x) if same is not None else None)
        self.total = len(items)

    def keep_latest(self) -> None:
        cap = CAPS[self.key]
        if len(self.md) > cap:
            cut = len(self.md) - cap
            del self.md[:-cap]
            del self.items[:-cap]
            self.same = {i - cut: s for i, s in self.same.items() if i >= cut}
            self.lean = {i - cut: md for i, md in self.lean.items() if i >= cut}
        if self.same:
            self._drop_repeats()

    def _drop_repeats(self) -> None:
        """Of kept items that say the same, only the last added shows (and counts)."""
        last = {s: i for i, s in sorted(self.same.items())}
        drop = {i for i, s in self.same.items() if last[s] != i}
        if not drop:
            return
        kept = [i for i in range(len(self.md)) if i not in drop]
        self.shrink = {n: self.shrink[i] for n, i in enumerate(kept) if i in self.shrink}
        self.lean = {n: self.lean[i] for n, i in enumerate(kept) if i in self.lean}
        self.md = [self.md[i] for i in kept]
        self.items = [self.items[i] for i in kept]
        self.total -= len(drop)
        self.same = {}

    def head(self) -> str:
        return f"## {self.title}\n" + (f"{self.intro}\n" if self.intro else "")

    def footer(self, shown: int) -> str:
        hidden = self.total - shown
        return f"- ... and {hidden} earlier {self.noun} not shown\n" if hidden else ""

    def render(self, shown: int) -> str:
        if shown == 0:
            return ""
        return self.head() + "".join(self.md[len(self.md) - shown:]) + self.footer(shown) + "\n"


def _fixed_md(workspace: str, session: str | None, collected: dict[str, Any],
              damage: dict[str, Any], goal_chars: int = GOAL_CHARS) -> str:
    scope = f"session {session}" if session is not None else "all sessions"
    out = [f"# Journal digest: workspace {workspace}\n",
           f"Observations: {scope}. Entries: all sessions.\n"]
    where = collected["where"]
    bits = [f"cwd {code(where['cwd'])}" if where["cwd"] else "",
            f"branch {code(where['branch'])}" if where["branch"] else "",
            _pulls(where.get("pullRequests") or [])]
    if any(bits):
        out.append("Where: " + ", ".join(b for b in bits if b) + ".\n")
    unreadable, malformed = damage["unreadable"], damage["malformed"]
    if unreadable or malformed:
        out.append(f"WARNING: {len(unreadable)} unreadable segment(s), {len(malformed)} "
                   "malformed row(s): this digest is a floor, not a total.\n")
    out.append("\n## Goal\n")
    goal = collected["goal"]
    if goal is not None and goal["kind"] == "compact_summary":
        out.append("Continued from an earlier conversation; what the client's summary of "
                   f"it ({goal['ts'][:16].replace('T', ' ')}) says was asked:\n")
        out.append(quote(clip_middle(summary_parts(goal["text"])[0], goal_chars), goal_chars))
    elif goal is not None:
        out.append(f"First prompt ({goal['ts'][:16].replace('T', ' ')}):\n")
        # Head and tail: a first prompt that pastes a log ends with what to do about it.
        out.append(quote(clip_middle(goal["text"], goal_chars), goal_chars))
    out.append("Objectives:" + (" (none recorded)\n" if not collected["objectives"] else "\n"))
    for item in collected["objectives"]:
        out.append(f"- {item['id']} ({item['author']}): {item['text']}\n")
    out.append("Live constraints:" + (" (none)\n" if not collected["liveConstraints"]
                                      else "\n"))
    for item in collected["liveConstraints"]:
        out.append(f"- {item['id']} ({item['author']}): {item['text']}\n")
    out.append("\n")
    return "".join(out)


def _pulls(pulls: list[dict[str, Any]]) -> str:
    """`PR #183 (url)`, or `PRs #12, #15 (url)`: the pull requests `gh` named, the latest
    last, with the latest one's URL when known."""
    if not pulls:
        return ""
    numbers = ", ".join(f"#{p['number']}" for p in pulls)
    url = pulls[-1]["url"]
    return ("PR " if len(pulls) == 1 else "PRs ") + numbers + (f" ({url})" if url else "")


def _assemble(fixed: str, body: str, note: str, max_chars: int) -> str:
    """The digest's parts put together within `max_chars`: with the note saying what was
    left out, or a short one, or none when even that does not fit."""
    short = (f"_More was left out to fit --max-chars {max_chars}: `agent-journal digest` "
             "prints more._\n")
    markdown = ""
    for tail in (note, short if note else "", ""):
        markdown = (fixed + body + tail).rstrip("\n") + "\n"
        if len(markdown) <= max_chars:
            break
    return markdown


def _cut_lines(text: str, max_chars: int) -> str:
    """`text`'s whole lines that fit in `max_chars` (at least its first line, cut)."""
    kept = ""
    for line in text.splitlines(keepends=True):
        if len(kept) + len(line) > max_chars:
            break
        kept += line
    return kept or text[:max_chars]


def _trim_note(sections: list[Section], shown: list[int], max_chars: int,
               workspace: str = "") -> str:
    """What was left out to fit the bound, and, whenever anything is not shown, the
    commands that print it."""
    parts = [f"{s.title} ({len(s.md) - n} of {len(s.md)})"
             for s, n in zip(sections, shown, strict=True) if n < len(s.md)]
    note = ""
    if parts:
        note = (f"_Left out to fit --max-chars {max_chars}, least important first: "
                + "; ".join(parts) + "._\n")
    if parts or any(s.total > n for s, n in zip(sections, shown, strict=True)):
        ws = f" --workspace {workspace}" if workspace else ""
        note += (f"_More: `agent-journal timeline{ws} --failures-only` (every failed call "
                 f"with its output), `agent-journal timeline{ws} --last 60` (the latest "
                 f"events), `agent-journal get{ws} ID` (a call's whole output; ids in "
                 f"[brackets])._\n")
    return note


def fit(fixed: str, sections: list[Section], max_chars: int, workspace: str = ""
        ) -> list[int]:
    """How many items of each section to show: drop the least important section's
    oldest items first until the whole document fits (or nothing is left to drop)."""
    shown = [len(s.md) for s in sections]
    suffix: list[list[int]] = []
    for s in sections:
        sums = [0]
        for md in reversed(s.md):
            sums.append(sums[-1] + len(md))
        suffix.append(sums)
    heads = [len(s.head()) for s in sections]

    def lean() -> None:
        """Drop every item's detail that goes before any item (run lines' earlier runs)."""
        for i, s in enumerate(sections):
            if s.lean:
                for index, md in s.lean.items():
                    s.md[index] = md
                s.lean = {}
                sums = [0]
                for md in reversed(s.md):
                    sums.append(sums[-1] + len(md))
                suffix[i] = sums

    def size() -> int:
        total = len(fixed)
        for i, s in enumerate(sections):
            if shown[i]:
                total += heads[i] + suffix[i][shown[i]] + len(s.footer(shown[i])) + 1
        return total + len(_trim_note(sections, shown, max_chars, workspace))

    if size() > max_chars:
        lean()
    # First every section down to its floor (the least important first), then below the
    # floors in the same order: one long section never starves all the sections after it.
    for floors in ({s.key: FLOORS.get(s.key, 0) for s in sections}, {}):
        i = len(sections) - 1
        while i >= 0 and size() > max_chars:
            if shown[i] <= floors.get(sections[i].key, 0):
                i -= 1
                continue
            s = sections[i]
            oldest = len(s.md) - shown[i]
            if shown[i] == 1 and oldest in s.shrink:
                # The section's last item is worth a clipped rendering rather than none.
                room = len(s.md[oldest]) - (size() - max_chars)
                if room >= SHRINK_MIN:
                    s.md[oldest] = s.shrink.pop(oldest)(room)
                    suffix[i] = [0, len(s.md[oldest])]
                    continue
            shown[i] -= 1
    return shown
