"""Push planning, pure: what a push keeps of the last one, the manifest it publishes,
what it remembers, and which of its keys it deletes.

Invariants:
- A remembered snapshot is reused only when its segment's file and WAL are
  unchanged (the signature), its object and every artifact object its rows cite
  are still in the remote, and the tombstones are those it was scrubbed under
  (the caller compares `tombstones_digest`).
- The manifest names every file and shipped artifact of its export once, each
  under a key that is a function of its bytes; a reused snapshot's artifacts
  are named again, so a push never drops what an unchanged segment cites.
- The push memory (`pushed.json`) is read tolerantly: what it cannot use is
  forgotten, which costs a snapshot or a check, never an event.
- Only keys the new manifest does not name are stale: never the manifest, never
  a lock file.
No I/O here: ops/sync_push.py lists, snapshots, uploads and writes.
"""

from __future__ import annotations

import json
from collections.abc import Container, Iterable, Mapping
from collections.abc import Set as AbstractSet
from types import MappingProxyType
from typing import Any, NamedTuple

import xxhash

from agent_journal.core import delta_plan, merge_plan
from agent_journal.core.delta_plan import Tip

SYNC_FORMAT = 1
# A manifest naming deltas (core/delta_plan.py); one naming none is still format 1,
# so a version that knows no deltas reads it.
DELTA_SYNC_FORMAT = 2
SYNC_FORMATS = (SYNC_FORMAT, DELTA_SYNC_FORMAT)
# A base object sent compressed (an entry's `packed`): its key ends so.
PACKED_SUFFIX = ".z"
MANIFEST_KEY = "manifest.json"

# What changes when a segment does: its file's and its WAL's (inode, size, mtime).
Signature = tuple[int, ...]
# An export manifest's entry (a segment file, an artifact), kept as the JSON it is.
Entry = dict[str, Any]


def segment_key(name: str, checksum: str) -> str:
    """`segments/<stem>.<16 hex>.sqlite`: the key is a function of the bytes."""
    stem = name[: -len(merge_plan.SEGMENT_SUFFIX)]
    digest = checksum.partition(":")[2]
    return f"segments/{stem}.{digest}{merge_plan.SEGMENT_SUFFIX}"


def base_key(entry: Entry) -> str:
    """The key of a segment's base object: its snapshot, or (an entry naming it
    `packed`) that snapshot zlib-compressed, keyed by the compressed bytes."""
    packed = entry.get("packed")
    if isinstance(packed, dict):
        return segment_key(entry["name"], packed["checksum"]) + PACKED_SUFFIX
    return segment_key(entry["name"], entry["checksum"])


def packed_error(entry: Entry) -> str | None:
    """Why a file entry's `packed` (when it has one) is not one a push writes."""
    packed = entry.get("packed")
    if packed is None:
        return None
    if not isinstance(packed, dict) or set(packed) != {"bytes", "checksum"} \
            or type(packed["bytes"]) is not int or packed["bytes"] < 0 \
            or not isinstance(packed["checksum"], str) \
            or not merge_plan.is_checksum(packed["checksum"]):
        return f"segment {entry['name']}: packed must give bytes and a checksum"
    return None


def tombstones_digest(ids: AbstractSet[str]) -> str:
    return xxhash.xxh3_64_hexdigest("\n".join(sorted(ids)).encode("utf-8"))


def manifest_digest(body: bytes) -> str:
    """What the memory keeps of a manifest's bytes to know it again."""
    return xxhash.xxh3_128_hexdigest(body)


class Scanned(NamedTuple):
    """The subjects one segment's tombstone rows name, under the signature it had."""

    sig: Signature | None
    ids: tuple[str, ...]
    # Where the scan ended (its `rows` unused): a segment that grew since is scanned
    # above it only, while the row there is the same one (seqs only grow).
    tip: Tip | None = None

    def holds_for(self, sig: Signature | None) -> bool:
        return sig is not None and self.sig == sig


