"""checks.parse_run runs only the parsers whose GATE pieces an output holds
(run_output.pieces): the same verdict, always, as every parser run on every output that
GATE lets through (the parse before the pieces, kept here as the reference).

Checked on every string of tests/data's transcripts and question files (tool outputs,
messages, file contents), and on generated outputs mixing summary lines, noise, colour
codes, relay and package prefixes and changes of case.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from test_recovery import _SUMMARY_LINES as SUMMARY_LINES

from agent_journal.core.recovery import checks, run_output
from agent_journal.core.recovery.checks import parse_run

DATA = Path(__file__).parent / "data"


def _reference(text: str | None) -> checks.RunSummary | None:
    """parse_run as it was before the pieces: GATE's one search, then every parser."""
    if not text or not isinstance(text, str):
        return None
    text = run_output.plain(text)
    if run_output.GATE.search(text) is None:
        return None
    lines = run_output.output_lines(text)
    packages = run_output.by_package(lines)
    if packages is not None:
        found = [(name, run) for name, part in packages.items()
                 if (run := checks._parse_lines(part)) is not None]
        if found:
            return checks._combined([(name, checks._brief(run)) for name, run in found])
    return checks._parse_lines(lines)


_PIECE_PATTERNS = [(name, re.compile(source)) for name, source, _ in run_output._PIECES]


def _pieces_by_pattern(text: str) -> frozenset[str]:
    return frozenset(name for name, pattern in _PIECE_PATTERNS if pattern.search(text))


def _strings(value: object, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for v in value.values():
            _strings(v, out)
    elif isinstance(value, list):
        for v in value:
            _strings(v, out)


@cache
def _corpus() -> tuple[str, ...]:
    """Every distinct string of tests/data's JSON and JSONL files."""
    out: list[str] = []
    for path in sorted(DATA.rglob("*")):
        if path.suffix == ".jsonl":
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                try:
                    _strings(json.loads(line), out)
                except ValueError:
                    continue
        elif path.suffix == ".json":
            try:
                _strings(json.loads(path.read_text(encoding="utf-8")), out)
            except ValueError:
                continue
    return tuple(dict.fromkeys(x for x in out if len(x) >= 2))


def _check(text: str) -> None:
    """parse_run's verdict is the reference's; each piece `pieces` names is one its
    pattern finds and the reverse; no parser finds a summary without one of its pieces."""
    plain = run_output.plain(text)
    held = run_output.pieces(plain)
    assert held == _pieces_by_pattern(plain), text[:300]
    assert bool(held) == (run_output.GATE.search(plain) is not None)
    assert parse_run(text) == _reference(text), text[:300]
    lines = run_output.output_lines(plain)
    parts = [lines, *(run_output.by_package(lines) or {}).values()]
    for parse, needs in checks._PARSERS:
        if any(parse(part) is not None for part in parts):
            assert held & needs, (parse.__name__, text[:300])


def test_the_corpus_is_there_and_holds_summaries():
    corpus = _corpus()
    assert len(corpus) > 10_000
    assert sum(parse_run(x) is not None for x in corpus) > 100


def test_pieces_and_parse_run_agree_with_the_reference_on_every_real_string():
    for text in _corpus():
        plain = run_output.plain(text)
        held = run_output.pieces(plain)
        assert held == _pieces_by_pattern(plain), text[:300]
        if held:  # the reference runs every parser; GATE's misses are told above
            assert parse_run(text) == _reference(text), text[:300]
        else:
            assert parse_run(text) is None and _reference(text) is None


def test_no_parser_finds_a_summary_in_a_real_output_without_its_pieces():
    """Every parser, run ungated on each real string that holds a line a summary may
    begin (bounded: every parser walks every line)."""
    for text in _corpus():
        if len(text) <= 200_000 and re.search(r"\d|Tests|example|information|\u2716",
                                              text):
            _check(text)


# The gate test's summary lines, and more runners' summaries the pieces must let through.
_SUMMARY_LINES = SUMMARY_LINES + [
    'Found 1 error.', 'Ran 12 tests across 3 files.', ' 12 pass', ' 0 fail',
    '(fail) adds [1.2ms]', 'error: expect(received).toBe(expected)',
    'Checked 277 files in 102ms. No fixes applied.', 'Found 4 errors.',
    'a.ts:1:1 lint/suspicious/noX ━━━', '3 issues:', '* errcheck: 2', '0 issues.',
    'a.go:1:2: x (govet)', 'Passed: 254, Failed: 0', 'passed=3 failed=1',
    '254 passed, 0 failed', '3 PASSED, 1 FAILED', 'PASSES: 4; FAILS: 0', 'pass = 3 fail = 0',
]
_NOISE = ["", "building...", "ok", "done in 3s", "Error: x", "warning: y", "make: *** [all]",
          "passed", "in 0.3s", "12 files", "PASS src/a.test.ts", "3 passed", "1 failed, 2 passed",
          "2 errors", "3 passed, in 0.2s", "token look book", "see the example", "Tests pass",
          "INFO starting", "Found it", "Checked it", "FAILURE", " issue #3", "Ran out"]
_PREFIXES = ["", "\x1b[32m", "[job] | ", "\x1b[1m[ci]   | ", "@a/web test: ", "api:test: "]


def _cased(line: str, how: int) -> str:
    return (line, line.upper(), line.lower(), line.swapcase())[how]


@given(st.lists(st.tuples(st.sampled_from(_SUMMARY_LINES + _NOISE),
                          st.sampled_from(_PREFIXES), st.integers(0, 3)), max_size=14),
       st.sampled_from(["\n", "\r\n", "\r", "\x0c", "  "]))
@settings(max_examples=1500, deadline=None)
def test_generated_outputs_agree_with_the_reference(lines, joiner):
    text = joiner.join(prefix + (_cased(line, how) if how and len(line) % 3 == 0 else line)
                       + ("\x1b[0m" if "\x1b" in prefix else "")
                       for line, prefix, how in lines)
    _check(text)


@given(st.lists(st.sampled_from(_SUMMARY_LINES + _NOISE), min_size=1, max_size=6),
       st.data())
@settings(max_examples=600, deadline=None)
def test_summary_lines_cut_and_joined_anywhere_agree_with_the_reference(lines, data):
    """Lines cut at any point and run together: a needle split or made across a cut."""
    text = "".join(lines)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=4)))
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    _check(data.draw(st.sampled_from(["", "\n", " ", "\x1b[0m"])).join(pieces))


def test_each_piece_told_by_its_needle_alone_is_a_plain_string():
    for name, source, needles in run_output._PIECES:
        if needles is None:
            assert not set(source) & set(".^$*+?{}[]\\|()"), name
            assert re.fullmatch(source, source), name
