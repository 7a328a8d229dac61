"""Whether one test command's selection provably contains another's.

Invariant: `covers(broad, narrow)` is True only when both are plain invocations (no
quotes, chains, pipes or substitutions) of the same runner with the same environment
prefix and build options, the broad one selects by paths alone (no `-k`, `-m`, `--lf`,
`-run`, filter names or test-name patterns), and every test the narrow one selects lies
inside what the broad one selects: no path arguments is the whole suite, a directory
holds the files under it, a file its node ids, `./pkg/...` the packages under `pkg`. An
option either rule does not know makes the answer False: an unknown case is never a
proof. Rules exist for pytest, go test, cargo test, bun test and jest/vitest (directly or
through a package manager's `test` script); any other command covers only itself
(test_runs). A pipeline `runner ... | filter` is judged by its head: the caller counts it
only when the pipeline's output reported a pass.
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
    head = pipeline_head(broad)
    if head is not None:
        # `go test -json ./... | python3 -c ...`: the runner is the pipeline's head, and
        # the caller knows the output (what the tail printed) reported a pass.
        if head == narrow:
            return True
        broad = head
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


# A word that names a test file: a path ending in a source suffix (a pytest node id's file
# part counts), not an option, not a URL.
_TEST_FILE = re.compile(r"^[\w@.+/-]+\.(?:py|go|rs|[cm]?[jt]sx?|rb|java|kt|ex|exs|php|cs|"
                        r"swift|scala|dart)$")
# Options that pick tests by name within files: a run with one does not hold a file whole.
_NAME_FILTERS = re.compile(r"^(?:-k|-m|-t|-g|--grep|--grep-invert|-run|--run|"
                           r"--testNamePattern|--test-name-pattern|"
                           r"--lf|--last-failed)(?:=.*)?$")
_STAGING = frozenset({"cd", "sleep", "echo", "export", "source", ".", "set", "pushd", "popd",
                      "for", "done", "then", "fi", "if", "while"})


def same_files(broad: str, narrow: str) -> bool:
    """Whether a passing run of `broad` ran every test file `narrow` names, however each
    was invoked (`npx playwright test t/a.spec.ts` inside `cd e2e &&`, then `pnpm --filter
    e2e test -- e2e/t/a.spec.ts`): both name test files, `broad` filters no test by name,
    and each file `narrow` names is one `broad` names, the same path or one ending the
    other at a folder boundary. The caller has checked that the same runner reported."""
    b, n = _named_files(broad), _named_files(narrow)
    if not b or not n or b[1] or b[0] is None or n[0] is None:
        return False
    return all(any(_same_file(f, g) for g in b[0]) for f in n[0])


def _named_files(command: str) -> tuple[list[str] | None, bool] | None:
    """(test files the command names, whether it filters tests by name)."""
    files: list[str] = []
    filtered = False
    for segment in re.split(r"&&|\|\||[;|\n]", command):
        words = segment.replace('"', " ").replace("'", " ").split()
        if not words or words[0] in _STAGING or words[0].startswith("#"):
            continue
        for word in words[1:]:
            if _NAME_FILTERS.match(word):
                filtered = True
            elif not word.startswith("-") and "://" not in word:
                path = word.split("::", 1)[0].split(":", 1)[0]
                if _TEST_FILE.match(path):
                    files.append(path)
    return (files or None), filtered


def _same_file(a: str, b: str) -> bool:
    a, b = _norm(a), _norm(b)
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def covers_any(broad: str, narrow: str) -> bool:
    """`covers` between the runs two commands hold: a chain `a && b` that passed passed
    each of its commands, a pipeline's run is its head, and a narrow script's runs are
    its plain runner invocations (all of them must be held). The caller has checked that
    both ran in the same folder (`folder`)."""
    if covers(broad, narrow):
        return True
    _, b_runs = _runs_in(broad, chained=True)
    _, n_runs = _runs_in(narrow, chained=False)
    if not b_runs or not n_runs:
        return False
    if [broad] == b_runs and [narrow] == n_runs:
        return False  # (already asked)
    return all(any(b == n or covers(b, n) for b in b_runs) for n in n_runs)


# Where a command's text divides into the commands it runs: chains, pipes, sequences,
# subshells and command substitutions; a redirection is no part of an invocation.
_PIECES = re.compile(r"&&|\|\||[;|\n()`]|\$\(|\bdo\b|\bthen\b|\belse\b")
_REDIRECT = re.compile(r"\s\d?>&?\d?\S*|\s\d?>\s*\S+")
_QUOTED = re.compile(r"\"[^\"\n]*\"|'[^'\n]*'")
_RUNNER_HINT = re.compile(r"\b(?:pytest|py\.test|go test|cargo test|bun test|jest|vitest|"
                          r"(?:npm|pnpm|yarn) (?:run )?test)\b")


def embedded_runs(command: str) -> list[str]:
    """The plain runner invocations anywhere in a shell command: in a loop, a command
    substitution, a subshell, a pipeline (`out=$(cd src && go test ./... | grep FAIL)`
    holds `go test ./...`), redirections dropped, each quoted word read as one word `Q`
    (a quoted `-run "A|B"` filters, whatever it says). A part with globs or anything
    else that is no plain invocation is left out."""
    if not _RUNNER_HINT.search(command):
        return []
    runs = []
    for part in _PIECES.split(_QUOTED.sub("Q", command)):
        part = " ".join(_REDIRECT.sub(" ", " " + part).split())
        if part and _selection(part) is not None:
            runs.append(part)
    return runs


def holds_runs(broad: list[str], narrow: str) -> bool:
    """Whether the runs `broad` holds take in every plain run of the command `narrow`
    (the same invocation, or one whose selection holds it); False when `narrow` holds
    no plain run."""
    wanted = embedded_runs(narrow)
    return bool(wanted) and all(any(b == n or covers(b, n) for b in broad) for n in wanted)


def _runs_in(command: str, *, chained: bool) -> tuple[str | None, list[str]]:
    """(the folder a leading `cd` moves to, the plain runner invocations). With `chained`
    only an `a && b` chain (or a pipeline's head) counts: what ran after a `;` or `||`
    may not have passed."""
    head = pipeline_head(command)
    if head is not None:
        command = head
    if chained and re.search(r";|\|\||\n", command):
        return None, []
    cd = None
    runs: list[str] = []
    for part in re.split(r"&&|\|\||[;\n]", command):
        part = " ".join(part.split())
        if part.startswith("cd ") and len(part.split()) == 2 and not runs:
            cd = part.split()[1]
        elif _selection(part) is not None:
            runs.append(part)
    return cd, runs


def folder(command: str, cwd: str | None) -> str | None:
    """The folder a command's runs ran in: where a leading `cd DIR` moved it (from
    `cwd`), else `cwd`; drive paths written either way (`D:\\x`, `/d/x`) compare equal."""
    words = command.split(maxsplit=2)
    where = cwd
    if len(words) >= 2 and words[0] in ("cd", "Set-Location") and (
            len(words) == 2 or words[2].startswith(("&&", ";"))):
        target = words[1].rstrip(";")
        where = target if _absolute(target) or not cwd else cwd.rstrip("/\\") + "/" + target
    if where is None:
        return None
    where = where.replace("\\", "/").rstrip("/")
    drive = re.match(r"^([A-Za-z]):(/|$)", where)
    if drive:
        where = "/" + drive.group(1).lower() + where[2:]
    return where


def _absolute(path: str) -> bool:
    return path.startswith(("/", "\\", "~")) or bool(re.match(r"^[A-Za-z]:", path))


def pipeline_head(command: str) -> str | None:
    """The first command of a plain pipeline `a | b ...` (no `||`, chain or subshell
    before the first pipe), or None when `command` is no such pipeline."""
    if "|" not in command or "||" in command:
        return None
    head = command.split("|", 1)[0].strip()
    if not head or re.search(r"[;&<>`$()]", head):
        return None
    return head


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
    elif head == "bun" and words[1:2] == ["test"]:
        found = _bun(words[2:])
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


def _bun(args: list[str]) -> Any:
    """`bun test [filters]`: a filter is a substring of test file paths; only none proves."""
    parsed = _options(args, re.compile(r"^(?:--bail|--only|--coverage|--silent)$"),
                      {"--timeout"}, re.compile(r"^--test-name-pattern=\S+$"),
                      {"-t", "--test-name-pattern"})
    if parsed is None:
        return None
    filters, filtered = parsed
    return "bun", (), None, filtered or bool(filters)


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
