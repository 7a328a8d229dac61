"""Peeked reads (storage/segment_reader.Peek): SQLite's values are the body's own.

Law: for any observation data and any paths, one path or several, the peek
holds exactly what Python's json reads at those paths (null where a path is
absent), so a reader may use the peek in place of parsing the body.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_journal.core.model import Event
from agent_journal.storage.connection import connect
from agent_journal.storage.files import create_private_file
from agent_journal.storage.segment import init_segment, insert_events
from agent_journal.storage.segment_reader import Peek, json_check, read_segment

pytestmark = pytest.mark.skipif(json_check() is None, reason="SQLite peeks nothing here")

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10**20), max_value=10**20)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                               max_size=3),
    max_leaves=8)
PATHS = ("$.data.tool", "$.data.input", "$.data.absent", "$.kind")


def _segment(tmp: Path, data: dict[str, Any]) -> str:
    path = str(tmp / "seg.sqlite")
    create_private_file(path)
    conn = connect(path)
    init_segment(conn, workspace="ws", replica="r1")
    conn.execute("BEGIN")
    insert_events(conn, [Event(event_id="e1", type="observation", kind="tool_call", id="o1",
                               ts="2026-01-01T00:00:00.000Z", author="agent", session="s",
                               replica="r1", data=data)])
    conn.execute("COMMIT")
    conn.close()
    return path


def _at(obj: Any, path: str) -> Any:
    for key in path.removeprefix("$.").split("."):
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def _peeked(path: str, paths: tuple[str, ...]) -> tuple[Any, ...]:
    scan = read_segment(path, peek=Peek(paths))
    assert scan.malformed == [] and scan.unreadable is None
    [ev] = scan.events
    return ev.peek  # type: ignore[attr-defined,no-any-return]


@settings(max_examples=60, deadline=None)
@given(tool=JSON, value=JSON)
def test_one_path_peeks_the_json_value_as_several_paths_do(tmp_path_factory: Any, tool: Any,
                                                           value: Any) -> None:
    path = _segment(tmp_path_factory.mktemp("peek"), {"tool": tool, "input": value})
    body = {"kind": "tool_call", "data": {"tool": tool, "input": value}}
    expected = tuple(_at(body, p) for p in PATHS)
    assert _peeked(path, PATHS) == expected
    for n, one in enumerate(PATHS):
        assert _peeked(path, (one,)) == (expected[n],)


def test_one_path_peek_of_a_string_large_number_and_object(tmp_path: Path) -> None:
    big = 12345678901234567890123
    path = _segment(tmp_path, {"tool": "Bash", "exitCode": big, "input": {"command": "ls"}})
    assert _peeked(path, ("$.data.tool",)) == ("Bash",)
    assert _peeked(path, ("$.data.exitCode",)) == (big,)
    assert _peeked(path, ("$.data.input",)) == ({"command": "ls"},)
    assert _peeked(path, ("$.data.absent",)) == (None,)
