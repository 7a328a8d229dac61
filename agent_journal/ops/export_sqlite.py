"""`export --sqlite FILE`: a workspace as one SQLite database for Datasette, sqlite-utils
or the SQLite shell (the schema: storage/sqlite_export.py; the contract: spec/cli-json.md).

Invariants:
- Every segment of the workspace is read (one whole read, ops/context.py) and derived
  (core/derive.py), so the database holds what `show` and `timeline` show: nothing a
  tombstone names, at any time, ever enters it (the tombstone itself does, with its
  target id and reason); invalidated and suppressed entries are there, marked not live.
- Rows are readable: kinds, tools, sessions, statuses and times are columns of their
  own, and every JSON value is JSON text.
- A damaged workspace is refused, writing nothing: a malformed row could be the
  tombstone that keeps some content out.
- FILE is checked before anything is read: its folder exists, it is outside the journal
  root (compact --apply would never erase a copy there), and it is not there already
  unless `overwrite` says to replace it (a regular file only). It appears whole or not
  at all.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from typing import Any

from agent_journal.core import clock
from agent_journal.core.derive import Derived
from agent_journal.core.errors import DamagedJournalError, JournalError, UsageError
from agent_journal.core.model import CHECKPOINT, ENTRY, INVALIDATION, OBSERVATION, TOMBSTONE
from agent_journal.core.recovery.facts import output_text
from agent_journal.core.timeline import entry_text, is_failed, target_of
from agent_journal.ops.context import Context, damage_summary, read_workspace

Progress = Callable[[str], None] | None


def check_file(path: str | None, root: str | None, *, overwrite: bool) -> str:
    """FILE made absolute, or the usage error (or refusal) that leaves everything as it
    was: no name, a missing folder, a place inside the root, something there already."""
    from agent_journal.storage.root import refuse_inside_root

    if path is None or path.strip() == "":
        raise UsageError("--sqlite needs a file name")
    absolute = os.path.abspath(os.path.expanduser(path))
    refuse_inside_root(absolute, root, "--sqlite")
    folder = os.path.dirname(absolute)
    if not os.path.isdir(folder):
        raise UsageError(f"--sqlite {path}: folder {folder} does not exist")
    if os.path.lexists(absolute):
        if os.path.islink(absolute) or not os.path.isfile(absolute):
            raise UsageError(f"--sqlite {path}: exists and is not a regular file")
        if not overwrite:
            raise JournalError(f"{absolute} exists; pass --overwrite to replace it "
                               "(nothing was written)")
    return absolute


def export_sqlite(ctx: Context, path: str, *, overwrite: bool = False,
                  progress: Progress = None) -> dict[str, Any]:
    """Write the database; its report (spec/cli-json.md, `export --sqlite`)."""
    from agent_journal.storage.segment_reader import PausedGC
    from agent_journal.storage.sqlite_export import names, write_database

    target = check_file(path, ctx.root_arg, overwrite=overwrite)
    replaced = os.path.lexists(target)
    if progress is not None:
        progress("reading the workspace")
    with PausedGC():
        result, d = read_workspace(ctx)
        if result.damaged:
            raise DamagedJournalError(
                f"refusing to export: {damage_summary(result.unreadable, result.malformed)}; "
                f"nothing was written to {target} (a damaged row could be the tombstone that "
                "keeps some content out; see `agent-journal coverage`)")
        events = sorted(result.events, key=lambda ev: (ev.ts, ev.event_id))
        del result
        withheld = sum(1 for ev in events if _withheld(ev, d))
        ws = ctx.open(create=False)
        meta = {"workspace": ws.name, "sourceReplica": ws.root.replica_id,
                "exportedAt": clock.now_ts(), "generator": _generator()}
        rows = {"events": (_event_row(ev, d) for ev in events if not _withheld(ev, d)),
                "observations": _observation_rows(d),
                "entries": (_entry_row(d, i) for i in d.visible_entry_ids())}
        try:
            counts = write_database(target, rows, meta, overwrite=overwrite,
                                    progress=progress)
        except FileExistsError:
            raise JournalError(f"{target} appeared while the database was written; pass "
                               "--overwrite to replace it (nothing was written)") from None
    tables, views = names()
    return {"path": target, "workspace": meta["workspace"],
            "sourceReplica": meta["sourceReplica"], "exportedAt": meta["exportedAt"],
            "replaced": replaced, "events": counts["events"],
            "observations": counts["observations"], "entries": counts["entries"],
            "withheld": withheld, "tables": tables, "views": views,
            "unreadable": [], "malformed": []}


def _generator() -> str:
    import agent_journal

    return f"agent-journal {agent_journal.__version__}"


def _withheld(ev: Any, d: Derived) -> bool:
    """An event about a tombstoned id (the tombstones themselves travel)."""
    return ev.type != TOMBSTONE and ev.id is not None and d.is_tombstoned(str(ev.id))


# -- rows -------------------------------------------------------------------------------

def _json(value: Any) -> str | None:
    if value is None:
        return None
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _output(value: Any) -> str | None:
    """A call's output as text: its text when it has one, else its JSON."""
    if value is None:
        return None
    text = output_text(value)
    return text if text is not None else _json(value)


