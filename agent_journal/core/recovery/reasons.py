"""Why a call failed: its first meaningful error line, and refusals told apart from errors.

Invariants: the reason is a line of the output itself (never rewritten beyond trimming
and a length cap); log noise (`level=info` lines, bare `Exit code N`, blank and
decoration lines, a test a runner reports passing, a line of source a runner quotes) is
skipped; for a Python traceback the exception line is the reason, and so is the first
exception line pytest marks with `E` (it prints no traceback header). A line that only
heads what follows (`Failure:`, `Error:`) is joined to the line after it. A permission
denial or a user's rejection is recognised only by Claude Code's own fixed wording, so an
error is never mistaken for one. A benign no-op (`benign`) is recognised only when the
failure's reason is one of a short fixed list of messages saying the wanted state already
holds (BENIGN_NOOPS).
"""

from __future__ import annotations

import re

from agent_journal.core.recovery.text import clip

DENIED = "denied"
REJECTED = "rejected"
REASON_CHARS = 240

_EXIT = re.compile(r"^Exit code \d+$")
_NOISE = re.compile(r"^(?:time=\"[^\"]*\"\s+)?level=(?:info|debug|trace)\b|"
                    # a test a runner reports passing says nothing of what failed, nor
                    # does a line of source a runner quotes around it (`12 | code`)
                    r"^(?:\(pass\)|✓|✔|√|PASS\s|--- PASS:|ok\s+\S+\s+[\d.]+s)|"
                    r"^>?\s*\d+\s*\|(?!\|)|"
                    r"^\s*(?:\[?(?:INFO|DEBUG|TRACE)\]?[: ])|"
                    r"^\d{4}-\d\d-\d\d[T ][\d:.]+\S*\s+(?:INFO|DEBUG|TRACE)\b|"
                    r"^[\s\-=_*~#|+]*$", re.IGNORECASE)
_ERRORISH = re.compile(r"\b(?:error|errors|fail|failed|failure|fatal|exception|denied|refused|"
                       r"not found|no such|cannot|can't|could not|unable|invalid|missing|"
                       r"panic|nothing to)\b", re.IGNORECASE)
_TAG = re.compile(r"^</?tool_use_error>|</?tool_use_error>$")
_DENIAL = re.compile(r"requires approval|haven't granted it yet|was blocked\. For security|"
                     r"Permission to use \S+ has been denied|permission denied by|"
                     r"denied by (?:the )?(?:user|policy|permission)", re.IGNORECASE)
_REJECTION = re.compile(r"The user doesn't want to (?:proceed with this tool use|take this "
                        r"action)|tool use was rejected", re.IGNORECASE)
# Lines that name the failure more precisely than a generic `error:` line after them: a
# merge or rebase conflict, a ref a push had rejected, a Rust panic, the symbol a link
# missed (the linker driver's own line after it only says that the link failed), a Python
# exception named by its module and printed with no traceback header
# (`django.core.exceptions.ImproperlyConfigured: ...`).
_PREFERRED = re.compile(r"^CONFLICT \(|^! \[(?:remote )?rejected\]|\bpanicked at\b|"
                        r"\bundefined reference to\b|^Undefined symbols? |"
                        r"\bunresolved external symbol\b|^[a-z_]\w*(?:\.[a-z_]\w*)+\.[A-Z]\w+: ")
# pytest prints a traceback's exception line behind its `E` marker, with no "Traceback"
# header (a conftest that failed to import, a failing test): that line is the exception.
_PYTEST_E = re.compile(r"^E\s+[A-Za-z_][\w.]*(?:Error|Exception)\b")
_HEADER = re.compile(r"^[A-Z][A-Za-z ]{0,30}:$")
# A failed call whose reason is one of these did nothing because nothing needed doing: the
# state it aimed at already holds, so nothing is lost and nothing is open.
BENIGN_NOOPS = (
    "nothing to commit, working tree clean",  # git commit with nothing staged or changed
    "No local changes to save",  # git stash on a clean tree
    "Everything up-to-date",  # git push with nothing new
    "Already up to date.",  # git pull / merge with nothing new
)
_REJECTION_SAID = re.compile(r"the user said:\s*(.+)", re.IGNORECASE | re.DOTALL)


def refusal(text: str | None) -> str | None:
    """DENIED for a permission denial, REJECTED for a user's rejection, else None."""
    if not isinstance(text, str):
        return None
    head = text[:2000]
    if _REJECTION.search(head):
        return REJECTED
    if _DENIAL.search(head):
        return DENIED
    return None


def rejection_words(text: str) -> str | None:
    """What the user said when rejecting a call, when Claude Code quotes it."""
    m = _REJECTION_SAID.search(text[:4000])
    return m.group(1).strip()[:1000] if m else None


def benign(reason: str | None) -> bool:
    """Whether a failure's reason is a benign no-op (BENIGN_NOOPS), not a problem."""
    return isinstance(reason, str) and reason.strip() in BENIGN_NOOPS


def error_reason(text: str | None) -> str | None:
    """The first meaningful error line of a failed call's output, or None."""
    if not isinstance(text, str) or not text.strip():
        return None
    lines = [_TAG.sub("", line).strip() for line in text[:20000].splitlines()]
    for i, line in enumerate(lines):
        if line.startswith("Traceback (most recent call last)"):
            for after in lines[i + 1:]:
                raw = after
                if raw and not raw.startswith("File ") and re.match(r"^[A-Za-z_][\w.]*"
                                                                     r"(?:Error|Exception|"
                                                                     r"Exit|Interrupt)\b",
                                                                     raw):
                    return clip(raw, REASON_CHARS)
        if _PYTEST_E.match(line):
            return clip(line, REASON_CHARS)
    useful = [line for line in lines if line and not _EXIT.match(line)
              and not _NOISE.match(line)]
    if not useful:
        return None
    preferred = next((line for line in useful if _PREFERRED.search(line)), None)
    if preferred is not None:
        return clip(preferred, REASON_CHARS)
    for i, line in enumerate(useful):
        if _ERRORISH.search(line):
            if _HEADER.match(line) and i + 1 < len(useful):
                return clip(f"{line} {useful[i + 1]}", REASON_CHARS)
            return clip(line, REASON_CHARS)
    return clip(" · ".join(useful[:2]), REASON_CHARS)


_TRACEBACK = "Traceback (most recent call last)"


def printed_traceback(text: str | None) -> str | None:
    """The exception line of a Python traceback a call printed, or None: for a call that
    exited 0 yet crashed inside (a script that catches and prints its exception)."""
    if not isinstance(text, str) or _TRACEBACK not in text[:20000]:
        return None
    reason = error_reason(text)
    return reason if reason and re.match(r"^[A-Za-z_][\w.]*(?:Error|Exception)\b", reason) \
        else None
