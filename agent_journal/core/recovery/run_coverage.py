"""Whether one test command's selection provably contains another's.

Invariant: `covers(broad, narrow)` is True only when both are plain invocations (no
quotes, chains, pipes or substitutions) of the same runner with the same environment
prefix and build options, the broad one selects by paths alone (no `-k`, `-m`, `--lf`,
`-run`, filter names or test-name patterns), and every test the narrow one selects lies
inside what the broad one selects: no path arguments is the whole suite, a directory
holds the files under it, a file its node ids, `./pkg/...` the packages under `pkg`. An
option either rule does not know makes the answer False: an unknown case is never a
proof. Rules exist for pytest, go test, cargo test and jest/vitest (directly or through
a package manager's `test` script); any other command covers only itself (test_runs).
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Anything that makes the command more than one plain invocation.
_NOT_PLAIN = re.compile(r"[;&|<>$`'\"()\\*?]")
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_LAUNCHER = ("uv", "poetry", "pdm", "hatch", "pipenv", "rye")
_PYTHON = re.compile(r"^(?:\S*/)?python[\d.]*$")

# pytest: options that only change how it reports or when it stops (a run that passed
# ran everything it selected), with the ones that take the next word as their value.
_PYTEST_SAFE = re.compile(r"^(?:-[qvsxl]+|-r\w+|-n\w+|--tb=\S+|--maxfail=\d+|--durations=\d+|"
                          r"--color=\w+|--no-header|--disable-warnings|--showlocals|--ff|"
                          r"--failed-first|--strict-markers|--no-cov|--cov(?:-report)?=\S+|"
                          r"--timeout=\d+)$")
_PYTEST_SAFE_VALUE = {"-n", "--tb", "--maxfail", "--durations", "--timeout", "--color"}
_PYTEST_NARROW = re.compile(r"^(?:-[km]\S+|--lf|--last-failed|--sw|--stepwise|--deselect=\S+)$")
_PYTEST_NARROW_VALUE = {"-k", "-m", "--deselect"}

_GO_SAFE = re.compile(r"^(?:-v|-race|-cover|-failfast|-json|-count=\d+|-timeout=\S+|-p=\d+)$")
_GO_SAFE_VALUE = {"-count", "-timeout", "-p"}
_GO_NARROW = re.compile(r"^(?:-short|-run=\S+)$")
_GO_NARROW_VALUE = {"-run"}

_CARGO_SAFE = {"-q", "--quiet", "-v", "--verbose", "--no-fail-fast"}
# cargo options that pick what is built: two runs compare only when they agree on them.
_CARGO_CONFIG = {"--release", "--all-features", "--workspace", "--all", "--lib", "--bins",
                 "--tests", "--doc"}
_CARGO_CONFIG_VALUE = {"-p", "--package", "--features", "--test", "--bin"}
_CARGO_HARNESS_SAFE = {"--nocapture", "--show-output", "-q", "--quiet"}
_CARGO_HARNESS_NARROW = {"--exact"}

_JS_SAFE = {"--ci", "--silent", "--verbose", "--runInBand", "-i", "--coverage",
            "--watchAll=false", "--no-cache", "--colors", "--no-watch"}
_JS_NARROW_VALUE = {"-t", "--testNamePattern"}


class _Selection:
    """What one command selects: its runner family, the words that must agree between
    two runs (environment prefix, build options), its paths (None: the whole suite) and
    whether a name filter narrows it further."""

    __slots__ = ("family", "config", "paths", "filtered")

    def __init__(self, family: str, config: tuple[str, ...], paths: tuple[str, ...] | None,
                 filtered: bool) -> None:
        self.family, self.config, self.paths, self.filtered = family, config, paths, filtered


def covers(broad: str, narrow: str) -> bool:
    """Whether a passing run of `broad` ran every test `narrow` selects (see module)."""
    if broad == narrow:
        return False  # the same command: test_runs keys it as one history already
    b, n = _selection(broad), _selection(narrow)
    if b is None or n is None or b.filtered or b.family != n.family or b.config != n.config:
        return False
    if b.paths is None:
        # The whole suite: it holds whatever the narrow run selects inside the project.
        return n.paths is None or all(_inside(p) for p in n.paths)
    if n.paths is None:
        return False
    contains = _go_contains if b.family == "go" else _path_contains
    return all(any(contains(bp, np) for bp in b.paths) for np in n.paths)


def _inside(path: str) -> bool:
    return not path.startswith("/") and ".." not in path.split("/")


def _norm(path: str) -> str:
    while path.startswith("./") and len(path) > 2:
        path = path[2:]
    return path.rstrip("/") or path


def _path_contains(broad: str, narrow: str) -> bool:
    b, n = _norm(broad), _norm(narrow)
    if not _inside(n):
        return False
    if b == ".":
        return True
    return n == b or n.startswith(b + "/") or n.startswith(b + "::")


def _go_contains(broad: str, narrow: str) -> bool:
    if not _inside(narrow) or not _inside(broad):
        return False
    if not broad.endswith("/..."):
        return _norm(broad) == _norm(narrow)
    base = _norm(broad[:-4] or ".")
    n = _norm(narrow[:-4] if narrow.endswith("/...") else narrow)
    return base == "." or n == base or n.startswith(base + "/")


def _selection(command: str) -> _Selection | None:
    if _NOT_PLAIN.search(command):
        return None
    words = command.split()
    env = []
    while words and _ENV.match(words[0]):
        env.append(words.pop(0))
    if len(words) >= 2 and words[0] in _LAUNCHER and words[1] == "run":
        words = words[2:]
    if len(words) >= 3 and _PYTHON.match(words[0]) and words[1] == "-m" and words[2] == "pytest":
        words = words[2:]
    if not words:
        return None
    head = words[0].rsplit("/", 1)[-1]
    found: Any = None
    if head in ("pytest", "py.test"):
        found = _pytest(words[1:])
    elif head == "go" and words[1:2] == ["test"]:
        found = _go(words[2:])
    elif head == "cargo" and words[1:2] == ["test"]:
        found = _cargo(words[2:])
    elif head in ("npx", "npm", "pnpm", "yarn"):
        found = _js(words)
    if found is None:
        return None
    family, config, paths, filtered = found
    return _Selection(family, tuple(env) + config, paths, filtered)


def _options(args: list[str], safe: Any, safe_value: set[str], narrow: Any,
             narrow_value: set[str]) -> tuple[list[str], bool] | None:
    """The positional words and whether a narrowing option was given; None when an
    option is not known."""
    positional: list[str] = []
    filtered = False
    i = 0
    while i < len(args):
        word = args[i]
        if word in safe_value or word in narrow_value:
            if i + 1 >= len(args):
                return None
            filtered = filtered or word in narrow_value
            i += 2
            continue
        if word.startswith("-"):
            if narrow.match(word):
                filtered = True
            elif not safe.match(word):
                return None
        else:
            positional.append(word)
        i += 1
    return positional, filtered


def _pytest(args: list[str]) -> Any:
    parsed = _options(args, _PYTEST_SAFE, _PYTEST_SAFE_VALUE, _PYTEST_NARROW,
                      _PYTEST_NARROW_VALUE)
    if parsed is None:
        return None
    paths, filtered = parsed
    return "pytest", (), tuple(paths) or None, filtered


def _go(args: list[str]) -> Any:
    if any(a.startswith("-bench") for a in args):
        return None  # benchmarks run only when asked for: no plain run holds them
    parsed = _options(args, _GO_SAFE, _GO_SAFE_VALUE, _GO_NARROW, _GO_NARROW_VALUE)
    if parsed is None:
        return None
    packages, filtered = parsed
    # No package is the one in the directory it ran in.
    return "go", (), tuple(packages or ["."]), filtered


def _cargo(args: list[str]) -> Any:
    harness: list[str] = []
    if "--" in args:
        at = args.index("--")
        args, harness = args[:at], args[at + 1:]
    config: list[str] = []
    filters: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        if word in _CARGO_CONFIG_VALUE:
            if i + 1 >= len(args):
                return None
            config += args[i:i + 2]
            i += 2
            continue
        if word in _CARGO_CONFIG:
            config.append(word)
        elif word.startswith("-"):
            if word not in _CARGO_SAFE:
                return None
        else:
            filters.append(word)
        i += 1
    for word in harness:
        if word.startswith("-"):
            if word not in _CARGO_HARNESS_SAFE and word not in _CARGO_HARNESS_NARROW:
                return None
            filters += [word] if word in _CARGO_HARNESS_NARROW else []
        else:
            filters.append(word)
    # A cargo filter is a substring of test names, not a path: only no filter proves.
    return "cargo", tuple(sorted(config)), None, bool(filters)


def _js(words: list[str]) -> Any:
    """jest or vitest, run directly (`npx jest`) or as the package's `test` script
    (`npm test`); which one ran the caller knows from the output (test_runs)."""
    args = words[1:]
    if words[0] != "npx" and args[:1] == ["run"]:
        args = args[1:]
    if words[0] == "npx" and args[:1] in (["jest"], ["vitest"]):
        args = args[1:]
        if args[:1] == ["run"]:
            args = args[1:]  # `vitest run`: once, not watching
    elif words[0] != "npx" and args[:1] == ["test"]:
        args = args[1:]
    else:
        return None
    if args[:1] == ["--"]:
        args = args[1:]
    parsed = _options(args, re.compile(r"^(?:" + "|".join(map(re.escape, _JS_SAFE)) + r")$"),
                      set(), re.compile(r"^--testNamePattern=\S+$"), _JS_NARROW_VALUE)
    if parsed is None:
        return None
    patterns, filtered = parsed
    # Positional words are patterns matched against paths, not paths: only none proves.
    return "js", (), None, filtered or bool(patterns)
