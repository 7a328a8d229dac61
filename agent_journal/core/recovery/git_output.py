"""What git's own output says about commits, pushes, branches and removed files.

Invariant: only git's fixed output forms are read (`[branch hash] subject` after a
commit, `old..new  src -> dst` after a push, ` ! [rejected]  src -> dst (why)` for a ref
a push had refused, ` - [deleted]  dst` for a ref a push deleted, `Deleted branch x (was
hash).` after `git branch -d`, `Switched to a new branch 'x'`, `rm 'path'` after `git rm`,
`Removing path` after `git clean` (its dry run says `Would remove`), `hash subject`
lines of `git log --oneline`, `git status` in its long or short form); nothing is
inferred from the command alone.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from collections.abc import Iterator

_MADE_LINE = re.compile(r"^\[(?P<branch>[^\]\s]+(?: [^\]\s]+)?)(?: \(root-commit\))? "
                     r"(?P<hash>[0-9a-f]{7,40})\] (?P<subject>.+)$")
_PUSH = re.compile(r"^\s*(?:\+ |\* )?(?:[0-9a-f]{7,40}\.\.\.?[0-9a-f]{7,40}|\[new branch\]|"
                   r"\[new tag\])\s+(?P<src>\S+) -> (?P<dst>\S+)")
_PUSH_REJECTED = re.compile(r"^\s*! \[(?:remote )?rejected\]\s+(?P<src>\S+) -> (?P<dst>\S+)"
                            r"(?: \((?P<why>[^)]+)\))?")
_PUSH_DELETED = re.compile(r"^\s*- \[deleted\]\s+(?P<dst>\S+)$")
DELETED_REF = "(delete)"  # the source of a push that deleted its destination
_BRANCH_DELETED = re.compile(
    r"^Deleted (?:remote-tracking )?branch (\S+) \(was ([0-9a-f]{7,40})\)\.?$")
_PUSH_TO = re.compile(r"^To (\S+)")
_SWITCHED = re.compile(r"^Switched to (?:a new )?branch '([^']+)'")
_GIT_RM = re.compile(r"^rm '([^']+)'$")
_GIT_CLEAN = re.compile(r"^Removing (\S+)$")
_STATUS = re.compile(r"\bgit\s+(?:-C\s+\S+\s+)?status\b")


def ran_status(command: str) -> bool:
    """Whether a command ran `git status` (`git -C DIR status` too)."""
    return "status" in command and _STATUS.search(command) is not None


_LOG_LINE = re.compile(r"^[*|/\\_ .\-]*?\b([0-9a-f]{7,12}) (?!\.\.)(.+)$")
_MAX = 20


def commits_in(text: str) -> list[tuple[str, str, str]]:
    """(short hash, subject, branch) of every commit git reports having made."""
    found = []
    for line in text.splitlines():
        m = _MADE_LINE.match(line.strip())
        if m:
            # The hash exactly as git printed it (its abbreviation is the repository's).
            found.append((m.group("hash"), m.group("subject").strip(), m.group("branch")))
    return found[:_MAX]


def _push_matches(text: str, pattern: re.Pattern[str], *, need_remote: bool
                  ) -> Iterator[tuple[str, re.Match[str]]]:
    """(remote, match) of each line of a push's output that `pattern` matches, the remote
    being the one its latest `To ...` line named ("" before any; with `need_remote`,
    such lines are skipped)."""
    remote = ""
    for line in text.splitlines():
        to = _PUSH_TO.match(line)
        if to:
            remote = to.group(1)
            continue
        m = pattern.match(line)
        if m and (remote or not need_remote):
            yield remote, m


def pushes_in(text: str) -> list[tuple[str, str, str]]:
    """(remote, source ref, destination ref) of every ref update a push reports."""
    found = [(remote, m.group("src"), m.group("dst"))
             for remote, m in _push_matches(text, _PUSH, need_remote=True)]
    found += [(remote, DELETED_REF, m.group("dst"))
              for remote, m in _push_matches(text, _PUSH_DELETED, need_remote=True)]
    return found[:_MAX]


def branches_deleted_in(text: str) -> list[tuple[str, str]]:
    """(branch, the hash it pointed to) of each branch `git branch -d/-D` deleted."""
    found = []
    for line in text.splitlines():
        m = _BRANCH_DELETED.match(line.strip()) if line.startswith("Deleted ") else None
        if m:
            found.append((m.group(1), m.group(2)))
    return found[:_MAX]


def push_rejections_in(text: str) -> list[tuple[str, str, str, str]]:
    """(remote, source ref, destination ref, git's reason) of every ref a push had rejected."""
    found = [(remote, m.group("src"), m.group("dst"), m.group("why") or "rejected")
             for remote, m in _push_matches(text, _PUSH_REJECTED, need_remote=False)]
    return found[:_MAX]


def switched_branch(text: str) -> str | None:
    for line in text.splitlines():
        m = _SWITCHED.match(line.strip())
        if m:
            return m.group(1)
    return None


def removed_by_git_rm(text: str) -> list[str]:
    return [m.group(1) for line in text.splitlines() if (m := _GIT_RM.match(line.strip()))]


def removed_by_git_clean(text: str) -> list[str]:
    return [m.group(1) for line in text.splitlines()
            if (m := _GIT_CLEAN.match(line.strip()))][:50]


def log_lines(text: str) -> list[tuple[str, str]]:
    """(hash, subject) of the commits a `git log --oneline` (optionally --graph) lists."""
    found = []
    for line in text.splitlines():
        m = _LOG_LINE.match(line)
        if m:
            found.append((m.group(1), m.group(2).strip()))
    return found[:_MAX]


_SHORT_STATUS = re.compile(r"^([ MADRCUT?!]{2}) (\S.*)$")
_LONG_STATUS = re.compile(r"^\t(?:(modified|new file|deleted|renamed|typechange|both modified|"
                          r"both added|deleted by us|deleted by them):\s+)?(\S.*)$")
_SECTIONS = {"Changes to be committed:": "staged", "Changes not staged for commit:": None,
             "Untracked files:": "untracked", "Unmerged paths:": None}
_SHORT_STATE = {"?": "untracked", "M": "modified", "A": "added", "D": "deleted",
                "R": "renamed", "C": "copied", "U": "unmerged", "T": "modified", "!": "ignored"}


def working_tree(text: str) -> list[tuple[str, str]] | None:
    """(state, path) of each file `git status` (long or short form) lists, [] for a clean
    tree, None when `text` is no status (at most _MAX files)."""
    if "nothing to commit" in text and "working tree clean" in text:
        return []
    lines = text.splitlines()
    if "Untracked files:" in text or "Changes " in text or "Unmerged paths:" in text:
        found: list[tuple[str, str]] = []
        section = ""
        for line in lines:
            if line in _SECTIONS:
                section = line
                continue
            m = _LONG_STATUS.match(line) if section else None
            if m:
                word = m.group(1) or _SECTIONS[section] or "modified"
                found.append(({"new file": "added"}.get(word, word), m.group(2).strip()))
        return found[:_MAX]
    found = []
    branch_line = False
    for line in lines:
        if line.startswith("## "):
            branch_line = True
            continue
        if not line.strip():
            continue
        m = _SHORT_STATUS.match(line)
        if m is None:
            return None  # a line of anything else: no status (read no further)
        found.append((_SHORT_STATE.get(m.group(1).strip()[:1] or "M", "modified"),
                      m.group(2)))
    # `git status -sb` of a clean tree prints its branch line alone.
    return found[:_MAX] if found or branch_line else None
