"""The root's search thesaurus: loaded for every search, edited by `alias add|remove|list`.

Invariants:
- `load` reads <root>/thesaurus.json afresh each time (an edit holds from the next
  search); a missing file is the empty thesaurus, and so is a broken one, whose
  problem is returned for the caller to report (search warns, doctor fails its check).
- `alias add` and `alias remove` check every argument (UsageError, exit 2) before the
  root is opened or anything is written; they refuse a broken file (exit 1) rather than
  replace what someone is editing by hand; and they rewrite it whole, atomically and
  0600, in its canonical layout, under a lock, so two edits never lose each other.
"""

from __future__ import annotations

import os
from typing import Any

from agent_journal.core import thesaurus as th
from agent_journal.core.errors import JournalError, NotFoundError, UsageError
from agent_journal.storage.config import THESAURUS_NAME, read_thesaurus, write_thesaurus
from agent_journal.storage.locks import FileLock
from agent_journal.storage.root import Root, resolve_root

LOCK_NAME = ".thesaurus.lock"


class Loaded:
    """One reading of the file: the mapping, its hash, and what was wrong with it."""

    def __init__(self, path: str, mapping: th.Thesaurus, problem: str | None,
                 present: bool) -> None:
        self.path = path
        self.mapping = mapping
        self.problem = problem
        self.present = present
        self.sha256 = th.sha256(mapping)

    def warning(self) -> str | None:
        if self.problem is None:
            return None
        return f"thesaurus {self.path} is broken ({self.problem}); searched without it"


def load(root_path: str) -> Loaded:
    """The thesaurus of the root at `root_path` (empty when missing or broken)."""
    try:
        path, raw = read_thesaurus(root_path)
    except OSError as exc:
        path = os.path.join(root_path, THESAURUS_NAME)
        return Loaded(path, {}, f"cannot be read: {exc.strerror or exc}", True)
    if raw is None:
        return Loaded(path, {}, None, False)
    mapping, problem = th.parse(raw)
    return Loaded(path, mapping, problem, True)


def _word(word: str) -> str:
    try:
        return th.word_of(word, "WORD")
    except th.ThesaurusError as exc:
        raise UsageError(str(exc)) from None


def _terms(terms: list[str]) -> list[str]:
    try:
        return list(dict.fromkeys(th.term_of(t, "TERM") for t in terms))
    except th.ThesaurusError as exc:
        raise UsageError(str(exc)) from None


def _editable(root_path: str) -> Loaded:
    loaded = load(root_path)
    if loaded.problem is not None:
        raise JournalError(f"thesaurus {loaded.path} is broken ({loaded.problem}); fix it "
                           "by hand or remove it, then run alias again (nothing was changed)")
    return loaded


def _listing(loaded: Loaded) -> dict[str, Any]:
    return {"path": loaded.path, "thesaurusSha256": loaded.sha256,
            "problem": loaded.problem, "aliases": loaded.mapping}


def add(root: str | None, word: str, terms: list[str]) -> dict[str, Any]:
    """Map `word` to `terms` too (terms it already has are kept once)."""
    key = _word(word)
    if not terms:
        raise UsageError("alias add needs at least one TERM")
    wanted = _terms(terms)
    opened = Root.open(root, create=True)
    with FileLock(os.path.join(opened.path, LOCK_NAME)):
        loaded = _editable(opened.path)
        mapping = dict(loaded.mapping)
        mapping[key] = sorted(set(mapping.get(key, [])) | set(wanted))
        if mapping != loaded.mapping or not loaded.present:
            write_thesaurus(opened.path, th.render(mapping))
    return _listing(load(opened.path))


def remove(root: str | None, word: str, terms: list[str]) -> dict[str, Any]:
    """Forget `word` (with no terms), or only the given terms of it."""
    key = _word(word)
    unwanted = _terms(terms)
    opened = Root.open(root, create=False)
    if not opened.exists:
        raise NotFoundError(f"no alias {key!r}: there is no journal root at {opened.path}")
    with FileLock(os.path.join(opened.path, LOCK_NAME)):
        loaded = _editable(opened.path)
        mapping = dict(loaded.mapping)
        if key not in mapping:
            raise NotFoundError(f"no alias {key!r} in {loaded.path}; nothing was changed")
        missing = [t for t in unwanted if t not in mapping[key]]
        if missing:
            raise NotFoundError(f"alias {key!r} has no term {missing[0]!r} (it has: "
                                f"{', '.join(mapping[key])}); nothing was changed")
        left = [t for t in mapping[key] if t not in unwanted] if unwanted else []
        if left:
            mapping[key] = left
        else:
            del mapping[key]
        write_thesaurus(opened.path, th.render(mapping))
    return _listing(load(opened.path))


def listing(root: str | None) -> dict[str, Any]:
    """What the thesaurus holds now (a broken file lists as empty, with its problem)."""
    path = resolve_root(root)
    Root.open(path, create=False)  # the same safety checks as every read; creates nothing
    return _listing(load(path))
