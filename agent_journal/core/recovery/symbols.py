"""Names a change defines: the functions, types and constants an edit or write adds.

Invariant: `defined_names(added, removed)` lists, in order and once each, the names that a
definition line of `added` introduces and no definition line of `removed` did (an edit
that only touches a function's body defines nothing new), at most MAX_NAMES. A
definition line is a declaration keyword of a common language followed by the name
(`def`, `class`, `function`, `func (r *T)`, `fn`, `interface`, `type`, `struct`, `enum`,
`trait`, an `export`ed or unindented `const`/`let`/`var`), an environment variable set at a
line's start (`IPFS_API_URL=`, `export X_Y=`, `ENV X_Y=`: upper case with an underscore),
or a string literal a union lists one a line (`| 'planning_error_fix'`). Text that is no
such line gives
nothing; the result is words copied from the text, never a guess.
"""

from __future__ import annotations

import re

MAX_NAMES = 8
_CAP = 200_000  # characters of a change looked at
_DEFINITION = re.compile(
    r"^(?:\s*(?:export\s+)?(?:default\s+)?(?:pub(?:\(\w+\))?\s+)?(?:async\s+)?(?:abstract\s+)?"
    r"(?:def|class|function\*?|func|fn|interface|type|struct|enum|trait|module|record)\s+"
    r"(?:\([^)]*\)\s*)?|(?:export\s+(?:declare\s+)?)(?:const|let|var)\s+|"
    r"(?:const|let|var)\s+)([A-Za-z_$][\w$]*)"
    # an environment variable a .env file, a shell script or a Dockerfile sets
    r"|^(?:export\s+|ENV\s+)?([A-Z][A-Z0-9]*_[A-Z0-9_]+)\s*=(?!=)"
    # a member of a union of string literals, one a line (`| 'planning_error_fix'`)
    r"|^\s*\|\s*['\"]([\w.:-]+)['\"]", re.M)


def defined_names(added: str, removed: str = "") -> list[str]:
    """The names `added` defines that `removed` did not (see the module)."""
    return _new_names(_names(added[:_CAP]), set(_names(removed[:_CAP])))


def changed_names(added: str, removed: str) -> tuple[list[str], list[str]]:
    """(the names `added` defines that `removed` did not, and the reverse): each text
    read once."""
    new, old = _names(added[:_CAP]), _names(removed[:_CAP])
    return _new_names(new, set(old)), _new_names(old, set(new))


def _new_names(names: list[str], before: set[str]) -> list[str]:
    found: list[str] = []
    for name in names:
        if name not in before and name not in found and len(name) > 1:
            found.append(name)
            if len(found) == MAX_NAMES:
                break
    return found


def _names(text: str) -> list[str]:
    return [m.group(m.lastindex or 1) for m in _DEFINITION.finditer(text)]
