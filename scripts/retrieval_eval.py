"""Retrieval quality of `search` against a judged query set (tests/data/retrieval/queries.json).

The set holds real Claude Code sessions (tests/data/claude-code/transcripts) and, for
each, queries a person or an agent resuming that work would type, written and judged
(which observation ids answer each) by reading the sessions before any search was run.
For every set this imports the transcripts into a fresh journal root, fixes the clock at
the set's `now` (so recency, and every figure, is the same on each run), runs each query
as `search` does (top K, default ranking and knobs, the root's thesaurus if --thesaurus
gives one) and scores the hits against the judgements:

- MRR@K: the mean over queries of 1/rank of the first relevant hit in the top K (0 when
  none is there);
- recall@k (k = 1, K): the mean over queries of the share of its relevant ids found in
  the top k;
- success@k: the share of queries with at least one relevant id in the top k.

    .venv/bin/python scripts/retrieval_eval.py            # the figures, per set and overall
    .venv/bin/python scripts/retrieval_eval.py --show     # each query's ranks and top hit
    .venv/bin/python scripts/retrieval_eval.py --json     # the figures as JSON
    .venv/bin/python scripts/retrieval_eval.py --thesaurus my-thesaurus.json

A measure, not a test: it exits 0 whatever the figures. A change to ranking, tokenising
or the thesaurus reports them before and after. `make bench` runs it (bench_retrieval.py).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
QUERIES = DATA / "retrieval" / "queries.json"
sys.path.insert(0, str(REPO))


def _metrics(ranked: list[str], relevant: set[str], k: int) -> dict[str, float]:
    top = ranked[:k]
    first = next((i + 1 for i, some_id in enumerate(top) if some_id in relevant), None)
    return {
        "rr": 0.0 if first is None else 1.0 / first,
        "recall1": len(relevant & set(top[:1])) / len(relevant),
        "recallK": len(relevant & set(top)) / len(relevant),
        "success1": float(bool(relevant & set(top[:1]))),
        "successK": float(first is not None),
        "rank": float(first or 0),
    }


def _mean(rows: list[dict[str, float]], key: str) -> float:
    return sum(r[key] for r in rows) / len(rows) if rows else 0.0


def _summary(rows: list[dict[str, float]], k: int) -> dict[str, Any]:
    return {"queries": len(rows), f"mrr@{k}": round(_mean(rows, "rr"), 4),
            "recall@1": round(_mean(rows, "recall1"), 4),
            f"recall@{k}": round(_mean(rows, "recallK"), 4),
            "success@1": round(_mean(rows, "success1"), 4),
            f"success@{k}": round(_mean(rows, "successK"), 4)}


def evaluate(path: Path = QUERIES, thesaurus: Path | None = None) -> dict[str, Any]:
    """Import every set, run its queries, and score them (the figures and each query's)."""
    from agent_journal.agents.claude_code_import import import_claude_code
    from agent_journal.ops import search
    from agent_journal.ops.context import Context

    spec = json.loads(path.read_text())
    k = int(spec.get("k", 10))
    saved = {name: os.environ.get(name) for name in
             ("AGENT_JOURNAL_NOW", "AGENT_JOURNAL_SEARCH_BOOST", "AGENT_JOURNAL_ROOT")}
    os.environ.pop("AGENT_JOURNAL_SEARCH_BOOST", None)
    os.environ.pop("AGENT_JOURNAL_ROOT", None)
    tmp = tempfile.mkdtemp(prefix="aj-retrieval-")
    os.chmod(tmp, 0o700)
    sets: list[dict[str, Any]] = []
    every: list[dict[str, float]] = []
    try:
        for index, group in enumerate(spec["sets"]):
            root = os.path.join(tmp, f"root{index}")
            os.makedirs(root, mode=0o700)
            if thesaurus is not None:
                shutil.copyfile(thesaurus, os.path.join(root, "thesaurus.json"))
                os.chmod(os.path.join(root, "thesaurus.json"), 0o600)
            ctx = Context(root, group["workspace"])
            for transcript in group["transcripts"]:
                import_claude_code(ctx, str(DATA / transcript))
            os.environ["AGENT_JOURNAL_NOW"] = group["now"]
            rows = []
            for q in group["queries"]:
                report = search.search(Context(root, group["workspace"]), q["query"], limit=k)
                ranked = [hit["id"] for hit in report["hits"]]
                row = _metrics(ranked, set(q["relevant"]), k)
                row.update({"id": q["id"], "query": q["query"], "top": ranked[:3],
                            "unmatched": report["unmatched"]})
                rows.append(row)
            every += rows
            sets.append({"workspace": group["workspace"], **_summary(rows, k), "rows": rows})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return {"k": k, "overall": _summary(every, k), "sets": sets}


def _line(name: str, figures: dict[str, Any], k: int) -> str:
    return (f"{name:<10} {figures['queries']:3d} queries  MRR@{k} {figures[f'mrr@{k}']:.3f}  "
            f"recall@1 {figures['recall@1']:.3f}  recall@{k} {figures[f'recall@{k}']:.3f}  "
            f"(success@1 {figures['success@1']:.3f}, success@{k} {figures[f'success@{k}']:.3f})")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=Path, default=QUERIES)
    parser.add_argument("--thesaurus", type=Path, default=None,
                        help="a thesaurus.json to put in every root")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--show", action="store_true", help="each query's rank and top hits")
    args = parser.parse_args(argv)
    result = evaluate(args.queries, args.thesaurus)
    k = result["k"]
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    for group in result["sets"]:
        print(_line(group["workspace"], group, k), flush=True)
        if args.show:
            for row in group["rows"]:
                rank = int(row["rank"]) or "-"
                print(f"    {row['id']}  rank {rank!s:>2}  {row['query']!r}  "
                      f"top {row['top'][:1]}  unmatched {row['unmatched']}")
    print(_line("overall", result["overall"], k), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
