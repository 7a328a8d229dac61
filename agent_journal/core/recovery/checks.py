"""Summary lines of test runners and checkers, parsed from a command's output.

Invariant: `parse_run` only reports what a runner's own summary line says (counts, the
ids it lists as failing, the first failure line it prints); text that matches no known
summary gives None, never a guess. Recognised: pytest, unittest, go test (with its
benchmark lines), cargo test, jest, vitest, mocha, rspec, minitest (`rails test`),
Playwright, bun test (and npm/yarn/pnpm test, which print one of these), mypy, pyright,
pyrefly, ruff (check, --fix and format), biome, tsc, eslint, golangci-lint; and, only when none of
these is there, a bare tally line a script prints ("Passed: 254, Failed: 0", runner
"tests"). A parser runs only on text holding one of its GATE pieces (`_PARSERS`), without
which it finds nothing, so its verdict is the one it gives run on every output.
"""

from __future__ import annotations

import re

from agent_journal.core.recovery.run_output import by_package, output_lines, pieces, plain
from agent_journal.core.recovery.run_summary import RunSummary

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    Parser = Callable[[list[str]], "RunSummary | None"]

# Lines are capped before matching: a minified bundle on one line must not cost the
# regex engine seconds.
_MAX_IDS = 20



_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected|"
                    r"warnings?|rerun)")
_PYTEST = re.compile(r"^=*\s*((?:\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|"
                     r"deselected|warnings?|rerun)(?:, )?)+) in [\d.]+m?s\b.*?=*$|"
                     r"^=*\s*no tests ran in [\d.]+s\s*=*$")
_PYTEST_FAILED = re.compile(r"^(FAILED|ERROR) (\S+)(?: - (.*))?$")
_PYTEST_E = re.compile(r"^E\s{2,}(\S.*)$")
_UNITTEST_RAN = re.compile(r"^Ran (\d+) tests? in [\d.]+s$")
_UNITTEST_VERDICT = re.compile(r"^(OK|FAILED)(?: \((.*)\))?$")
_UNITTEST_FAIL = re.compile(r"^(FAIL|ERROR): (\S+ \([^)]*\))")
_GO_FAIL = re.compile(r"^\s*--- FAIL: (\S+)")
_GO_PKG = re.compile(r"^(ok|FAIL)\s+(\S+)\s+(?:[\d.]+s|\(cached\))")
_GO_RUN = re.compile(r"^=== RUN\s+(\S+)")
# A benchmark's result line: its name, iterations, time per op and what else it measured.
_GO_BENCH = re.compile(r"^(Benchmark\S+)\s+\d+\s+([\d.]+ ns/op(?:\s+[\d.]+ \S+/op)*)")
_CARGO = re.compile(r"^test result: (ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored")
_CARGO_FAIL = re.compile(r"^test (\S+) \.\.\. FAILED$")
_JEST = re.compile(r"^Tests:\s+(.*\d+ total)$")
_JEST_FAIL = re.compile(r"^\s*● (.+›.+)$")
_VITEST = re.compile(r"^\s*Tests\s+((?:\d+ \w+(?: \| )?)+)\s*\((\d+)\)")
_VITEST_FAIL = re.compile(r"^\s*(?:FAIL\s+(\S+\.(?:[jt]sx?|mjs|cjs)\s*>.+?)|×\s+(.+?))"
                          r"(?:\s+\d+m?s)?$")
_MOCHA_PASS = re.compile(r"^\s+(\d+) passing \(")
_MOCHA_FAIL = re.compile(r"^\s+(\d+) failing$")
_MOCHA_ID = re.compile(r"^\s+\d+\) (.+):$")
_RSPEC = re.compile(r"^(\d+) examples?, (\d+) failures?(?:, (\d+) pending)?")
_RSPEC_FAIL = re.compile(r"^rspec (\S+) # (.+)$")
_MINITEST = re.compile(r"^(\d+) runs, (\d+) assertions, (\d+) failures, (\d+) errors, "
                       r"(\d+) skips")
# minitest names a failure on the line after its `Failure:` / `Error:` header.
_MINITEST_ID = re.compile(r"^(\w[\w:]*#\w+)(?: \[[^\]]*\])?:$")
# Playwright's closing counts, one a line; the last one carries the run's duration.
_PLAYWRIGHT = re.compile(r"^\s*(\d+) (passed|failed|flaky|skipped|did not run|interrupted)"
                         r"(?: \(([\d.]+(?:ms|s|m|h))\))?$")
