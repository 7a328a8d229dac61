"""Wrapper commands: a task runner's target that may run a failing command's tests.

Invariant: `wrapper_scope(command)` names what a plain invocation of a task runner or
script (make, just, task, mise, npm/pnpm/yarn/bun run, tox, nox, hatch/poetry/uv run of
a script name, `./scripts/...`, `bin/...`) may run, judged by its target's name alone:
"test" (a test target), "check" (a lint or type-check target) or "all" (ci, verify,
check-all, precommit...). What the target really runs is unknown, so a passing wrapper is
suggestive evidence, never proof: test_runs records it as "may cover", and the digest
says so in words instead of listing the failure as open. None for anything else.
`kind_of(runner)` sorts a runner's name (from its summary) into "test" or "check".
"""

from __future__ import annotations

import re

_NOT_PLAIN = re.compile(r"[;|<>`$()]|&&|\|\|")
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_TEST = re.compile(r"test|spec|e2e|integration|unit", re.I)
_CHECK = re.compile(r"lint|typecheck|type-check|types|tsc|mypy|format|fmt|style|vet", re.I)
_ALL = re.compile(r"^(?:ci|check|checks|verify|validate|all|precommit|pre-commit|qa|"
                  r"check-all|checkall|build-and-test|test-all|all-checks)$", re.I)
_TASK_RUNNERS = {"make", "just", "task", "mage", "rake", "gradle", "./gradlew", "mvn"}
_JS = {"npm", "pnpm", "yarn", "bun"}
_CHECKERS = ("mypy", "pyright", "pyrefly", "ruff", "tsc", "eslint", "golangci-lint",
             "biome", "clippy", "go vet")


def kind_of(runner: str) -> str:
    """"check" for a linter or type checker's summary, else "test"."""
    return "check" if any(c in runner for c in _CHECKERS) else "test"


def wrapper_scope(command: str) -> str | None:
    """What a passing run of `command` may cover ("test", "check", "all"), or None when
    it is no plain wrapper invocation."""
    if _NOT_PLAIN.search(command):
        return None
    words = command.split()
    while words and _ENV.match(words[0]):
        words.pop(0)
    if not words:
        return None
    head = words[0].rsplit("/", 1)[-1] if not words[0].startswith("./gradlew") else words[0]
    targets: list[str]
    if head in ("tox", "nox"):
        return "test" if not any(_CHECK.search(w) for w in words[1:]) else "all"
    if words[0] in _TASK_RUNNERS or head in _TASK_RUNNERS:
        targets = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
    elif head == "mise" and words[1:2] in (["run"], ["r"]) or head in _JS and \
            words[1:2] in (["run"], ["run-script"]):
        targets = [w for w in words[2:3] if not w.startswith("-")]
    elif head in _JS and len(words) >= 2 and words[1] in ("test", "t", "lint", "check"):
        if head == "bun" and words[1] == "test":
            return None  # bun's own test runner: a runner, not a wrapper
        targets = [words[1]]
    elif head in ("hatch", "poetry", "uv", "pdm") and words[1:2] == ["run"] and len(words) > 2:
        targets = [words[2]] if not _is_runner(words[2]) else []
    elif "/" in words[0] and (words[0].startswith(("./", "scripts/", "bin/", "script/"))):
        targets = [words[0].rsplit("/", 1)[-1].rsplit(".", 1)[0]]
    else:
        return None
    return _scope(targets)


def _is_runner(word: str) -> bool:
    return word in ("pytest", "python", "python3", "mypy", "ruff", "pyright", "tox", "nox")


def _scope(targets: list[str]) -> str | None:
    scopes = set()
    for target in targets:
        name = target.split(":", 1)[0] if ":" in target else target
        if _ALL.match(name) or _ALL.match(target):
            scopes.add("all")
        elif _TEST.search(target):
            scopes.add("test")
        elif _CHECK.search(target):
            scopes.add("check")
    if not scopes:
        return None
    if "all" in scopes or len(scopes) > 1:
        return "all"
    return scopes.pop()


def may_cover(scope: str, runner: str) -> bool:
    """Whether a wrapper of `scope` may run a runner whose summary says `runner`."""
    return scope == "all" or scope == kind_of(runner)
