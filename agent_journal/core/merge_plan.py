"""Merge planning: which source events a merge takes, and why it leaves the others. Pure.

Invariants:
- The journal is a grow-only set keyed by event id. A source event whose id
  the local side already holds is never written again, so merging the same
  source twice adds nothing (idempotent), and the result of merging several
  sources is their union whatever the order (commutative, associative).
- Tombstones win on both sides. An entry, observation or invalidation whose
  subject is named by a well-formed tombstone, local or in the source, is
  never imported as bytes. Every tombstone is imported, and arrives with
  `purged: false`: purged records what compaction removed *here*.
- Replica id collisions (two roots sharing one replica id, e.g. a root copied
  wholesale and used on two machines) are recognised by append slots: a
  replica is the only writer of the segments named after it, so one slot
  (replica, segment file, seq) ever holds one event. Two different events
  seen in one slot mean two roots wrote under that id. This is a report
  only: events are keyed by id, so none is lost either way.
- Manifests are checked for shape and safe names here, before any file they
  name is opened.
"""

from __future__ import annotations

import re
from collections.abc import Container, Iterable
from collections.abc import Set as AbstractSet
from typing import Any

import xxhash

from agent_journal.core.model import ENTRY, INVALIDATION, OBSERVATION, TOMBSTONE, Event

MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = 1
SEGMENT_SUFFIX = ".sqlite"
IMPORT_PREFIX = "import-"

# Event types whose subject can carry content a tombstone must keep out.
# Unknown types are left alone: compaction never purges them either, so
# holding one back would only make replicas disagree about what they hold.
ERASABLE_TYPES = frozenset({ENTRY, OBSERVATION, INVALIDATION})

# Per-event decisions.
IMPORT = "import"
PRESENT = "alreadyPresent"
DUPLICATE = "duplicate"          # a second copy of an id this merge already decided
TOMBSTONED = "tombstoned"        # the reason reported in notImported
REMOVED = "removedHere"          # imported once, then removed here by compaction

_OWN_SEGMENT = re.compile(r"^(?P<replica>[A-Za-z0-9_][A-Za-z0-9_.-]*)-(?P<number>\d{6})"
                          + re.escape(SEGMENT_SUFFIX) + "$")
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,200}$")
_SAFE_REPLICA = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.]{0,63}$")
_REF = re.compile(r"^(?P<algo>[a-z0-9][a-z0-9-]{0,31}):(?P<digest>[0-9a-f]{8,128})$")
# A file's or artifact's checksum (`xxh3-64:<hex>`, files.file_digest): an algorithm and
# hex digits, so a key made of one (sync.segment_key) holds no '/' or '..'.
_CHECKSUM = re.compile(r"[a-z0-9][a-z0-9-]{0,31}:[0-9a-f]{1,128}")


class ManifestError(ValueError):
    """An export manifest that cannot be trusted; the message says why."""


# -- per-event decisions ----------------------------------------------------------------

def withheld(type_: str, subject: str | None, tombstoned: Container[str]) -> bool:
    """True when these bytes must not travel: their subject is tombstoned."""
    return type_ in ERASABLE_TYPES and subject is not None and subject in tombstoned