class Remembered(NamedTuple):
    """One segment's snapshot as the last push published it."""

    sig: Signature | None
    entry: Entry
    artifacts: tuple[Entry, ...] | None  # None: not kept (an older version) or unusable
    high: int | None = None  # the highest seq the snapshot holds (None: not known)
    tip: Tip | None = None  # where the base and its deltas end (None: no delta may follow)
    generation: str | None = None  # the erasure generation the tip was read under
    deltas: tuple[Entry, ...] = ()  # the chain after the base, oldest first

    def held(self) -> delta_plan.Held:
        return delta_plan.Held(self.tip, self.generation, self.deltas)


_NONE: Mapping[str, Any] = MappingProxyType({})


class PushMemory(NamedTuple):
    """`remotes/<name>/pushed.json`: what a push remembers for the next one."""

    url: str | None = None
    tombstones: str | None = None  # tombstones_digest of the last manifest's tombstones
    scans: Mapping[str, Scanned] = _NONE
    owned: frozenset[str] = frozenset()  # segment snapshot keys this root wrote
    segments: Mapping[str, Remembered] = _NONE
    manifests: frozenset[str] = frozenset()  # manifest_digest of the manifests it wrote

    @classmethod
    def parse(cls, obj: Any) -> PushMemory:
        """The memory in a loaded `pushed.json`; empty when it is not one."""
        if not isinstance(obj, dict) or not isinstance(obj.get("segments"), dict):
            return cls()
        scans = obj.get("tombstonesBySegment")
        return cls(
            url=obj.get("url") if isinstance(obj.get("url"), str) else None,
            tombstones=obj.get("tombstones") if isinstance(obj.get("tombstones"), str)
            else None,
            scans={name: got for name, held in _items(scans)
                   if (got := _scanned(held)) is not None},
            owned=_strings(obj.get("owned")),
            segments={name: seg for name, held in obj["segments"].items()
                      if (seg := _remembered(held)) is not None},
            manifests=_strings(obj.get("manifests")))

    def about(self, url: str) -> PushMemory:
        """The memory for a push to `url`: one about another URL (a remote removed and
        added again under the same name) keeps only what the segments' tombstones are."""
        return self if self.url == url else PushMemory(scans=self.scans)

    def as_json(self) -> dict[str, Any]:
        return {
            "url": self.url, "tombstones": self.tombstones,
            "tombstonesBySegment": {name: {"sig": _listed(s.sig), "ids": list(s.ids),
                                           "tip": None if s.tip is None else s.tip.as_json()}
                                    for name, s in self.scans.items()},
            "owned": sorted(self.owned),
            "segments": {name: {"sig": _listed(r.sig), "entry": r.entry,
                                "artifacts": list(r.artifacts or ()), "high": r.high,
                                "tip": None if r.tip is None else r.tip.as_json(),
                                "generation": r.generation, "deltas": list(r.deltas)}
                         for name, r in self.segments.items()},
            "manifests": sorted(self.manifests),
        }


def _items(value: Any) -> Iterable[tuple[Any, Any]]:
    return value.items() if isinstance(value, dict) else ()


def _strings(value: Any) -> frozenset[str]:
    return frozenset(v for v in value if isinstance(v, str)) if isinstance(value, list) \
        else frozenset()


def _signature(value: Any) -> Signature | None:
    if isinstance(value, list) and all(type(v) is int for v in value):
        return tuple(value)
    return None


def _listed(sig: Signature | None) -> list[int] | None:
    return None if sig is None else list(sig)


def _scanned(held: Any) -> Scanned | None:
    if not isinstance(held, dict) or not isinstance(held.get("ids"), list) \
            or not all(isinstance(i, str) for i in held["ids"]):
        return None
    sig = _signature(held.get("sig"))
    return None if sig is None else Scanned(sig, tuple(held["ids"]), Tip.parse(held.get("tip")))


