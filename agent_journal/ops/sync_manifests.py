"""The replicas' manifests in a remote, as pull and remote status read them, and the
pull's memory of them.

Invariants:
- A manifest is trusted for nothing until it is checked: strict JSON, this
  sync format, a time this journal writes, this workspace, the replica its
  key names, an export manifest as `merge` checks it, and objects naming
  exactly the export's files by their content.
- Which manifests changed since the last pull is known from one listing of
  the workspace with the objects' etags (rolled up so that each replica shows
  little but its manifest), whatever the number of replicas; a manifest whose
  listed etag is the one the last pull merged is not asked for. Any other is
  asked for conditionally (`If-None-Match`).
- The pull state (`remotes/<name>/state.json`) is a memory: lost or damaged, it
  costs one full fetch, never data.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agent_journal.core import delta_plan, merge_plan, push_plan
from agent_journal.core.errors import JournalError
from agent_journal.core.push_plan import MANIFEST_KEY, SYNC_FORMAT, SYNC_FORMATS
from agent_journal.ops.sync_common import replica_prefix
from agent_journal.storage.remote import ObjectMissing, ObjectUnusable, Remote

# clock.now_ts(): what push writes as pushedTs (years before 1000 unpadded).
_PUSHED_TS = re.compile(r"[0-9]{1,4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z")
# Where a listing of a workspace rolls a key up: both `segments/` and `artifacts/`
# end in it, and no `<replica>/manifest.json` holds it (a replica id this journal
# writes ends in a hex digit), so each replica lists as its manifest and two prefixes.
ROLLUP = "s/"

Refused = list[dict[str, Any]]
# Manifests asked for at once: each request waits mostly on the service.
READERS = 8


def check_sync_manifest(raw: bytes, *, workspace: str, replica: str) -> dict[str, Any]:
    """A remote manifest, validated; raises JournalError with the reason."""
    from agent_journal.capture.strictjson import StrictJSONError, loads

    try:
        # Strict: no NaN or Infinity (which no JSON report could carry on), no duplicate
        # keys; nesting too deep for the parser is a refusal, not a crash.
        obj = loads(raw)
    except StrictJSONError as exc:
        raise JournalError(f"not JSON: {exc}") from None
    if not isinstance(obj, dict) or obj.get("syncFormat") not in SYNC_FORMATS \
            or type(obj["syncFormat"]) is not int:
        raise JournalError(f"syncFormat is not one of {', '.join(map(str, SYNC_FORMATS))}")
    if not isinstance(obj.get("pushedTs"), str) or not _PUSHED_TS.fullmatch(obj["pushedTs"]):
        raise JournalError("pushedTs is not a time this journal writes")
    if obj.get("workspace") != workspace:
        raise JournalError(f"it is of workspace {obj.get('workspace')!r}")
    if obj.get("replica") != replica:
        raise JournalError(f"it says it is replica {obj.get('replica')!r}")
    try:
        export = merge_plan.check_manifest(obj.get("export"), workspace=workspace)
    except merge_plan.ManifestError as exc:
        raise JournalError(str(exc)) from None
    if export["sourceReplica"] != replica:
        raise JournalError(f"its export is of replica {export['sourceReplica']!r}")
    owners = {replica, *_checked_forked_from(obj, replica)}
    for f in export["files"]:
        own = merge_plan.own_segment(f["name"])
        if own is None or own[0] not in owners:
            raise JournalError(f"{f['name']} is not one of replica {replica}'s own segments")
    if obj.get("forkedFrom", []) != push_plan.forked_from(replica, export["files"]):
        raise JournalError("forkedFrom does not name exactly the other ids its files have")
    objects = obj.get("objects")
    if not isinstance(objects, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in objects.items()):
        raise JournalError("objects must map paths to keys")
    for f in export["files"]:
        why = push_plan.packed_error(f)
        if why is not None or ("packed" in f and obj["syncFormat"] == SYNC_FORMAT):
            raise JournalError(why or f"syncFormat {SYNC_FORMAT} packs no segment")
    wanted = {f["name"]: push_plan.base_key(f) for f in export["files"]}
    wanted.update({a["path"]: a["path"] for a in export["artifacts"] if a["path"] is not None})
    wanted.update(delta_plan.chain_objects(_checked_deltas(obj, export)))
    if objects != wanted:
        raise JournalError("objects do not name exactly the export's files by their content")
    return obj


def _checked_forked_from(obj: dict[str, Any], replica: str) -> list[str]:
    """The ids a forked replica's segments may also be named after (syncFormat 2 only):
    a root copied from another forks to a new id and keeps pushing its old segments."""
    if "forkedFrom" not in obj:
        return []
    got = obj["forkedFrom"]
    if obj["syncFormat"] == SYNC_FORMAT or not isinstance(got, list) or not got or not all(
            isinstance(r, str) and r != replica and merge_plan.safe_replica(r) == r
            for r in got) or got != sorted(set(got)):
        raise JournalError("forkedFrom must list other replica ids, sorted, in syncFormat 2")
    return got


def _checked_deltas(obj: dict[str, Any], export: dict[str, Any]) -> dict[str, Any]:
    """A manifest's deltas (core/delta_plan.py): only in syncFormat 2, and there a
    non-empty rising chain for some of its own files."""
    if obj["syncFormat"] == SYNC_FORMAT or "deltas" not in obj:
        if "deltas" in obj:
            raise JournalError(f"syncFormat {SYNC_FORMAT} names no deltas")
        return {}
    deltas = obj.get("deltas")
    if not isinstance(deltas, dict) or not deltas:
        raise JournalError("deltas must map segments to their chains")
    names = {f["name"] for f in export["files"]}
    for name, chain in deltas.items():
        if name not in names:
            raise JournalError(f"deltas name {name!r}, which is not one of its files")
        why = delta_plan.chain_error(name, chain)
        if why is not None:
            raise JournalError(why)
    return deltas


class Seen:
    """One replica's manifest as this pull found it."""

    def __init__(self, replica: str, manifest: dict[str, Any] | None, etag: str | None,
                 tombstoned: list[str]) -> None:
        self.replica = replica
        self.manifest = manifest  # None: unchanged since the last pull
        self.etag = etag
        self.tombstoned = tombstoned