def _prose(data: dict[str, Any]) -> str | None:
    """What was said: a prompt's or message's whole text."""
    for key in ("text", "prompt", "message"):
        found = data.get(key)
        if isinstance(found, str) and found.strip():
            return found
    hook = data.get("hook")
    if isinstance(hook, dict):
        for key in ("prompt", "last_assistant_message", "message"):
            found = hook.get(key)
            if isinstance(found, str) and found.strip():
                return found
    value = data.get("input")
    if isinstance(value, dict) and data.get("tool") is None:
        found = value.get("prompt")
        if isinstance(found, str) and found.strip():
            return found
    return None


def _cwd(data: dict[str, Any]) -> str | None:
    for holder in (data, data.get("transcript"), data.get("hook"), data.get("data")):
        if isinstance(holder, dict) and isinstance(holder.get("cwd"), str):
            return str(holder["cwd"])
    return None


def _call_columns(data: dict[str, Any], kind: str) -> dict[str, Any]:
    tool = _str(data.get("tool"))
    status = _str(data.get("status"))
    exit_code = _int(data.get("exitCode"))
    return {"tool": tool, "status": status, "exit_code": exit_code,
            "duration_ms": _int(data.get("durationMs")),
            "failed": int(is_failed(status, exit_code)),
            "target": target_of(tool, kind, data), "text": _prose(data),
            "input": _json(data.get("input")), "output": _output(data.get("output"))}


def _event_row(ev: Any, d: Derived) -> dict[str, Any]:
    data = ev.data
    row: dict[str, Any] = {"event_id": ev.event_id, "ts": ev.ts, "type": ev.type,
                           "kind": ev.kind, "id": ev.id, "session": ev.session,
                           "author": ev.author, "replica": ev.replica, "data": _json(data)}
    if ev.type == OBSERVATION:
        row.update(_call_columns(data, ev.kind))
        if row["tool"] is None or row["target"] is None:
            # A finish names neither tool nor input: the call's other events do.
            tool, target = _call_of(d, str(ev.id))
            row["tool"] = row["tool"] or tool
            row["target"] = row["target"] or target
    elif ev.type == ENTRY:
        text = entry_text(ev.kind, data.get("fields"))
        row.update(target=text, text=text, subject=_str(data.get("subject")),
                   status="recorded")
    elif ev.type in (INVALIDATION, TOMBSTONE):
        row.update(target=ev.id, text=_str(data.get("reason")),
                   status="purged" if data.get("purged") is True else None)
    elif ev.type == CHECKPOINT:
        row.update(target=ev.id, text=_str(data.get("note")))
    return row


def _call_of(d: Derived, obs_id: str) -> tuple[str | None, str | None]:
    """The tool and target of an observation, from the first of its events naming them."""
    tool: str | None = None
    target: str | None = None
    for ev in d.observation_events.get(obs_id, ()):
        tool = tool or _str(ev.data.get("tool"))
        if target is None and ev.data.get("input") is not None:
            target = target_of(tool, ev.kind, ev.data)
    return tool, target


def _observation_rows(d: Derived) -> Iterator[dict[str, Any]]:
    for obs_id in d.visible_observation_ids():
        view = d.observation_view(obs_id)
        row = {"id": obs_id, "kind": view["kind"], "ts": view["ts"], "last_ts": view["lastTs"],
               "session": view["session"], "author": view["author"],
               "call_id": _str(view.get("callId")), "artifact": _json(view.get("artifact")),
               "cwd": _cwd(view), "events": len(view["eventIds"]),
               "data": _json({k: v for k, v in view.items()
                              if k not in ("type", "id", "kind", "author", "session", "ts",
                                           "lastTs", "eventIds")})}
        row.update(_call_columns(view, view["kind"]))
        yield row


def _entry_row(d: Derived, entry_id: str) -> dict[str, Any]:
    view = d.entry_view(entry_id)
    invalidation = view["invalidation"] or {}
    return {"id": entry_id, "kind": view["kind"], "ts": view["ts"], "session": view["session"],
            "author": view["author"], "text": entry_text(view["kind"], view["fields"]),
            "subject": _str(view["subject"]), "live": int(view["live"]),
            "outcome": view["outcome"], "invalidation_reason": invalidation.get("reason"),
            "suppressed_through": _json(view["suppressedThrough"] or None),
            "anchors": _json(view["anchors"]), "depends_on": _json(view["dependsOn"]),
            "fields": _json(view["fields"]), "conflicts": len(view["conflicts"]),
            "event_id": view["eventId"]}