def _remembered(held: Any) -> Remembered | None:
    entry = held.get("entry") if isinstance(held, dict) else None
    if not isinstance(entry, dict):
        return None
    cited = held.get("artifacts")
    usable = isinstance(cited, list) and all(
        isinstance(a, dict) and isinstance(a.get("ref"), str)
        and isinstance(a.get("observations"), list) for a in cited)
    high = held.get("high")
    deltas = held.get("deltas") or []
    name = entry.get("name")
    sound = isinstance(name, str) and name.endswith(merge_plan.SEGMENT_SUFFIX) and (
        not deltas or delta_plan.chain_error(name, deltas) is None)
    generation = held.get("generation")
    return Remembered(_signature(held.get("sig")), entry, tuple(cited) if usable else None,
                      high if type(high) is int else None,
                      Tip.parse(held.get("tip")) if sound else None,
                      generation if isinstance(generation, str) else None,
                      tuple(deltas) if sound else ())


# -- before the snapshots ----------------------------------------------------------------

def reusable(memory: PushMemory, signatures: Mapping[str, Signature | None], prefix: str,
             present: Container[str]) -> dict[str, Remembered]:
    """The remembered snapshots a push may name again without taking them, provided
    the tombstones did not change: the segment is unchanged, and the remote still
    holds its object and every artifact object its rows cite."""
    out = {}
    for name, held in memory.segments.items():
        checksum = held.entry.get("checksum")
        if (held.artifacts is not None and held.entry.get("name") == name
                and isinstance(checksum, str) and held.sig is not None
                and signatures.get(name) == held.sig
                and prefix + base_key(held.entry) in present
                and all(not a.get("path") or prefix + a["path"] in present
                        for a in held.artifacts)
                and all(prefix + k in present
                        for k in delta_plan.chain_objects({name: list(held.deltas)}).values())):
            out[name] = held
    return out


def extendable(memory: PushMemory, signatures: Mapping[str, Signature | None],
               generation: str, prefix: str, present: Container[str],
               reused: Container[str]) -> dict[str, Remembered]:
    """The changed segments (not in `reused`) whose next rows may travel as a delta
    after what the remote holds of them (delta_plan.can_extend), provided the
    tombstones did not change and the rows up to the tip are the same ones."""
    out = {}
    for name, held in memory.segments.items():
        checksum = held.entry.get("checksum")
        if name in reused or name not in signatures or held.entry.get("name") != name \
                or not isinstance(checksum, str):
            continue
        if delta_plan.can_extend(held.held(), generation,
                                 prefix + base_key(held.entry) in present, present,
                                 prefix, name, held.artifacts):
            out[name] = held
    return out


def owned_keys(memory: PushMemory) -> set[str]:
    """The segment snapshots this root wrote to the remote, as far as the memory
    (already about this remote's URL) remembers: its `owned` list, and the entries of
    the last push (all a version before `owned` kept)."""
    owned = set(memory.owned)
    for name, held in memory.segments.items():
        checksum = held.entry.get("checksum")
        if isinstance(checksum, str) and merge_plan.own_segment(name) is not None:
            owned.add(base_key(held.entry))
            owned.update(delta_plan.chain_objects({name: list(held.deltas)}).values())
    return owned


# -- after the snapshots -----------------------------------------------------------------

class Assembly(NamedTuple):
    """The export a push publishes, and what its memory keeps of it."""

    export: dict[str, Any]  # the export manifest, reused entries and tombstones added
    objects: dict[str, str]  # export-relative path -> key below the own prefix
    artifacts_by_file: dict[str, list[Entry]]  # what each segment's rows cite
    fresh: frozenset[str]  # segments snapshotted by this push
    kept: frozenset[str]  # reused entries still good for the next push
    deltas: dict[str, list[Entry]]  # segment name -> its chain after the base


