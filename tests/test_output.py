"""output.to_json is json.dumps(indent=2, ensure_ascii=False), whatever path it takes."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_journal import output

_TEXT = st.text(max_size=8) | st.sampled_from(['a", "b', "line\nbreak", "é😀", "\\", ",\n    "])
_VALUES = (st.none() | st.booleans() | st.integers() | _TEXT
           | st.floats(allow_nan=False) | st.lists(_TEXT, max_size=4)
           | st.lists(st.integers(), max_size=2)
           | st.dictionaries(_TEXT, st.integers(), max_size=2))


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(_TEXT, _VALUES, max_size=5) | st.lists(_TEXT, max_size=3) | _TEXT)
def test_to_json_is_json_dumps_with_two_space_indent(value):
    assert output.to_json(value) == json.dumps(value, indent=2, ensure_ascii=False)


def test_a_compaction_report_takes_the_direct_path():
    report = {"apply": True, "entryTtlDays": None, "observationTtlDays": 3,
              "expired": [], "tombstoned": ["o-1", 'o-"2"'], "skipped": ["seg"]}
    assert output._flat_json(report) == json.dumps(report, indent=2, ensure_ascii=False)
    assert output._flat_json({"nested": {"a": 1}}) is None
    assert output._flat_json({"mixed": ["a", 1]}) is None
    assert output._flat_json({}) is None
