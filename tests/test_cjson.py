"""core/cjson.py answers what json answers: the same values, the same text, the same errors."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_journal.core import cjson

_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20)
_blank = st.text(alphabet=" \t\n\r", max_size=3)


def _outcome(call: Any) -> tuple[str, Any]:
    try:
        return "value", call()
    except Exception as exc:  # the error's class and message are part of the answer
        return exc.__class__.__name__, str(exc)


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)  # NaN == NaN


def _pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
    if len({k for k, _ in items}) != len(items):
        raise ValueError("duplicate")
    return dict(items)


OPTIONS = [{}, {"object_pairs_hook": _pairs, "parse_float": float},
           {"parse_constant": lambda name: (_ for _ in ()).throw(ValueError(name))}]


@pytest.mark.parametrize("options", OPTIONS)
@given(value=_values, before=_blank, after=_blank)
def test_decoding_json_text_gives_what_json_gives(options: dict[str, Any], value: Any,
                                                  before: str, after: str) -> None:
    text = before + json.dumps(value) + after
    ours = _outcome(lambda: cjson.Decoder(**options).decode(text))
    theirs = _outcome(lambda: json.JSONDecoder(**options).decode(text))
    assert ours[0] == theirs[0] and (ours[0] != "value" or _same(ours[1], theirs[1]))
    if ours[0] != "value":
        assert ours == theirs


@pytest.mark.parametrize("options", OPTIONS)
@given(text=st.text(alphabet='{}[]",:0123456789.eE+-tfnrulasNIaIy \n\\u', max_size=30))
def test_decoding_anything_fails_or_succeeds_as_json_does(options: dict[str, Any],
                                                          text: str) -> None:
    ours = _outcome(lambda: cjson.Decoder(**options).decode(text))
    theirs = _outcome(lambda: json.JSONDecoder(**options).decode(text))
    assert ours[0] == theirs[0]
    if ours[0] == "value":
        assert _same(ours[1], theirs[1])
    else:
        assert ours[1] == theirs[1]
    raw_ours = _outcome(lambda: cjson.Decoder(**options).raw_decode(text))
    raw_theirs = _outcome(lambda: json.JSONDecoder(**options).raw_decode(text))
    assert raw_ours[0] == raw_theirs[0]


ENCODERS = [{}, {"sort_keys": True, "separators": (",", ":"), "ensure_ascii": False,
                 "allow_nan": False}, {"sort_keys": True}]


@pytest.mark.parametrize("options", ENCODERS)
@given(value=_values)
def test_encoding_gives_what_json_gives(options: dict[str, Any], value: Any) -> None:
    assert _outcome(lambda: cjson.encoder(**options)(value)) == \
        _outcome(lambda: json.JSONEncoder(**options).encode(value))


def test_encoding_refuses_what_json_refuses() -> None:
    looped: list[Any] = []
    looped.append(looped)
    for bad in (looped, {"x": object()}, {(1, 2): 3}, float("nan")):
        for options in ENCODERS:
            assert _outcome(lambda: cjson.encoder(**options)(bad)) == \
                _outcome(lambda: json.JSONEncoder(**options).encode(bad))  # noqa: B023


@given(st.text())
def test_needs_escape_is_what_the_canonical_encoder_escapes(text: str) -> None:
    assert cjson.needs_escape(text) == (json.dumps(text, ensure_ascii=False)
                                        != f'"{text}"')


def test_it_imports_no_json_until_an_error_needs_it() -> None:
    code = ("import sys\nfrom agent_journal.core import cjson\n"
            "cjson.loads('{\"a\": [1, 2.5, null]}')\n"
            "cjson.encoder(sort_keys=True)({'b': [1], 'a': 'x'})\n"
            "print('json' in sys.modules, 're' in sys.modules)\n"
            "try:\n    cjson.loads('{')\nexcept ValueError as exc:\n"
            "    print(type(exc).__name__, 'json' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "False", "JSONDecodeError", "True"]
