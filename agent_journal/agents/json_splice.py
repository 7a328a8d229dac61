"""Edits to a JSON document's text that leave every byte outside the edit as it was.

Invariant: inserting a member or an element and then removing it again gives back the
original text byte for byte: an insertion after the last sibling adds `,` newline indent
VALUE, and the removal of a sibling that is not the first takes away exactly that; an
insertion into an empty container fills its inside, and removing its only child empties it.
The text must already be strict JSON (hook_settings.load checks it first).

An edit reads only what it must to find its place: the members of the containers on its
path, each value among them passed over by json's C scanner, never walked character by
character in Python; so an edit costs about one C-speed pass, however large the file.
`depth` is how deep inside a larger document the text sits (the text of one member's value
is edited alone, then put back), so a value inserted there is indented as in the whole.
"""

from __future__ import annotations

import json
import re
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any

_WS = re.compile(r"[ \t\r\n]*")
# json's C scanner: the end of any value at C speed (the value it builds is dropped).
_scan_once = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


class Node:
    """A value's span [start, end) and, for containers, its children (with their keys),
    read from `text` the first time they are asked for."""

    __slots__ = ("start", "_end", "kind", "_text", "_children")

    def __init__(self, text: str, start: int, end: int | None, kind: str) -> None:
        self.start = start
        self._end = end  # None until read (the document's outermost value)
        self.kind = kind  # "object", "array" or "scalar"
        self._text = text
        self._children: list[tuple[Any, int, Node]] | None = None

    @property
    def end(self) -> int:
        if self._end is None:
            self.children  # noqa: B018  (reading the members finds the end)
        assert self._end is not None
        return self._end

    @property
    def children(self) -> list[tuple[Any, int, Node]]:
        """(key or index, start of the member (its key for objects), value node)."""
        if self._children is None:
            self._children, self._end = _members(self._text, self.start, self.kind)
        return self._children

    def child(self, key: Any) -> Node | None:
        for name, _, node in self.children:
            if name == key:
                return node
        return None


def _skip(text: str, i: int) -> int:
    return _WS.match(text, i).end()  # type: ignore[union-attr]  # (matches the empty run)


def _kind(ch: str) -> str:
    return "object" if ch == "{" else "array" if ch == "[" else "scalar"


def _value_end(text: str, i: int) -> int:
    try:
        return int(_scan_once(text, i)[1])
    except StopIteration:
        raise ValueError(f"no JSON value at offset {i}") from None


def _members(text: str, start: int, kind: str) -> tuple[list[tuple[Any, int, Node]], int]:
    """The children of the container at `start`, and the container's end."""
    if kind == "scalar":
        return [], _value_end(text, start)
    close = "}" if kind == "object" else "]"
    children: list[tuple[Any, int, Node]] = []
    i = _skip(text, start + 1)
    while text[i] != close:
        member = i
        key: Any = len(children)
        if kind == "object":
            key, i = scanstring(text, i + 1)
            i = _skip(text, _skip(text, i) + 1)  # past the colon
        end = _value_end(text, i)
        children.append((key, member, Node(text, i, end, _kind(text[i]))))
        i = _skip(text, end)
        if text[i] == ",":
            i = _skip(text, i + 1)
    return children, i + 1


def parse(text: str) -> Node:
    start = _skip(text, 0)
    return Node(text, start, None, _kind(text[start]))


def find(text: str, path: list[Any]) -> Node | None:
    node: Node | None = parse(text)
    for key in path:
        if node is None:
            return None
        node = node.child(key)
    return node


def dump(value: Any, indent: str, level: int) -> str:
    """`value` as text for a place `level` containers deep, indented with `indent`."""
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    return text.replace("\n", "\n" + indent * level)


def append(text: str, path: list[Any], value: Any, indent: str, *, key: str | None = None,
           depth: int = 0) -> str:
    """Add `value` at the end of the container at `path` (an object member when `key`)."""
    container = find(text, path)
    assert container is not None and container.kind in ("object", "array")
    level = depth + len(path) + 1
    item = dump(value, indent, level)
    if key is not None:
        item = json.dumps(key, ensure_ascii=False) + ": " + item
    if not container.children:
        inside = "\n" + indent * level + item + "\n" + indent * (level - 1)
        return text[:container.start + 1] + inside + text[container.end - 1:]
    last = container.children[-1][2]
    return text[:last.end] + ",\n" + indent * level + item + text[last.end:]


def replace(text: str, path: list[Any], value: Any, indent: str, *, depth: int = 0) -> str:
    node = find(text, path)
    assert node is not None
    return text[:node.start] + dump(value, indent, depth + len(path)) + text[node.end:]


def remove(text: str, path: list[Any]) -> str:
    """Take the member or element at `path` out of its container (see the invariant)."""
    container = find(text, path[:-1])
    assert container is not None
    keys = [name for name, _, _ in container.children]
    at = keys.index(path[-1])
    _, begin, node = container.children[at]
    if len(keys) == 1:
        return text[:container.start + 1] + text[container.end - 1:]
    if at > 0:
        return text[:container.children[at - 1][2].end] + text[node.end:]
    return text[:begin] + text[container.children[1][1]:]
