"""Edits to a JSON document's text that leave every byte outside the edit as it was.

Invariant: inserting a member or an element and then removing it again gives back the
original text byte for byte: an insertion after the last sibling adds `,` newline indent
VALUE, and the removal of a sibling that is not the first takes away exactly that; an
insertion into an empty container fills its inside, and removing its only child empties it.
The text must already be strict JSON (hook_settings.load checks it first).
"""

from __future__ import annotations

import json
from typing import Any

_WS = " \t\r\n"


class Node:
    """A value's span [start, end) and, for containers, its children (with their keys)."""

    __slots__ = ("start", "end", "kind", "children")

    def __init__(self, start: int, kind: str) -> None:
        self.start = start
        self.end = start
        self.kind = kind  # "object", "array" or "scalar"
        # (key or index, start of the member (its key for objects), value node)
        self.children: list[tuple[Any, int, Node]] = []

    def child(self, key: Any) -> Node | None:
        for name, _, node in self.children:
            if name == key:
                return node
        return None


def parse(text: str) -> Node:
    node, _ = _value(text, _skip(text, 0))
    return node


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


def _string_end(text: str, i: int) -> int:
    i += 1
    while text[i] != '"':
        i += 2 if text[i] == "\\" else 1
    return i + 1


def _value(text: str, i: int) -> tuple[Node, int]:
    ch = text[i]
    if ch == "{":
        node = Node(i, "object")
        i = _skip(text, i + 1)
        while text[i] != "}":
            key_start = i
            key_end = _string_end(text, i)
            key = json.loads(text[key_start:key_end])
            i = _skip(text, key_end)
            i = _skip(text, i + 1)  # the colon
            child, i = _value(text, i)
            node.children.append((key, key_start, child))
            i = _skip(text, i)
            if text[i] == ",":
                i = _skip(text, i + 1)
        node.end = i + 1
        return node, node.end
    if ch == "[":
        node = Node(i, "array")
        i = _skip(text, i + 1)
        index = 0
        while text[i] != "]":
            child, i = _value(text, i)
            node.children.append((index, child.start, child))
            index += 1
            i = _skip(text, i)
            if text[i] == ",":
                i = _skip(text, i + 1)
        node.end = i + 1
        return node, node.end
    node = Node(i, "scalar")
    if ch == '"':
        node.end = _string_end(text, i)
    else:
        j = i
        while j < len(text) and text[j] not in _WS + ",]}":
            j += 1
        node.end = j
    return node, node.end


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


def append(text: str, path: list[Any], value: Any, indent: str, *, key: str | None = None
           ) -> str:
    """Add `value` at the end of the container at `path` (an object member when `key`)."""
    container = find(text, path)
    assert container is not None and container.kind in ("object", "array")
    level = len(path) + 1
    item = dump(value, indent, level)
    if key is not None:
        item = json.dumps(key, ensure_ascii=False) + ": " + item
    if not container.children:
        inside = "\n" + indent * level + item + "\n" + indent * (level - 1)
        return text[:container.start + 1] + inside + text[container.end - 1:]
    last = container.children[-1][2]
    return text[:last.end] + ",\n" + indent * level + item + text[last.end:]


def replace(text: str, path: list[Any], value: Any, indent: str) -> str:
    node = find(text, path)
    assert node is not None
    return text[:node.start] + dump(value, indent, len(path)) + text[node.end:]


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