_PLAYWRIGHT_ID = re.compile(r"^\s+(\[[^\]]+\] › \S+:\d+:\d+ › .+?)\s*$")
_MYPY_BAD = re.compile(r"^Found (\d+) errors? in (\d+) files? \(checked \d+ source files?\)")
_MYPY_OK = re.compile(r"^Success: no issues found in \d+ source files?")
_MYPY_ERR = re.compile(r"^\S+:\d+(?::\d+)?: error: .+")
_PYRIGHT = re.compile(r"^(\d+) errors?, (\d+) warnings?, (\d+) informations?")
_PYRIGHT_ERR = re.compile(r"^\s*\S+:\d+:\d+ - error: (.+)")
# `ruff check --fix` ends its count with what is left: "Found 6 errors (3 fixed, 3 remaining)."
_RUFF_BAD = re.compile(r"^Found (\d+) errors?\.?(?: \((?:(\d+) fixed, )?(\d+) remaining\)\.?|"
                       r" \(.*\))?$")
_RUFF_OK = re.compile(r"^All checks passed!")
_RUFF_ERR = re.compile(r"^\S+:\d+:\d+: ([A-Z]+\d+) (.+)")
_RUFF_FORMAT = re.compile(r"^(?:(\d+) files? would be reformatted|(\d+) files? reformatted|"
                          r"(\d+) files? (?:left unchanged|already formatted))")
_TSC_BAD = re.compile(r"^Found (\d+) errors?(?: in (\d+) files?)?\.$")
_TSC_ERR = re.compile(r"^\S+(?:\(\d+,\d+\)|:\d+:\d+) ?[:-] error (TS\d+: .+)")
# pyrefly's last line: " INFO 58 errors (1 suppressed)"; each error starts "ERROR msg [kind]".
_PYREFLY = re.compile(r"^\s*INFO (\d+) errors?(?: \((\d+) (?:suppressed|shown)[^)]*\))?$")
_PYREFLY_ERR = re.compile(r"^ERROR (.+)$")
_ESLINT = re.compile(r"^✖ (\d+) problems? \((\d+) errors?, (\d+) warnings?\)")
# bun test closes with one count a line (" 12 pass", " 0 fail") and "Ran 12 tests across
# 3 files."; a failing test is listed as "(fail) name".
_BUN_RAN = re.compile(r"^Ran (\d+) tests? across (\d+) files?\.")
_BUN_COUNT = re.compile(r"^\s*(\d+) (pass|fail|skip|todo)$")
_BUN_FAIL = re.compile(r"^\(fail\) (.+?)(?: \[[\d.]+m?s\])?$")
# A bare tally a script prints of a runner's results (`go test -json | python3 -c ...`):
# "Passed: 254, Failed: 0", "passed=254 failed=0", or the plain "254 passed, 0 failed".
_TALLY = re.compile(r"^\W*pass(?:ed|es)?\s*[:=]\s*(\d+)[,;]?\s+fail(?:ed|ures?|s)?\s*[:=]\s*"
                    r"(\d+)\b|^(\d+) passed, (\d+) failed(?:, \d+ skipped)?\.?$", re.I)
# Biome: "Checked 277 files in 102ms. No fixes applied." and, when it found any,
# "Found 4 errors." (warnings too); a rule's diagnostic names it ("lint/suspicious/...").
_BIOME = re.compile(r"^Checked (\d+) files? in [\d.]+(?:ms|s|µs)\.")
_BIOME_FOUND = re.compile(r"^Found (\d+) (errors?|warnings?)\.$")
_BIOME_RULE = re.compile(r"\s((?:lint|assist|format)/[\w/]+)\s")
# golangci-lint: "3 issues:" then "* errcheck: 2" per linter; "0 issues." when clean.
_GOLANGCI = re.compile(r"^(\d+) issues?[.:]$")
_GOLANGCI_LINTER = re.compile(r"^\* ([\w-]+): \d+$|^\S+\.go:\d+:\d+: .+ \(([\w-]+)\)$")


