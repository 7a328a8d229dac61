"""What an invalidation does to the entries that depend on it: the one closure rule.

Invariant: an invalidated entry is `invalidated`; every entry that depends on
an invalidated one, transitively over dependsOn edges (cycles allowed), is
`suppressed`; every other entry is `live`. The answer depends only on the
edges and the set of invalidated roots, never on the order they are given in.
`derive` and the search index both decide outcomes through this module.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is costly to import; mypy reads this as True
if TYPE_CHECKING:
    from collections.abc import Container, Iterable, Mapping

LIVE = "live"
INVALIDATED = "invalidated"
SUPPRESSED = "suppressed"


def reached_from(depends: Mapping[str, Iterable[str]], roots: Iterable[str]
                 ) -> dict[str, set[str]]:
    """Entry id -> the roots whose invalidation reaches it through its dependencies.

    A root reaches an entry only through that entry depending on it (directly or
    through others); a root does not reach itself unless a cycle leads back to it.
    """
    dependents: dict[str, list[str]] = {}
    for node, deps in depends.items():
        for dep in deps:
            dependents.setdefault(dep, []).append(node)
    through: dict[str, set[str]] = {}
    for root in sorted(set(roots)):
        stack = list(dependents.get(root, []))
        seen: set[str] = set()
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            through.setdefault(current, set()).add(root)
            stack.extend(dependents.get(current, []))
    return through


def outcome_of(entry_id: str, invalidated: Container[str], reached: Container[str]) -> str:
    if entry_id in invalidated:
        return INVALIDATED
    if entry_id in reached:
        return SUPPRESSED
    return LIVE