class Planner:
    """The running decisions of one merge, one source event at a time.

    Fed every well-formed source event (in any order), it ends with the same
    counts and the same not-imported list, provided the tombstones that decide
    what is held back are known before the first event is fed (`tombstoned`
    holds both sides' targets) and ids are deduplicated. A tombstone met only
    while feeding (a pre-scan missed it) is added at once; the caller must
    then `retract` what it already took about that target.
    """

    def __init__(self, local_ids: AbstractSet[str], tombstoned: set[str],
                 removed_here: AbstractSet[str] = frozenset()) -> None:
        self.local_ids = local_ids
        self.tombstoned = tombstoned
        # Ids an earlier merge imported and a compaction here then removed (TTL
        # or tombstone): never imported again, so expiry is not undone by merging
        # the same stale replica back.
        self.removed_here = removed_here
        self.seen: set[str] = set()
        self.imported = 0
        self.present = 0
        self.not_imported: list[dict[str, str]] = []

    def take(self, event_id: str, type_: str, subject: str | None) -> str:
        """Decide one well-formed source event (called once per source row: kept lean).

        A second copy of an id within one merge is a no-op; an id already
        held is left alone (even if tombstoned: compaction, not a merge,
        removes bytes); an erasable event whose subject is tombstoned is held
        back; everything else, tombstones included, is imported.
        """
        if event_id in self.seen:
            return DUPLICATE
        self.seen.add(event_id)
        if type_ == TOMBSTONE and subject is not None:
            # A source being written during the merge can show one late.
            self.tombstoned.add(subject)
        if event_id in self.local_ids:
            self.present += 1
            return PRESENT
        if type_ in ERASABLE_TYPES and subject is not None and subject in self.tombstoned:
            self.not_imported.append({"eventId": event_id, "reason": TOMBSTONED})
            return TOMBSTONED
        if event_id in self.removed_here:  # (compaction removes only erasable types)
            self.not_imported.append({"eventId": event_id, "reason": REMOVED})
            return REMOVED
        self.imported += 1
        return IMPORT

    def take_bulk(self, event_ids: Iterable[str],
                  special: list[tuple[int, str, str, str | None]]) -> dict[str, str]:
        """`take` for every row of one segment; returns {event id: decision} for
        the rows not imported (every other row is IMPORT).

        `event_ids` are all the segment's ids (unique within a segment; a set
        is taken as it is, never changed);
        `special` lists (seq, event id, type, subject) of at least every row
        that is a tombstone or whose subject is tombstoned, counting the
        segment's own tombstones. The result is exactly what calling `take`
        on each row in seq order would give: special rows are taken in seq
        order, and the others (plain rows, which no order can affect) are
        counted with set operations.
        """
        out: dict[str, str] = {}
        for _seq, event_id, type_, subject in sorted(special):
            decision = self.take(event_id, type_, subject)
            if decision != IMPORT:
                out[event_id] = decision
        plain: set[str] | frozenset[str]
        if not special and isinstance(event_ids, (set, frozenset)):
            plain = event_ids
        else:
            plain = set(event_ids).difference(e for _, e, _, _ in special)
        if self.seen.isdisjoint(plain) and self.local_ids.isdisjoint(plain) and (
                not self.removed_here or self.removed_here.isdisjoint(plain)):
            # The common case (a segment none of whose plain rows is held or seen):
            # every one is imported, with no set built but the one kept.
            self.seen |= plain
            self.imported += len(plain)
            return out
        duplicate = plain & self.seen
        present = (plain - duplicate) & self.local_ids
        out.update(dict.fromkeys(duplicate, DUPLICATE))
        out.update(dict.fromkeys(present, PRESENT))
        taken = plain - duplicate
        removed = (taken - present) & self.removed_here if self.removed_here else set()
        out.update(dict.fromkeys(removed, REMOVED))
        self.not_imported.extend({"eventId": e, "reason": REMOVED} for e in removed)
        self.seen |= taken
        self.present += len(present)
        self.imported += len(taken) - len(present) - len(removed)
        return out

    def retract(self, event_ids: Iterable[str]) -> None:
        """Events counted as imported that a tombstone met later holds back after all."""
        for event_id in event_ids:
            self.imported -= 1
            self.not_imported.append({"eventId": event_id, "reason": TOMBSTONED})

    def report(self) -> dict[str, Any]:
        return {"imported": self.imported, "alreadyPresent": self.present,
                "notImported": sorted(self.not_imported, key=lambda r: r["eventId"])}


def arriving(event: Event) -> Event | None:
    """The event as it must be stored here, or None when its bytes can be kept as they are.

    Only a tombstone changes: whether its target was purged is knowledge of
    the replica that ran compaction, so it arrives as not purged here.
    """
    if event.type == TOMBSTONE and event.data.get("purged") is not False:
        data = dict(event.data)
        data["purged"] = False
        return event.replace(data=data)
    return None


# Words (ASCII letters compared without case) one of which any stored UTF-8
# body that could decode to a tombstone holds (see tombstone_candidate);
# storage.replica_source asks SQLite the same question with LIKE.
TOMBSTONE_WORDS = (b"tombstone", b"\\u")


