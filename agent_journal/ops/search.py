"""`search`: ranked recall over what still holds, answered from a disposable index.

Invariants:
- Every search first brings the index (storage/search_index.py) up to date with the
  segments, so an answer reflects every event written before it, tombstones included;
  ranking is the formula in spec/SEARCH.md, in a total, deterministic order, and the
  damage lists every read reports come with it.
- The root's thesaurus (ops/thesaurus.py) is read afresh for every search; its words
  are added to the query's (never put in their place), and the answer names the hash
  of the version it used.
- A document holding any searched word is a candidate, so a query with a word no
  document holds still returns the documents holding the others; the answer lists the
  words that matched nothing.
- With the weak-query log on (ops/search_misses.py), a weak answer is recorded; off,
  a search writes nothing.
"""

from __future__ import annotations

import math
import os
from typing import Any

from agent_journal.core import clock
from agent_journal.core.errors import JournalError, UsageError
from agent_journal.core.model import (
    validate_id,
)
from agent_journal.core.ranking import instant_millis, query_terms
from agent_journal.core.thesaurus import expand
from agent_journal.ops import search_misses, thesaurus
from agent_journal.ops.context import Context
from agent_journal.storage.search_index import index_path
from agent_journal.storage.search_query import answer

# -- knobs (documented in spec/SEARCH.md) ---------------------------------------------------

DEFAULT_LIMIT = 10
DEFAULT_BOOST = 1.0
ENV_BOOST = "AGENT_JOURNAL_SEARCH_BOOST"


def boost_from_env() -> float:
    raw = os.environ.get(ENV_BOOST)
    if raw is None or raw == "":
        return DEFAULT_BOOST
    try:
        value = float(raw)
    except ValueError:
        raise UsageError(f"${ENV_BOOST} must be a number, not {raw!r}") from None
    if not math.isfinite(value) or value < 0:
        raise UsageError(f"${ENV_BOOST} must be a finite number >= 0, not {raw!r}")
    return value


def search(ctx: Context, query: str, *, limit: int | None = None, kind: str | None = None,
           include_retracted: bool = False, exclude_tools: tuple[str, ...] = (),
           log_as: Context | None = None, log_misses: bool = True) -> dict[str, Any]:
    """Ranked hits for `query` plus the damage lists every read reports. Observations of
    a tool whose name starts with one of `exclude_tools` are left out (before `limit`).
    A weak answer is logged (when the log is on and `log_misses`) as written by `log_as`,
    else by `ctx`'s session."""
    terms = query_terms(query)
    if kind is not None:
        validate_id(kind, "--kind")
    limit = DEFAULT_LIMIT if limit is None else limit
    if limit < 1:
        raise UsageError("--limit must be at least 1")
    boost = boost_from_env()
    ws = ctx.open(create=False)
    loaded = thesaurus.load(ws.root.path)
    searched, added = expand(terms, loaded.mapping)
    warning = loaded.warning()
    report: dict[str, Any] = {"query": query, "terms": terms, "expansions": added,
                              "unmatched": list(searched), "thesaurusSha256": loaded.sha256,
                              "hits": [], "warnings": [warning] if warning else [],
                              "unreadable": [], "malformed": []}
    if ws.segment_paths() or os.path.exists(index_path(ws)):
        # (Otherwise there is nothing to search, and no index to bring up to date.)
        (report["hits"], report["unmatched"], report["unreadable"],
         report["malformed"]) = answer(
            ws, searched, limit=limit, kind=kind, include_retracted=include_retracted,
            now_ms=instant_millis(clock.now()), boost=boost, exclude_tools=exclude_tools)
    if (log_misses and search_misses.is_weak(report["hits"])
            and search_misses.enabled(ws.root.path)):
        writer = log_as or Context(ctx.root_arg, ctx.workspace_name, ctx.session)
        try:
            search_misses.record(writer, report)
        except JournalError as exc:
            # The answer stands; only its log entry is missing, and the caller is told.
            report["warnings"].append(f"the weak query could not be logged: {exc.message}")
    return report
