"""Read commands as text for people: show, get of an entry or event, trace,
coverage, decay, checkpoints.

Invariant: each renderer takes the very report `--json` prints and only
formats it: nothing is looked up, derived or left out that the report
decides, so the text and the JSON can never disagree about what the journal
holds (tombstoned content is absent from both). Stored text is printed as it
is, on its own indented lines, never folded into a column, except that bidi
controls are shown as `<U+XXXX>` markers (core/bidi.py): each renderer's lines
pass through `visible` on their way out, so no stored text reads as other text.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from agent_journal.core.bidi import visible

INDENT = "    "


def _text_lines(text: Any, indent: str = INDENT) -> list[str]:
    value = text if isinstance(text, str) else str(text)
    return [indent + line for line in (value.splitlines() or [""])]


def fields_lines(kind: str, fields: Any, indent: str = INDENT) -> list[str]:
    if not isinstance(fields, dict):
        return []
    out: list[str] = []
    order = ["claim", "question", "chosen", "text"]
    for name in order + sorted(k for k in fields if k not in order):
        if name in fields:
            label = f"{name}: "
            body = str(fields[name]).splitlines() or [""]
            out.append(f"{indent}{label}{body[0]}")
            out.extend(f"{indent}{' ' * len(label)}{more}" for more in body[1:])
    return out


def _status(entry: dict[str, Any]) -> str:
    outcome = entry.get("outcome")
    if outcome == "invalidated":
        inv = entry.get("invalidation") or {}
        return f"INVALIDATED by {inv.get('author')} at {inv.get('ts')}: {inv.get('reason')}"
    if outcome == "suppressed":
        through = entry.get("suppressedThrough") or []
        why = ", ".join(through) if through else "a retracted entry (not shown)"
        return f"SUPPRESSED: depends on retracted {why}"
    return "live"


def entry_lines(entry: dict[str, Any]) -> list[str]:
    who = entry.get("author")
    if entry.get("session"):
        who = f"{who}, session {entry['session']}"
    out = [f"{entry['kind']} {entry['id']}  [{_status(entry)}]",
           f"{INDENT}recorded {entry.get('ts')} by {who}"]
    out += fields_lines(entry["kind"], entry.get("fields"))
    if entry.get("subject") is not None:
        out.append(f"{INDENT}subject: {entry['subject']}")
    anchors = entry.get("anchors") or []
    out.append(f"{INDENT}anchors: " + (", ".join(anchors) if anchors else "none"))
    if entry.get("dependsOn"):
        out.append(f"{INDENT}depends on: " + ", ".join(entry["dependsOn"]))
    versions = entry.get("conflictVersions") or []
    if versions:
        out.append(f"{INDENT}CONFLICT: {len(versions)} other record(s) of id {entry['id']} "
                   "(another replica chose the same id); this one is the earliest, so it is "
                   "the entry:")
        for v in versions:
            out.append(f"{INDENT}  - event {v['eventId']}: {v['kind']} by {v['author']} "
                       f"on replica {v['replica']} at {v['ts']}")
            out += fields_lines(v["kind"], v.get("fields"), INDENT + "      ")
    return out


def entry_text(entry: dict[str, Any]) -> str:
    """One entry (`get ID`) for people."""
    return _text(entry_lines(entry))


def observation_line(obs: dict[str, Any]) -> list[str]:
    from agent_journal.core.timeline import is_failed, target_of

    status = obs.get("status") or "-"
    if obs.get("exitCode") is not None:
        status += f" exit {obs['exitCode']}"
    target = target_of(obs.get("tool"), obs.get("kind") or "", obs) or ""
    mark = "  FAILED" if is_failed(obs.get("status"), obs.get("exitCode")) else ""
    head = f"{obs['kind']} {obs['id']}  {obs.get('tool') or ''}  [{status}]{mark}"
    out = [head.replace("  []", ""), f"{INDENT}{obs.get('ts')}  session {obs.get('session')}"]
    if target:
        out += _text_lines(target, INDENT + "target: ")
    return out


def damage_lines(report: dict[str, Any]) -> list[str]:
    """What the read could not trust, named (the floor warning on stderr says
    only how much)."""
    out: list[str] = []
    unreadable = report.get("unreadable") or []
    malformed = report.get("malformed") or []
    if unreadable or malformed:
        out.append("")
        out.append(f"Damage: {len(unreadable)} unreadable segment(s), {len(malformed)} "
                   "malformed row(s); this result is a floor, not a total")
    for u in unreadable:
        out.append(f"  unreadable {u.get('path')}: {u.get('reason')}")
    for m in malformed:
        out.append(f"  malformed {m.get('segment')} row {m.get('row')}: {m.get('reason')}")
    return out


def _text(lines: list[str]) -> str:
    """The lines of a renderer as its text, stored bidi controls shown as markers."""
    return visible("\n".join(lines) + "\n")


def show_text(report: dict[str, Any]) -> str:
    return "\n".join(show_lines(report)) + "\n"


def show_lines(report: dict[str, Any]) -> Iterator[str]:
    """`show` for people, line by line as the report's items come (ops/show.py
    streams them; the counts of the summary are known before the first)."""
    return map(visible, _show_lines(report))


def _show_lines(report: dict[str, Any]) -> Iterator[str]:
    constraints = report.get("liveConstraints") or []
    yield f"Live constraints: {len(constraints)}"
    for c in constraints:
        yield from fields_lines(c["kind"], c.get("fields"), f"  {c['id']}: ")
    items: Any = report.get("entries") or []
    if hasattr(items, "live"):
        entries, live, observations = items.entries, items.live, items.observations
    else:
        shown = [i for i in items if i.get("type") == "entry"]
        entries, live = len(shown), sum(1 for e in shown if e.get("live"))
        observations = len(items) - entries
    summary = f"Entries: {entries} ({live} live, {entries - live} not live)"
    if observations:
        summary += f"; observations: {observations}"
    yield ""
    yield summary
    for item in items:
        yield ""
        yield from entry_lines(item) if item.get("type") == "entry" else observation_line(item)
    yield from damage_lines(report)


def event_text(event: dict[str, Any]) -> str:
    """A stored event (`get EVENT_ID`) for people."""
    out = [f"event {event['eventId']}: {event['type']}/{event['kind']} about {event['id']}",
           f"{INDENT}{event['ts']} by {event['author']}"
           + (f", session {event['session']}" if event.get("session") else "")
           + f", replica {event['replica']}"]
    data = event.get("data") or {}
    if event["type"] == "entry":
        out += fields_lines(event["kind"], data.get("fields"))
        if data.get("anchors"):
            out.append(f"{INDENT}anchors: " + ", ".join(data["anchors"]))
        if data.get("dependsOn"):
            out.append(f"{INDENT}depends on: " + ", ".join(data["dependsOn"]))
    else:
        import json

        text = json.dumps(data, indent=2, ensure_ascii=False, sort_keys=True)
        out += _text_lines(text)
    return _text(out)


def trace_text(target: str, report: dict[str, Any]) -> str:
    matched = report.get("matched") or []
    chain = report.get("chain") or []
    out = [f"trace {target}: {len(matched)} matched, {len(chain)} in the chain"]
    if not chain:
        out.append("(no entry cites it)")
        return _text(out + damage_lines(report))
    via_of = {row["id"]: row["via"] for row in matched}
    children: dict[str, list[dict[str, Any]]] = {}
    roots = []
    for row in chain:
        if row["depth"] == 0:
            roots.append(row)
        else:
            children.setdefault(row["via"], []).append(row)

    def label(row: dict[str, Any]) -> str:
        state = "live" if row["live"] else str(row["outcome"]).upper()
        how = f"  (matched by {via_of[row['id']]})" if row["depth"] == 0 else ""
        return f"{row['kind']} {row['id']} [{state}]{how}"

    def walk(row: dict[str, Any], prefix: str, last: bool, top: bool) -> None:
        branch = "" if top else ("└─ " if last else "├─ ")
        out.append(prefix + branch + label(row))
        kids = children.get(row["id"], [])
        below = prefix + ("" if top else ("   " if last else "│  "))
        for i, kid in enumerate(kids):
            walk(kid, below, i == len(kids) - 1, False)

    for root in roots:
        walk(root, "", True, True)
    return _text(out + damage_lines(report))


def coverage_text(report: dict[str, Any]) -> str:
    events = report["events"]
    out = [f"Segments: {report['segmentsRead']} of {len(report['segments'])} read",
           f"Events: {events['total']}"]
    for type_, n in events["byType"].items():
        kinds = events["byKind"].get(type_, {})
        detail = ", ".join(f"{k} {v}" for k, v in kinds.items()) if len(kinds) > 1 else ""
        out.append(f"  {type_}: {n}" + (f" ({detail})" if detail else ""))
    cited = report["observationsCitedByLiveEntries"]
    share = "-" if cited["share"] is None else f"{cited['share'] * 100:.1f}%"
    out.append(f"Observations cited by live entries: {cited['cited']} of "
               f"{cited['observations']} ({share})")
    without = report["entriesWithoutAnchors"]
    out.append(f"Entries without anchors: {len(without)}")
    for e in without:
        out.append(f"  {e['kind']} {e['id']}" + ("" if e["live"] else " (not live)"))
    dangling = report["anchorsResolvingToNothing"]
    out.append(f"Anchors resolving to nothing: {len(dangling)}")
    for a in dangling:
        out.append(f"  {a['entry']}: {a['anchor']} ({a['status']}, {a['reason']})"
                   + ("" if a["live"] else " (entry not live)"))
    tombs = report["tombstones"]
    out.append(f"Tombstones: {len(tombs)}")
    for t in tombs:
        out.append(f"  {t['target']}  {t['ts']}  {'purged' if t['purged'] else 'not purged'}"
                   f": {t['reason']}")
    return _text(out + damage_lines(report))


def stats_text(report: dict[str, Any]) -> str:
    out = [f"Calls: {report['calls']}", "", "Calls per tool:"]
    out += [f"  {t['tool'] or '(none)'}: {t['calls']}"
            + (f" ({t['failed']} failed)" if t["failed"] else "") for t in report["tools"]]
    failing = [c for c in report["commands"] if c["failed"]]
    out += ["", "Failures per command:" if failing else "Failures per command: none"]
    out += [f"  {c['command']}: {c['failed']} of {c['runs']} run(s)" for c in failing[:20]]
    if len(failing) > 20:
        out.append(f"  ... and {len(failing) - 20} more")
    out += ["", "Time per session:"]
    for s in report["sessions"]:
        out.append(f"  {s['session'] or '(no session)'}: {s['first'][:16].replace('T', ' ')}"
                   f" .. {s['last'][:16].replace('T', ' ')} ({_span(s['first'], s['last'])}), "
                   f"{s['calls']} call(s)")
    return _text(out + damage_lines(report))


def _span(first: str, last: str) -> str:
    from agent_journal.core.clock import parse_instant

    try:
        seconds = int((parse_instant(last) - parse_instant(first)).total_seconds())
    except ValueError:
        return "?"
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


def decay_text(report: dict[str, Any]) -> str:
    entries = report["entries"]
    out = [f"Live entries checked: {report['liveEntriesChecked']}, tool_use anchors checked: "
           f"{report['anchorsChecked']}"]
    if not entries:
        out.append("Every checked anchor still stands here.")
    else:
        out.append(f"{len(entries)} live entr{'y cites' if len(entries) == 1 else 'ies cite'} "
                   "evidence that no longer stands here:")
    for e in entries:
        out.append(f"  {e['kind']} {e['id']} ({e['ts']})")
        for a in e["anchors"]:
            out.append(f"    {a['anchor']}: {a['reason']}")
    return _text(out + damage_lines(report))


def checkpoints_text(report: dict[str, Any]) -> str:
    items = report["checkpoints"]
    if not items:
        return "no checkpoints\n"
    out = []
    for n, c in enumerate(items, 1):
        line = f"{n}. {c['name']}  {c['ts']}  {c['events']} events  by {c['author']}"
        if c.get("note"):
            line += f": {c['note']}"
        if c["conflicts"]:
            line += f"  ({len(c['conflicts'])} later record(s) of this name ignored)"
        out.append(line)
    return _text(out + damage_lines(report))