def assemble(staged: Mapping[str, Any], reused: Mapping[str, Remembered],
             known: AbstractSet[str], cited: Mapping[str, list[Entry]]) -> Assembly:
    """The export manifest of the snapshots just taken (`staged`, their artifacts by
    file `cited`), with the reused entries, under every tombstone `known` before the
    snapshots and those the snapshots read themselves."""
    export = dict(staged)
    export["files"] = sorted([*staged["files"], *(r.entry for r in reused.values())],
                             key=lambda f: f["name"])
    tombstoned = set(staged["tombstoned"]) | set(known)
    export["tombstoned"] = sorted(tombstoned)
    by_file = dict(cited)
    by_file.update({name: list(r.artifacts or ()) for name, r in reused.items()})
    export["artifacts"] = union_artifacts(staged["artifacts"], by_file.values())
    objects = {f["name"]: base_key(f) for f in export["files"]}
    objects.update({a["path"]: a["path"] for a in export["artifacts"] if a["path"]})
    deltas = {name: list(r.deltas) for name, r in sorted(reused.items()) if r.deltas}
    objects.update(delta_plan.chain_objects(deltas))
    # A tombstone that came while the snapshots were taken: the reused entries were
    # scrubbed without it, so the next push takes them again.
    kept = frozenset() if reused and tombstoned != set(known) else frozenset(reused)
    fresh = frozenset(f["name"] for f in export["files"]) - frozenset(reused)
    return Assembly(export, objects, by_file, fresh, kept, deltas)


def unchanged(in_place: Mapping[str, Any] | None, own: AbstractSet[str],
              reused: Mapping[str, Remembered], known: AbstractSet[str]) -> Assembly | None:
    """The assembly of a push with nothing to snapshot: every own segment reused, under
    tombstones `known`, and the manifest in place saying just that. None otherwise:
    the export takes the snapshots."""
    if in_place is None or set(reused) != set(own):
        return None
    staged = dict(in_place["export"], files=[], artifacts=[], tombstoned=[])
    got = assemble(staged, reused, known, {})
    return got if same_content({"objects": got.objects, "export": got.export}, in_place) \
        else None


def union_artifacts(listed: list[Entry], more: Iterable[list[Entry]]) -> list[Entry]:
    """One manifest entry per artifact, citing every observation any file cites it by,
    and naming its object when any file's entry does: a blob this push could not ship
    (gone here since) stays named while a reused snapshot's entry says the remote
    holds it, so the clean-up does not delete its last copy."""
    by_ref: dict[str, Entry] = {a["ref"]: dict(a) for a in listed}
    for entries in more:
        for a in entries:
            got = by_ref.get(a["ref"])
            if got is None:
                by_ref[a["ref"]] = dict(a)
                continue
            if got["path"] is None and a["path"] is not None:
                got.update(path=a["path"], bytes=a["bytes"], checksum=a["checksum"])
            got["observations"] = sorted(set(got["observations"]) | set(a["observations"]))
    return [by_ref[ref] for ref in sorted(by_ref)]


def manifest(workspace: str, replica: str, pushed_ts: str, assembly: Assembly
             ) -> dict[str, Any]:
    """The manifest a push writes. Its files may be segments named after an id this
    root forked from (storage/replica_fork.py): those ids are its `forkedFrom`, which
    only a reader of format 2 that knows it accepts."""
    packed = any("packed" in f for f in assembly.export["files"])
    forked = forked_from(replica, assembly.export["files"])
    out = {"syncFormat": DELTA_SYNC_FORMAT if assembly.deltas or packed or forked
           else SYNC_FORMAT,
           "workspace": workspace, "replica": replica, "pushedTs": pushed_ts,
           "export": assembly.export, "objects": assembly.objects}
    if assembly.deltas:
        out["deltas"] = assembly.deltas
    if forked:
        out["forkedFrom"] = forked
    return out


