"""Anchor standing: does the evidence an anchor cites still stand here? Pure; no I/O.

Invariants:
- Only `tool_use:` anchors cite journal ids (observations). `file:`,
  `commit:` and `url:` anchors point outside the journal, so the journal
  cannot vouch for them either way: they are `external`, never `present`.
- An anchor whose observation is tombstoned, purged or not held here is
  `unknown`, never `present`: evidence that is gone (or was never synced)
  must not read as evidence that holds. Tombstone suppression is checked
  first, so a tombstoned observation whose bytes are still on disk is
  `unknown` too.
- The anchor text itself is never rewritten; this module only classifies it.
"""

from __future__ import annotations

from agent_journal.core.derive import Derived
from agent_journal.core.model import anchor_ref

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

PRESENT = "present"
UNKNOWN = "unknown"
EXTERNAL = "external"

# Why an anchor is unknown.
TOMBSTONED = "tombstoned"  # a tombstone names the id; its bytes may still be on disk
PURGED = "purged"          # a tombstone with purged: true names it; compaction removed it
ABSENT = "absent"          # not in this journal: expired by a TTL, or never synced here

JOURNAL_SCHEME = "tool_use"


def cited_id(anchor: str) -> str | None:
    """The journal id an anchor cites, or None for anchors outside the journal."""
    scheme, ref = anchor_ref(anchor)
    if scheme == JOURNAL_SCHEME and ref:
        return ref
    return None


def id_standing(d: Derived, obs_id: str, held: Any = None) -> tuple[str, str | None]:
    """(status, reason) for an observation id cited by a `tool_use:` anchor; `held(id)`
    says whether the journal holds it, when `d` holds only some observations."""
    tombs = d.tombstones.get(obs_id)
    if tombs:
        if any(t.data.get("purged") is True for t in tombs):
            return UNKNOWN, PURGED
        return UNKNOWN, TOMBSTONED
    if held(obs_id) if held is not None else obs_id in d.observation_events:
        return PRESENT, None
    return UNKNOWN, ABSENT


def standing(d: Derived, anchor: str, held: Any = None) -> tuple[str, str | None]:
    obs_id = cited_id(anchor)
    if obs_id is None:
        return EXTERNAL, None
    return id_standing(d, obs_id, held)


def anchor_report(d: Derived, anchor: str, held: Any = None) -> dict[str, str | None]:
    status, reason = standing(d, anchor, held)
    return {"anchor": anchor, "status": status, "reason": reason}
