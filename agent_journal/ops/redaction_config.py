"""The redactor every write path uses: built-in rules plus the root's configured patterns.

Invariant: a configuration that cannot be read or understood never means "redact less".
`redactor_for` either returns a Redactor carrying every configured pattern or raises a
JournalError naming the problem, so a write command refuses (exit 1) and the hook logs and
journals nothing, rather than persisting text that the user asked to have redacted.

Config file: <root>/config.json, strict JSON (no duplicate keys, no NaN):
    {"redact": {"patterns": [{"name": "order-code", "regex": "ORDER-[0-9]{4}"}]}}
Other top-level keys are left to other features.
"""

from __future__ import annotations

from agent_journal.capture.redact import Redactor, default_redactor
from agent_journal.core.errors import JournalError
from agent_journal.storage.config import read_root_config

TYPE_CHECKING = False  # `typing` costs ~5 ms to import; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any

_cache: dict[str, Redactor] = {}


def redactor_for(root_path: str) -> Redactor:
    """The Redactor for the journal at `root_path` (cached per process)."""
    cached = _cache.get(root_path)
    if cached is not None:
        return cached
    found = read_root_config(root_path)
    redactor = default_redactor() if found is None else _from_config(*found)
    _cache[root_path] = redactor
    return redactor


def _from_config(path: str, raw: bytes) -> Redactor:
    from agent_journal.capture.strictjson import StrictJSONError, loads

    try:
        config = loads(raw)
    except StrictJSONError as exc:
        raise JournalError(f"bad config {path}: {exc}") from None
    if not isinstance(config, dict):
        raise JournalError(f"bad config {path}: expected a JSON object")
    section = config.get("redact")
    if section is None:
        return default_redactor()
    if not isinstance(section, dict):
        raise JournalError(f'bad config {path}: "redact" must be an object')
    unknown = sorted(set(section) - {"patterns"})
    if unknown:
        # A misspelt key would silently drop the patterns under it.
        raise JournalError(f'bad config {path}: unknown key "redact.{unknown[0]}"')
    patterns = section.get("patterns", [])
    if not isinstance(patterns, list):
        raise JournalError(f'bad config {path}: "redact.patterns" must be a list')
    pairs: list[tuple[Any, Any]] = []
    for index, item in enumerate(patterns):
        if not isinstance(item, dict) or set(item) != {"name", "regex"}:
            raise JournalError(
                f'bad config {path}: redact.patterns[{index}] must be {{"name": ..., '
                '"regex": ...}')
        pairs.append((item["name"], item["regex"]))
    try:
        return Redactor(pairs)
    except ValueError as exc:
        raise JournalError(f"bad config {path}: {exc}") from None
