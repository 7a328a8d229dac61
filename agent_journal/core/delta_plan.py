"""Delta planning, pure: how a push ships only the rows an own segment gained since
its last push, and how a pull knows which of a segment's objects it still needs.

A pushed segment is a *base* (a whole snapshot, `push_plan.segment_key`) and a
chain of *deltas*, each the rows of that segment from seq `from` (exclusive) to
seq `to` (inclusive) as its own immutable object (a compressed SQLite file of
those rows only, scrubbed as a snapshot is). Invariants:
- A chain is contiguous and rising: the first delta starts where the base ends,
  each next one where the one before ended; no two deltas share a row.
- A segment is extended by a delta only while nothing of what the remote holds
  of it can have changed: the tombstones are those its base was scrubbed under,
  no compaction ran since (the erasure generation), the rows up to the tip are
  the same ones (their count and the id of the tip's row), the base, every
  delta and every artifact they cite are still in the remote, and the chain is
  shorter than MAX_DELTAS. Otherwise the segment is snapshotted whole again, and
  the manifest names no delta of it: the clean-up deletes the old chain, so an
  erasure reaches the bucket as it did before deltas.
- A key is a function of its object's bytes, as every key of a push is.
No I/O here: ops/sync_deltas.py takes, checks, compresses and materialises.
"""

from __future__ import annotations

import re
from collections.abc import Container, Iterable, Mapping
from typing import Any, NamedTuple

from agent_journal.core import merge_plan

# Past this many deltas a segment is snapshotted whole again (the manifest, which
# every pull of a changed replica reads, stays small).
MAX_DELTAS = 64
DELTA_SUFFIX = ".delta"
# An export-relative delta path: deltas/<stem>.<from>-<to>.delta
_PATH = re.compile(r"deltas/(?P<stem>[A-Za-z0-9_.-]+)\.(?P<lo>[0-9]+)-(?P<hi>[0-9]+)\.delta")

Entry = dict[str, Any]


class Tip(NamedTuple):
    """Where the remote's copy of a segment ends: the highest seq it covers, the
    event id of that row in the segment, and how many rows the segment holds up to
    it (withheld ones included)."""

    high: int
    event_id: str
    rows: int  # the rows up to it

    def as_json(self) -> list[Any]:
        return [self.high, self.event_id, self.rows]

    @classmethod
    def parse(cls, value: Any) -> Tip | None:
        if isinstance(value, list) and len(value) == 3 and type(value[0]) is int \
                and isinstance(value[1], str) and type(value[2]) is int \
                and value[0] >= 0 and value[2] >= 0:
            return cls(value[0], value[1], value[2])
        return None


def delta_path(name: str, lo: int, hi: int) -> str:
    stem = name[: -len(merge_plan.SEGMENT_SUFFIX)]
    return f"deltas/{stem}.{lo}-{hi}{DELTA_SUFFIX}"


def delta_key(name: str, lo: int, hi: int, checksum: str) -> str:
    """`segments/<stem>.<from>-<to>.<16 hex>.delta`: a function of the bytes."""
    stem = name[: -len(merge_plan.SEGMENT_SUFFIX)]
    return f"segments/{stem}.{lo}-{hi}.{checksum.partition(':')[2]}{DELTA_SUFFIX}"


def delta_entry(lo: int, hi: int, size: int, checksum: str, events: int,
                malformed: list[Entry]) -> Entry:
    return {"from": lo, "to": hi, "bytes": size, "checksum": checksum, "events": events,
            "malformed": malformed}


