"""Retrieval quality of search (MRR@10, recall@1/@10) on the judged query set: a measure
with no goal to fail, printed with the speed figures (scripts/retrieval_eval.py)."""

from __future__ import annotations

from retrieval_eval import main


def run(ctx: object) -> None:
    """`make bench` entry: the per-set and overall figures."""
    main([])
