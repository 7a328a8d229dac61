"""A command's output made ready for the runners' parsers (checks.parse_run).

Invariants: `plain` drops terminal colour codes; `output_lines` cuts each line at
LINE_CAP characters (a minified bundle on one line must not cost the regex engine
seconds) and drops a job runner's `[job] | ` relay prefix; `by_package` splits lines a
monorepo's runner prefixed with a package's name, or says there are none; GATE holds a
piece of every summary line some parser needs, so text without one holds no summary, and
`pieces` names the GATE's pieces a text holds, none exactly when GATE finds nothing;
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
# that some parser's summary (or, for go test and tsc, failure) line cannot do without;
# GATE is their alternation. Each piece is named, with the substrings it cannot match
# without: every group of its `needles` has one of its strings in any text the piece
# matches (None: the piece is a plain string, its own needle). Most shell outputs hold no
# needle, and `pieces` settles that by substring tests in C, running a piece's pattern
# only where its needles are; checks.parse_run then runs only the parsers whose pieces
# the text holds. Loosening a piece or a needle is always safe; adding a parser means
# adding its piece here (tests/test_recovery.py holds the gate to the parsers' verdicts,
# tests/test_parse_gate.py `pieces` to GATE and to the parsers run ungated).
_IN_COUNT = ("passed", "failed", "error", "skipped", "deselected", "warning", "rerun")
_TIMED = ("passed (", "failed (", "flaky (", "skipped (", "did not run (", "interrupted (")
_PIECES: tuple[tuple[str, str, tuple[tuple[str, ...], ...] | None], ...] = (
    # pytest's summary: its last count and the duration (a bare "3 passed" is no summary)
    ("pytest", r"\d (?:passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?"
     r"|rerun)(?:, )? in [\d.]", ((" in ",), _IN_COUNT)),
    ("no tests ran", "no tests ran", None),
    ("ran tests", r"Ran \d+ test", (("Ran ",),)),
    ("go fail", "--- FAIL: ", None),
    ("go package", r"(?:ok|FAIL)\s+\S+\s+(?:[\d.]+s|\(cached\))", (("ok", "FAIL"),)),
    ("cargo", "test result: ", None),
    ("Tests", "Tests", None),
    ("mocha", r"passing \(", (("passing (",),)),
    ("rspec", "example", None),
    ("mypy ok", "Success: no issues found", None),
    ("found errors", r"Found \d+ error", (("Found ",),)),
    ("pyright", "information", None),
    ("ruff ok", "All checks passed!", None),
    ("reformatted", "reformatted", None),
    ("left unchanged", "left unchanged", None),
    ("already formatted", "already formatted", None),
    ("pyrefly", r"INFO \d+ error", (("INFO ",),)),
    ("tsc", r"error TS\d", (("error TS",),)),
    ("eslint", r"\u2716", (("\u2716",),)),
    ("minitest", r"\d runs, \d+ assertions", ((" runs, ",),)),
    ("playwright", r"\d (?:passed|failed|flaky|skipped|did not run|interrupted) "
     r"\([\d.]+(?:ms|s|m|h)\)", (_TIMED,)),
    ("tally", r"(?i:pass(?:ed|es)?\s*[:=]\s*\d)", ()),
    ("passed failed", r"\d passed, \d+ failed", (("passed, ",),)),
    ("issues", r"\d issues?[.:]", ((" issue",),)),
    ("biome", r"Checked \d+ files? in ", (("Checked ",),)),
)
GATE = re.compile("|".join(source for _, source, _ in _PIECES))
_TESTS = tuple((name, ((source,),) if needles is None else needles,
                None if needles is None else re.compile(source))
               for name, source, needles in _PIECES)


_Test = tuple[str, tuple[tuple[str, ...], ...], "re.Pattern[str] | None"]


def _by_needle(tests: tuple[_Test, ...]) -> dict[str, list[_Test]]:
    """Every piece with needles has one of its first group's in any text it matches: the
    pieces each such needle can start."""
    starts: dict[str, list[_Test]] = {}
    for test in tests:
        for needle in test[1][0] if test[1] else ():
            starts.setdefault(needle, []).append(test)
    return starts


_STARTS = _by_needle(_TESTS)
_BARE = tuple((name, pattern) for name, needles, pattern in _TESTS if not needles)


def pieces(text: str) -> frozenset[str]:
    """The names of the GATE's pieces `text` holds: empty exactly when GATE finds nothing.
    Each needle is looked for once, in C; a piece's pattern runs only where its needles
    are (most outputs hold none), at most once."""
    held = {name for name, pattern in _BARE if pattern is not None and pattern.search(text)}
    tried = set(held)
    for needle, tests in _STARTS.items():
        if needle in text:
            for name, needles, pattern in tests:
                if name in tried:
                    continue
                tried.add(name)
                if all(any(n in text for n in group) for group in needles[1:]) and \
                        (pattern is None or pattern.search(text) is not None):
                    held.add(name)
    return frozenset(held)


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
