"""Deltas: the rows an own segment gained since its last push, travelling as objects of
their own (core/delta_plan.py), and a pull joining them into the staged segment it
merges.

Invariants:
- A delta holds exactly the rows of its segment above the tip the push memory
  remembers, read in one transaction that first checks the rows up to the tip
  are the ones the remote holds (storage/segment_tail.take_tail); every row is
  checked and scrubbed as an export's snapshot is (the same verdict, the same
  scrub), under the very tombstones the base was scrubbed under. Its object is
  that SQLite file, zlib-compressed; its key is a function of the object's bytes.
- A pull trusts a delta no more than a snapshot: size and checksum as it lands,
  a bounded inflate, the inflated file read as a local reader reads it (a
  malformed row its entry does not list refuses it), then joined to the staged
  file of its segment only when its rows are above every row already there. A
  delta that fails, and every later delta of its segment, is left for the next
  pull; what was joined before it is merged.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from agent_journal.core import delta_plan, export_plan, push_plan
from agent_journal.core.delta_plan import Entry
from agent_journal.core.push_plan import Remembered
from agent_journal.storage.files import (
    RunningDigest,
    file_digest,
    make_private_dirs,
    open_private_new,
    unlink_quietly,
)
from agent_journal.storage.remote import Remote
from agent_journal.storage.replica_source import Unreadable, fetched_segment_fault, scrub_rows
from agent_journal.storage.segment_tail import append_rows, take_tail
from agent_journal.storage.workspace import Workspace

# A delta inflates to at most this (a push whose tail is larger snapshots the segment
# whole instead); a packed snapshot to exactly the bytes its entry names.
MAX_INFLATED = 256 * 1024 * 1024
_CHUNK = 1 << 20
# Inflating a tail is quick, and it compresses a JSON journal several times over.
_LEVEL = 6


class Extended(NamedTuple):
    """What the deltas of one push did."""

    held: dict[str, Remembered]  # segment -> its memory with the chain extended
    made: list[tuple[str, str]]  # (stage-relative path, key) of each new delta object
    artifacts: list[Entry]  # the artifact entries the new deltas' rows cite (shipped or not)
    withheld: int
    malformed: int


def extend(ws: Workspace, stage: str, candidates: Mapping[str, Remembered],
           known: set[str], signatures: Mapping[str, Any],
           ship: Callable[[export_plan.Cited], list[Entry]]) -> Extended:
    """A delta for every candidate segment that gained rows since its tip (none for
    one that gained none: it is kept as it is); a segment whose rows up to its tip
    changed is left out (snapshotted whole). `ship` copies the cited artifacts into
    `stage` and returns their entries."""
    from agent_journal.ops.export_check import verdict

    out = Extended({}, [], [], 0, 0)
    work = os.path.join(stage, ".tails")
    make_private_dirs(work)
    verdicts: list[tuple[str, export_plan.Verdict]] = []
    for name, held in sorted(candidates.items()):
        assert held.tip is not None
        tail_path = os.path.join(work, name)
        tail = take_tail(os.path.join(ws.segments_dir, name), held.tip, tail_path)
        if tail is None:
            continue
        if tail.rows == 0:
            out.held[name] = held._replace(sig=signatures.get(name))
            os.unlink(tail_path)
            continue
        if os.path.getsize(tail_path) > MAX_INFLATED:
            os.unlink(tail_path)
            continue  # more than a reader inflates: the segment is snapshotted whole
        v = verdict(tail_path, known)
        if not set(v.tombstones) <= known:
            os.unlink(tail_path)
            continue  # (cannot be: `known` holds every segment's tombstones)
        scrub_rows(tail_path, v.withheld, fixes=v.fixes)
        path = delta_plan.delta_path(name, held.tip.high, tail.tip.high)
        size, checksum = _deflate(tail_path, os.path.join(stage, *path.split("/")))
        os.unlink(tail_path)
        entry = delta_plan.delta_entry(
            held.tip.high, tail.tip.high, size, checksum, v.rows - len(v.withheld),
            [{"row": row, "reason": why} for row, why in v.malformed])
        out.made.append((path, delta_plan.delta_key(name, entry["from"], entry["to"],
                                                    checksum)))
        out = out._replace(withheld=out.withheld + len(v.withheld),
                           malformed=out.malformed + len(v.malformed))
        verdicts.append((name, v))
        out.held[name] = held._replace(sig=signatures.get(name), high=tail.tip.high,
                                       tip=tail.tip, deltas=(*held.deltas, entry))
    cited = export_plan.cited(verdicts, known)
    listed = ship(cited) if cited.records else []
    for name, _ in verdicts:
        refs = set(cited.by_file.get(name, ()))
        mine = [a for a in listed if a["ref"] in refs]
        old = out.held[name]
        out.held[name] = old._replace(artifacts=tuple(
            push_plan.union_artifacts(list(old.artifacts or ()), [mine])))
    out.artifacts.extend(listed)
    return out


def _deflate(src: str, dest: str) -> tuple[int, str]:
    make_private_dirs(os.path.dirname(dest))
    digest = RunningDigest()
    packer = zlib.compressobj(_LEVEL)
    with open(src, "rb") as fh, open_private_new(dest) as out:
        while chunk := fh.read(_CHUNK):
            packed = packer.compress(chunk)
            digest.update(packed)
            out.write(packed)
        packed = packer.flush()
        digest.update(packed)
        out.write(packed)
    return digest.result()


def inflate(src: str, dest: str, limit: int = MAX_INFLATED) -> str | None:
    """The SQLite file a fetched delta or packed snapshot holds, written to the new file
    `dest`; why not, when it does not inflate (or inflates past `limit` bytes)."""
    unpacker = zlib.decompressobj()
    total = 0
    try:
        with open(src, "rb") as fh, open_private_new(dest) as out:
            while chunk := fh.read(_CHUNK):
                data = unpacker.decompress(chunk, min(limit + 1 - total, _CHUNK))
                while True:
                    total += len(data)
                    if total > limit:
                        return f"it inflates past {limit} bytes"
                    out.write(data)
                    if not unpacker.unconsumed_tail:
                        break
                    data = unpacker.decompress(unpacker.unconsumed_tail,
                                               min(limit + 1 - total, _CHUNK))
            rest = unpacker.flush(_CHUNK)
            if total + len(rest) > limit:
                return f"it inflates past {limit} bytes"
            out.write(rest)
            if not unpacker.eof or unpacker.unused_data:
                return "it is not one whole zlib stream"
    except zlib.error as exc:
        return f"it does not inflate ({exc})"
    return None


MISMATCH = "size or checksum does not match its manifest"


def fetch_object(remote: Remote, key: str, entry: Entry, delta: bool, dest: str
                 ) -> tuple[str | None, int]:
    """Download a segment object (a base, packed or not, or a delta) and leave the SQLite
    file it holds at the new path `dest`: (why it must not be used, None when it may;
    the bytes transferred). The object is checked for its size and checksum as it
    lands, inflated within MAX_INFLATED, and a packed base's file against its entry.
    Raises ObjectMissing and ObjectUnusable as Remote.download does."""
    size, checksum, packed = delta_plan.wire(entry, delta)
    target = dest + ".z" if packed else dest
    got = remote.download(key, target)
    try:
        if got != (size, checksum):
            return MISMATCH, got[0]
        if packed:
            why = inflate(target, dest, MAX_INFLATED if delta else entry["bytes"])
            if why is not None:
                return why, got[0]
            if not delta and file_digest(dest) != (entry["bytes"], entry["checksum"]):
                return "it inflates to other bytes than its manifest names", got[0]
        return None, got[0]
    finally:
        if packed:
            unlink_quietly(target)


def pack(src: str) -> tuple[str, dict[str, Any]]:
    """A staged snapshot compressed beside it: (its path, the entry's `packed`)."""
    size, checksum = _deflate(src, src + push_plan.PACKED_SUFFIX)
    return src + push_plan.PACKED_SUFFIX, {"bytes": size, "checksum": checksum}


class Joined(NamedTuple):
    """What a pull made of one segment's fetched deltas."""

    entry: Entry | None  # the staged file's entry (base and deltas joined), None: nothing
    applied: list[Entry]  # the deltas joined, in order
    failed: list[tuple[Entry, str]]  # the first delta that failed and why


def join(stage: str, name: str, replica: str, base: Entry | None,
         fetched: list[Entry]) -> Joined:
    """Join the fetched deltas of segment `name` (in chain order, each inflated at its
    delta path in `stage`) to the staged file `stage/name`: the base fetched with them
    (`base`, its entry), or else a file made of the first delta."""
    dest = os.path.join(stage, name)
    entry = None if base is None else dict(base, malformed=list(base["malformed"]))
    applied: list[Entry] = []
    for d in fetched:
        tail = os.path.join(stage, *delta_plan.delta_path(name, d["from"], d["to"])
                            .split("/"))
        why = fetched_segment_fault(tail, {m["row"] for m in d["malformed"]})
        if why is None and entry is not None:
            try:
                append_rows(dest, tail)
            except Unreadable as exc:
                why = str(exc)
        elif why is None:
            os.rename(tail, dest)
        unlink_quietly(tail)
        if why is not None:
            return _joined(dest, name, replica, entry, applied, [(d, why)])
        applied.append(d)
        entry = {"name": name, "bytes": 0, "checksum": "", "replica": replica,
                 "events": (0 if entry is None else entry["events"]) + d["events"],
                 "malformed": [*([] if entry is None else entry["malformed"]),
                               *d["malformed"]]}
    return _joined(dest, name, replica, entry, applied, [])


def _joined(dest: str, name: str, replica: str, entry: Entry | None, applied: list[Entry],
            failed: list[tuple[Entry, str]]) -> Joined:
    if entry is None:
        return Joined(None, applied, failed)
    size, checksum = file_digest(dest)
    return Joined(dict(entry, bytes=size, checksum=checksum), applied, failed)
