"""The redactor every write path uses: built-in rules plus the root's configured patterns.

Invariant: a configuration that cannot be read or understood never means "redact less"
than the built-in rules, and never passes unnoticed. `redactor_for` either returns a
Redactor carrying every configured pattern or raises a JournalError naming the problem
(a pattern that does not compile, a misspelt key), so every command refuses (exit 1).
The hook alone must keep journaling: `load_redactor` gives it the built-in rules plus
every configured pattern that is usable, with the problems, which the hook logs.

Config file: <root>/config.json, strict JSON (no duplicate keys, no NaN):
    {"redact": {"patterns": [{"name": "order-code", "regex": "ORDER-[0-9]{4}"}]}}
`remotes` belongs to sync (ops/remotes.py) and `search` to the weak-query log
({"search": {"missLog": true}}, ops/search_misses.py); its shape is checked here with the
rest. No other top-level key is known: one is reported as a likely misspelling.
"""

from __future__ import annotations

from agent_journal.capture.redact import Redactor, default_redactor
from agent_journal.core.errors import JournalError
from agent_journal.storage.config import read_root_config

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any

# Keys config.json may hold at its top level. Any other is most likely a misspelling
# (`"redcat"`), which would silently drop what it holds, so it is reported. `remotes`
# belongs to sync (ops/remotes.py).
KNOWN_KEYS = frozenset({"redact", "remotes", "search"})
SEARCH_KEYS = frozenset({"missLog"})

_cache: dict[str, tuple[Redactor, list[str]]] = {}


def redactor_for(root_path: str) -> Redactor:
    """The Redactor for the journal at `root_path` (cached per process).

    Raises JournalError naming the first problem when the config is not usable whole:
    every command but the hook refuses rather than redact less than it was asked to.
    """
    redactor, problems = load_redactor(root_path)
    if problems:
        raise JournalError(problems[0])
    return redactor


def check_config(root_path: str) -> None:
    """Refuse (JournalError naming the problem) a root whose config.json is not usable
    whole; one failed open when there is none. Read commands call it too, so a broken
    pattern is reported by whatever command meets it first, not only by writes."""
    if root_path in _cache or read_root_config(root_path) is not None:
        redactor_for(root_path)


def load_redactor(root_path: str) -> tuple[Redactor, list[str]]:
    """The best Redactor the config allows, and every problem found in it.

    For the hook, which must keep journaling: with problems, it is the built-in rules
    plus every configured pattern that compiles (never fewer rules than the built-ins);
    the caller logs the problems. A config file that cannot be read at all raises.
    """
    cached = _cache.get(root_path)
    if cached is None:
        found = read_root_config(root_path)
        cached = (default_redactor(), []) if found is None else _from_config(*found)
        _cache[root_path] = cached
    return cached


def _from_config(path: str, raw: bytes) -> tuple[Redactor, list[str]]:
    from agent_journal.capture.strictjson import StrictJSONError, loads

    def bad(text: str) -> tuple[Redactor, list[str]]:
        return default_redactor(), [f"bad config {path}: {text}"]

    try:
        config = loads(raw)
    except StrictJSONError as exc:
        return bad(str(exc))
    if not isinstance(config, dict):
        return bad("expected a JSON object")
    problems = [f'bad config {path}: unknown key "{key}" (known: '
                f'{", ".join(sorted(KNOWN_KEYS))})' for key in sorted(set(config) - KNOWN_KEYS)]
    problems += _search_problems(path, config.get("search"))
    section = config.get("redact")
    if section is None:
        return default_redactor(), problems
    if not isinstance(section, dict):
        return default_redactor(), problems + [f'bad config {path}: "redact" must be an object']
    # A misspelt key would silently drop the patterns under it.
    problems += [f'bad config {path}: unknown key "redact.{key}"'
                 for key in sorted(set(section) - {"patterns"})]
    patterns = section.get("patterns", [])
    if not isinstance(patterns, list):
        return default_redactor(), problems + [
            f'bad config {path}: "redact.patterns" must be a list']
    good: list[tuple[Any, Any]] = []
    for index, item in enumerate(patterns):
        if not isinstance(item, dict) or set(item) != {"name", "regex"}:
            problems.append(f'bad config {path}: redact.patterns[{index}] must be '
                            '{"name": ..., "regex": ...}')
            continue
        pair = (item["name"], item["regex"])
        try:
            Redactor([pair])  # each on its own, so the one that fails is the one named
        except ValueError as exc:
            problems.append(f"bad config {path}: redact.patterns[{index}]: {exc}")
            continue
        good.append(pair)
    try:
        return (Redactor(good) if good else default_redactor()), problems
    except ValueError as exc:  # two good patterns that clash (a repeated name)
        return default_redactor(), problems + [f"bad config {path}: {exc}"]


def _search_problems(path: str, section: Any) -> list[str]:
    """What is wrong with the "search" section (a misspelt key would leave the log off)."""
    if section is None:
        return []
    if not isinstance(section, dict):
        return [f'bad config {path}: "search" must be an object']
    problems = [f'bad config {path}: unknown key "search.{key}" (known: '
                f'{", ".join(sorted(SEARCH_KEYS))})' for key in sorted(set(section) - SEARCH_KEYS)]
    if "missLog" in section and not isinstance(section["missLog"], bool):
        problems.append(f'bad config {path}: "search.missLog" must be true or false')
    return problems
