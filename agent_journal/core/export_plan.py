"""Export planning: which rows of a snapshot travel, and what the manifest says of them. Pure.

Invariants:
- A row travels unless it is erasable and a tombstone names its subject
  (`merge_plan.withheld`); tombstones always travel. A travelling row whose
  lookup columns (or text body) do not say what its bytes say is fixed in
  the snapshot, since a receiver decides from those columns (the manifest
  seals them). A malformed row travels as stored and is named in the
  manifest.
- A snapshot's verdict is a function of its rows and the tombstoned ids; the
  part that does not depend on the tombstones (`clean`, `artifacts`,
  `tombstones`) is what may be remembered of its bytes.
- The manifest lists the files in segment order, and an artifact once, with
  every travelling observation that cites it; an artifact cited only by
  withheld observations is not listed.
"""

from __future__ import annotations

from collections.abc import Container, Iterator
from typing import Any, NamedTuple

from agent_journal.core import codec, merge_plan
from agent_journal.core.merge_rows import verify_row
from agent_journal.core.model import OBSERVATION, TOMBSTONE

# A row fixed in the snapshot: (type, subject, ts, body, seq), as its bytes say.
Fix = tuple[str, "str | None", str, bytes, int]
# An artifact an observation cites: (ref, bytes, checksum, the observation's id).
Cite = tuple[str, int, str, "str | None"]


class Verdict(NamedTuple):
    """The check of every row of one snapshot (see `judge`). It crosses
    between processes as a plain tuple (`tuple(v)`, `Verdict._make`)."""

    rows: int
    owner: Any  # the replica its meta names
    withheld: list[int]  # seqs of the rows a tombstone keeps back
    fixes: list[Fix]
    malformed: list[tuple[int, str]]  # (seq, why)
    artifacts: list[Cite]
    tombstones: list[str]  # the ids its well-formed tombstones name, sorted
    clean: bool  # every row well-formed, every row's columns agreeing with its bytes


def judge(rows: list[tuple[Any, ...]], owner: Any, tombstoned: Container[str]) -> Verdict:
    """Check every row of one snapshot, rows as a segment read gives them:
    (seq, event_id, type, subject, ts, body, checksum).

    `withheld` and `fixes` are about the rows that travel given `tombstoned`;
    `clean`, `artifacts` and `tombstones` are about every row, whatever the
    tombstones, so that a clean verdict can be remembered and reused under
    other tombstones.
    """
    withheld: list[int] = []
    fixes: list[Fix] = []
    malformed: list[tuple[int, str]] = []
    artifacts: list[Cite] = []
    tombstones: list[str] = []
    agree = True
    for seq, event_id, col_type, col_subject, col_ts, body, checksum in rows:
        try:
            obj = verify_row(body, checksum, event_id)
        except codec.MalformedEvent as exc:
            malformed.append((seq, str(exc)))
            continue
        type_, subject, ts = obj["type"], obj["id"], obj["ts"]
        same = type(body) is bytes and (col_type, col_subject, col_ts) == (type_, subject, ts)
        agree = agree and same
        art = merge_plan.artifact_record(type_, obj["data"])
        if art is not None:
            artifacts.append((art["ref"], art["bytes"], art["checksum"], subject))
        elif type_ == TOMBSTONE:
            tombstones.append(subject)
        if merge_plan.withheld(type_, subject, tombstoned):
            withheld.append(seq)
        elif not same:
            fixes.append((type_, subject, ts, codec.as_bytes(body), seq))
    return Verdict(len(rows), owner, withheld, fixes, malformed, artifacts,
                   sorted(set(tombstones)), agree and not malformed)


def travelling_artifacts(v: Verdict, tombstoned: Container[str]) -> Iterator[Cite]:
    """The verdict's artifacts cited by observations that travel."""
    for art in v.artifacts:
        if not merge_plan.withheld(OBSERVATION, art[3], tombstoned):
            yield art


def file_entry(name: str, size: int, checksum: str, v: Verdict) -> dict[str, Any]:
    """A published snapshot's entry in the manifest's `files`."""
    owner = v.owner or (merge_plan.own_segment(name) or ("", 0))[0]
    return {"name": name, "bytes": size, "checksum": checksum,
            "events": v.rows - len(v.withheld), "replica": owner,
            "malformed": [{"row": row, "reason": why} for row, why in v.malformed]}


class Cited(NamedTuple):
    """The artifacts the travelling observations of an export cite."""

    records: dict[str, tuple[dict[str, Any], set[str]]]  # ref -> (record, citing ids)
    by_file: dict[str, list[str]]  # file name -> the refs its travelling rows cite


def cited(files: list[tuple[str, Verdict]], tombstoned: Container[str]) -> Cited:
    """What the travelling observations of these files (name, verdict), in
    order, cite: each ref once, with the first record met and every citing
    observation's id ("" for none)."""
    got = Cited({}, {})
    for name, v in files:
        refs = got.by_file.setdefault(name, [])
        for ref, size, checksum, subject in travelling_artifacts(v, tombstoned):
            art: dict[str, Any] = {"ref": ref, "bytes": size, "checksum": checksum}
            got.records.setdefault(ref, (art, set()))[1].add(subject or "")
            refs.append(ref)
    return got


def artifact_entry(ref: str, art: dict[str, Any], cited_by: set[str], shipped: bool
                   ) -> dict[str, Any]:
    """An artifact's entry in the manifest: with its path when its file was
    shipped, else listed without one, so a receiver knows it is missing."""
    return {"ref": ref, "path": merge_plan.export_artifact_path(ref) if shipped else None,
            "bytes": art["bytes"], "checksum": art["checksum"],
            "observations": sorted(cited_by)}


def malformed_report(files: list[tuple[str, Verdict]]) -> list[dict[str, Any]]:
    """The malformed rows of these files (reported path, verdict), in order, as
    a serial check would meet them."""
    return [{"segment": rel, "row": row, "reason": why}
            for rel, v in files for row, why in v.malformed]
