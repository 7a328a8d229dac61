"""Ranking over the search index: the query one search runs, and its exact pruned shortcut.

Invariants: a query only reads the index, which `answer` has search_index.refresh bring
up to date first (and throws away and builds again when a query meets damage in it); the score is
core/ranking.py's formula (idf of each matched word, times the recency factor), computed
in SQL; the pruned ranking (`pruned`) returns a page only when no document outside its
candidates can reach it, so it is always the page the full query gives
(tests/test_search.py holds the two equal), else None and the full query runs.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from agent_journal.core.errors import JournalError
from agent_journal.core.ranking import PERIOD_MS, idf, snippet
from agent_journal.storage.search_index import describe, discard, refresh
from agent_journal.storage.workspace import Workspace

# Pruned ranking (see `pruned`): try at most this many rare-word prefixes,
# while they cover at most max(PRUNE_MIN_CANDIDATES, all matches / PRUNE_FRACTION).
PRUNE_ATTEMPTS = 3
PRUNE_MIN_CANDIDATES = 20_000
PRUNE_FRACTION = 4


def phrase(term: str) -> str:
    """A term as an FTS5 phrase."""
    return '"' + term.replace('"', '""') + '"'


def query(c: sqlite3.Connection, terms: list[str], *, limit: int, kind: str | None,
          include_retracted: bool, now_ms: int, boost: float, prune: bool = True,
          exclude_tools: tuple[str, ...] = ()) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """(the ranked hits, each term's document frequency) over the index `c`."""
    n = int(c.execute("SELECT value FROM meta WHERE key = 'docs'").fetchone()[0])
    params: dict[str, Any] = {"now": now_ms, "boost": float(boost), "limit": limit}
    active: list[int] = []
    weights: dict[int, float] = {}
    dfs: dict[int, int] = {}
    frequencies: dict[str, int] = {}
    for i, term in enumerate(terms):
        df = c.execute("SELECT count(*) FROM wordindex WHERE wordindex MATCH ?",
                       (phrase(term),)).fetchone()[0]
        frequencies[term] = df
        if df:
            active.append(i)
            dfs[i] = df
            weights[i] = idf(n, df)
            params[f"w{i}"] = weights[i]
    if not active:
        return [], frequencies
    where = []
    if not include_retracted:
        where.append("(d.outcome IS NULL OR d.outcome = 'live')")
    if kind is not None:
        where.append("d.kind = :kind")
        params["kind"] = kind
    for i, prefix in enumerate(exclude_tools):
        # Left out before the limit, so the page is still filled by what is kept.
        where.append(f"(d.tool IS NULL OR substr(d.tool, 1, {len(prefix)}) != :xt{i})")
        params[f"xt{i}"] = prefix
    weight = " + ".join(f"(CASE WHEN m.mask & {1 << i} THEN :w{i} ELSE 0.0 END)"
                        for i in active)
    head = (f"SELECT d.id, d.type, d.subject, d.kind, d.ts, d.outcome, m.mask, "
            f"({weight}) * (1.0 + :boost / (max(:now - d.ts_ms, 0) / {PERIOD_MS} + 1)) "
            "AS score FROM (")
    tail = (") AS m JOIN docs AS d ON d.id = m.rid "
            + (f"WHERE {' AND '.join(where)} " if where else "")
            + "ORDER BY score DESC, d.ts_ms DESC, d.subject, d.type LIMIT :limit")

    def run(matches: dict[int, str]) -> list[tuple[Any, ...]]:
        if len(matches) == 1:
            (i, expr), = matches.items()
            inner = f"SELECT rowid AS rid, {1 << i} AS mask FROM wordindex " \
                    f"WHERE wordindex MATCH :m{i}"
        else:
            inner = "SELECT rid, sum(bit) AS mask FROM (" + " UNION ALL ".join(
                f"SELECT rowid AS rid, {1 << i} AS bit FROM wordindex "
                f"WHERE wordindex MATCH :m{i}" for i in matches) + ") GROUP BY rid"
        bound = dict(params)
        bound.update({f"m{i}": expr for i, expr in matches.items()})
        return c.execute(head + inner + tail, bound).fetchall()

    rows = None
    if prune and len(active) > 1:
        rows = pruned(run, terms, active, weights, dfs, limit, boost)
    if rows is None:
        rows = run({i: phrase(terms[i]) for i in active})
    hits = []
    for doc_id, type_, subject, kind_, ts, outcome, mask, value in rows:
        matched_terms = [terms[i] for i in active if mask & (1 << i)]
        text = c.execute("SELECT text FROM texts WHERE id = ?", (doc_id,)).fetchone()[0]
        hits.append({
            "id": subject,
            "type": type_,
            "kind": kind_,
            "ts": ts,
            "score": value,
            "outcome": outcome,
            "terms": matched_terms,
            "snippet": snippet(text, matched_terms),
        })
    return hits, frequencies


def pruned(run: Any, terms: list[str], active: list[int], weights: dict[int, float],
            dfs: dict[int, int], limit: int, boost: float) -> list[tuple[Any, ...]] | None:
    """The exact top hits found by reading only the rarer words' documents, or None.

    Take the rarest words as the candidates' source. A document holding
    none of them holds only commoner words, so it scores at most the sum
    of those words' weights times the largest recency factor. The
    candidates' masks are completed with `common AND (rare OR ...)`
    queries, which FTS5 answers by skipping through the long lists rather
    than reading them. When the last of `limit` candidates still scores
    above that ceiling, nothing outside can reach the page, and the
    answer is the one the full query would give. Otherwise None: run it.
    """
    order = sorted(active, key=lambda i: (-weights[i], i))
    total = sum(dfs.values())
    budget = max(PRUNE_MIN_CANDIDATES, total // PRUNE_FRACTION)
    seen = 0
    for j in range(1, min(len(order), PRUNE_ATTEMPTS + 1)):
        seen += dfs[order[j - 1]]
        if seen > budget:
            return None
        if seen < limit:
            continue  # too few candidates to fill the page: take the next word too
        rare, common = order[:j], order[j:]
        any_rare = " OR ".join(phrase(terms[i]) for i in rare)
        matches = {i: phrase(terms[i]) for i in rare}
        matches.update({i: f"{phrase(terms[i])} AND ({any_rare})" for i in common})
        rows = run(matches)
        ceiling = 0.0
        for i in common:
            ceiling += weights[i]
        ceiling *= 1.0 + boost
        if len(rows) == limit and rows[-1][7] > ceiling * (1 + 1e-9):
            return list(rows)
    return None


def answer(ws: Workspace, terms: list[str], *, limit: int, kind: str | None,
           include_retracted: bool, now_ms: int, boost: float,
           exclude_tools: tuple[str, ...] = ()
           ) -> tuple[list[dict[str, Any]], list[str], list[dict[str, Any]],
                      list[dict[str, Any]]]:
    """(hits, unmatched, unreadable, malformed) from an index brought up to date first:
    `unmatched` are the terms no indexed document holds. Observations of a tool whose
    name starts with one of `exclude_tools` are never hits."""
    for attempt in range(2):
        index = refresh(ws)
        try:
            hits, frequencies = query(index.conn, terms, limit=limit, kind=kind,
                                      include_retracted=include_retracted, now_ms=now_ms,
                                      boost=boost, exclude_tools=exclude_tools)
            unmatched = [t for t in terms if not frequencies.get(t)]
            unreadable, malformed = index.damage(ws)
            return hits, unmatched, unreadable, malformed
        except (sqlite3.Error, MemoryError) as exc:
            # Damage only a query reaches (say, a bad FTS page) is not trusted
            # either: the index is thrown away and built again. (A garbled FTS record
            # can make SQLite answer SQLITE_NOMEM, which Python raises as MemoryError.)
            index.conn.close()
            discard(ws)
            if attempt:
                raise JournalError(f"the search index failed twice: {describe(exc)}") from None
        finally:
            index.conn.close()
    raise AssertionError("unreachable")
