"""Observation ages: what an observation TTL needs of a set of observations. Pure; no I/O.

An observation id is due under a TTL when every stamp it carries is: each
stamp is judged alone (`Cutoff.ok` in compaction_plan.py), and the id is due
when it has stamps and all of them pass. So the stamps can be summarised
apart, a segment at a time, and the summaries folded in any grouping.

Invariants:
- A summary of (id, stamp) pairs keeps, per id, its latest canonical stamp
  (clock.format_ts text, which sorts in time order: a later stamp passes only
  if the earlier ones do) and every other stamp as it is. `AgeFold` over the
  summaries of any split of a set of pairs gives the due ids, and the ids
  seen, of the whole set: the same verdicts as judging each id's stamps
  together (tests/test_plan.py holds the two equal).
- A summary is plain values (lists of strings and of stamps as read), so it
  can be kept in a projection and sent between processes as it is.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Iterable
from typing import Any

# The journal's own stamps (clock.format_ts: UTC, milliseconds, `Z`, fixed
# width) sort as text in time order, so they are compared as text, unparsed.
# Only a stamp whose every field is in range for any month is taken so (a day
# past the 28th is left to the parser, as is any other spelling): it is then
# one the parser reads, at the instant its text says.
CANONICAL = re.compile(r"(?!0000)\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|1\d|2[0-8])"
                       r"T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d\.\d{3}Z").fullmatch

# (ids by their latest canonical stamp, those stamps in the same order,
#  ids of the other stamps, those stamps): see `summarize`
Summary = tuple[list[str], list[str], list[Any], list[Any]]

EMPTY: Summary = ([], [], [], [])


def all_canonical(stamps: list[Any]) -> bool:
    try:
        return all(map(CANONICAL, stamps))
    except TypeError:  # not text at all: the parser refuses it
        return False


def summarize(ids: list[Any], stamps: list[Any]) -> Summary:
    """The summary of the pairs (ids[k], stamps[k])."""
    odd_ids: list[Any] = []
    odd_stamps: list[Any] = []
    if all_canonical(stamps):
        latest = dict(zip(ids, stamps, strict=True))
        if len(latest) != len(ids):  # an id seen twice: its latest stamp, not its last
            latest = _latest(zip(ids, stamps, strict=True))
    else:
        canonical = []
        for oid, ts in zip(ids, stamps, strict=True):
            if isinstance(ts, str) and CANONICAL(ts):
                canonical.append((oid, ts))
            else:
                odd_ids.append(oid)
                odd_stamps.append(ts)
        latest = _latest(canonical)
    # In stamp order, so the ids a cutoff makes due are a prefix (a bisect).
    order = sorted(latest, key=lambda oid: (latest[oid], oid))
    return order, [latest[o] for o in order], odd_ids, odd_stamps


def _latest(pairs: Iterable[tuple[Any, str]]) -> dict[Any, str]:
    latest: dict[Any, str] = {}
    get = latest.get
    for oid, ts in pairs:
        if ts > get(oid, ""):  # a canonical stamp is never empty
            latest[oid] = ts
    return latest


def merged(first: Summary, second: Summary) -> Summary:
    """The summary of the pairs of both."""
    ids, stamps, odd_ids, odd_stamps = summarize(first[0] + second[0], first[1] + second[1])
    return ids, stamps, first[2] + second[2], first[3] + second[3]


def ids_of(summary: Summary) -> list[Any]:
    """Every id the summary has a stamp of (an id may be listed twice)."""
    return summary[0] + summary[2]


def is_summary(value: Any) -> bool:
    """Whether a value read back (a projection's) has a summary's shape."""
    return (isinstance(value, tuple) and len(value) == 4
            and all(isinstance(v, list) for v in value) and len(value[0]) == len(value[1])
            and len(value[2]) == len(value[3]))


class AgeFold:
    """The verdicts of one cutoff over every summary added.

    `text`: the cutoff as canonical text (a canonical stamp passes when it
    sorts at or before it); `every`: every canonical stamp passes (the
    cutoff is at or after now); `ok`: the verdict on any other stamp.
    """

    __slots__ = ("text", "every", "ok", "passed", "failed")

    def __init__(self, text: str, every: bool, ok: Callable[[Any], bool]) -> None:
        self.text = text
        self.every = every
        self.ok = ok
        self.passed: set[Any] = set()  # ids with a stamp that passes
        self.failed: set[Any] = set()  # ids with a stamp that does not

    def add(self, summary: Summary) -> None:
        ids, stamps, odd_ids, odd_stamps = summary
        cut = len(ids) if self.every else bisect_right(stamps, self.text)
        self.passed.update(ids[:cut])
        self.failed.update(ids[cut:])
        if odd_ids:
            ok = self.ok
            for oid, ts in zip(odd_ids, odd_stamps, strict=True):
                (self.passed if ok(ts) else self.failed).add(oid)

    def passes(self, ts: Any) -> bool:
        """The verdict on one stamp."""
        if isinstance(ts, str) and CANONICAL(ts):
            return self.every or ts <= self.text
        return self.ok(ts)

    def due(self) -> set[Any]:
        """The ids every stamp of which passes: the fold's own set, handed
        over (a million ids at times); ask `in` before."""
        self.passed -= self.failed
        return self.passed

    def __contains__(self, oid: object) -> bool:
        """Whether the id has a stamp in some summary added."""
        return oid in self.passed or oid in self.failed
