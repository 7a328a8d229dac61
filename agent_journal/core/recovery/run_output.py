"""A command's output made ready for the runners' parsers (checks.parse_run).

Invariants: `plain` drops terminal colour codes; `output_lines` cuts each line at
LINE_CAP characters (a minified bundle on one line must not cost the regex engine
seconds) and drops a job runner's `[job] | ` relay prefix; `by_package` splits lines a
monorepo's runner prefixed with a package's name, or says there are none; GATE holds a
piece of every summary line some parser needs, so text without one holds no summary;
`summary_context` is what a large output keeps of its middle for the parsers to read.
"""

from __future__ import annotations

import re

LINE_CAP = 2000

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

# A runner's output relayed by a job runner carries a `[job] | ` prefix on every line (act,
# docker compose); the runner's own line follows it.
_RELAY = re.compile(r"^\[[^\]]{1,80}\]\s+\|\s?")


# A text can hold a runner's summary only if it holds one of these pieces, each a part
# that some parser's summary (or, for go test and tsc, failure) line cannot do without.
# Most shell outputs hold none, and one search in C settles that before fourteen parsers
# walk the lines in Python. Loosening a piece is always safe; adding a parser means
# adding its piece here (tests/test_recovery.py holds the gate to the parsers' verdicts).
GATE = re.compile(
    # pytest's summary: its last count and the duration (a bare "3 passed" is no summary)
    r"\d (?:passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?|rerun)"
    r"(?:, )? in [\d.]"
    r"|no tests ran|Ran \d+ test|--- FAIL: |(?:ok|FAIL)\s+\S+\s+(?:[\d.]+s|\(cached\))"
    r"|test result: |Tests|passing \(|example|Success: no issues found|Found \d+ error"
    r"|information|All checks passed!|reformatted|left unchanged|already formatted"
    r"|INFO \d+ error|error TS\d|\u2716|\d runs, \d+ assertions"
    r"|\d (?:passed|failed|flaky|skipped|did not run|interrupted) \([\d.]+(?:ms|s|m|h)\)"
    r"|(?i:pass(?:ed|es)?\s*[:=]\s*\d)|\d passed, \d+ failed|\d issues?[.:]"
    r"|Checked \d+ files? in ")


def summary_context(text: str, before: int = 3, cap: int = 4000) -> str:
    """The lines of `text` a runner's summary can be made of: each line the gate finds,
    with the `before` lines above it (bun's counts sit above its `Ran N tests`), in order,
    at most `cap` characters. What a large output keeps of its middle, where a monorepo's
    runner prints every package's summary but the last."""
    spans: list[tuple[int, int]] = []
    for m in GATE.finditer(text):
        if spans and m.start() < spans[-1][1]:
            continue  # within the lines already kept
        start = m.start()
        for _ in range(before + 1):
            start = text.rfind("\n", 0, start - 1) + 1 if start > 0 else 0
        end = text.find("\n", m.end())
        end = len(text) if end < 0 else end
        if spans and start <= spans[-1][1]:
            spans[-1] = (spans[-1][0], end)
        else:
            spans.append((start, end))
    kept = "\n".join(text[a:b] for a, b in spans)
    return kept[-cap:] if len(kept) > cap else kept


def plain(text: str) -> str:
    return ANSI.sub("", text) if "\x1b" in text else text


def output_lines(text: str) -> list[str]:
    return [_RELAY.sub("", line.rstrip()[:LINE_CAP]) for line in text.splitlines()]


# `@scope/pkg test: ` (bun --filter, pnpm -r) or `pkg:test: ` (turbo): a package's name and
# the script it runs, before each line that package printed.
PACKAGE = re.compile(r"^(@?[\w.-]+(?:/[\w.-]+)?)[ :]([A-Za-z][\w:.-]*): ?")


def by_package(lines: list[str]) -> dict[str, list[str]] | None:
    """Each package's own lines, when at least half of the lines carry a package prefix of
    at least two packages; else None."""
    groups: dict[str, list[str]] = {}
    prefixed = 0
    for line in lines:
        m = PACKAGE.match(line)
        if m:
            groups.setdefault(m.group(1), []).append(line[m.end():])
            prefixed += 1
    if len(groups) < 2 or prefixed * 2 < len([line for line in lines if line]):
        return None
    return groups