def parse_run(text: str | None) -> RunSummary | None:
    """The test or check summary in `text`, or None when it holds none.

    When one output holds several runners' summaries (a CI job run locally, a `make`
    target), they are combined: runner names joined by ` + `, each summary kept, counts
    added, and the run passes only when every runner passed.
    """
    if not text or not isinstance(text, str):
        return None
    text = plain(text)
    held = pieces(text)
    if not held:
        return None  # GATE finds nothing: no summary (most outputs stop here)
    parsers = [parse for parse, needs in _PARSERS if not held.isdisjoint(needs)]
    tally = _ANY_PASS.search(text) is not None
    lines = output_lines(text)
    packages = by_package(lines)
    if packages is not None:
        # A monorepo's runner (`bun run --filter`, turbo, pnpm -r) prefixes each package's
        # lines with its name: each package's summary is its own.
        found = [(name, run) for name, part in packages.items()
                 if (run := _parse_lines(part, parsers, tally)) is not None]
        if found:
            # Each package's counts, its detail in parentheses left out: one line for all.
            return _combined([(name, _brief(run)) for name, run in found])
    return _parse_lines(lines, parsers, tally)


def _brief(run: RunSummary) -> RunSummary:
    """`run` with its summary's closing detail in parentheses left out."""
    brief = RunSummary(*run.fields())
    brief.summary = re.sub(r" \([^()]*\)$", "", run.summary)
    return brief


def _parse_lines(lines: list[str], parsers: Iterable[Parser] | None = None,
                 tally: bool = True) -> RunSummary | None:
    """The summary in `lines`, by `parsers` (those GATE's pieces in the text let run, in
    _PARSERS's order; by default every one) and, when none finds one and `tally`, a
    script's tally."""
    found: list[RunSummary] = []
    for parse in _ALL if parsers is None else parsers:
        run = parse(lines)
        if run is not None:
            found.append(run)
    if not found:
        # Only when no runner's own summary is there: a script's tally of its results.
        return _tally(lines) if tally else None
    if len(found) == 1:
        return found[0]
    return _combined([(run.runner, run) for run in found])


def _combined(found: list[tuple[str, RunSummary]]) -> RunSummary:
    """One output, several runners (`make check`, a CI job run locally) or packages: each
    one's verdict is kept under its name, and the run passes only when every one passed."""
    runs = [run for _, run in found]
    failing = [run for run in runs if not run.ok]
    first = next((r.first_failure for r in failing if r.first_failure), None)
    return RunSummary(
        " + ".join(dict.fromkeys(run.runner for run in runs)), not failing,
        "; ".join(f"{name}: {run.summary}" for name, run in found),
        passed=_total(r.passed for r in runs), failed=_total(r.failed for r in runs),
        errors=_total(r.errors for r in runs), skipped=_total(r.skipped for r in runs),
        failing=[x for r in failing for x in r.failing][:_MAX_IDS], first_failure=first)


