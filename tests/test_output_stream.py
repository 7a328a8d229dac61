"""A streamed report is the same JSON document as the built one, written item by item."""

import contextlib
import io
import json

from hypothesis import given
from hypothesis import strategies as st

from agent_journal.cli import output

scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=8)
items = st.dictionaries(st.text(max_size=6), scalars | st.lists(scalars, max_size=3),
                        max_size=4)


@given(entries=st.lists(items, max_size=5), tail=st.lists(items, max_size=2))
def test_a_streamed_list_prints_the_document_the_list_prints(entries, tail):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        output.emit_json({"entries": iter(entries), "liveConstraints": tail, "n": {"a": 1}})
    text = out.getvalue()
    assert text.endswith("}\n")
    assert json.loads(text) == {"entries": entries, "liveConstraints": tail, "n": {"a": 1}}
    # One line per item, so a reader can follow a large document line by line.
    lines = text.split("\n")
    if entries:
        assert lines[1] == '  "entries": ['
        assert [json.loads(line.strip().rstrip(",")) for line in lines[2:2 + len(entries)]] \
            == entries
        assert lines[2 + len(entries)] == "  ],"
    else:
        assert lines[1] == '  "entries": [],'
