"""core/counts.CountFold: what coverage and decay read, as a projection's fold.

Law: `sift` (the observations counted as stored, no event built) changes nothing: a
segment folded with it gives the state `step` alone gives for every row, damaged rows
included (a row whose body no longer matches its checksum is malformed either way).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_read_projection import _SPECS, _append, _event, _segment

from agent_journal.core.counts import CountFold
from agent_journal.storage.projection import fold_segment


class _StepOnly(CountFold):
    sift = None  # type: ignore[assignment]


def _state(part: Any) -> tuple[Any, ...]:
    counts, subjects, others = part.state
    return counts, sorted(subjects), others, part.malformed, part.high, part.unreadable


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(specs=st.lists(_SPECS, min_size=1, max_size=12), damaged=st.integers(0, 12))
def test_sifting_stored_rows_folds_what_stepping_every_row_folds(tmp_path_factory, specs,
                                                                 damaged):
    root: Path = tmp_path_factory.mktemp("counts") / "journal"
    _append(root, 0, [_event(i, spec) for i, spec in enumerate(specs)])
    path = _segment(root, 0)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE events SET checksum = 'xxh3-64:0' WHERE seq = ?", (damaged,))
    conn.close()
    sifted = fold_segment(path, "seg", CountFold())
    stepped = fold_segment(path, "seg", _StepOnly())
    assert _state(sifted) == _state(stepped)
    assert sum(sifted.state[0].values()) + len(sifted.malformed) == len(specs)
