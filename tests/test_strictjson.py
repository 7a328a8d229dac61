"""strictjson: JSON that canonical encoding can write back unchanged, or a one-line error."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_journal.capture.strictjson import StrictJSONError, loads


def error_of(text: str | bytes, **kwargs: str) -> str:
    with pytest.raises(StrictJSONError) as info:
        loads(text, **kwargs)  # type: ignore[arg-type]
    message = str(info.value)
    assert "\n" not in message
    return message


def test_plain_json_parses() -> None:
    assert loads('{"a": [1, 2.5, "x", true, null], "b": {}}') == {
        "a": [1, 2.5, "x", True, None],
        "b": {},
    }
    assert loads("[]") == []
    assert loads('"s"') == "s"
    assert loads("0") == 0


def test_error_is_a_value_error() -> None:
    assert issubclass(StrictJSONError, ValueError)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"x": 1, "x": 2}', 'duplicate key "x"'),
        ('{"a": {"y": 1, "z": 2, "y": 3}}', 'duplicate key "y"'),
        ('[{"ok": 1}, {"k": 1, "k": 1}]', 'duplicate key "k"'),
        # Escapes are decoded before comparing: these are the same key.
        ('{"a": 1, "\\u0061": 2}', 'duplicate key "a"'),
        ('{"q\\"": 1, "q\\"": 2}', 'duplicate key "q\\""'),
    ],
)
def test_duplicate_keys_are_rejected(text: str, message: str) -> None:
    assert error_of(text) == message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("NaN", "NaN is not valid JSON"),
        ('{"v": NaN}', "NaN is not valid JSON"),
        ("[Infinity]", "Infinity is not valid JSON"),
        ("-Infinity", "-Infinity is not valid JSON"),
        ("1e999", "number 1e999 is out of range"),
        ("[-1.5e400]", "number -1.5e400 is out of range"),
    ],
)
def test_non_finite_numbers_are_rejected(text: str, message: str) -> None:
    assert error_of(text) == message


def test_large_but_finite_numbers_are_kept() -> None:
    assert loads("1.7e308") == 1.7e308
    assert loads("123456789012345678901234567890") == 123456789012345678901234567890


def test_syntax_errors_name_the_position() -> None:
    assert error_of('{"a": 1,}') == (
        "invalid JSON: Expecting property name enclosed in double quotes at line 1 column 9"
    )
    assert error_of("") == "invalid JSON: Expecting value at line 1 column 1"
    assert error_of("[1]\n[2]") == "invalid JSON: Extra data at line 2 column 1"


def test_integer_too_long_is_a_strict_error() -> None:
    assert error_of("9" * 5000).startswith("invalid JSON: Exceeds the limit")


def test_nesting_too_deep_is_a_strict_error() -> None:
    assert error_of("[" * 200_000 + "]" * 200_000) == "invalid JSON: nesting too deep"


def test_bytes_must_be_utf8() -> None:
    assert loads('{"name": "café"}'.encode()) == {"name": "café"}
    assert loads(bytearray(b"[1]")) == [1]
    assert error_of(b'{"a": "\xff"}') == "not valid UTF-8 at byte 7"
    # UTF-16 would be sniffed by json.loads; stored text is UTF-8 only.
    assert error_of('{"a": 1}'.encode("utf-16")) == "not valid UTF-8 at byte 0"


def test_byte_order_mark_is_rejected() -> None:
    assert "BOM" in error_of(b"\xef\xbb\xbf{}")


def test_lone_surrogates_are_rejected_by_default() -> None:
    assert error_of('"\\ud800"') == "lone surrogate \\ud800 in string"
    assert error_of('{"k": ["ok", "x\\udfffy"]}') == "lone surrogate \\udfff in string"
    assert error_of('{"\\udc00": 1}') == "lone surrogate \\udc00 in string"


def test_lone_surrogates_can_be_replaced() -> None:
    value = loads('{"a\\udc00": ["x\\ud83d", "ok"]}', lone_surrogates="replace")
    assert value == {"a\ufffd": ["x\ufffd", "ok"]}
    json.dumps(value, ensure_ascii=False).encode("utf-8")  # encodable now


def test_replacing_surrogates_refuses_to_merge_keys() -> None:
    assert error_of('{"\\ud800": 1, "\\udfff": 2}', lone_surrogates="replace") == (
        "duplicate key after replacing lone surrogates"
    )


def test_surrogate_pairs_are_one_character() -> None:
    assert loads('"\\ud83d\\ude00"') == "\U0001f600"
    # An escaped backslash followed by "ud800" is plain text, not a surrogate.
    assert loads('"\\\\ud800"') == "\\ud800"


def test_surrogate_check_survives_deep_nesting() -> None:
    depth = 900
    text = "[" * depth + '"\\ud800"' + "]" * depth
    value = loads(text, lone_surrogates="replace")
    for _ in range(depth):
        value = value[0]
    assert value == "\ufffd"


def test_non_text_input_is_refused() -> None:
    assert error_of(123) == "expected str or bytes, got int"  # type: ignore[arg-type]


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=30,
)


@given(json_values)
def test_round_trip_of_canonical_json(value: object) -> None:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert loads(text) == value
    assert loads(text.encode("utf-8")) == value
    assert loads(json.dumps(value)) == value  # ASCII escapes, surrogate pairs included


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_every_finite_float_survives(number: float) -> None:
    parsed = loads(json.dumps(number))
    assert parsed == number and math.isfinite(parsed)