def load_state(path: str, url: str) -> dict[str, Any]:
    """What earlier pulls from this remote merged; empty when it was about another URL
    (a remote removed and added again under the same name)."""
    state = read_state(path)
    if state.get("url") != url:
        return {"url": url, "replicas": {}}
    return state


def read_state(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            state = json.loads(fh.read())
    except FileNotFoundError:
        return {"replicas": {}}
    except (OSError, ValueError, RecursionError):
        return {"replicas": {}}  # a lost memory costs one full fetch, never data
    if not isinstance(state, dict) or not isinstance(state.get("replicas"), dict):
        return {"replicas": {}}
    return state


def manifest_etags(remote: Remote, workspace: str) -> dict[str, str | None]:
    """Each replica folder of the workspace in the remote -> the etag its manifest is
    listed with (None: none listed), in one listing."""
    base = f"{workspace}/"
    tops = remote.list_tops(base, ROLLUP)
    found: dict[str, str | None] = {}
    for key in [*tops.etags, *tops.rolled]:
        replica, slash, _ = key[len(base):].partition("/")
        if replica and slash:  # (a key right below the workspace is no replica's)
            found.setdefault(replica, None)
    for key, etag in tops.etags.items():
        replica, _, rest = key[len(base):].partition("/")
        if replica and rest == MANIFEST_KEY:
            found[replica] = etag
    return dict(sorted(found.items()))


def read_manifests(remote: Remote, workspace: str, me: str | None,
                   state: dict[str, Any], refused: Refused,
                   *, conditional: bool = True) -> list[Seen]:
    """Every other replica's manifest, checked; with `conditional`, those the state
    says were merged as they are come back with no manifest (unchanged). The ones to
    ask for are asked for READERS at a time; the answer is in listing order."""
    from concurrent.futures import ThreadPoolExecutor

    slots: list[Seen | tuple[str, dict[str, Any]] | None] = []
    for replica, listed in manifest_etags(remote, workspace).items():
        if replica == me:
            continue
        if merge_plan.safe_replica(replica) != replica:
            refused.append({"replica": replica, "key": None,
                            "reason": "not a replica id this journal would write"})
            continue
        remembered = state["replicas"].get(replica, {}) if conditional else {}
        if listed is not None and listed == remembered.get("etag"):
            slots.append(Seen(replica, None, listed, list(remembered.get("tombstoned", []))))
        else:
            slots.append((replica, remembered))
    asks = [s for s in slots if isinstance(s, tuple)]
    found: list[tuple[Seen | None, Refused]] = []
    if asks:
        with ThreadPoolExecutor(max_workers=min(READERS, len(asks))) as pool:
            found = list(pool.map(lambda ask: _read_one(remote, workspace, *ask), asks))
    answers = iter(found)
    seen = []
    for slot in slots:
        if isinstance(slot, tuple):
            got, why = next(answers)
            refused.extend(why)
            slot = got
        if slot is not None:
            seen.append(slot)
    return seen


def _read_one(remote: Remote, workspace: str, replica: str, remembered: dict[str, Any]
              ) -> tuple[Seen | None, Refused]:
    """One replica's manifest (None: none yet, or refused) and what was refused."""
    key = replica_prefix(workspace, replica) + MANIFEST_KEY
    try:
        got = remote.get_bytes(key, if_none_match=remembered.get("etag"))
    except ObjectMissing:
        return None, []  # a first push that has not written its manifest yet
    except ObjectUnusable as exc:
        return None, [{"replica": replica, "key": key, "reason": f"bad manifest: {exc}"}]
    if got is None:
        return Seen(replica, None, remembered.get("etag"),
                    list(remembered.get("tombstoned", []))), []
    raw, etag = got
    try:
        manifest = check_sync_manifest(raw, workspace=workspace, replica=replica)
    except JournalError as exc:
        return None, [{"replica": replica, "key": key, "reason": f"bad manifest: {exc}"}]
    return Seen(replica, manifest, etag, list(manifest["export"]["tombstoned"])), []