def forked_from(replica: str, files: Iterable[Mapping[str, Any]]) -> list[str]:
    """The other ids an export's own segments are named after, sorted."""
    return sorted({own[0] for f in files if (own := merge_plan.own_segment(f["name"]))
                   is not None} - {replica})


def encode(manifest: Mapping[str, Any]) -> bytes:
    return json.dumps(manifest, indent=2, sort_keys=True).encode("utf-8") + b"\n"


def same_content(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """Whether two manifests name the same objects and say the same of them (when each
    was written and when its export was made aside): a push whose manifest would be
    the one in place writes none."""
    return _comparable(a) == _comparable(b)


def _comparable(manifest: Mapping[str, Any] | None) -> Any:
    if manifest is None:
        return None
    export = dict(manifest["export"])
    export.pop("createdTs", None)
    return manifest["objects"], export, manifest.get("deltas") or {}


def segment_keys(manifest: Mapping[str, Any]) -> set[str]:
    """The keys of its segment objects: bases and deltas."""
    return {manifest["objects"][f["name"]] for f in manifest["export"]["files"]} | \
        set(delta_plan.chain_objects(manifest.get("deltas") or {}).values())


def next_memory(url: str, assembly: Assembly, signatures: Mapping[str, Signature | None],
                reused: Mapping[str, Remembered], tips: Mapping[str, Tip | None],
                generation: str | None, scans: Mapping[str, Scanned],
                owned: AbstractSet[str], manifests: AbstractSet[str]) -> PushMemory:
    """What the next push needs, saved before the manifest is written: the entries this
    push took (with the tip of each, `tips`, read under erasure `generation`; None
    when a compaction ran meanwhile) or could keep (their chains and tips as `reused`
    says), under its tombstones; `owned` and `manifests` name the snapshots and
    manifests of this push and of the manifest in place."""
    segments: dict[str, Remembered] = {}
    for f in assembly.export["files"]:
        name = f["name"]
        if name in assembly.kept:
            held = reused[name]
            segments[name] = held._replace(
                sig=signatures.get(name), generation=generation if held.tip else None)
        elif name in assembly.fresh:
            tip = tips.get(name)
            segments[name] = Remembered(
                signatures.get(name), f, tuple(assembly.artifacts_by_file.get(name, ())),
                None if tip is None else tip.high, tip,
                None if tip is None else generation)
    return PushMemory(url=url, tombstones=tombstones_digest(set(assembly.export["tombstoned"])),
                      scans=dict(scans), owned=frozenset(owned), segments=segments,
                      manifests=frozenset(manifests))


class Mark(NamedTuple):
    """Where the remote's copy of one own segment ends: the rows above seq `above`
    are not in it, but for the first `skip` of them."""

    done: bool  # the remote holds the segment as it is: nothing to read
    above: int
    skip: int


def remote_mark(named: Entry | None, held: Remembered | None, sig: Signature | None) -> Mark:
    """For one own segment with signature `sig`: `named`, the entry the remote's
    manifest has for it (None: none), and `held`, what the push memory remembers of
    it. The memory is about that entry only when their checksums agree; without it,
    the seq the snapshot ends at is not known, and the first `events` rows the
    scrub keeps are taken to be the ones it holds."""
    if named is None:
        return Mark(False, 0, 0)
    if held is not None and held.entry.get("checksum") == named.get("checksum"):
        if held.sig is not None and held.sig == sig:
            return Mark(True, 0, 0)
        if held.high is not None:
            return Mark(False, held.high, 0)
    return Mark(False, 0, int(named.get("events") or 0))


def stale_keys(listed: Iterable[str], prefix: str, objects: Mapping[str, str]) -> list[str]:
    """The keys below the own prefix that the manifest written (or in place) does not
    name: older snapshots, objects of an interrupted push; never a lock file."""
    keep = {prefix + MANIFEST_KEY} | {prefix + k for k in objects.values()}
    return sorted(k for k in set(listed) - keep if k.rsplit("/", 1)[-1] != ".lock")
