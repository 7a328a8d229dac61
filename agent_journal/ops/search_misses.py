"""The weak-query log: searches that found little, kept so the thesaurus can be curated.

Invariants:
- Off unless the root's config.json says {"search": {"missLog": true}}; off, a search
  writes nothing at all.
- A search is weak when its best hit scores under MISS_SCORE (or it has none). It is
  then recorded as one observation of kind `search_miss` (its own id), written through
  `writes.observe` like any other: its text passes the root's redactor, a tombstone of
  its id hides it at once and `compact --apply` then erases its bytes. Only the query
  as typed (redacted whole, so a secret cut into words by the tokenizer cannot slip
  through piecemeal), the best score, the number of hits and the thesaurus hash are
  stored.
- `search_miss` observations are never searched themselves (ranking.UNINDEXED_KINDS).
- `misses` lists what is recorded and not tombstoned, grouped by the query's words (so
  `Clock skew` and `clock  skew` are one line), with counts, newest first.
"""

from __future__ import annotations

import os
from typing import Any

from agent_journal.capture.strictjson import StrictJSONError, loads
from agent_journal.core.ranking import SEARCH_MISS, words
from agent_journal.ops.context import Context, read_workspace
from agent_journal.storage.config import read_root_config

# A best score under this is a weak answer (spec/SEARCH.md). One term held by one
# document in five scores ln(1 + 4.5 / 1.5) = 1.39 before recency, x1 to x2 after; a
# term in a third of a large journal about 1.1: neither is much to go on.
MISS_SCORE = 2.0
ID_PREFIX = "search-miss-"


def enabled(root_path: str) -> bool:
    """Whether config.json turns the log on (its shape was checked when the root was
    opened: redaction_config refuses a bad "search" section)."""
    found = read_root_config(root_path)
    if found is None:
        return False
    try:
        config = loads(found[1])
    except StrictJSONError:
        return False
    section = config.get("search") if isinstance(config, dict) else None
    return isinstance(section, dict) and section.get("missLog") is True


def is_weak(hits: list[dict[str, Any]]) -> bool:
    return not hits or max(hit["score"] for hit in hits) < MISS_SCORE


def record(ctx: Context, report: dict[str, Any]) -> str:
    """Append the weak search `report` answered to the log; the new observation's id."""
    from agent_journal.ops import writes

    hits = report["hits"]
    obs_id = ID_PREFIX + os.urandom(8).hex()
    writes.observe(ctx, kind=SEARCH_MISS, obs_id=obs_id, tool=None, call_id=None,
                   input_value={"query": report["query"]}, output=None, status="ok",
                   exit_code=None, duration_ms=None,
                   extra={"bestScore": max((h["score"] for h in hits), default=0.0),
                          "hits": len(hits), "thesaurusSha256": report["thesaurusSha256"]})
    return obs_id


def misses(ctx: Context) -> dict[str, Any]:
    """The logged weak queries, grouped, newest first, with the damage lists."""
    result, derived = read_workspace(ctx)
    groups: dict[str, dict[str, Any]] = {}
    for obs_id in derived.visible_observation_ids():
        events = derived.observation_events[obs_id]
        if events[0].kind != SEARCH_MISS:
            continue
        view = derived.observation_view(obs_id)
        value = view.get("input")
        query = value.get("query") if isinstance(value, dict) else None
        if not isinstance(query, str):
            continue
        key = " ".join(words(query)) or query
        group = groups.get(key)
        score = view.get("bestScore")
        if group is None:
            group = groups[key] = {"query": query, "count": 0, "firstTs": view["ts"],
                                   "lastTs": view["ts"], "bestScore": score, "ids": []}
        group["count"] += 1
        group["ids"].append(obs_id)
        if view["ts"] >= group["lastTs"]:
            group["query"], group["lastTs"], group["bestScore"] = query, view["ts"], score
        group["firstTs"] = min(group["firstTs"], view["ts"])
    ordered = sorted(groups.values(), key=lambda g: (g["lastTs"], g["query"]), reverse=True)
    root_path = ctx.open(create=False).root.path
    return {"missLog": enabled(root_path), "misses": ordered,
            "unreadable": result.unreadable, "malformed": result.malformed}