def chain_error(name: str, chain: Any) -> str | None:
    """Why `chain` (a manifest's deltas of segment `name`) is not one a push writes,
    or None."""
    if not isinstance(chain, list) or not chain:
        return f"deltas of {name} must be a non-empty list"
    last = None
    for d in chain:
        if not isinstance(d, dict) or set(d) != {"from", "to", "bytes", "checksum", "events",
                                                 "malformed"}:
            return f"a delta of {name} is not a delta entry"
        if not all(type(d[k]) is int and d[k] >= 0 for k in ("from", "to", "bytes", "events")):
            return f"a delta of {name}: from, to, bytes and events must be counts"
        if not d["from"] < d["to"] or (last is not None and d["from"] != last):
            return f"the deltas of {name} are not one rising chain"
        if not isinstance(d["checksum"], str) or not merge_plan.is_checksum(d["checksum"]):
            return f"a delta of {name} has no checksum of the form ALGO:HEX"
        if not isinstance(d["malformed"], list) or not all(
                isinstance(m, dict) and type(m.get("row")) is int
                and d["from"] < m["row"] <= d["to"] and isinstance(m.get("reason"), str)
                for m in d["malformed"]):
            return f"a delta of {name}: malformed must list its own rows"
        last = d["to"]
    return None


def chain_objects(deltas: Mapping[str, list[Entry]]) -> dict[str, str]:
    """The manifest's `objects` entries of every delta: path -> key."""
    return {delta_path(name, d["from"], d["to"]): delta_key(name, d["from"], d["to"],
                                                             d["checksum"])
            for name, chain in deltas.items() for d in chain}


def parse_path(path: str) -> tuple[str, int, int] | None:
    """(segment name, from, to) of a delta path, or None."""
    m = _PATH.fullmatch(path)
    if m is None:
        return None
    return m["stem"] + merge_plan.SEGMENT_SUFFIX, int(m["lo"]), int(m["hi"])


class Held(NamedTuple):
    """What a push remembers of a segment's chain, beside its base entry."""

    tip: Tip | None  # None: not known (an older memory), so no delta can follow it
    generation: str | None  # the erasure generation the tip was read under
    deltas: tuple[Entry, ...]


def can_extend(held: Held, generation: str, base_present: bool,
               present: Container[str], prefix: str, name: str,
               artifacts: Iterable[Entry] | None) -> bool:
    """Whether a changed segment may get a delta after what the remote holds of it
    (the tombstones' sameness and the tip's rows are checked by the caller)."""
    if held.tip is None or held.generation is None or held.generation != generation \
            or not base_present or artifacts is None or len(held.deltas) >= MAX_DELTAS:
        return False
    if any(prefix + delta_key(name, d["from"], d["to"], d["checksum"]) not in present
           for d in held.deltas):
        return False
    return all(not a.get("path") or prefix + a["path"] in present for a in artifacts)


def next_tip(before: Tip, high: int, event_id: str, rows: int) -> Tip:
    """The tip after a delta of `rows` rows (withheld ones included) ending at `high`."""
    return Tip(high, event_id, before.rows + rows)


def wanted(chain: list[Entry], name: str, had: Container[str]) -> list[Entry]:
    """The deltas of a segment a pull still needs: those whose key it has not merged."""
    return [d for d in chain if delta_key(name, d["from"], d["to"], d["checksum"]) not in had]


def wire(entry: Entry, delta: bool) -> tuple[int, str, bool]:
    """(size, checksum, compressed) of the object a segment entry (a base's, or a
    delta's) names, as it travels."""
    packed = entry.get("packed")
    if delta:
        return entry["bytes"], entry["checksum"], True
    if isinstance(packed, dict):
        return packed["bytes"], packed["checksum"], True
    return entry["bytes"], entry["checksum"], False


def delta_events(deltas: Mapping[str, list[Entry]]) -> int:
    return sum(d["events"] for chain in deltas.values() for d in chain)


def segment_objects(manifest: Mapping[str, Any]) -> list[tuple[str, Entry, bool]]:
    """Every segment object a (checked) manifest names, as (export-relative path, its
    entry, whether it is a delta): the bases, then each chain in order."""
    out = [(f["name"], f, False) for f in manifest["export"]["files"]]
    out += [(delta_path(name, d["from"], d["to"]), d, True)
            for name, chain in sorted((manifest.get("deltas") or {}).items()) for d in chain]
    return out
