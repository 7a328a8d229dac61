"""Strict JSON parsing for everything that will be stored.

Invariant: `loads` returns only values that canonical JSON can write back unchanged: no
duplicate object keys (which value "wins" is decoder-specific, so a duplicate is ambiguous
evidence), no NaN/Infinity (not JSON, and `allow_nan=False` encoders refuse them), no number
that overflows to infinity, and (by default) no lone UTF-16 surrogate (such a string cannot be
encoded as UTF-8). Every failure is a StrictJSONError whose message is one line naming the
problem.
"""

from __future__ import annotations

from agent_journal.core.cjson import Decoder

# Annotations only: typing costs milliseconds to import and this module is on the hook path.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import re
    from typing import Any, Literal

__all__ = ["StrictJSONError", "loads"]


class StrictJSONError(ValueError):
    """The text is not JSON, or is JSON this project refuses to store; the message says why."""


# Python's decoder combines escaped surrogate pairs itself; only an escape can produce a lone
# surrogate (raw ones cannot appear in valid UTF-8), so the walk below runs only when the text
# holds such an escape, and the pattern is compiled only then.
_surrogate: re.Pattern[str] | None = None


def _surrogate_pattern() -> re.Pattern[str]:
    global _surrogate
    if _surrogate is None:
        import re

        _surrogate = re.compile("[\ud800-\udfff]")
    return _surrogate


_INFINITIES = (float("inf"), float("-inf"))


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                import json

                raise StrictJSONError(f"duplicate key {json.dumps(key)}")
            seen.add(key)
    return result


def _reject_constant(name: str) -> Any:
    raise StrictJSONError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    # 1e999 parses to inf without passing through parse_constant.
    if value in _INFINITIES:
        raise StrictJSONError(f"number {text[:40]} is out of range")
    return value


def _check_surrogates(value: Any, mode: str) -> Any:
    # Iterative so that the deepest structure the decoder accepted cannot overflow the stack.
    if isinstance(value, str):
        return _fix_string(value, mode)
    root: list[Any] = [value]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        container, key = stack.pop()
        item = container[key]
        if isinstance(item, str):
            container[key] = _fix_string(item, mode)
        elif isinstance(item, list):
            stack.extend((item, i) for i in range(len(item)))
        elif isinstance(item, dict):
            if any(_surrogate_pattern().search(k) for k in item):
                renamed = {_fix_string(k, mode): v for k, v in item.items()}
                if len(renamed) != len(item):
                    raise StrictJSONError("duplicate key after replacing lone surrogates")
                container[key] = item = renamed
            stack.extend((item, k) for k in item)
    return root[0]


def _fix_string(text: str, mode: str) -> str:
    match = _surrogate_pattern().search(text)
    if match is None:
        return text
    if mode == "reject":
        raise StrictJSONError(f"lone surrogate \\u{ord(match.group()):04x} in string")
    return _surrogate_pattern().sub("\ufffd", text)


_strict_decoder: Decoder | None = None


def _decoder() -> Decoder:
    # One decoder for every call: json.loads with hooks builds a new one (and its scanner)
    # each time, a cost paid per line of a transcript. (core.cjson: json's own decoder,
    # without importing json, which costs the hook milliseconds, until an error needs it.)
    global _strict_decoder
    if _strict_decoder is None:
        _strict_decoder = Decoder(
            object_pairs_hook=_unique_pairs,
            parse_constant=_reject_constant,
            parse_float=_finite_float,
        )
    return _strict_decoder


def loads(
    text: str | bytes | bytearray,
    *,
    lone_surrogates: Literal["reject", "replace"] = "reject",
) -> Any:
    """Parse `text` as strict JSON.

    Bytes must be UTF-8 (RFC 8259 §8.1); the stdlib's UTF-16/32 sniffing is not used.
    `lone_surrogates="replace"` turns each unpaired surrogate into U+FFFD instead of failing:
    a JavaScript producer that cuts a string inside a surrogate pair emits one, and losing one
    character is better than losing the whole payload.
    """
    if isinstance(text, bytes | bytearray):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise StrictJSONError(f"not valid UTF-8 at byte {exc.start}") from None
    if not isinstance(text, str):
        raise StrictJSONError(f"expected str or bytes, got {type(text).__name__}")
    if text.startswith("\ufeff"):
        # What json.loads refuses before it decodes (the decoder itself does not check).
        raise StrictJSONError("invalid JSON: Unexpected UTF-8 BOM (decode using utf-8-sig) "
                              "at line 1 column 1")
    try:
        value = _decoder().decode(text)
    except StrictJSONError:
        raise
    except RecursionError:
        raise StrictJSONError("invalid JSON: nesting too deep") from None
    except ValueError as exc:
        from json import JSONDecodeError  # (loaded by now: json's decoder reported it)

        if isinstance(exc, JSONDecodeError):
            raise StrictJSONError(
                f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
            ) from None
        # int() refuses integers beyond sys.get_int_max_str_digits().
        raise StrictJSONError(f"invalid JSON: {str(exc).splitlines()[0]}") from None
    # One scan of the text in the common case (no \\u escape), three only when one is there.
    if "\\u" in text and ("\\ud" in text or "\\uD" in text):
        value = _check_surrogates(value, lone_surrogates)
    return value