def _total(values: Iterable[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _counts(text: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for number, word in _COUNT.findall(text):
        word = {"error": "errors", "warning": "warnings"}.get(word, word)
        counts[word] = counts.get(word, 0) + int(number)
    return counts


def _pytest(lines: list[str]) -> RunSummary | None:
    summary = None
    for line in lines:
        if _PYTEST.match(line.strip()):
            summary = line.strip()
    if summary is None:
        return None
    counts = _counts(summary)
    failing: list[str] = []
    first = None
    for line in lines:
        m = _PYTEST_FAILED.match(line)
        if m:
            if len(failing) < _MAX_IDS:
                failing.append(m.group(2))
            if first is None and m.group(3):
                first = m.group(3)
        elif first is None and (e := _PYTEST_E.match(line)):
            first = e.group(1)
    bad = counts.get("failed", 0) + counts.get("errors", 0)
    return RunSummary("pytest", bad == 0 and "no tests ran" not in summary, summary.strip("= "),
                      passed=counts.get("passed"), failed=counts.get("failed"),
                      errors=counts.get("errors"), skipped=counts.get("skipped"),
                      failing=failing, first_failure=first)


def _unittest(lines: list[str]) -> RunSummary | None:
    ran = None
    verdict = None
    for line in lines:
        m = _UNITTEST_RAN.match(line)
        if m:
            ran = int(m.group(1))
        elif ran is not None and (v := _UNITTEST_VERDICT.match(line)):
            verdict = v
    if ran is None or verdict is None:
        return None
    detail = dict(part.split("=", 1) for part in (verdict.group(2) or "").split(", ")
                  if "=" in part)
    failed = int(detail.get("failures", 0))
    errors = int(detail.get("errors", 0))
    failing = [m.group(2) for line in lines if (m := _UNITTEST_FAIL.match(line))][:_MAX_IDS]
    first = _first_after_traceback(lines)
    return RunSummary("unittest", verdict.group(1) == "OK",
                      f"Ran {ran} tests: {verdict.group(0)}",
                      passed=ran - failed - errors, failed=failed, errors=errors,
                      skipped=int(detail["skipped"]) if "skipped" in detail else None,
                      failing=failing, first_failure=first if failing else None)


def _first_after_traceback(lines: list[str]) -> str | None:
    for i, line in enumerate(lines):
        if line.startswith("Traceback (most recent call last)"):
            for after in lines[i + 1:]:
                if after and not after.startswith(" "):
                    return after
    return None


def _go(lines: list[str]) -> RunSummary | None:
    packages = [m for line in lines if (m := _GO_PKG.match(line))]
    failing = [m.group(1) for line in lines if (m := _GO_FAIL.match(line))][:_MAX_IDS]
    if not packages and not failing:
        return None
    bad = [m for m in packages if m.group(1) == "FAIL"]
    ok = not bad and not failing
    summary = (f"go test: {len(packages) - len(bad)} package(s) ok, {len(bad)} failed"
               if packages else f"go test: {len(failing)} failed")
    # A benchmark's figures are what a run of it is for: they join the summary.
    benches = [f"{m.group(1)} {' '.join(m.group(2).split())}" for line in lines
               if (m := _GO_BENCH.match(line))][:3]
    if benches:
        summary += "; " + "; ".join(benches)
    return RunSummary("go test", ok, summary, passed=len(packages) - len(bad) if packages
                      else None, failed=len(failing) or len(bad), failing=failing,
                      first_failure=_go_first_failure(lines) if failing else None)


def _go_first_failure(lines: list[str]) -> str | None:
    """The first message the first failing test logged: the indented lines after its
    `--- FAIL:` line, or, with -v (which prints them before it), those after its
    `=== RUN` line."""
    for i, line in enumerate(lines):
        m = _GO_FAIL.match(line)
        if not m:
            continue
        for k, after in enumerate(lines[i + 1:i + 4], i + 1):
            if after.strip() and after[:1].isspace() and not _GO_FAIL.match(after):
                return _go_message(after.strip(), lines[k + 1:k + 8])
            if after.strip():
                break
        for j in range(i - 1, max(-1, i - 200), -1):
            run = _GO_RUN.match(lines[j])
            if run:
                if run.group(1) == m.group(1):
                    logged = [x.strip() for x in lines[j + 1:i] if x.strip() and x[:1].isspace()]
                    return logged[0] if logged else None
                break
        return None
    return None


_GO_WHERE = re.compile(r"^\S+\.go:\d+:$")
_TESTIFY_ERROR = re.compile(r"^\s*Error:\s+(\S.*)$")


def _go_message(first: str, after: list[str]) -> str:
    """A failing test's first logged line; a bare `file.go:N:` (testify's) with the
    `Error:` line printed under it."""
    if _GO_WHERE.match(first):
        error = next((m.group(1) for x in after if (m := _TESTIFY_ERROR.match(x))), None)
        if error:
            return f"{first} {error.strip()}"
    return first


def _cargo(lines: list[str]) -> RunSummary | None:
    results = [m for line in lines if (m := _CARGO.match(line))]
    if not results:
        return None
    passed = sum(int(m.group(2)) for m in results)
    failed = sum(int(m.group(3)) for m in results)
    ignored = sum(int(m.group(4)) for m in results)
    failing = [m.group(1) for line in lines if (m := _CARGO_FAIL.match(line))][:_MAX_IDS]
    first = next((line.strip() for line in lines if "panicked at" in line), None)
    return RunSummary("cargo test", failed == 0, results[-1].group(0), passed=passed,
                      failed=failed, skipped=ignored, failing=failing, first_failure=first)


_VALUE = re.compile(r"^\s*(Expected|Received)(?: value)?: (.+)$")


def _with_values(lines: list[str], start: int, first: str) -> str:
    """An `expect(...)` failure line with the Expected and Received values printed under
    it (bun, jest): what the assertion wanted and what it got, which the matcher's name
    alone does not say."""
    if "expect(" not in first:
        return first
    values = [f"{m.group(1)}: {m.group(2).strip()[:150]}" for line in lines[start:start + 8]
              if (m := _VALUE.match(line))][:2]
    return first + (" (" + "; ".join(values) + ")" if values else "")


def _jest(lines: list[str]) -> RunSummary | None:
    summary = next((m for line in reversed(lines) if (m := _JEST.match(line.strip()))), None)
    if summary is None:
        return None
    counts = _counts(summary.group(1))
    failing = [m.group(1).strip() for line in lines if (m := _JEST_FAIL.match(line))]
    first = None
    for i, line in enumerate(lines):
        if _JEST_FAIL.match(line):
            nxt = [x.strip() for x in lines[i + 1:i + 6] if x.strip()]
            first = _with_values(lines, i + 1, nxt[0]) if nxt else None
            break
    return RunSummary("jest", counts.get("failed", 0) == 0, summary.group(0),
                      passed=counts.get("passed"), failed=counts.get("failed"),
                      skipped=counts.get("skipped"), failing=failing[:_MAX_IDS],
                      first_failure=first)


def _vitest(lines: list[str]) -> RunSummary | None:
    summary = next((m for line in reversed(lines) if (m := _VITEST.match(line))), None)
    if summary is None:
        return None
    counts = _counts(summary.group(1))
    failing = list(dict.fromkeys((m.group(1) or m.group(2)).strip() for line in lines
                                 if (m := _VITEST_FAIL.match(line))))
    # Vitest prints the error a test threw under its FAIL heading: `Error:`,
    # `AssertionError:`, or the error's own class (`TypeError:`, `RangeError:`).
    first = next((line.strip() for line in lines if re.match(r"^\s*[A-Z]?\w*Error:", line)),
                 None)
    return RunSummary("vitest", counts.get("failed", 0) == 0, summary.group(0).strip(),
                      passed=counts.get("passed"), failed=counts.get("failed"),
                      skipped=counts.get("skipped"), failing=failing[:_MAX_IDS],
                      first_failure=first)


def _mocha(lines: list[str]) -> RunSummary | None:
    passing = next((int(m.group(1)) for line in lines if (m := _MOCHA_PASS.match(line))), None)
    failing_n = next((int(m.group(1)) for line in lines if (m := _MOCHA_FAIL.match(line))), 0)
    if passing is None:
        return None
    ids = [m.group(1) for line in lines if (m := _MOCHA_ID.match(line))][:_MAX_IDS]
    first = next((line.strip() for line in lines if re.match(r"^\s+(AssertionError|Error)\b",
                                                             line)), None)
    summary = f"{passing} passing" + (f", {failing_n} failing" if failing_n else "")
    return RunSummary("mocha", failing_n == 0, summary, passed=passing, failed=failing_n,
                      failing=ids, first_failure=first)


def _rspec(lines: list[str]) -> RunSummary | None:
    summary = next((m for line in reversed(lines) if (m := _RSPEC.match(line.strip()))), None)
    if summary is None:
        return None
    examples, failures = int(summary.group(1)), int(summary.group(2))
    failing = [m.group(1) for line in lines if (m := _RSPEC_FAIL.match(line))][:_MAX_IDS]
    first = next((line.strip() for line in lines if line.strip().startswith("Failure/Error:")),
                 None)
    return RunSummary("rspec", failures == 0, summary.group(0), passed=examples - failures,
                      failed=failures, skipped=int(summary.group(3)) if summary.group(3)
                      else None, failing=failing, first_failure=first)


def _minitest(lines: list[str]) -> RunSummary | None:
    summary = next((m for line in reversed(lines) if (m := _MINITEST.match(line.strip()))), None)
    if summary is None:
        return None
    runs, failures, errors, skips = (int(summary.group(n)) for n in (1, 3, 4, 5))
    failing: list[str] = []
    first = None
    for i, line in enumerate(lines[:-1]):
        if line.strip() in ("Failure:", "Error:"):
            m = _MINITEST_ID.match(lines[i + 1].strip())
            if m and len(failing) < _MAX_IDS:
                failing.append(m.group(1))
            if first is None:
                after = [x.strip() for x in lines[i + 2:i + 6] if x.strip()]
                first = after[0] if after else None
    return RunSummary("minitest", failures + errors == 0, summary.group(0),
                      passed=runs - failures - errors - skips, failed=failures, errors=errors,
                      skipped=skips, failing=failing, first_failure=first)


def _playwright(lines: list[str]) -> RunSummary | None:
    counts: dict[str, int] = {}
    start = None
    end = -1
    timed = False
    for i, line in enumerate(lines):
        m = _PLAYWRIGHT.match(line)
        if m:
            if start is None or i > end + 8:
                counts, start, timed = {}, i, False  # a new block of counts
            counts[m.group(2)] = int(m.group(1))
            timed = timed or m.group(3) is not None
            end = i
    if start is None or not timed:
        return None
    # The failing tests are listed, indented, under the `N failed` (and `N flaky`) counts.
    failing = list(dict.fromkeys(m.group(1) for line in lines[start:]
                                 if (m := _PLAYWRIGHT_ID.match(line))))[:_MAX_IDS]
    first = next((line.strip() for line in lines if re.match(r"^\s*Error: ", line)), None)
    summary = ", ".join(f"{n} {word}" for word, n in counts.items())
    bad = counts.get("failed", 0) + counts.get("interrupted", 0)
    return RunSummary("playwright", bad == 0, summary, passed=counts.get("passed"),
                      failed=counts.get("failed", 0), skipped=counts.get("skipped"),
                      failing=failing, first_failure=first if bad else None)


def _mypy(lines: list[str]) -> RunSummary | None:
    for line in reversed(lines):
        if _MYPY_OK.match(line):
            return RunSummary("mypy", True, line, errors=0)
        m = _MYPY_BAD.match(line)
        if m:
            first = next((x for x in lines if _MYPY_ERR.match(x)), None)
            return RunSummary("mypy", False, line, errors=int(m.group(1)), first_failure=first)
    return None


def _pyright(lines: list[str]) -> RunSummary | None:
    for line in reversed(lines):
        m = _PYRIGHT.match(line.strip())
        if m:
            errors = int(m.group(1))
            first = next((e.group(1) for x in lines if (e := _PYRIGHT_ERR.match(x))), None)
            return RunSummary("pyright", errors == 0, line.strip(), errors=errors,
                              first_failure=first)
    return None


def _ruff(lines: list[str]) -> RunSummary | None:
    for line in reversed(lines):
        if _RUFF_OK.match(line):
            return RunSummary("ruff", True, line, errors=0)
        m = _RUFF_BAD.match(line)
        if m and any(_RUFF_ERR.match(x) for x in lines):
            first = next((x for x in lines if _RUFF_ERR.match(x)), None)
            codes = sorted({e.group(1) for x in lines if (e := _RUFF_ERR.match(x))})
            left = int(m.group(3) if m.group(3) is not None else m.group(1))
            return RunSummary("ruff", left == 0, line, errors=left, failing=codes,
                              first_failure=first)
        f = _RUFF_FORMAT.match(line)
        if f:
            pending = next((int(g.group(1)) for x in lines if (g := _RUFF_FORMAT.match(x))
                            and g.group(1)), 0)
            summary = ", ".join(x for x in lines if _RUFF_FORMAT.match(x))
            return RunSummary("ruff format", pending == 0, summary, errors=pending)
    return None


def _pyrefly(lines: list[str]) -> RunSummary | None:
    for line in reversed(lines):
        m = _PYREFLY.match(line)
        if m:
            errors = int(m.group(1))
            first = next((e.group(1) for x in lines if (e := _PYREFLY_ERR.match(x))), None)
            return RunSummary("pyrefly", errors == 0, line.strip(), errors=errors,
                              first_failure=first)
    return None


def _tsc(lines: list[str]) -> RunSummary | None:
    errs = [m for x in lines if (m := _TSC_ERR.match(x))]
    if not errs:
        return None
    summary = next((x for x in reversed(lines) if _TSC_BAD.match(x)),
                   f"{len(errs)} TypeScript error(s)")
    return RunSummary("tsc", False, summary, errors=len(errs), first_failure=errs[0].group(0))


def _bun(lines: list[str]) -> RunSummary | None:
    ran = next((m for line in reversed(lines) if (m := _BUN_RAN.match(line.strip()))), None)
    if ran is None:
        return None
    counts: dict[str, int] = {}
    for line in lines:
        m = _BUN_COUNT.match(line)
        if m:
            counts[m.group(2)] = int(m.group(1))
    failing = list(dict.fromkeys(m.group(1) for line in lines
                                 if (m := _BUN_FAIL.match(line.strip()))))[:_MAX_IDS]
    failed = counts.get("fail", len(failing))
    at = next((i for i, line in enumerate(lines) if re.match(r"^\s*(?:error|\w*Error):", line)),
              None)
    first = None if at is None else _with_values(lines, at + 1, lines[at].strip())
    summary = ", ".join(f"{n} {word}" for word, n in counts.items()) or ran.group(0)
    return RunSummary("bun test", failed == 0, f"{summary} ({ran.group(0).rstrip('.')})",
                      passed=counts.get("pass"), failed=failed, skipped=counts.get("skip"),
                      failing=failing, first_failure=first if failed else None)


def _biome(lines: list[str]) -> RunSummary | None:
    checked = next((line.strip() for line in lines if _BIOME.match(line.strip())), None)
    if checked is None:
        return None
    errors = 0
    for line in lines:
        m = _BIOME_FOUND.match(line.strip())
        if m and m.group(2).startswith("error"):
            errors += int(m.group(1))
    rules = list(dict.fromkeys(m.group(1) for line in lines
                               if (m := _BIOME_RULE.search(line))))[:_MAX_IDS]
    summary = checked + (f" Found {errors} error(s)." if errors else "")
    return RunSummary("biome", errors == 0, summary, errors=errors, failing=rules)


def _tally(lines: list[str]) -> RunSummary | None:
    for line in reversed(lines):
        m = _TALLY.match(line.strip())
        if m:
            passed = int(m.group(1) or m.group(3))
            failed = int(m.group(2) or m.group(4))
            return RunSummary("tests", failed == 0, line.strip(), passed=passed, failed=failed)
    return None


def _golangci(lines: list[str]) -> RunSummary | None:
    for line in reversed(lines):
        m = _GOLANGCI.match(line.strip())
        if m:
            issues = int(m.group(1))
            linters = list(dict.fromkeys(g.group(1) or g.group(2) for x in lines
                                         if (g := _GOLANGCI_LINTER.match(x.strip()))))
            first = next((x.strip() for x in lines if re.match(r"^\S+\.go:\d+:\d+: ", x)),
                         None)
            return RunSummary("golangci-lint", issues == 0, line.strip(), errors=issues,
                              failing=linters[:_MAX_IDS], first_failure=first)
    return None


def _eslint(lines: list[str]) -> RunSummary | None:
    for line in reversed(lines):
        m = _ESLINT.match(line.strip())
        if m:
            first = next((x.strip() for x in lines if re.match(r"^\s+\d+:\d+\s+error\s", x)),
                         None)
            return RunSummary("eslint", int(m.group(2)) == 0, line.strip(),
                              errors=int(m.group(2)), first_failure=first)
    return None


# Each parser, in the order their summaries are combined, with the GATE pieces
# (run_output._PIECES) one of which is in every text it finds a summary in: the piece
# its summary (or, for go test and tsc, failure) line cannot match without.
_PARSERS: tuple[tuple[Parser, frozenset[str]], ...] = tuple(
    (parse, frozenset(needs)) for parse, needs in (
        (_pytest, ("pytest", "no tests ran")), (_unittest, ("ran tests",)),
        (_go, ("go fail", "go package")), (_cargo, ("cargo",)), (_jest, ("Tests",)),
        (_vitest, ("Tests",)), (_mocha, ("mocha",)), (_rspec, ("rspec",)),
        (_minitest, ("minitest",)), (_playwright, ("playwright",)), (_bun, ("ran tests",)),
        (_mypy, ("mypy ok", "found errors")), (_pyright, ("pyright",)),
        (_pyrefly, ("pyrefly",)),
        (_ruff, ("ruff ok", "found errors", "reformatted", "left unchanged",
                 "already formatted")),
        (_biome, ("biome",)), (_tsc, ("tsc",)), (_eslint, ("eslint",)),
        (_golangci, ("issues",))))
_ALL = tuple(parse for parse, _ in _PARSERS)
# A script's tally (`_TALLY`, case-insensitive) cannot be without "pass".
_ANY_PASS = re.compile("pass", re.IGNORECASE)