def tombstone_candidate(type_column: Any, body: Any) -> bool:
    """Could this stored row be a tombstone? A cheap superset test, and the one rule.

    A row whose type column says so, or whose body is not stored as bytes,
    could. Otherwise a body whose JSON says "tombstone" either contains those
    letters or spells one with a \\u escape (case is ignored, as SQLite's LIKE
    ignores it), or is not UTF-8 at all (UTF-16/32 put NUL bytes between
    ASCII letters; any NUL makes a row a candidate). Rows failing every test
    need not be parsed to know they are not tombstones, whatever damage
    they carry.
    """
    if type_column == TOMBSTONE or type(body) is not bytes or b"\x00" in body:
        return True
    folded = body.lower()
    return any(word in folded for word in TOMBSTONE_WORDS)


def id_in_body(event_id: str, body: bytes) -> bool:
    """Cheap check that a row's event_id column matches canonical bytes."""
    return (b'"eventId":"' + event_id.encode("utf-8") + b'"') in body


# -- names ------------------------------------------------------------------------------

def own_segment(name: str) -> tuple[str, int] | None:
    """(replica, number) for a file named like a replica's own segment, else None."""
    if name.startswith(IMPORT_PREFIX) or name.startswith("."):
        return None
    m = _OWN_SEGMENT.match(name)
    if not m:
        return None
    return m.group("replica"), int(m.group("number"))


def sealed_own(names: Iterable[str], replica: str) -> frozenset[str]:
    """Of segment file names, the replica's own ones no append can reach: all but its two
    newest by number. Appends go to the newest; the one before is left out too, for a
    writer that chose it just as the newest was started."""
    own = sorted((found[1], name) for name in names
                 if (found := own_segment(name)) is not None and found[0] == replica)
    return frozenset(name for _, name in own[:-2])


def safe_replica(value: Any) -> str:
    """A replica id fit to be part of a file name; anything else reads as 'unknown'."""
    if isinstance(value, str) and _SAFE_REPLICA.match(value):
        return value
    return "unknown"


def import_segment_name(source_replica: str, event_ids: Iterable[str]) -> str:
    """`import-<source replica>-<digest of the event ids it holds>.sqlite`.

    The name is a function of the content, so an import file can never be
    confused with a replica's own segment (those are `<replica>-NNNNNN`), and
    no two imports holding different events share a name.
    """
    digest = xxhash.xxh3_64_hexdigest("\n".join(sorted(event_ids)).encode("utf-8"))
    return f"{IMPORT_PREFIX}{safe_replica(source_replica)}-{digest}{SEGMENT_SUFFIX}"


def parse_ref(ref: Any) -> tuple[str, str] | None:
    """(algo, hex digest) of an artifact ref like `sha256:ab12...`, or None if unusable."""
    if not isinstance(ref, str):
        return None
    m = _REF.match(ref)
    return (m.group("algo"), m.group("digest")) if m else None


def artifact_record(type_: str, data: dict[str, Any]) -> dict[str, Any] | None:
    """An observation's artifact record when it is usable: {ref, bytes, checksum, ...}."""
    if type_ != OBSERVATION:
        return None
    art = data.get("artifact")
    if not isinstance(art, dict) or parse_ref(art.get("ref")) is None:
        return None
    if not isinstance(art.get("bytes"), int) or not isinstance(art.get("checksum"), str):
        return None
    return art


# -- replica id collisions ----------------------------------------------------------------

class SlotIndex:
    """Which events each append slot (replica, segment, seq) was seen holding.

    Slots are fed from the replicas' own segments (any file named
    `<replica>-NNNNNN.sqlite`) and from the provenance that import segments
    keep. A copy that only one side kept writing is a linear history, not a
    collision; the clash appears once both have written the same slot.
    Events whose bytes a tombstone allows to be erased do not count (judged
    at the end, against every tombstone the merge met): a slot emptied by
    compaction and taken by a later append is not a clash. (The same can
    happen after a TTL purge of a segment's newest rows; that rare case reads
    as a collision, a false alarm that loses nothing.)
    """

    def __init__(self, local_replica: str, tombstoned: Container[str]) -> None:
        self.local_replica = local_replica
        self.tombstoned = tombstoned
        self.slots: dict[tuple[str, str, int], dict[str, tuple[str, str | None]]] = {}

    def add(self, replica: str, segment: str, seq: int, event_id: str, type_: str,
            subject: str | None) -> None:
        self.slots.setdefault((replica, segment, seq), {})[event_id] = (type_, subject)

    @property
    def collisions(self) -> set[str]:
        found = set()
        for (replica, _, _), held in self.slots.items():
            if len(held) > 1 and sum(
                    1 for t, s in held.values() if not withheld(t, s, self.tombstoned)) > 1:
                found.add(replica)
        return found


