"""The search thesaurus, pure: casual words mapped to the journal's canonical terms.

File: <root>/thesaurus.json (spec/SEARCH.md), one JSON object, a word to the terms it
stands for: {"firmware": ["fwupd"], "login": ["oauth callback"]}. A key is one word and a
term one or more words, both in the sense of `ranking.words` (folded, split); a query
holding the key also searches every word of its terms (additive expansion: the query's
own words stay, and rank as before).

Invariants:
- `parse` either returns the whole mapping or, for anything it cannot take whole
  (invalid UTF-8 or JSON, a duplicate key, a key that is not one word, a term with no
  word, a value that is not a list of strings), an empty one with the problem named:
  a broken file counts as empty, never as half of itself.
- The canonical form (keys folded and sorted, each key's terms folded, split, joined by
  one space, distinct and sorted) is what `sha256` hashes, so two files that expand
  every query alike carry the same hash, and any edit that changes an expansion
  changes it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from agent_journal.core.ranking import MAX_TERMS, words

MAX_BYTES = 1024 * 1024        # a hand-edited word list; anything larger is a mistake


Thesaurus = dict[str, list[str]]


class ThesaurusError(ValueError):
    """What makes a thesaurus unusable (the message names the problem, not the file)."""


def word_of(value: str, what: str) -> str:
    """The one folded word `value` is, else ThesaurusError."""
    found = words(value)
    if len(found) != 1:
        raise ThesaurusError(f"{what} {value!r} must be exactly one word (letters, digits, "
                             "underscore)")
    return found[0]


def term_of(value: str, what: str) -> str:
    """A term's canonical spelling: its folded words joined by one space."""
    found = words(value)
    if not found:
        raise ThesaurusError(f"{what} {value!r} has no word in it")
    return " ".join(found)


def normalise(raw: dict[str, Any]) -> Thesaurus:
    """The canonical mapping of a decoded file (ThesaurusError for any bad part)."""
    out: dict[str, set[str]] = {}
    for key, value in raw.items():
        word = word_of(key, "key")
        if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
            raise ThesaurusError(f"the value of {key!r} must be a list of strings")
        terms = out.setdefault(word, set())
        for term in value:
            terms.add(term_of(term, f"a term of {key!r}"))
    return {word: sorted(terms) for word, terms in sorted(out.items()) if terms}


def parse(raw: bytes) -> tuple[Thesaurus, str | None]:
    """(mapping, None), or ({}, the problem) for a file that cannot be taken whole."""
    if len(raw) > MAX_BYTES:
        return {}, f"larger than {MAX_BYTES} bytes"

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise ThesaurusError(f"duplicate key {key!r}")
            out[key] = value
        return out

    def constant(name: str) -> Any:
        raise ThesaurusError(f"{name} is not JSON")

    try:
        decoded = json.loads(raw.decode("utf-8"), object_pairs_hook=pairs,
                             parse_constant=constant)
        if not isinstance(decoded, dict):
            raise ThesaurusError("expected a JSON object mapping a word to a list of terms")
        return normalise(decoded), None
    except UnicodeDecodeError:
        return {}, "not valid UTF-8"
    except ThesaurusError as exc:
        return {}, str(exc)
    except (ValueError, RecursionError) as exc:
        return {}, f"not valid JSON: {exc}"


def canonical(thesaurus: Thesaurus) -> bytes:
    """The bytes the hash is taken of: sorted keys, sorted terms, no spaces."""
    return json.dumps(normalise(thesaurus), ensure_ascii=False, sort_keys=True,
                      separators=(",", ":")).encode("utf-8")


def sha256(thesaurus: Thesaurus) -> str:
    return hashlib.sha256(canonical(thesaurus)).hexdigest()


def render(thesaurus: Thesaurus) -> bytes:
    """The file as `alias` writes it: canonical, one key per line, for hand editing."""
    if not thesaurus:
        return b"{}\n"
    lines = [f"  {json.dumps(word, ensure_ascii=False)}: "
             f"{json.dumps(terms, ensure_ascii=False)}"
             for word, terms in sorted(normalise(thesaurus).items())]
    return ("{\n" + ",\n".join(lines) + "\n}\n").encode("utf-8")


def expand(terms: list[str], thesaurus: Thesaurus) -> tuple[list[str], dict[str, list[str]]]:
    """(every word to search, what each query word added).

    The query's own words come first, in their order; then, for each of them in turn,
    the words of its terms that are not there yet, until MAX_TERMS words in all (the
    rest is not searched, and not reported as added).
    """
    searched = list(terms)
    seen = set(terms)
    added: dict[str, list[str]] = {}
    for term in terms:
        for canonical_term in thesaurus.get(term, ()):
            for word in canonical_term.split(" "):
                if word in seen or len(searched) >= MAX_TERMS:
                    continue
                seen.add(word)
                searched.append(word)
                added.setdefault(term, []).append(word)
    return searched, added
