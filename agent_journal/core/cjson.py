"""JSON through the interpreter's own C scanner and encoder, without importing `json`.

The `json` package compiles regular expressions as it loads, and `re` brings `enum`,
`functools` and more with it: about 6 ms of a process that journals one event (the agent
hook, whose whole budget is a few milliseconds over a bare SQLite insert). json's decoder
and encoder are themselves thin wrappers around `_json`'s C functions; this module calls
those directly.

Invariant: every answer is json's own. A decoder or encoder built here returns exactly what
`json.JSONDecoder(...).decode` or `json.JSONEncoder(...).encode` with the same options
returns, and raises what they raise: whatever the fast path cannot settle (any error, an
interpreter without `_json`) is handed to `json` itself, imported only then, so every
error and its message is json's.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_c: Any
try:
    import _json as _c
except ImportError:  # an interpreter without the accelerator: json's Python code does it
    _c = None
_c_make_scanner: Any = _c.make_scanner if _c is not None else None
_c_make_encoder: Any = _c.make_encoder if _c is not None else None
_encode_str: Any = _c.encode_basestring if _c is not None else None
_encode_ascii: Any = _c.encode_basestring_ascii if _c is not None else None

# JSON's insignificant whitespace (json.decoder.WHITESPACE).
_BLANKS = " \t\n\r"
_CONSTANTS = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}


class _Options:
    """The attributes json's C scanner reads from the JSONDecoder that makes it."""

    __slots__ = ("strict", "object_hook", "object_pairs_hook", "parse_float", "parse_int",
                 "parse_constant")

    strict: bool
    object_hook: Any
    object_pairs_hook: Any
    parse_float: Any
    parse_int: Any
    parse_constant: Any


class Decoder:
    """`json.JSONDecoder(object_pairs_hook=, parse_float=, parse_constant=)`, its
    `decode` and `raw_decode` (the only two methods it has)."""

    __slots__ = ("_kwargs", "_scan", "_json")

    def __init__(self, *, object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None
                 = None, parse_float: Callable[[str], Any] | None = None,
                 parse_constant: Callable[[str], Any] | None = None) -> None:
        self._kwargs: dict[str, Any] = {"object_pairs_hook": object_pairs_hook,
                                        "parse_float": parse_float,
                                        "parse_constant": parse_constant}
        self._json: Any = None
        self._scan: Any = None
        if _c_make_scanner is not None:
            options = _Options()
            options.strict = True
            options.object_hook = None
            options.object_pairs_hook = object_pairs_hook
            options.parse_float = parse_float or float
            options.parse_int = int
            options.parse_constant = parse_constant or _CONSTANTS.__getitem__
            self._scan = _c_make_scanner(options)

    def decode(self, text: str) -> Any:
        scan = self._scan
        if scan is not None and type(text) is str:
            start = len(text) - len(text.lstrip(_BLANKS))
            try:
                value, end = scan(text, start)
            except Exception:  # an error: json's decoder says which, below
                pass
            else:
                if end == len(text) or not text[end:].strip(_BLANKS):
                    return value
        return self._full().decode(text)

    def raw_decode(self, text: str, index: int = 0) -> tuple[Any, int]:
        scan = self._scan
        if scan is not None and type(text) is str:
            try:
                return scan(text, index)  # type: ignore[no-any-return]
            except Exception:
                pass
        return self._full().raw_decode(text, index)  # type: ignore[no-any-return]

    def _full(self) -> Any:
        if self._json is None:
            import json

            self._json = json.JSONDecoder(**self._kwargs)
        return self._json


_plain: Decoder | None = None


def loads(text: str) -> Any:
    """`json.loads(text)` for a str."""
    global _plain
    if _plain is None:
        _plain = Decoder()
    return _plain.decode(text)


def _not_serializable(value: Any) -> Any:
    # json.JSONEncoder.default, word for word.
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


def encoder(*, sort_keys: bool = False, ensure_ascii: bool = True,
            separators: tuple[str, str] = (", ", ": "), allow_nan: bool = True
            ) -> Callable[[Any], str]:
    """`json.JSONEncoder(sort_keys=, ensure_ascii=, separators=, allow_nan=).encode`, as
    json's own one-shot path runs it (a fresh circular-reference memo per call)."""
    item_separator, key_separator = separators
    if _c_make_encoder is None:
        import json

        return json.JSONEncoder(sort_keys=sort_keys, ensure_ascii=ensure_ascii,
                                separators=separators, allow_nan=allow_nan).encode
    strings = _encode_ascii if ensure_ascii else _encode_str
    make = _c_make_encoder

    def encode(value: Any) -> str:
        if isinstance(value, str):
            return strings(value)  # type: ignore[no-any-return]
        return "".join(make({}, _not_serializable, strings, None, key_separator,
                            item_separator, sort_keys, False, allow_nan)(value, 0))

    return encode


def needs_escape(text: str) -> bool:
    """Whether JSON writes `text` with an escape (a quote, a backslash or a control
    character below U+0020), non-ASCII kept as it is."""
    if _encode_str is None:
        return any(ch in '"\\' or ch < " " for ch in text)
    return len(_encode_str(text)) != len(text) + 2