# -- manifests --------------------------------------------------------------------------

def _require(cond: bool, message: str) -> None:
    if not cond:
        raise ManifestError(message)


def is_checksum(value: str) -> bool:
    """Whether `value` has the form ALGO:HEX of every checksum a manifest names."""
    return bool(_CHECKSUM.fullmatch(value))


def check_manifest(obj: Any, *, workspace: str) -> dict[str, Any]:
    """Validate a parsed manifest; return it. Raises ManifestError."""
    _require(isinstance(obj, dict), "manifest is not a JSON object")
    _require(obj.get("format") == MANIFEST_FORMAT,
             f"manifest format {obj.get('format')!r} is not {MANIFEST_FORMAT}")
    _require(isinstance(obj.get("workspace"), str), "manifest has no workspace")
    _require(obj["workspace"] == workspace,
             f"export is of workspace {obj['workspace']!r}, not {workspace!r}")
    _require(isinstance(obj.get("sourceReplica"), str), "manifest has no sourceReplica")
    files, artifacts = obj.get("files"), obj.get("artifacts")
    _require(isinstance(files, list) and isinstance(artifacts, list),
             "manifest files and artifacts must be lists")
    assert isinstance(files, list) and isinstance(artifacts, list)
    names: set[str] = set()
    for f in files:
        _require(isinstance(f, dict), "manifest file entry is not an object")
        name = f.get("name")
        _require(isinstance(name, str) and bool(_SAFE_NAME.match(name))
                 and name.endswith(SEGMENT_SUFFIX), f"unsafe segment name {name!r}")
        _require(name not in names, f"segment {name} listed twice")
        names.add(name)
        _require(_count(f.get("bytes")) and _count(f.get("events")),
                 f"segment {name}: bytes and events must be counts")
        _require(isinstance(f.get("checksum"), str)
                 and bool(_CHECKSUM.fullmatch(f["checksum"])),
                 f"segment {name}: no checksum of the form ALGO:HEX")
        bad = f.get("malformed")
        _require(isinstance(bad, list) and all(
            isinstance(m, dict) and _count(m.get("row")) and isinstance(m.get("reason"), str)
            for m in bad), f"segment {name}: malformed must list {{row, reason}}")
    paths: set[str] = set()
    for a in artifacts:
        _require(isinstance(a, dict), "manifest artifact entry is not an object")
        parsed = parse_ref(a.get("ref"))
        _require(parsed is not None, f"bad artifact ref {a.get('ref')!r}")
        assert parsed is not None
        _require(a.get("path") in (export_artifact_path(a["ref"]), None),
                 f"artifact {a['ref']}: unexpected path {a.get('path')!r}")
        _require(a["ref"] not in paths, f"artifact {a['ref']} listed twice")
        paths.add(a["ref"])
        _require(_count(a.get("bytes")) and isinstance(a.get("checksum"), str)
                 and bool(_CHECKSUM.fullmatch(a["checksum"])),
                 f"artifact {a['ref']}: bytes and a checksum of the form ALGO:HEX required")
        _require(_strings(a.get("observations")),
                 f"artifact {a['ref']}: observations must list ids")
    _require(_strings(obj.get("tombstoned")), "manifest tombstoned must list ids")
    return obj


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def export_artifact_path(ref: str) -> str:
    """Where an export keeps an artifact, relative to the export folder."""
    parsed = parse_ref(ref)
    if parsed is None:
        raise ManifestError(f"bad artifact ref {ref!r}")
    algo, digest = parsed
    return f"artifacts/{algo}/{digest}"
