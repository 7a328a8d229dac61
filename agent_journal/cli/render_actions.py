"""Commands that do something, as text for people: import, export, merge, compact,
push, pull, sync and the remote commands.

Invariant: as in cli/render_reads.py, each renderer takes the very report
`--json` prints and only formats it (nothing is looked up or derived), in a
few short lines: what was done, its counts, what was held back. Warnings are
not repeated here: the handler prints them on stderr either way. Long id lists
(a compaction can remove a million) are cut to their first few, with the count
of the rest; `--json` lists them all. Every line passes through `visible`
(core/bidi.py), so no stored text or path reads as other text.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from agent_journal.core.bidi import visible

INDENT = "  "
# Ids a list shows before "and N more".
SHOWN = 5


def _text(lines: list[str]) -> str:
    return visible("\n".join(lines) + "\n")


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def _ids(label: str, items: Any) -> str:
    """`label: N` and, when there are any, the first few of them."""
    items = list(items)
    line = f"{label}: {len(items)}"
    if items:
        line += " (" + ", ".join(str(i) for i in items[:SHOWN])
        if len(items) > SHOWN:
            line += f", and {len(items) - SHOWN} more"
        line += ")"
    return line


def _damage(report: dict[str, Any]) -> list[str]:
    """The malformed rows a report names (export ships them, merge skips them)."""
    return [f"{INDENT}malformed {m.get('segment')} row {m.get('row')}: {m.get('reason')}"
            for m in report.get("malformed") or []]


# -- import ------------------------------------------------------------------------------

def import_text(report: dict[str, Any]) -> str:
    out = [f"imported {report['transcript']} into workspace {report['workspace']}",
           f"{INDENT}{_plural(report['calls'], 'call')}, "
           f"{_plural(report['messages'], 'message')}, "
           f"{_plural(report['eventsWritten'], 'event')} written, "
           f"{report['alreadyPresent']} already present",
           f"{INDENT}{report['unfinished']} unfinished, {report['tombstoned']} skipped as "
           f"tombstoned, {_plural(report['artifacts'], 'artifact')}"]
    sessions = report.get("sessions") or []
    if sessions:
        out.append(f"{INDENT}" + _ids("sessions", sessions))
    project = report.get("project")
    if project:
        extra = [v for v in (project.get("repository"), project.get("branch")) if v]
        out.append(f"{INDENT}project {project['cwd']}"
                   + (f" ({', '.join(extra)})" if extra else ""))
    return _text(out)


def other_project_warning(report: dict[str, Any]) -> str | None:
    """The line warning that an import mixed projects into one workspace, or None."""
    other = report.get("otherProject")
    if not other:
        return None
    project = report.get("project") or {}
    return (f"{report['transcript']} is from project {project.get('cwd')} but workspace "
            f"{report['workspace']} already held observations from {other}; imported "
            "anyway (--other-project)")


# -- compact -------------------------------------------------------------------------------

def _ttl(days: Any) -> str:
    return "never" if days is None else _plural(days, "day")


def compact_text(report: dict[str, Any]) -> str:
    head = "compact: applied" if report["apply"] else \
        "compact: dry run, nothing changed (--apply carries out this plan)"
    out = [head,
           f"{INDENT}entry TTL: {_ttl(report['entryTtlDays'])}; observation TTL: "
           f"{_ttl(report['observationTtlDays'])}",
           INDENT + _ids("expired", report["expired"]),
           INDENT + _ids("tombstoned", report["tombstoned"]),
           INDENT + _ids("pinned", report["pinned"]),
           INDENT + _ids("downgraded", report["downgraded"])]
    if report["unclassified"]:
        out.append(INDENT + _ids("unclassified events (never removed)",
                                 report["unclassified"]))
    out.append(INDENT + _ids("tombstones marked purged", report["tombstonesMarkedPurged"]))
    if "skipped" in report:
        out.append(INDENT + _ids("segments skipped (they gained events; run it again)",
                                 report["skipped"]))
    return _text(out)


# -- export, merge ---------------------------------------------------------------------------

def export_text(report: dict[str, Any]) -> str:
    out = [f"exported workspace {report['workspace']} (replica {report['sourceReplica']}) "
           f"to {report['dest']}",
           f"{INDENT}{_plural(report['files'], 'segment file')}, "
           f"{_plural(report['events'], 'event')}, {report['withheld']} withheld "
           f"(tombstoned), {_plural(report['artifacts'], 'artifact')}"]
    if report["artifactsMissing"]:
        out.append(INDENT + _ids("artifacts missing", report["artifactsMissing"]))
    if report.get("malformed"):
        out.append(f"{INDENT}{_plural(len(report['malformed']), 'malformed row')} shipped "
                   "as stored:")
        out += _damage(report)
    return _text(out)


def export_sqlite_text(report: dict[str, Any]) -> str:
    path = report["path"]
    quoted = path if all(c.isalnum() or c in "/._-+@%=:," for c in path) else repr(path)
    return _text([
        f"{'replaced' if report['replaced'] else 'wrote'} {path}: workspace "
        f"{report['workspace']} as one SQLite database",
        f"{INDENT}{_plural(report['events'], 'event')}, "
        f"{_plural(report['observations'], 'observation')}, "
        f"{_plural(report['entries'], 'entry', 'entries')}; {report['withheld']} withheld "
        "(tombstoned)",
        f"{INDENT}tables: {', '.join(report['tables'])} (full-text search on their text); "
        f"views: {', '.join(report['views'])}",
        f"{INDENT}open it: datasette {quoted}   or: sqlite-utils tables {quoted} --counts"])


def _not_imported(items: list[dict[str, Any]]) -> str:
    if not items:
        return "0 not imported"
    reasons = Counter(i["reason"] for i in items)
    why = ", ".join(f"{n} {'removed here' if r == 'removedHere' else r}"
                    for r, n in sorted(reasons.items()))
    return f"{len(items)} not imported ({why})"


def _merge_counts(report: dict[str, Any]) -> str:
    return (f"{report['imported']} imported, {report['alreadyPresent']} already present, "
            + _not_imported(report["notImported"]))


def merge_text(report: dict[str, Any]) -> str:
    source = report["source"]
    replica = f" (replica {source['replica']})" if source.get("replica") else ""
    art = report["artifacts"]
    out = [f"merged {source['kind']} {source['path']}{replica} into workspace "
           f"{report['workspace']}",
           f"{INDENT}events: {_merge_counts(report)}",
           f"{INDENT}artifacts: {art['copied']} copied, {art['alreadyPresent']} already "
           f"present, {len(art['missing'])} missing"]
    out += [INDENT + "new segment: " + path for path in report["segmentsTouched"]]
    if report["replicaIdCollisions"]:
        out.append(INDENT + _ids("replica ids shared by two roots",
                                 report["replicaIdCollisions"]))
    if report.get("malformed"):
        out.append(f"{INDENT}{_plural(len(report['malformed']), 'malformed source row')} "
                   "skipped:")
        out += _damage(report)
    return _text(out)


# -- sync ------------------------------------------------------------------------------------

def _where(report: dict[str, Any]) -> str:
    return f"{report['remote']} ({report['url']})"


def _push_lines(report: dict[str, Any]) -> list[str]:
    manifest = "written" if report["manifestWritten"] else "unchanged"
    out = [f"pushed workspace {report['workspace']} to {_where(report)} as replica "
           f"{report['replica']}",
           f"{INDENT}{_plural(report['files'], 'segment file')} "
           f"({report['snapshotted']} snapshotted now, "
           f"{_plural(report['deltas'], 'delta')} of new rows), "
           f"{_plural(report['events'], 'event')}, "
           f"{report['withheld']} withheld (tombstoned)",
           f"{INDENT}uploaded {_plural(report['uploaded'], 'object')} "
           f"({_plural(report['uploadedBytes'], 'byte')}), {report['alreadyPresent']} already "
           f"present; manifest {manifest}",
           INDENT + _ids("deleted", report["deleted"])]
    return out


def _pull_lines(report: dict[str, Any]) -> list[str]:
    out = [f"pulled workspace {report['workspace']} from {_where(report)}",
           f"{INDENT}{_plural(report['replicas'], 'other replica')}, {report['changed']} "
           f"changed; fetched {_plural(report['fetched'], 'object')} "
           f"({_plural(report['fetchedBytes'], 'byte')})",
           f"{INDENT}events: {_merge_counts(report)}"]
    for r in report["refused"]:
        out.append(f"{INDENT}refused {r['replica']} {r['key']}: {r['reason']}")
    for m in report["missing"]:
        out.append(f"{INDENT}missing {m['replica']} {m['key']} (the next pull tries again)")
    return out


def push_text(report: dict[str, Any]) -> str:
    return _text(_push_lines(report))


def pull_text(report: dict[str, Any]) -> str:
    return _text(_pull_lines(report))


def sync_text(report: dict[str, Any]) -> str:
    return _text(_pull_lines(report["pull"]) + _push_lines(report["push"]))


def remote_status_text(report: dict[str, Any]) -> str:
    replicas = report["replicas"]
    out = [f"remote {_where(report)}, workspace {report['workspace']}: "
           f"{_plural(len(replicas), 'replica')}, "
           f"{_plural(report['tombstones'], 'tombstoned id')}"]
    unpushed = report.get("unpushed")
    if unpushed is not None:
        out.append(f"{INDENT}not pushed yet from this root: "
                   f"{_plural(unpushed['events'], 'event')} "
                   f"({_plural(unpushed['bytes'], 'byte')}) in "
                   f"{_plural(unpushed['segments'], 'segment')}")
    for r in replicas:
        me = " (this root)" if r["self"] else ""
        out.append(f"{INDENT}{r['replica']}{me}: pushed {r['pushedTs']}, "
                   f"{_plural(r['files'], 'file')}, {_plural(r['events'], 'event')}, "
                   f"{_plural(r['bytes'], 'byte')}")
        if r["unseenTombstones"]:
            out.append(INDENT * 2 + _ids("tombstones not seen", r["unseenTombstones"]))
        for held in r["objectsHoldingErased"]:
            out.append(INDENT * 2 + f"{held['key']} holds erased content: "
                       + ", ".join(str(t) for t in held["tombstoned"]))
    if report["versioning"] is not None:
        out.append(f"{INDENT}bucket versioning: {report['versioning']}")
    for r in report["refused"]:
        out.append(f"{INDENT}refused {r['replica']} {r['key']}: {r['reason']}")
    return _text(out)


def remote_list_text(report: dict[str, Any]) -> str:
    remotes = report["remotes"]
    if not remotes:
        return _text([f"no remotes for workspace {report['workspace']}"])
    return _text([f"{r['name']}  {r['url']}"
                  + (f"  (endpoint {r['endpointUrl']})" if r.get("endpointUrl") else "")
                  for r in remotes])


def remote_add_text(report: dict[str, Any]) -> str:
    added = report["added"]
    endpoint = f" (endpoint {added['endpointUrl']})" if added.get("endpointUrl") else ""
    return _text([f"added remote {added['name']} {added['url']}{endpoint} for workspace "
                  f"{report['workspace']}"])


def remote_remove_text(report: dict[str, Any]) -> str:
    removed = report["removed"]
    return _text([f"removed remote {removed['name']} {removed['url']} from workspace "
                  f"{report['workspace']}"])
