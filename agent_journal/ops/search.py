"""`search`: ranked recall over what still holds, answered from a disposable index.

Invariant: every search first brings the index (storage/search_index.py) up to
date with the segments, so an answer reflects every event written before it,
tombstones included; ranking is the formula in spec/SEARCH.md, in a total,
deterministic order, and the damage lists every read reports come with it.
"""

from __future__ import annotations

import math
import os
from typing import Any

from agent_journal.core import clock
from agent_journal.core.errors import UsageError
from agent_journal.core.model import (
    validate_id,
)
from agent_journal.core.ranking import instant_millis, query_terms
from agent_journal.ops.context import Context
from agent_journal.storage.search_index import answer, index_path

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
           include_retracted: bool = False, exclude_tools: tuple[str, ...] = ()
           ) -> dict[str, Any]:
    """Ranked hits for `query` plus the damage lists every read reports. Observations of
    a tool whose name starts with one of `exclude_tools` are left out (before `limit`)."""
    terms = query_terms(query)
    if kind is not None:
        validate_id(kind, "--kind")
    limit = DEFAULT_LIMIT if limit is None else limit
    if limit < 1:
        raise UsageError("--limit must be at least 1")
    boost = boost_from_env()
    report: dict[str, Any] = {"query": query, "terms": terms, "hits": [],
                              "unreadable": [], "malformed": []}
    ws = ctx.open(create=False)
    if not ws.segment_paths() and not os.path.exists(index_path(ws)):
        return report  # nothing to search, and no index to bring up to date
    report["hits"], report["unreadable"], report["malformed"] = answer(
        ws, terms, limit=limit, kind=kind, include_retracted=include_retracted,
        now_ms=instant_millis(clock.now()), boost=boost, exclude_tools=exclude_tools)
    return report
