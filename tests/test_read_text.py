"""Read commands print text for people by default; --json keeps the contract;
conflicting records of one entry id are shown whole; get takes any event id."""

from __future__ import annotations

import json


def test_show_trace_coverage_decay_read_as_text(cli):
    cli("record", "--kind", "finding", "--id", "f1", "--claim", "make passes",
        "--anchor", "tool_use:gone")
    cli("record", "--kind", "decision", "--id", "d1", "--question", "ship?", "--chosen", "yes",
        "--depends-on", "f1")
    cli("record", "--kind", "note", "--id", "n1", "--text", "built on d1", "--depends-on", "d1")
    cli("invalidate", "f1", "--reason", "flaky runner")
    shown = cli("show")
    assert shown.code == 0 and not shown.out.lstrip().startswith("{")
    assert "finding f1  [INVALIDATED by human at" in shown.out and "flaky runner" in shown.out
    assert "decision d1  [SUPPRESSED: depends on retracted f1]" in shown.out
    assert "    question: ship?\n    chosen: yes\n" in shown.out
    traced = cli("trace", "f1").out
    assert traced.splitlines() == [
        "trace f1: 2 matched, 3 in the chain",
        "finding f1 [INVALIDATED]  (matched by id)",
        "decision d1 [SUPPRESSED]  (matched by dependsOn)",
        "└─ note n1 [SUPPRESSED]",
    ]
    assert "Anchors resolving to nothing: 1" in cli("coverage").out
    assert "Every checked anchor still stands here." in cli("decay").out
    entry = cli("get", "f1").out
    assert entry.startswith("finding f1  [INVALIDATED")
    assert cli("get", "f1", "--json").json()["outcome"] == "invalidated"
    for command in (("show",), ("trace", "f1"), ("coverage",), ("decay",)):
        json.loads(cli(*command, "--json").out)


def test_conflicting_records_are_shown_whole_and_get_takes_event_ids(cli, tmp_path, root):
    other = tmp_path / "private" / "other"
    env_b = {"AGENT_JOURNAL_ROOT": str(other)}
    cli("record", "--kind", "finding", "--id", "f1", "--claim", "the cache is cold",
        "--session", "sa", env={"AGENT_JOURNAL_NOW": "2026-05-01T12:00:00Z"})
    cli("record", "--kind", "finding", "--id", "f1", "--claim", "the cache is warm",
        env={**env_b, "AGENT_JOURNAL_NOW": "2026-05-01T12:00:05Z"})
    assert cli("merge", str(other)).code == 0
    [entry] = cli("show", "--json").json()["entries"]
    [loser] = entry["conflicts"]
    [version] = entry["conflictVersions"]
    assert version["eventId"] == loser and version["fields"] == {"claim": "the cache is warm"}
    assert version["author"] == "human" and version["ts"] == "2026-05-01T12:00:05.000Z"
    replica_b = (other / "replica-id").read_text().strip()
    assert version["replica"] == replica_b
    text = cli("show").out
    assert "the cache is cold" in text and "the cache is warm" in text
    assert f"event {loser}: finding by human on replica {replica_b} at 2026-05-01T12:00:05" in text
    got = cli("get", loser, "--json")
    assert got.code == 0 and got.json()["data"]["fields"] == {"claim": "the cache is warm"}
    assert "the cache is warm" in cli("get", loser).out
    # An event about tombstoned content is not handed out by its event id either.
    cli("tombstone", "f1", "--reason", "leak")
    gone = cli("get", loser)
    assert gone.code == 1 and "no entry or observation with id" in gone.err and gone.out == ""
