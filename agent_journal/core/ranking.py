"""Search ranking, pure: the words of an event, term rarity times recency, snippets.

Invariant: every function here is a deterministic function of its arguments
(no clock, no I/O), so the index (storage/search_index.py) and a rebuild from
scratch rank alike; the formula is the one in spec/SEARCH.md.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from agent_journal.core import clock
from agent_journal.core.errors import UsageError
from agent_journal.core.model import ENTRY_FIELDS, Event
from agent_journal.core.outcomes import outcome_of, reached_from

PERIOD_MS = 24 * 60 * 60 * 1000     # recency decays once per whole 24-hour period


MAX_TERMS = 32                      # distinct query words (a bitmask per document)


MAX_PART_CHARS = 32 * 1024          # text indexed per event; the rest is not searchable


SNIPPET_WORDS = 16


SNIPPET_OPEN, SNIPPET_CLOSE, ELLIPSIS = "\u00ab", "\u00bb", "\u2026"


# Observation kinds that are not searched: the weak-query log (ops/search_misses.py), so a
# logged query never finds its own record.
SEARCH_MISS = "search_miss"
UNINDEXED_KINDS = frozenset({SEARCH_MISS})


# Observation fields that are bookkeeping, not content worth finding.
OBSERVATION_SKIP = frozenset({"callId", "status", "exitCode", "durationMs", "artifact"})
# Of a tool call, also the client's metadata beside it (the hook payload's cwd, event name,
# permission mode, ids; an import's transcript context): a search for what a call did must
# not match, nor show as its snippet, the mode it ran in. A prompt's or a session event's
# hook fields stay: they can be what was said.
CALL_METADATA = frozenset({"hook", "transcript"})


_WORD = re.compile(r"\w+")


_SPACE = re.compile(r"\s+")


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


_MS = timedelta(milliseconds=1)


def words(text: str) -> list[str]:
    """Tokenisation shared by documents and queries: Unicode case folding,
    then maximal runs of word characters (letters, digits, underscore)."""
    return _WORD.findall(text.casefold())


def query_terms(query: str) -> list[str]:
    """Distinct words of a query, in the order they first appear."""
    terms = list(dict.fromkeys(words(query)))
    if not terms:
        raise UsageError("the query has no words to search for")
    if len(terms) > MAX_TERMS:
        raise UsageError(f"the query has {len(terms)} distinct words; at most {MAX_TERMS}")
    return terms


def idf(n: int, df: int) -> float:
    """A term's rarity weight: ln(1 + (N - df + 0.5) / (df + 0.5))."""
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


def recency(now_ms: int, ts_ms: int, boost: float) -> float:
    """1 + boost / (whole 24-hour periods elapsed + 1); a future ts counts as age 0."""
    periods = max(now_ms - ts_ms, 0) // PERIOD_MS
    return 1.0 + boost / (periods + 1)


def score(weights: Iterable[float], now_ms: int, ts_ms: int, boost: float) -> float:
    """The sum of the matched terms' weights (in query order) times recency.

    The SQL ranking performs the same floating-point operations in the same
    order, so a score computed here equals the reported one exactly.
    """
    total = 0.0
    for w in weights:
        total += w
    return total * recency(now_ms, ts_ms, boost)


def ts_millis(ts: str) -> int:
    """Milliseconds since the epoch; a timestamp that does not parse counts as 0."""
    try:
        value = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        try:
            value = clock.parse_instant(ts)
        except UsageError:
            return 0
    return instant_millis(value)


def instant_millis(value: datetime) -> int:
    """Whole milliseconds since the epoch (a naive instant is taken as UTC)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return (value - _EPOCH) // _MS


def _strings(value: Any, out: list[str]) -> None:
    """Every string leaf of a JSON value, in document order."""
    if isinstance(value, str):
        if value:
            out.append(value)
    elif isinstance(value, dict):
        for item in value.values():
            _strings(item, out)
    elif isinstance(value, list):
        for item in value:
            _strings(item, out)


def entry_text(ev: Event) -> str:
    """An entry's searchable text: its fields (the kind's own first), subject, anchors."""
    data = ev.data
    fields = data.get("fields")
    fields = fields if isinstance(fields, dict) else {}
    own = ENTRY_FIELDS.get(ev.kind, ())
    names = [n for n in own if n in fields] + sorted(n for n in fields if n not in own)
    out: list[str] = []
    for name in names:
        _strings(fields[name], out)
    _strings(data.get("subject"), out)
    _strings(data.get("anchors"), out)
    return "\n".join(out)[:MAX_PART_CHARS]


def observation_text(ev: Event) -> str:
    """One observation event's searchable text: tool, input, output, then any
    other content it carries (prompts, previews), never ids or checksums, nor a tool
    call's client metadata (CALL_METADATA)."""
    data = ev.data
    out: list[str] = []
    for name in ("tool", "input", "output"):
        _strings(data.get(name), out)
    call = ev.kind == "tool_call"
    for name in sorted(data):
        if name not in ("tool", "input", "output") and name not in OBSERVATION_SKIP and not (
                call and name in CALL_METADATA):
            _strings(data[name], out)
    return "\n".join(out)[:MAX_PART_CHARS]


def split_parts(parts: list[list[Any]], text: str) -> list[str]:
    """The per-event pieces of a document's text (parts carry each piece's length)."""
    pieces = []
    pos = 0
    for part in parts:
        length = part[3]
        pieces.append(text[pos:pos + length])
        pos += length + 1
    return pieces


def snippet(text: str, terms: Iterable[str]) -> str:
    """A short window of `text` holding as many distinct query terms as it can,
    each marked with guillemets; whitespace collapsed; ellipses where cut."""
    wanted = set(terms)
    tokens = list(_WORD.finditer(text))
    if not tokens:
        return _SPACE.sub(" ", text).strip()[:200]
    found = [i for i, m in enumerate(tokens) if m.group().casefold() in wanted]
    start = 0
    if found:
        best = -1
        last_start = max(0, len(tokens) - SNIPPET_WORDS)
        for i in found[:200]:
            # two words of context before the match, but no shorter than it must be
            candidate = max(0, min(i - 2, last_start))
            window = {tokens[j].group().casefold() for j in found
                      if candidate <= j < candidate + SNIPPET_WORDS}
            if len(window) > best:
                best, start = len(window), candidate
    end = min(len(tokens), start + SNIPPET_WORDS)
    out = [ELLIPSIS] if start > 0 else []
    prev_end = tokens[start].start()
    for j in range(start, end):
        m = tokens[j]
        gap = text[prev_end:m.start()]
        if gap:
            out.append(_SPACE.sub(" ", gap))
        word = m.group()
        out.append(f"{SNIPPET_OPEN}{word}{SNIPPET_CLOSE}" if word.casefold() in wanted else word)
        prev_end = m.end()
    tail = text[prev_end:tokens[end].start()] if end < len(tokens) else text[prev_end:]
    tail = _SPACE.sub(" ", tail)
    if end < len(tokens):
        out.append(tail.rstrip() + ELLIPSIS if tail.strip() else ELLIPSIS)
    else:
        out.append(tail.rstrip())
    return "".join(out).strip()


def outcomes(deps: dict[str, list[str]], invalidated: set[str]) -> dict[str, str]:
    """Entry id -> live | invalidated | suppressed, by the one rule (core/outcomes.py)."""
    reached = reached_from(deps, (i for i in invalidated if i in deps))
    return {entry_id: outcome_of(entry_id, invalidated, reached) for entry_id in deps}
