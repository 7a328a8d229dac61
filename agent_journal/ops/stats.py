"""`stats`: calls per tool, failures per command, time per session, through a projection.

Invariant: the answer is core.stats.combine over every segment's StatsFold state as the
projection engine (storage/projection.py) gives it, so it is what folding every row gives,
and a run after a few new rows reads only those rows. Tombstoned calls are never counted.
The damage the read met is reported beside the counts, as every read reports it.
"""

from __future__ import annotations

from typing import Any

from agent_journal.core.stats import StatsFold, combine
from agent_journal.ops.context import Context
from agent_journal.storage.projection import project
from agent_journal.storage.segment_reader import ReadResult


def stats(ctx: Context) -> tuple[dict[str, Any], ReadResult]:
    """The report, and the read's damage (ReadResult's lists) for the floor warning."""
    ws = ctx.open(create=False)
    parts = project(ws, StatsFold())
    result = ReadResult()
    for part in parts:
        result.segments.append(part.rel)
        result.malformed.extend({"segment": part.rel, "row": seq, "reason": why}
                                for seq, why in part.malformed)
        if part.unreadable is not None:
            result.unreadable.append({"path": part.rel, "reason": part.unreadable})
    counts = combine([p.state for p in parts])
    report = {
        "workspace": ws.name,
        "calls": counts["calls"],
        "tools": [{"tool": t, "calls": n, "failed": f}
                  for t, (n, f) in sorted(counts["tools"].items(), key=lambda x: -x[1][0])],
        "commands": [{"command": c, "runs": n, "failed": f}
                     for c, (n, f) in sorted(counts["commands"].items(),
                                             key=lambda x: (-x[1][1], -x[1][0], x[0]))],
        "sessions": [{"session": s or None, "first": a, "last": b, "calls": n}
                     for s, (a, b, n) in sorted(counts["sessions"].items(),
                                                key=lambda x: x[1][0])],
        "unreadable": result.unreadable, "malformed": result.malformed,
    }
    return report, result
