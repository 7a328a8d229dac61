"""compact: the retention document's examples, refusals, erasure, and real-process safety."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import CLI, all_bytes_under, clean_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_journal.core import clock, codec, errors
from agent_journal.core.compaction_plan import plan_compaction
from agent_journal.core.model import Event, new_event_id
from agent_journal.ops import compact, context, writes
from agent_journal.ops import show as show_op
from agent_journal.storage import (
    compaction_read,
    compaction_rows,
    compaction_workers,
    erasure,
    locks,
    parallel,
)
from agent_journal.storage.artifacts import artifact_path
from agent_journal.storage.connection import connect, run_write
from agent_journal.storage.erasure import COMPACT_INTENT, apply_to_segment, erasing_connection
from agent_journal.storage.files import create_private_file, make_private_dirs
from agent_journal.storage.root import Root, check_root
from agent_journal.storage.segment import SCHEMA, init_segment, insert_events
from agent_journal.storage.segment_reader import strict_json_check
from agent_journal.storage.workspace import ENV_SEGMENT_MAX_BYTES, Workspace

EMPTY = {"expired": [], "tombstoned": [], "pinned": [], "downgraded": [], "unclassified": [],
         "tombstonesMarkedPurged": []}


def full(apply: bool, entry_ttl: int | None = None, obs_ttl: int | None = None,
         **lists: Any) -> dict[str, Any]:
    report = {"apply": apply, "entryTtlDays": entry_ttl, "observationTtlDays": obs_ttl}
    report.update(EMPTY)
    report.update(lists)
    return report


def ok(result) -> Any:
    assert result.code == 0, result.err
    return result


def tombstone_id(cli, target: str, reason: str, **kw: Any) -> str:
    return ok(cli("tombstone", target, "--reason", reason, "--json", **kw)).json()["eventId"]


def snapshot(root: Path) -> dict[str, tuple[str, int]]:
    return {str(p): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def journal_snapshot(root: Path) -> dict[str, tuple[str, int]]:
    """`snapshot` of everything but the disposable projections under cache/."""
    return {p: v for p, v in snapshot(root).items() if "/cache/" not in p}


def segments(root: Path, ws: str = "ws") -> list[Path]:
    return sorted((root / "workspaces" / ws / "segments").glob("*.sqlite"))


def stored_tombstones(root: Path, ws: str = "ws") -> dict[str, dict[str, Any]]:
    ctx = context.Context(str(root), ws)
    return {e.event_id: e.data for e in ctx.open(create=False).read().events
            if e.type == "tombstone"}


def ctx_for(root: Path, ws: str = "ws") -> context.Context:
    return context.Context(str(root), ws)


# -- the retention document's examples -------------------------------------------------------

def test_tombstone_then_compact_purges_f1_and_flips_only_its_tombstone(cli, root):
    ws = {"workspace": "retention-demo"}
    ok(cli("record", "--kind", "finding", "--id", "f1", "--claim",
           "leaked a live API key in its rationale", **ws))
    f1_tomb = tombstone_id(cli, "f1", "leaked a live API key in its rationale", **ws)
    ghost = cli("tombstone", "ghost", "--reason",
                "preemptive; the entry is coming from another replica", **ws)
    assert ghost.code == 0 and ghost.out == "tombstoned ghost\n"
    assert "no entry with id ghost is present in this workspace" in ghost.err
    assert cli("show", "--json", "--id", "f1", **ws).code == 1  # hidden at once: names nothing

    expected = {"expired": [], "tombstoned": ["f1"], "pinned": [], "downgraded": [],
                "unclassified": [], "tombstonesMarkedPurged": [f1_tomb]}
    dry = ok(cli("compact", "--json", **ws))
    assert dry.json() == full(False, **expected)
    applied = ok(cli("compact", "--json", "--apply", **ws))
    assert applied.json() == full(True, **expected)
    gone = cli("show", "--json", "--id", "f1", **ws)
    assert (gone.code, gone.out) == (1, "") and "no entry or observation with id f1" in gone.err
    flags = {e: d["purged"] for e, d in stored_tombstones(root, "retention-demo").items()}
    assert flags[f1_tomb] is True and sorted(flags.values()) == [False, True]
    assert ok(cli("compact", "--json", "--apply", **ws)).json() == full(True)


# A zero TTL expires what is older than now: the writes are stamped at one fixed instant
# and the compaction runs at a later one ($AGENT_JOURNAL_NOW), rather than sleeping so
# the real clock moves on.
WRITTEN = {"AGENT_JOURNAL_NOW": "2026-05-01T12:00:00Z"}
LATER = {"AGENT_JOURNAL_NOW": "2026-05-01T12:00:01Z"}
LATER_STILL = {"AGENT_JOURNAL_NOW": "2026-05-01T12:00:02Z"}


def pin_setup(cli) -> None:
    ok(cli("observe", "--kind", "tool_call", "--id", "obs-migrate", "--tool", "Bash",
           "--callId", "call-1", env=WRITTEN))
    ok(cli("record", "--kind", "decision", "--id", "d-migrate", "--question",
           "how do we backfill the new column?", "--chosen",
           "a one-off script run under a maintenance window", "--anchor", "tool_use:obs-migrate",
           env=WRITTEN))


def test_a_live_entrys_anchor_pins_its_observation_past_the_ttl(cli):
    pin_setup(cli)
    report = ok(cli("compact", "--json", "--observation-ttl-days", "0", "--apply",
                    env=LATER)).json()
    assert report == full(True, obs_ttl=0, pinned=["obs-migrate"])
    shown = ok(cli("show", "--json", "--id", "obs-migrate")).json()
    assert [e["id"] for e in shown["entries"]] == \
        ["obs-migrate"]


def test_an_expired_entry_stops_pinning_and_both_go(cli):
    pin_setup(cli)
    ok(cli("compact", "--json", "--observation-ttl-days", "0", "--apply", env=LATER))
    report = ok(cli("compact", "--json", "--entry-ttl-days", "0", "--observation-ttl-days", "0",
                    "--apply", env=LATER_STILL)).json()
    assert report == full(True, entry_ttl=0, obs_ttl=0, expired=["obs-migrate", "d-migrate"])
    assert ok(cli("show", "--json", "--observations")).json()["entries"] == []


def test_tombstoned_evidence_downgrades_the_live_entry_citing_it(cli):
    ok(cli("observe", "--kind", "tool_call", "--id", "obs-vendor-call", "--tool", "Bash",
           "--callId", "call-2"))
    ok(cli("record", "--kind", "finding", "--id", "f-vendor-latency", "--claim",
           "the vendor call adds 40ms p50", "--anchor", "tool_use:obs-vendor-call"))
    t = tombstone_id(cli, "obs-vendor-call", "the callId embeds an internal vendor account id")
    report = ok(cli("compact", "--json", "--apply")).json()
    assert report == full(True, tombstoned=["obs-vendor-call"], downgraded=["f-vendor-latency"],
                          tombstonesMarkedPurged=[t])
    assert cli("show", "--json", "--id", "obs-vendor-call").code == 1  # names nothing
    [kept] = ok(cli("show", "--json", "--id", "f-vendor-latency")).json()["entries"]
    assert kept["anchors"] == ["tool_use:obs-vendor-call"] and kept["live"] is True
    # Computed fresh each run: the earlier purge is not reported again.
    assert ok(cli("compact", "--json")).json() == full(False)


def test_the_same_plan_printed_dry_is_the_one_applied(cli):
    pin_setup(cli)
    ok(cli("record", "--kind", "note", "--id", "n1", "--text", "old note", env=WRITTEN))
    ok(cli("tombstone", "n1", "--reason", "named a person", env=WRITTEN))
    args = ("compact", "--json", "--entry-ttl-days", "0", "--observation-ttl-days", "0")
    dry = ok(cli(*args, env=LATER)).json()
    applied = ok(cli(*args, "--apply", env=LATER)).json()
    assert dry.pop("apply") is False and applied.pop("apply") is True
    assert dry == applied and dry["expired"] and dry["tombstoned"] == ["n1"]


# -- flags and refusals ----------------------------------------------------------------------

@pytest.mark.parametrize("args, message", [
    (["--apply", "true"], "--apply takes no value"),
    (["--apply=maybe"], "--apply takes no value"),
    (["--apply="], "--apply takes no value"),
    (["--entry-ttl-days", "-1"], "--entry-ttl-days must be at least 0"),
    (["--observation-ttl-days", "1.5"], "--observation-ttl-days takes a whole number"),
    (["--observation-ttl-days", "ten"], "--observation-ttl-days takes a whole number"),
    (["--entry-ttl-days", " 7"], "--entry-ttl-days takes a whole number"),
    (["--entry-ttl-days"], "--entry-ttl-days needs a value"),
    (["--entry-ttl-days", "--apply"], "--entry-ttl-days needs a value"),
    (["--observation-ttl-days="], "--observation-ttl-days needs a value"),
    (["--entry-ttl-days", "1", "--entry-ttl-days", "2"], "more than once"),
])
def test_bad_flags_exit_2_and_touch_nothing(cli, root, args, message):
    ok(cli("record", "--kind", "finding", "--id", "f1", "--claim", "x"))
    ok(cli("tombstone", "f1", "--reason", "r"))
    before = snapshot(root)
    result = cli("compact", "--json", *args, "--apply")
    assert result.code == 2 and message in result.err and result.out == ""
    assert snapshot(root) == before


def test_a_dry_run_changes_no_byte(cli, root):
    pin_setup(cli)
    ok(cli("tombstone", "obs-migrate", "--reason", "r"))
    # The read projection under cache/ is disposable and may be brought up to
    # date; no byte of the journal itself changes.
    before = journal_snapshot(root)
    assert ok(cli("compact", "--json", "--entry-ttl-days", "0", "--observation-ttl-days",
                  "0")).json()["tombstoned"] == ["obs-migrate"]
    assert journal_snapshot(root) == before


def _damage_unreadable(root: Path) -> None:
    (segments(root)[0].parent / "zz-imported.sqlite").write_bytes(b"not a database" * 300)


def _damage_malformed(root: Path) -> None:
    conn = sqlite3.connect(segments(root)[0])
    conn.execute("UPDATE events SET body = CAST('{}' AS BLOB) WHERE event_id = "
                 "(SELECT event_id FROM events WHERE type = 'entry' LIMIT 1)")
    conn.commit()
    conn.close()


@pytest.mark.parametrize("damage, counts", [
    (_damage_unreadable, "1 unreadable segment(s), 0 malformed row(s)"),
    (_damage_malformed, "0 unreadable segment(s), 1 malformed row(s)"),
])
def test_a_damaged_journal_is_refused_even_with_apply(cli, root, damage, counts):
    ok(cli("record", "--kind", "finding", "--id", "keep", "--claim", "kept"))
    ok(cli("record", "--kind", "finding", "--id", "f1", "--claim", "secret"))
    ok(cli("tombstone", "f1", "--reason", "r"))
    damage(root)
    before = journal_snapshot(root)
    for extra in ([], ["--apply"], ["--apply", "--entry-ttl-days", "0"]):
        result = cli("compact", "--json", *extra)
        assert result.code == 1 and result.out == ""
        assert counts in result.err and "partial read" in result.err
    # (The read projection under cache/ is not the journal: it may be brought
    # up to date for the segments that are sound.)
    assert journal_snapshot(root) == before


def test_compacting_an_empty_workspace_reports_nothing(cli, root):
    # A workspace that is not there is refused, as by every read (a typo in a scheduled
    # compaction would otherwise report an empty plan for ever), and nothing is made.
    missing = cli("compact", "--json", "--apply", workspace="nothing-here")
    assert (missing.code, missing.out) == (1, "")
    assert missing.err.startswith("error: no journal root at ")
    assert not root.exists()
    (root / "workspaces" / "nothing-here").mkdir(mode=0o700, parents=True)
    os.chmod(root, 0o700)
    assert ok(cli("compact", "--json", "--apply", workspace="nothing-here")).json() == full(True)


# -- erasure: no byte of a purged event anywhere under the root --------------------------------

SECRET_CLAIM = b"MARKER-CLAIM-7f3ae1"
SECRET_OUTPUT = b"MARKER-OUTPUT-19c2b4"
SECRET_INVAL = b"MARKER-INVAL-5d0e77"
SECRET_OLD = b"MARKER-EXPIRED-a91c03"
SECRET_BLOB = b"MARKER-BLOB-33f1d9"
KEPT = b"KEPT-CONTENT-0b6e2c"


def write_artifact_observation(root: Path, obs_id: str, content: bytes) -> Path:
    """An observation whose output observe stores as a content-addressed blob."""
    import os

    from agent_journal.ops import evidence

    saved = os.environ.get(evidence.ENV_THRESHOLD)
    os.environ[evidence.ENV_THRESHOLD] = "16"  # every output here is large enough
    try:
        writes.observe(ctx_for(root), kind="tool_call", obs_id=obs_id, tool="Bash",
                        call_id="c-blob", input_value=None, output=content.decode(),
                        status="ok", exit_code=0, duration_ms=1)
    finally:
        if saved is None:
            del os.environ[evidence.ENV_THRESHOLD]
        else:
            os.environ[evidence.ENV_THRESHOLD] = saved
    ws = Root.open(str(root), create=False).workspace("ws")
    ref = show_op.show(ctx_for(root), only_id=obs_id)[0]["entries"][0]["artifact"]["ref"]
    blob = Path(artifact_path(ws, ref))
    assert blob.read_bytes() == content
    return blob


def test_no_byte_of_a_purged_event_survives_anywhere_under_the_root(cli, root, tmp_path):
    big = tmp_path / "big.txt"
    big.write_bytes((b"line of tool output " + SECRET_OUTPUT + b"\n") * 2000)  # overflow pages
    ok(cli("record", "--kind", "finding", "--id", "keep", "--claim", KEPT.decode()))
    ok(cli("record", "--kind", "finding", "--id", "f-secret", "--claim",
           f"the key is {SECRET_CLAIM.decode()}"))
    ok(cli("invalidate", "f-secret", "--reason", f"wrong, and it quoted {SECRET_INVAL.decode()}"))
    ok(cli("observe", "--kind", "tool_call", "--id", "o-secret", "--tool", "Bash",
           "--callId", "c1", "--output", str(big)))
    ok(cli("observe", "--kind", "tool_call", "--id", "o-old", "--tool", "Bash",
           "--callId", "c2", "--input", json.dumps({"command": SECRET_OLD.decode()}),
           env={"AGENT_JOURNAL_NOW": "2020-01-01T00:00:00Z"}))
    blob = write_artifact_observation(root, "o-blob", SECRET_BLOB * 100)
    kept_blob = write_artifact_observation(root, "o-kept-blob", KEPT * 100)
    for target in ("f-secret", "o-secret", "o-blob"):
        ok(cli("tombstone", target, "--reason", "must not exist"))
    cache = root / "cache" / "search"
    cache.mkdir(parents=True)
    (cache / "ws.sqlite").write_bytes(SECRET_CLAIM + SECRET_OUTPUT)
    (cache / "ws.sqlite-wal").write_bytes(SECRET_CLAIM)
    (cache / "other-ws.sqlite").write_bytes(b"another workspace's index")
    (cache / "ws.dotted.sqlite").write_bytes(b"workspace ws.dotted's index")
    for other in ("other-ws", "ws.dotted"):  # they exist (a gone one's cache is cleared)
        (root / "workspaces" / other).mkdir()
    for n in range(3):  # rows after the secrets, so the deletes leave holes mid-file
        ok(cli("observe", "--kind", "tool_call", "--id", f"o-filler-{n}", "--tool", "Bash",
               "--callId", f"f{n}"))

    everything = all_bytes_under(root)
    for marker in (SECRET_CLAIM, SECRET_OUTPUT, SECRET_INVAL, SECRET_OLD, SECRET_BLOB, KEPT):
        assert marker in everything  # the scan can see them: this test can fail

    report = ok(cli("compact", "--json", "--observation-ttl-days", "365", "--apply")).json()
    assert report["tombstoned"] == ["o-blob", "o-secret", "f-secret"]
    assert report["expired"] == ["o-old"]
    everything = all_bytes_under(root)
    for marker in (SECRET_CLAIM, SECRET_OUTPUT, SECRET_INVAL, SECRET_OLD, SECRET_BLOB):
        assert marker not in everything, marker
    assert KEPT in everything
    assert not blob.exists() and kept_blob.exists()
    assert not (cache / "ws.sqlite").exists() and not (cache / "ws.sqlite-wal").exists()
    assert (cache / "other-ws.sqlite").exists() and (cache / "ws.dotted.sqlite").exists()
    for seg in segments(root):
        conn = sqlite3.connect(seg)
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        conn.close()
    assert not (root / "workspaces" / "ws" / COMPACT_INTENT).exists()


def _force_secure_delete_off(monkeypatch) -> None:
    """Simulate a SQLite built without secure delete by default."""
    real = erasure.connect

    def connect(path: str, *, readonly: bool = False, immutable: bool = False
                ) -> sqlite3.Connection:
        conn = real(path, readonly=readonly, immutable=immutable)
        conn.execute("PRAGMA secure_delete = OFF")
        return conn

    monkeypatch.setattr(erasure, "connect", connect)


def _secret_journal(root: Path) -> context.Context:
    ctx = ctx_for(root)
    writes.record(ctx, kind="finding", entry_id="f-secret",
                   fields={"claim": SECRET_CLAIM.decode() * 50}, anchors=[], depends_on=[],
                   subject=None)
    writes.record(ctx, kind="finding", entry_id="keep", fields={"claim": "kept"}, anchors=[],
                   depends_on=[], subject=None)
    writes.tombstone(ctx, "f-secret", "must go")
    return ctx


def test_the_deleting_connection_sets_secure_delete_itself(root, monkeypatch):
    _force_secure_delete_off(monkeypatch)
    ctx = _secret_journal(root)
    [seg] = segments(root)
    plain = erasure.connect(str(seg))
    assert plain.execute("PRAGMA secure_delete").fetchone() == (0,)
    plain.close()
    erasing = erasing_connection(str(seg))
    assert erasing.execute("PRAGMA secure_delete").fetchone() == (1,)
    assert erasing.execute("PRAGMA journal_mode").fetchone()[0] in ("delete", "wal")
    erasing.close()

    outcome = compact.compact(ctx, entry_ttl_days=None, observation_ttl_days=None, apply=True)
    assert outcome.report["tombstoned"] == ["f-secret"]
    assert SECRET_CLAIM not in all_bytes_under(root)


def test_without_secure_delete_the_bytes_would_stay(root, monkeypatch):
    """The control for the test above: a delete on a connection left at OFF keeps them."""
    _force_secure_delete_off(monkeypatch)
    _secret_journal(root)
    [seg] = segments(root)
    conn = erasure.connect(str(seg))
    conn.execute("DELETE FROM events WHERE subject = 'f-secret'")
    assert conn.execute("SELECT count(*) FROM events WHERE subject = 'f-secret'").fetchone() \
        == (0,)
    conn.close()
    assert SECRET_CLAIM in all_bytes_under(root)


def test_a_wal_segment_is_checkpointed_and_truncated(root):
    ctx = ctx_for(root)
    writes.record(ctx, kind="finding", entry_id="first", fields={"claim": "x"}, anchors=[],
                   depends_on=[], subject=None)
    [seg] = segments(root)
    conn = sqlite3.connect(seg)
    assert conn.execute("PRAGMA journal_mode = WAL").fetchone() == ("wal",)
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("SELECT count(*) FROM events").fetchall()  # hold the WAL open: no reset
    _secret_journal(root)  # appended through the WAL
    assert SECRET_CLAIM in Path(str(seg) + "-wal").read_bytes()
    outcome = compact.compact(ctx, entry_ttl_days=None, observation_ttl_days=None, apply=True)
    assert outcome.warnings == [] and outcome.report["tombstoned"] == ["f-secret"]
    # Scanned while another connection still holds the WAL open, so SQLite's
    # own checkpoint-on-last-close cannot be what cleaned it.
    assert SECRET_CLAIM not in all_bytes_under(root)
    assert Path(str(seg) + "-wal").stat().st_size == 0
    conn.close()


# -- equivalence and second runs through the real CLI --------------------------------------------

def test_without_ttls_every_read_is_unchanged_and_a_second_run_purges_nothing(cli):
    ok(cli("observe", "--kind", "tool_call", "--id", "o1", "--tool", "Bash", "--callId", "1"))
    ok(cli("observe", "--kind", "tool_call", "--id", "o2", "--tool", "Bash", "--callId", "2"))
    ok(cli("record", "--kind", "finding", "--id", "root", "--claim", "base premise"))
    ok(cli("record", "--kind", "finding", "--id", "mid", "--claim", "built on it",
           "--depends-on", "root"))
    ok(cli("record", "--kind", "decision", "--id", "leaf", "--question", "q", "--chosen", "c",
           "--depends-on", "mid", "--anchor", "tool_use:o1"))
    ok(cli("record", "--kind", "constraint", "--id", "rule", "--text", "never do X",
           "--anchor", "tool_use:o2"))
    ok(cli("invalidate", "root", "--reason", "premise was wrong"))
    ok(cli("tombstone", "mid", "--reason", "named a person"))
    ok(cli("tombstone", "o2", "--reason", "held a token"))
    ok(cli("tombstone", "ghost", "--reason", "preemptive"))
    reads = [("show", "--json"), ("show", "--json", "--observations"),
             ("show", "--json", "--id", "leaf"),
             ("show", "--json", "--id", "mid"), ("show", "--json", "--id", "o2")]

    def answers() -> list[tuple[int, str, str]]:
        return [(res.code, res.out, res.err) for res in (cli(*r) for r in reads)]

    before = answers()
    assert json.loads(before[2][1])["entries"][0]["outcome"] == "suppressed"
    assert [code for code, _, _ in before] == [0, 0, 0, 1, 1]  # tombstoned: names nothing
    report = ok(cli("compact", "--json", "--apply")).json()
    assert report["tombstoned"] == ["o2", "mid"] and report["downgraded"] == ["rule"]
    assert answers() == before
    assert ok(cli("compact", "--json", "--apply")).json() == full(True)


# -- segments left alone ------------------------------------------------------------------------

def _grow(path: Path, ws: str = "ws") -> None:
    """Append one event straight into a given segment, as a writer holding it open would:
    an invalidation, which a plan may depend on, so the segment must be left alone."""
    conn = connect(str(path))
    ev = Event(event_id=new_event_id(), type="invalidation", kind="invalidation",
               id="late-write", ts="2025-01-01T00:00:00.000Z", author="human", session=None,
               replica="r-other", data={"reason": "late"})
    run_write(conn, lambda c: insert_events(c, [ev]))
    conn.close()


def _observe(ctx: context.Context, obs_id: str, output: str | None = None) -> None:
    writes.observe(ctx, kind="tool_call", obs_id=obs_id, tool="Bash", call_id="c",
                   input_value=None, output=output, status="ok", exit_code=0, duration_ms=1)


def test_a_segment_that_grew_by_plain_appends_is_applied_and_keeps_them(root):
    ctx = _secret_journal(root)
    ws = ctx.open(create=False)
    prepared = compact.prepare(ws, entry_ttl_days=None, observation_ttl_days=None)
    _observe(ctx, "arrived-meanwhile")
    writes.record(ctx, kind="note", entry_id="noted-meanwhile", fields={"text": "x"},
                  anchors=["tool_use:arrived-meanwhile"], depends_on=["keep"], subject=None)
    outcome = compact.carry_out(prepared)
    assert outcome.skipped == [] and "skipped" not in outcome.report
    assert outcome.report["tombstoned"] == ["f-secret"]
    assert len(outcome.report["tombstonesMarkedPurged"]) == 1
    ids = {e.id for e in ws.read().events if e.type != "tombstone"}
    assert {"arrived-meanwhile", "noted-meanwhile", "keep"} <= ids and "f-secret" not in ids
    assert SECRET_CLAIM not in all_bytes_under(root)


GROWTH_THAT_MATTERS = {
    "a tombstone": lambda ctx: writes.tombstone(ctx, "keep", "must go too"),
    "an invalidation": lambda ctx: writes.invalidate(ctx, "keep", "wrong"),
    "an entry citing the removed id": lambda ctx: writes.record(
        ctx, kind="note", entry_id="cites", fields={"text": "x"},
        anchors=["tool_use:f-secret"], depends_on=[], subject=None),
    "an entry depending on the removed id": lambda ctx: writes.record(
        ctx, kind="note", entry_id="leans", fields={"text": "x"}, anchors=[],
        depends_on=["f-secret"], subject=None),
}


@pytest.mark.parametrize("growth", sorted(GROWTH_THAT_MATTERS))
def test_a_segment_that_grew_by_what_the_plan_reads_is_skipped_and_nothing_is_lost(
        root, growth):
    ctx = _secret_journal(root)
    ws = ctx.open(create=False)
    prepared = compact.prepare(ws, entry_ttl_days=None, observation_ttl_days=None)
    GROWTH_THAT_MATTERS[growth](ctx)
    before = {e.event_id for e in ws.read().events}
    outcome = compact.carry_out(prepared)
    [seg] = segments(root)
    assert outcome.skipped == [str(seg.relative_to(root))]
    assert outcome.report["skipped"] == outcome.skipped
    assert outcome.report["tombstoned"] == [] and outcome.report["tombstonesMarkedPurged"] == []
    assert {e.event_id for e in ws.read().events} == before
    again = compact.compact(ctx, entry_ttl_days=None, observation_ttl_days=None, apply=True)
    assert again.skipped == [] and "f-secret" in again.report["tombstoned"]


def test_a_malformed_row_appended_meanwhile_makes_the_segment_skipped(root):
    ctx = _secret_journal(root)
    ws = ctx.open(create=False)
    prepared = compact.prepare(ws, entry_ttl_days=None, observation_ttl_days=None)
    _observe(ctx, "arrived-meanwhile")
    [seg] = segments(root)
    conn = connect(str(seg))
    conn.execute("UPDATE events SET checksum = 'xxh3-64:0' WHERE subject = 'arrived-meanwhile'")
    conn.close()
    outcome = compact.carry_out(prepared)
    assert outcome.skipped == [str(seg.relative_to(root))]


def test_the_cli_prints_the_report_and_exits_1_when_it_skipped(root, monkeypatch, capsys):
    from agent_journal.cli import main

    ctx = _secret_journal(root)
    real_prepare = compact.prepare

    def prepare_then_write(*a: Any, **kw: Any) -> compact.Prepared:
        prepared = real_prepare(*a, **kw)
        writes.tombstone(ctx, "keep", "late")
        return prepared

    monkeypatch.setattr(compact, "prepare", prepare_then_write)
    code = main.main(["compact", "--json", "--apply", "--root", str(root), "--workspace", "ws"])
    out, err = capsys.readouterr()
    assert code == 1
    report = json.loads(out)
    assert report["apply"] is True and len(report["skipped"]) == 1
    assert "1 segment(s) gained events while compaction ran" in err


def _rotating(monkeypatch) -> None:
    monkeypatch.setenv(ENV_SEGMENT_MAX_BYTES, "1")  # every write opens a new segment


def test_a_tombstone_in_another_segment_is_flipped_once_its_target_is_gone(root, monkeypatch):
    _rotating(monkeypatch)
    ctx = _secret_journal(root)
    assert len(segments(root)) == 3
    outcome = compact.compact(ctx, entry_ttl_days=None, observation_ttl_days=None, apply=True)
    [(tomb_id, data)] = stored_tombstones(root).items()
    assert data["purged"] is True and outcome.report["tombstonesMarkedPurged"] == [tomb_id]
    assert SECRET_CLAIM not in all_bytes_under(root)


def test_target_erased_but_tombstone_segment_busy_leaves_purged_false_for_good(
        root, monkeypatch):
    _rotating(monkeypatch)
    ctx = _secret_journal(root)
    ws = ctx.open(create=False)
    tomb_seg = segments(root)[-1]
    prepared = compact.prepare(ws, entry_ttl_days=None, observation_ttl_days=None)
    _grow(tomb_seg)
    outcome = compact.carry_out(prepared)
    assert outcome.report["tombstoned"] == ["f-secret"]
    assert outcome.report["tombstonesMarkedPurged"] == []
    assert outcome.skipped == [str(tomb_seg.relative_to(root))]
    assert SECRET_CLAIM not in all_bytes_under(root)
    # Nothing later can tell "purged here" from "never here", so the flag stays false.
    again = compact.compact(ctx, entry_ttl_days=None, observation_ttl_days=None, apply=True)
    assert again.report == full(True)
    assert [d["purged"] for d in stored_tombstones(root).values()] == [False]


def test_a_dependent_never_turns_live_when_the_tombstone_segment_is_busy(root, monkeypatch):
    _rotating(monkeypatch)
    ctx = ctx_for(root)
    writes.record(ctx, kind="finding", entry_id="root", fields={"claim": "premise"},
                   anchors=[], depends_on=[], subject=None)
    writes.record(ctx, kind="finding", entry_id="leaf", fields={"claim": "built on it"},
                   anchors=[], depends_on=["root"], subject=None)
    writes.invalidate(ctx, "root", "premise was wrong")
    writes.tombstone(ctx, "root", "named a person")
    ws = ctx.open(create=False)

    def leaf() -> dict[str, Any]:
        return show_op.show(ctx, only_id="leaf")[0]["entries"][0]

    assert leaf()["outcome"] == "suppressed"
    # The tombstone carried root's place in the graph from the moment it was written.
    [data] = stored_tombstones(root).values()
    assert data["graph"] == {"dependsOn": [], "invalidated": True}
    prepared = compact.prepare(ws, entry_ttl_days=None, observation_ttl_days=None)
    _grow(segments(root)[3])  # the tombstone's segment: its flag cannot be flipped
    outcome = compact.carry_out(prepared)
    assert len(outcome.skipped) == 1 and outcome.report["tombstonesMarkedPurged"] == []
    assert leaf()["outcome"] == "suppressed"
    compact.compact(ctx, entry_ttl_days=None, observation_ttl_days=None, apply=True)
    assert leaf()["outcome"] == "suppressed" and leaf()["suppressedThrough"] == []
    [data] = stored_tombstones(root).values()
    assert data["graph"] == {"dependsOn": [], "invalidated": True}


def test_an_interrupted_run_leaves_an_intent_the_next_run_finishes(root, monkeypatch):
    blob = write_artifact_observation(root, "o-blob", SECRET_BLOB * 10)
    ctx = ctx_for(root)
    writes.tombstone(ctx, "o-blob", "must go")
    cache = root / "cache" / "search"
    cache.mkdir(parents=True)
    (cache / "ws.sqlite").write_bytes(SECRET_BLOB)

    def die(*a: Any, **kw: Any) -> None:
        raise KeyboardInterrupt  # killed after the segments, before the files

    monkeypatch.setattr(compact, "artifact_files", die)
    with pytest.raises(KeyboardInterrupt):
        compact.compact(ctx, entry_ttl_days=None, observation_ttl_days=None, apply=True)
    monkeypatch.undo()
    assert blob.exists() and (root / "workspaces" / "ws" / COMPACT_INTENT).exists()
    again = compact.compact(ctx, entry_ttl_days=None, observation_ttl_days=None, apply=True)
    assert again.report == full(True)  # nothing left to plan, but the files are finished
    assert not blob.exists() and not (cache / "ws.sqlite").exists()
    assert SECRET_BLOB not in all_bytes_under(root)


class Died(BaseException):
    pass


def _crossed_journal(root: Path) -> context.Context:
    """Targets, invalidations, tombstones and dependents, each in its own segment."""
    ctx = ctx_for(root)
    writes.record(ctx, kind="finding", entry_id="root", fields={"claim": SECRET_CLAIM.decode()},
                   anchors=[], depends_on=[], subject=None)
    writes.record(ctx, kind="finding", entry_id="leaf", fields={"claim": "built on it"},
                   anchors=[], depends_on=["root"], subject=None)
    writes.observe(ctx, kind="tool_call", obs_id="o1", tool="Bash", call_id="c",
                    input_value=None, output=SECRET_OUTPUT.decode(), status="ok",
                    exit_code=0, duration_ms=1)
    writes.invalidate(ctx, "root", SECRET_INVAL.decode())
    writes.tombstone(ctx, "root", "named a person")
    writes.tombstone(ctx, "o1", "held a token")
    return ctx


def test_a_run_stopped_between_any_two_transactions_is_finished_by_the_next(
        root, tmp_path, monkeypatch):
    _rotating(monkeypatch)
    _crossed_journal(root)
    template = tmp_path / "template"
    os.rename(root, template)
    calls = []
    real_apply = apply_to_segment

    def counting(*a: Any, **kw: Any) -> Any:
        calls.append(a[0])
        return real_apply(*a, **kw)

    subprocess.run(["cp", "-a", str(template), str(root)], check=True)
    monkeypatch.setattr(compact, "apply_to_segment", counting)
    compact.compact(ctx_for(root), entry_ttl_days=None, observation_ttl_days=None, apply=True)
    total = len(calls)
    assert total >= 4  # several segments, several passes: worth stopping between
    for stop_after in range(total + 1):
        subprocess.run(["rm", "-rf", str(root)], check=True)
        subprocess.run(["cp", "-a", str(template), str(root)], check=True)
        def dying(*a: Any, done: list[str] = [], stop_after: int = stop_after,  # noqa: B006
                  **kw: Any) -> Any:
            if len(done) == stop_after:
                raise Died()
            done.append(a[0])
            return real_apply(*a, **kw)

        monkeypatch.setattr(compact, "apply_to_segment", dying)
        ctx = ctx_for(root)
        if stop_after < total:
            with pytest.raises(Died):
                compact.compact(ctx, entry_ttl_days=None, observation_ttl_days=None,
                                apply=True)
        leaf = show_op.show(ctx, only_id="leaf")[0]["entries"][0]
        assert leaf["outcome"] == "suppressed", stop_after  # never live, at any point
        monkeypatch.setattr(compact, "apply_to_segment", real_apply)
        compact.compact(ctx, entry_ttl_days=None, observation_ttl_days=None, apply=True)
        flags = [d["purged"] for d in stored_tombstones(root).values()]
        assert flags == [True, True], stop_after
        everything = all_bytes_under(root)
        assert not [m for m in (SECRET_CLAIM, SECRET_OUTPUT, SECRET_INVAL) if m in everything]
        assert show_op.show(ctx, only_id="leaf")[0]["entries"][0]["outcome"] == "suppressed"
        again = compact.compact(ctx, entry_ttl_days=None, observation_ttl_days=None,
                                apply=True)
        assert again.report == full(True)


def test_a_blob_another_event_still_references_is_kept(root):
    blob = write_artifact_observation(root, "o-a", KEPT * 10)
    write_artifact_observation(root, "o-b", KEPT * 10)  # same content, same blob
    ctx = ctx_for(root)
    writes.tombstone(ctx, "o-a", "must go")
    outcome = compact.compact(ctx, entry_ttl_days=None, observation_ttl_days=None, apply=True)
    assert outcome.report["tombstoned"] == ["o-a"] and blob.exists()



@pytest.mark.parametrize("segments", ["one", "two"])
def test_a_blob_a_fresh_capture_still_cites_outlives_its_expired_twin(root, monkeypatch,
                                                                        segments):
    """A TTL plan that reads observation ages, not rows, must still see that a
    kept observation cites the blob an expired one held."""
    from agent_journal.ops import evidence

    if segments == "two":
        monkeypatch.setenv(ENV_SEGMENT_MAX_BYTES, "1")  # every write opens a new segment
    monkeypatch.setenv("AGENT_JOURNAL_NOW", "2025-01-01T00:00:00Z")
    blob = write_artifact_observation(root, "o-old", KEPT * 10)
    monkeypatch.setenv("AGENT_JOURNAL_NOW", "2025-06-01T00:00:00Z")
    write_artifact_observation(root, "o-new", KEPT * 10)  # same content, same blob
    ctx = ctx_for(root)
    for expired in (["o-old"], []):
        outcome = compact.compact(ctx, entry_ttl_days=None, observation_ttl_days=30,
                                  apply=True)
        assert outcome.report["expired"] == expired and blob.exists()
    found = evidence.get(ctx, "o-new")
    assert found.raw == KEPT * 10  # the capture's output, read back from its blob


@pytest.mark.parametrize("ttl", [None, 30])
def test_a_blob_no_event_cites_is_erased_once_it_is_old_and_a_cited_one_never(
        root, monkeypatch, ttl):
    """A writer killed between its blob and its event leaves bytes nothing can
    tombstone: `compact --apply` erases them once they are older than any
    writer's capture could be; blobs that events cite stay, however old."""
    from agent_journal.ops import evidence
    from agent_journal.storage.artifacts import UNCITED_GRACE_S, write_artifact

    monkeypatch.setenv(ENV_SEGMENT_MAX_BYTES, "1")  # every write opens a new segment
    cited = [write_artifact_observation(root, f"o-{n}", KEPT * (10 + n)) for n in range(3)]
    ws = ctx_for(root).open(create=False)
    orphan = Path(artifact_path(ws, write_artifact(ws, b"ORPHAN-BYTES-5d1e" * 40)))
    fresh = Path(artifact_path(ws, write_artifact(ws, b"FRESH-ORPHAN-77aa" * 40)))
    old = time.time() - UNCITED_GRACE_S - 60
    for path in [*cited, orphan]:
        os.utime(path, (old, old))
    # A dry run first, so the apply plans from the read projection it kept.
    compact.compact(ctx_for(root), entry_ttl_days=None, observation_ttl_days=ttl, apply=False)
    assert orphan.exists()
    for _ in range(2):
        outcome = compact.compact(ctx_for(root), entry_ttl_days=None,
                                  observation_ttl_days=ttl, apply=True)
        assert outcome.report["expired"] == [] and outcome.report["tombstoned"] == []
    assert not orphan.exists() and fresh.exists()
    assert b"ORPHAN-BYTES-5d1e" not in all_bytes_under(root)
    for n, path in enumerate(cited):
        assert path.exists()
        assert evidence.get(ctx_for(root), f"o-{n}").raw == KEPT * (10 + n)

# -- real processes -----------------------------------------------------------------------------

def build_segment(path: Path, events: list[Event], *, workspace: str = "ws") -> None:
    make_private_dirs(str(path.parent))
    create_private_file(str(path))
    conn = connect(str(path))
    init_segment(conn, workspace=workspace, replica="r-seed")
    run_write(conn, lambda c: insert_events(c, events))
    conn.close()


def seed_events(prefix: str, n: int, *, tombstone_every: int, secret: bytes) -> list[Event]:
    events = []
    for i in range(n):
        oid = f"{prefix}-{i}"
        marked = i % tombstone_every == 0
        output = (secret.decode() if marked else "plain output ") * 4
        events.append(Event(event_id=new_event_id(), type="observation", kind="tool_call",
                            id=oid, ts="2025-01-01T00:00:00.000Z", author="agent",
                            session="s", replica="r-seed",
                            data={"tool": "Bash", "output": output, "status": "ok"}))
        if marked:
            events.append(Event(event_id=new_event_id(), type="tombstone", kind="tombstone",
                                id=oid, ts="2025-01-01T00:00:01.000Z", author="human",
                                session=None, replica="r-seed",
                                data={"reason": "must go", "purged": False}))
    return events


WRITER = r"""
import sys, time
from agent_journal.ops import context
from agent_journal.ops import show as show_op
from agent_journal.ops import writes
root, ws, name, log, stop = sys.argv[1:6]
ctx = context.Context(root, ws, session=name)
i = 0
with open(log, "a") as out:
    while True:
        import os
        if os.path.exists(stop):
            break
        oid = f"{name}-{i}"
        if i % 25 == 24:
            time.sleep(0.4)  # bursts and pauses: some runs meet a quiet segment
        writes.observe(ctx, kind="tool_call", obs_id=oid, tool="Bash", call_id=str(i),
                        input_value=None, output="written while compacting", status="ok",
                        exit_code=0, duration_ms=1)
        out.write(oid + "\n")
        out.flush()
        i += 1
"""


def _env(root: Path) -> dict[str, str]:
    return clean_env(AGENT_JOURNAL_ROOT=str(root), AGENT_JOURNAL_WORKSPACE="ws")


def test_writers_appending_during_compaction_lose_nothing(root, tmp_path):
    _writers_and_compactions(root, tmp_path, rounds=5)


@pytest.mark.soak
def test_writers_appending_during_many_compactions_lose_nothing(root, tmp_path):
    _writers_and_compactions(root, tmp_path, rounds=60)


def _writers_and_compactions(root: Path, tmp_path: Path, rounds: int) -> None:
    secret = b"MARKER-CONCURRENT-44aa"
    ctx = ctx_for(root)
    writes.record(ctx, kind="note", entry_id="start", fields={"text": "x"}, anchors=[],
                   depends_on=[], subject=None)
    seg_dir = segments(root)[0].parent
    build_segment(seg_dir / "imported-a.sqlite",
                  seed_events("imp", 600, tombstone_every=5, secret=secret))
    stop = tmp_path / "stop"
    logs = [tmp_path / f"w{n}.log" for n in range(2)]
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(root), "ws", f"w{n}",
                                 str(logs[n]), str(stop)], env=_env(root))
               for n in range(2)]
    codes: list[int] = []
    try:
        for round_ in range(rounds):
            # New tombstoned content in the busy local segment every round.
            writes.observe(ctx, kind="tool_call", obs_id=f"doomed-{round_}", tool="Bash",
                            call_id="d", input_value=None, output=secret.decode(),
                            status="ok", exit_code=0, duration_ms=1)
            writes.tombstone(ctx, f"doomed-{round_}", "must go")
            result = subprocess.run([CLI, "compact", "--json", "--apply"], env=_env(root),
                                    capture_output=True, timeout=120)
            report = json.loads(result.stdout)
            assert result.returncode in (0, 1), result.stderr
            if result.returncode == 1:
                assert report["skipped"] and b"Re-run compact --apply" in result.stderr
            else:
                assert "skipped" not in report
            codes.append(result.returncode)
        # Enough acknowledged writes for the check below, however seldom a loaded
        # machine scheduled the writers during the rounds.
        deadline = time.monotonic() + 120
        while sum(len(log.read_text().split()) for log in logs if log.exists()) <= 20:
            assert time.monotonic() < deadline, "the writers barely wrote"
            time.sleep(0.01)  # polling, with the deadline above
    finally:
        stop.write_text("")
        for w in writers:
            w.wait(timeout=60)
    assert all(w.returncode == 0 for w in writers)
    acknowledged = [line for log in logs for line in log.read_text().split()]
    assert len(acknowledged) > 20
    present = {e.id for e in ctx.open(create=False).read().events}
    assert not [oid for oid in acknowledged if oid not in present]
    # The segment nobody was writing was purged while the writers ran.
    assert secret not in (seg_dir / "imported-a.sqlite").read_bytes()
    # With the writers gone, a last run finishes what busy rounds left.
    final = subprocess.run([CLI, "compact", "--json", "--apply"], env=_env(root),
                           capture_output=True)
    assert final.returncode == 0, final.stderr
    assert secret not in all_bytes_under(root)
    assert set(codes) <= {0, 1}


def test_a_killed_compaction_leaves_a_readable_journal_and_a_rerun_finishes(root, tmp_path):
    _kill_rounds(root, tmp_path, rounds=3, segments_=2, per_segment=2000, seed=1234)


@pytest.mark.soak
def test_compactions_killed_at_many_points_all_recover(root, tmp_path):
    _kill_rounds(root, tmp_path, rounds=40, segments_=3, per_segment=4000, seed=99)


def _kill_rounds(root: Path, tmp_path: Path, *, rounds: int, segments_: int,
                 per_segment: int, seed: int) -> None:
    secret = b"MARKER-KILLED-7c1e"
    seg_dir = root / "workspaces" / "ws" / "segments"
    check_root(str(root), create=True)
    for n in range(segments_):
        build_segment(seg_dir / f"imported-{n}.sqlite",
                      seed_events(f"s{n}", per_segment, tombstone_every=4, secret=secret))
    template = tmp_path / "template"
    os.rename(root, template)
    rng = random.Random(seed)
    start = time.perf_counter()
    subprocess.run(["cp", "-a", str(template), str(root)], check=True)
    ok_run = subprocess.run([CLI, "compact", "--json", "--apply"], env=_env(root),
                            capture_output=True)
    assert ok_run.returncode == 0, ok_run.stderr
    full_time = time.perf_counter() - start
    for _ in range(rounds):
        subprocess.run(["rm", "-rf", str(root)], check=True)
        subprocess.run(["cp", "-a", str(template), str(root)], check=True)
        proc = subprocess.Popen([CLI, "compact", "--json", "--apply"], env=_env(root),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.05, full_time))  # a kill at a random point: the test
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        ctx = ctx_for(root)
        read = ctx.open(create=False).read()
        assert read.unreadable == [] and read.malformed == []
        for seg in segments(root):
            conn = sqlite3.connect(seg)
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            conn.close()
        rerun = subprocess.run([CLI, "compact", "--json", "--apply"], env=_env(root),
                               capture_output=True)
        assert rerun.returncode == 0, rerun.stderr
        assert secret not in all_bytes_under(root)
        tombs = stored_tombstones(root)
        assert len(tombs) == segments_ * per_segment // 4
        assert all(d["purged"] for d in tombs.values())
        done = subprocess.run([CLI, "compact", "--json", "--apply"], env=_env(root),
                              capture_output=True)
        assert json.loads(done.stdout) == full(True)


def test_report_rows_decode_after_rewrite(root):
    """A rewritten tombstone is a well-formed event: checksum over its canonical bytes."""
    ctx = _secret_journal(root)
    compact.compact(ctx, entry_ttl_days=None, observation_ttl_days=None, apply=True)
    [seg] = segments(root)
    conn = sqlite3.connect(seg)
    for body, digest in conn.execute("SELECT body, checksum FROM events"):
        codec.decode(body, digest)
    conn.close()


AWKWARD_REASONS = ['plain', 'a "quoted" one', "back\\slash \\u0041", "new\nline\ttab",
                   "nul\x00 and \x1f", "é ü ß", "emoji 😀 and 𝄞", "x\u2028\u2029y", "'\"'"]


@pytest.mark.parametrize("bulk", [True, False])
def test_rewritten_tombstones_hold_exactly_their_canonical_bytes(root, bulk, monkeypatch):
    """Both ways of sending rewrites to SQLite (one JSON list, or a statement
    per row) store the canonical bytes of the rewritten event, whatever the text."""
    check_root(str(root), create=True)
    events = []
    for n, reason in enumerate(AWKWARD_REASONS):
        oid = f"o-{n}"
        events.append(Event(event_id=f"ev-o{n}", type="observation", kind="tool_call", id=oid,
                            ts="2025-01-01T00:00:00.000Z", author="agent", session="s",
                            replica="r-seed", data={"tool": "Bash", "output": reason}))
        events.append(Event(event_id=f"ev-t{n}", type="tombstone", kind="tombstone", id=oid,
                            ts="2025-01-01T00:00:01.000Z", author="human", session=None,
                            replica="r-seed", data={"reason": reason, "purged": False}))
    build_segment(root / "workspaces" / "ws" / "segments" / "imported-seed.sqlite", events)
    monkeypatch.setattr(erasure, "_BULK_JSON", [bulk])
    outcome = compact.compact(ctx_for(root), entry_ttl_days=None, observation_ttl_days=None,
                              apply=True)
    assert len(outcome.report["tombstonesMarkedPurged"]) == len(AWKWARD_REASONS)
    [seg] = segments(root)
    conn = sqlite3.connect(seg)
    rows = conn.execute("SELECT body, checksum, typeof(body) FROM events").fetchall()
    conn.close()
    assert len(rows) == len(AWKWARD_REASONS)
    for body, digest, kind in rows:
        ev = codec.decode(body, digest)
        assert kind == "blob" and ev.data["purged"] is True
        original = next(e for e in events if e.event_id == ev.event_id)
        assert (body, digest) == codec.encode(original.replace(
            data={**original.data, "purged": True}))


# -- the compaction read finds exactly the damage every reader finds ---------------------------

FAST_READ = strict_json_check(sqlite3.sqlite_version_info) is not None


def _observation_obj(n: int) -> dict[str, Any]:
    return {"eventId": f"ev-{n}", "type": "observation", "kind": "tool_call", "id": f"o{n}",
            "ts": "2025-01-01T00:00:00.000Z", "author": "agent", "session": "s1",
            "replica": "r1", "schema": 1,
            "data": {"tool": "Bash", "output": "x", "status": "ok",
                     "artifact": {"ref": "sha256:" + "ab" * 32, "bytes": 3}}}


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def _with_data(**extra: Any) -> Any:
    return lambda o: _canonical({**o, "data": {**o["data"], **extra}})


def _plain_swap(old: bytes, new: bytes) -> Any:
    """`_swap` on an observation whose data holds no artifact."""
    swap = _swap(old, new)
    return lambda o: swap({**o, "data": {"tool": "Bash", "output": "x"}})


def _swap(old: bytes, new: bytes) -> Any:
    def mutate(o: dict[str, Any]) -> bytes:
        body = _canonical(o)
        assert old in body, old
        return body.replace(old, new, 1)
    return mutate


# Bodies the fast path must read itself (a regression to the slow path fails the test).
FAST_CASES = {"intact", "unicode", "no artifact", "artifact null",
              "artifact in text", "two artifacts", "surrogate", "data={}", "schema=7",
              "session=None", "session=''", "session='other'", "author='other'",
              "kind='other'", "replica='other'", "schema -0", "unicode in data",
              "escapes in data", "terminal colours", "nested eventId", "artifact nested only",
              "artifact then null", "escaped slash in artifact", "long string", "nesting",
              "space inside data", "space after data", "plain, data then other key"}


def _mutations() -> list[tuple[str, Any]]:
    cases: list[tuple[str, Any]] = [("intact", lambda o: _canonical(o))]
    for key in ("eventId", "type", "kind", "id", "ts", "author", "session", "replica",
                "schema", "data"):
        cases.append((f"no {key}", lambda o, k=key: _canonical({x: v for x, v in o.items()
                                                                   if x != k})))
        for value in (None, "", 7, 1.5, True, [], {}, "other"):
            cases.append((f"{key}={value!r}",
                          lambda o, k=key, v=value: _canonical({**o, k: v})))
    cases += [
        ("not json", lambda o: b"{not json"),
        ("array", lambda o: _canonical([o])),
        ("NaN", lambda o: _canonical(o).replace(b'"schema":1', b'"schema":NaN')),
        ("bad utf-8", lambda o: _canonical(o).replace(b'"output":"x"', b'"output":"\xff"')),
        ("spaces", lambda o: json.dumps(o, indent=1).encode()),
        ("unicode", lambda o: _canonical({**o, "author": "agént"})),
        ("no artifact", lambda o: _canonical({**o, "data": {"tool": "Bash"}})),
        ("artifact null", lambda o: _canonical({**o, "data": {"artifact": None}})),
        ("dup id", lambda o: _canonical(o)[:-1] + b',"id":"o-dup"}'),
        ("schema big", lambda o: _canonical({**o, "schema": 10**30})),
        ("two data keys", lambda o: _canonical(o)[:-1] + b',"data":{"artifact":null}}'),
        ("data text elsewhere", lambda o: _canonical({**o, "author": '"data":{}'})),
        ("bad utf-8 in id", lambda o: _canonical(o).replace(b'"id":"o', b'"id":"\xff')),
        ("two artifacts", lambda o: _canonical(o).replace(
            b'"output"', b'"artifact":{"ref":"sha256:' + b"cd" * 32 + b'"},"output"')),
        ("artifact in text", lambda o: _canonical(
            {**o, "data": {"output": '"artifact":{"ref":"x"}'}})),
        ("nested data key", lambda o: _canonical({**o, "data": {"data": {"a": 1}}})),
        ("escaped unicode", lambda o: _canonical(o).replace(b'"agent"', b'"\\u0061gent"')),
        ("utf-8 bom", lambda o: b"\xef\xbb\xbf" + _canonical(o)),
        ("leading space", lambda o: b" " + _canonical(o)),
        ("utf-16", lambda o: json.dumps(o).encode("utf-16")),
        ("surrogate bytes", lambda o: _canonical(o).replace(b'"output":"x"',
                                                            b'"output":"\xed\xa0\x80"')),
        ("surrogate", lambda o: _canonical(o).replace(b'"output":"x"', b'"output":"\\ud800"')),
        # The fast path's own shortcuts, each with a body that fools it if it is wrong.
        ("schema -0", _swap(b'"schema":1', b'"schema":-0')),
        ("schema 1.0", _swap(b'"schema":1', b'"schema":1.0')),
        ("schema 1e0", _swap(b'"schema":1', b'"schema":1e0')),
        ("schema 01", _swap(b'"schema":1', b'"schema":01')),
        ("schema 19 digits", lambda o: _canonical({**o, "schema": 10**18})),
        ("schema 5000 digits", _swap(b'"schema":1', b'"schema":' + b"7" * 5000)),
        ("escaped artifact key", _swap(b'"artifact"', b'"\\u0061rtifact"')),
        ("escaped artifact key, upper hex", _swap(b'"artifact"', b'"ar\\u0074ifAct"'
                                                  .replace(b"A", b"a"))),
        ("artifact then null", _swap(b'"output"', b'"artifact":null,"output"')),
        ("artifact nested only", lambda o: _canonical(
            {**o, "data": {"x": {"artifact": o["data"]["artifact"]}}})),
        ("escaped slash in artifact", _swap(b'"sha256:', b'"sha\\/256:')),
        ("unicode in data", _with_data(aa="é€😀 ünïcödé")),
        ("escapes in data", _with_data(aa='a "quoted" \\ back\tslash\n')),
        ("terminal colours", _with_data(aa="\x1b[31mred\x1b[0m")),
        ("long string", _with_data(aa="y" * 20000)),
        ("nested eventId", _with_data(aa={"eventId": "ev-x", "id": "o-x", "kind": "k"})),
        ("space inside data", _swap(b'"tool":"Bash"', b'"tool": "Bash"')),
        ("space after data", _swap(b'},"eventId"', b'} ,"eventId"')),
        ("newline after body", lambda o: _canonical(o) + b"\n"),
        ("NUL after body", lambda o: _canonical(o) + b"\x00"),
        ("NUL in a string", _swap(b'"output":"x"', b'"output":"x\x00"')),
        ("tab in a string", _swap(b'"output":"x"', b'"output":"x\ty"')),
        ("data then author", _swap(b',"eventId"', b',"author":"","eventId"')),
        ("data then data", _swap(b',"eventId"', b',"data":5,"eventId"')),
        ("data then other key", _swap(b',"eventId"', b',"zz":1,"eventId"')),
        ("data twice, same length", _swap(b',"eventId"', b',"data":{"artifact":9},"eventId"')),
        ("plain, data then data", _plain_swap(b',"eventId"', b',"data":5,"eventId"')),
        ("plain, data then author", _plain_swap(b',"eventId"', b',"author":"b","eventId"')),
        ("plain, data then other key", _plain_swap(b',"eventId"', b',"zz":1,"eventId"')),
        ("plain, spaced data then data", _plain_swap(b',"eventId"', b' , "data" : 5,"eventId"')),
        ("plain, nested author key", _plain_swap(b'"tool"', b'"x":{"author":"b"},"tool"')),
        ("author key renamed", _swap(b'{"author"', b'{"Author"')),
        ("author then author", _swap(b'"author":"agent",', b'"author":"agent","author":"",')),
        ("backslash in author", lambda o: _canonical({**o, "author": "a\\b"})),
        ("quote in author", lambda o: _canonical({**o, "author": 'a","data":{}'})),
        ("escaped session", _swap(b'"session":"s1"', b'"session":"s\\u0031"')),
        ("escaped kind", _swap(b'"kind":"tool_call"', b'"kind":"tool\\u005fcall"')),
        ("escaped replica", _swap(b'"replica":"r1"', b'"replica":"r\\u0031"')),
        ("escaped ts", _swap(b'"ts":"2025', b'"ts":"\\u00325')),
        ("escaped event id", _swap(b'"eventId":"ev', b'"eventId":"\\u0065v')),
        ("escaped type", _swap(b'"observation"', b'"obs\\u0065rvation"')),
        ("long integer in data", _swap(b'"output"', b'"n":' + b"7" * 5000 + b',"output"')),
        ("long integer in a string", _with_data(n="7" * 5000)),
        ("long float in data", _swap(b'"output"', b'"n":' + b"7" * 5000 + b'.5,"output"')),
        ("nesting", _with_data(aa=_nested(150))),
        ("single quotes", _swap(b'"output":"x"', b"\"output\":'x'")),
        ("trailing comma", _swap(b'"status":"ok"', b'"status":"ok",')),
        ("comment", _swap(b'"status":"ok"', b'"status":"ok"/* c */')),
        ("hex number", _swap(b'"output":"x"', b'"output":0x10')),
        ("leading zero", _swap(b'"output":"x"', b'"output":01')),
        ("bad escape", _swap(b'"output":"x"', b'"output":"\\x"')),
        ("Infinity", _swap(b'"output":"x"', b'"output":Infinity')),
        ("data a string", lambda o: _canonical({**o, "data": json.dumps(o["data"])})),
        ("key order", lambda o: json.dumps(o, separators=(",", ":")).encode()),
        ("extra key at the end", lambda o: _canonical({**o, "zz": 1})),
        ("extra key at the start", lambda o: _canonical({**o, "aa": 1})),
    ]
    return cases


def _raw_rows(root: Path, rows: list[tuple[Any, ...]], name: str = "imported-raw") -> None:
    """(event_id, subject, ts, body, checksum[, type]) rows, written as they are."""
    path = root / "workspaces" / "ws" / "segments" / f"{name}.sqlite"
    build_segment(path, [])
    conn = sqlite3.connect(path)
    conn.executemany("INSERT INTO events(event_id, type, subject, ts, body, checksum) "
                     "VALUES (?, ?, ?, ?, ?, ?)",
                     [(row[0], row[5] if len(row) > 5 else "observation", *row[1:5])
                      for row in rows])
    conn.commit()
    conn.close()


@contextlib.contextmanager
def _counting_exact() -> Iterator[set[Any]]:
    """The event ids sent to the exact decoder while the block runs."""
    slow: set[Any] = set()
    real = codec.decode_checked

    def counting(body: Any, digest: Any, event_id: Any, *rest: Any) -> Event:
        slow.add(event_id)
        return real(body, digest, event_id, *rest)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(codec, "decode_checked", counting)
        yield slow


def _read_counting_exact(ws: Workspace) -> tuple[compaction_read.CompactionRead, set[Any]]:
    """The compaction read, and the event ids it sent to the exact decoder."""
    with _counting_exact() as slow:
        return compaction_read.read_located(ws), slow


def _compare_reads(root: Path) -> set[Any]:
    """Both reads agree; returns the event ids the compaction read sent to the exact decoder."""
    ws = ctx_for(root).open(create=False)
    exact = ws.read()
    fast, slow = _read_counting_exact(ws)
    assert [(m["row"], m["reason"]) for m in fast.malformed] == \
        [(m["row"], m["reason"]) for m in exact.malformed]
    assert fast.unreadable == exact.unreadable and fast.high_water == exact.high_water

    def key(e: Event) -> tuple[Any, ...]:
        return (e.event_id, e.type, e.kind, e.id, e.ts, e.author, e.session, e.replica,
                e.schema, e.data.get("artifact"))

    assert [key(e) for e in fast.events] == [key(e) for e in exact.events]
    for e in fast.events:
        assert e.type != "observation" or set(e.data) <= {"artifact"}
    _compare_time_order(ws, exact)
    return slow


def _compare_time_order(ws: Workspace, exact: Any) -> set[Any]:
    """The time order (timeline, show --observations) shares the fast path's
    layout and parses data itself: it reads every row, data whole, as the
    exact decoder does. Returns the event ids it sent to the exact decoder."""
    from agent_journal.storage.time_order import TimeOrder

    with _counting_exact() as slow, TimeOrder(ws) as reader:
        events = list(reader.forward())
    assert sorted((m["row"], m["reason"]) for m in reader.malformed) == \
        sorted((m["row"], m["reason"]) for m in exact.malformed)
    assert [e.as_dict() for e in events] == \
        [e.as_dict() for e in sorted(exact.events, key=lambda e: e.sort_key)]
    return slow


def test_the_fast_compaction_read_agrees_with_the_exact_decoder(root):
    check_root(str(root), create=True)
    rows: list[tuple[Any, ...]] = []
    names = {}
    for n, (name, mutate) in enumerate(_mutations()):
        obj = _observation_obj(n)
        body = mutate(obj)
        names[obj["eventId"]] = name
        rows.append((obj["eventId"], obj["id"], obj["ts"], body, codec.checksum(body)))
    obj = _observation_obj(999)
    body = _canonical(obj)
    rows.append((obj["eventId"], obj["id"], obj["ts"], body, "xxh3-64:0000"))  # bad checksum
    rows.append(("ev-other", obj["id"], obj["ts"], _canonical({**obj, "eventId": "ev-x"}),
                 codec.checksum(_canonical({**obj, "eventId": "ev-x"}))))
    rows += _column_cases()
    _raw_rows(root, rows)
    slow = _compare_reads(root)
    if FAST_READ:
        assert {name for eid, name in names.items() if eid in slow} & FAST_CASES == set()
        assert {name for eid, name in names.items() if eid not in slow} == FAST_CASES
    # The time order needs no JSON check by SQLite: the usual layouts are read
    # without the exact decoder on any SQLite (but for a member after data,
    # which its parse of data refuses).
    ws = ctx_for(root).open(create=False)
    ordered_slow = _compare_time_order(ws, ws.read())
    assert {name for eid, name in names.items() if eid in ordered_slow} & FAST_CASES == {
        "plain, data then other key"}


def _tombstone_obj(n: int, **data: Any) -> dict[str, Any]:
    return {"eventId": f"tev-{n}", "type": "tombstone", "kind": "tombstone", "id": f"o{n}",
            "ts": "2025-01-02T00:00:00.000Z", "author": "human", "session": None,
            "replica": "r1", "schema": 1, "data": {"purged": False, "reason": "r", **data}}


def _tombstone_mutations() -> list[tuple[str, bytes]]:
    """Tombstone bodies around the canonical layout the fast path matches."""
    def canon(obj: dict[str, Any]) -> bytes:
        return _canonical(obj)

    cases: list[tuple[str, bytes]] = []
    for n, (name, obj) in enumerate([
        ("canonical", _tombstone_obj(0)),
        ("purged", _tombstone_obj(1, purged=True)),
        ("unicode reason", _tombstone_obj(2, reason="geheim 😀 \u2028 é")),
        ("escaped reason", _tombstone_obj(3, reason='a "quoted" \\ reason\n')),
        ("blank reason", _tombstone_obj(4, reason="   ")),
        ("unicode blank reason", _tombstone_obj(5, reason="\u2028\xa0")),
        ("extra data", _tombstone_obj(6, graph={"a": ["b"]})),
        ("purged null", _tombstone_obj(7, purged=None)),
        ("purged int", _tombstone_obj(8, purged=0)),
        ("session", {**_tombstone_obj(9), "session": "s-1"}),
        ("empty session", {**_tombstone_obj(10), "session": ""}),
        ("big schema", {**_tombstone_obj(11), "schema": 10**17}),
        ("negative schema", {**_tombstone_obj(12), "schema": -3}),
        ("float schema", {**_tombstone_obj(13), "schema": 1.0}),
        ("empty author", {**_tombstone_obj(14), "author": ""}),
        ("null id", {**_tombstone_obj(15), "id": None}),
    ]):
        obj["eventId"] = f"tev-{n}"
        cases.append((name, canon(obj)))
    base = canon(_tombstone_obj(50))
    for n, (name, body) in enumerate([
        ("spaced", base.replace(b'"purged":false', b'"purged": false')),
        ("reordered", base.replace(b'"purged":false,"reason":"r"', b'"reason":"r","purged":false')),
        ("duplicate author", base.replace(b'"data":', b'"author":"x","data":', 1)),
        ("duplicate purged", base.replace(b'"reason":"r"', b'"reason":"r","purged":true')),
        ("trailing space", base + b" "),
        ("nul", base.replace(b'"reason":"r"', b'"reason":"r\x00"')),
        ("bad utf8", base.replace(b'"reason":"r"', b'"reason":"\xff"')),
        ("leading zero schema", base.replace(b'"schema":1', b'"schema":01')),
        ("escaped letter", base.replace(b'"reason":"r"', b'"reason":"\\u0072"')),
    ]):
        cases.append((name, body.replace(b"tev-50", f"tev-{100 + n}".encode())))
    return cases


def test_the_fast_tombstone_read_agrees_with_the_exact_decoder(root):
    check_root(str(root), create=True)
    rows: list[tuple[Any, ...]] = []
    for name, body in _tombstone_mutations():
        try:
            obj = json.loads(body)
            event_id, subject, ts = obj["eventId"], obj["id"], obj["ts"]
        except (ValueError, KeyError, TypeError):
            event_id, subject, ts = f"bad-{name}", "o50", "2025-01-02T00:00:00.000Z"
        rows.append((event_id, subject, ts, body, codec.checksum(body), "tombstone"))
    good = _canonical(_tombstone_obj(200))
    rows.append(("tev-200", "o200", "2025-01-02T00:00:00.000Z", good, "xxh3-64:0", "tombstone"))
    rows.append(("tev-201", "o200", "2025-01-02T00:00:00.000Z", good, codec.checksum(good),
                 "tombstone"))  # the event id column disagrees with the body
    other = _canonical(_tombstone_obj(202))
    rows.append(("tev-202", "o202", "2025-01-02T00:00:00.000Z", other, codec.checksum(other),
                 "entry"))  # so does the type column
    _raw_rows(root, rows)
    ws = ctx_for(root).open(create=False)
    exact = ws.read()
    fast, slow = _read_counting_exact(ws)
    # The usual shapes are read without the exact decoder.
    assert not slow & {f"tev-{n}" for n in (0, 1, 2, 9, 10, 11, 12)}
    assert {"tev-3", "tev-6", "tev-100", "tev-101"} <= slow
    assert [(m["row"], m["reason"]) for m in fast.malformed] == \
        [(m["row"], m["reason"]) for m in exact.malformed]
    assert [e.as_dict() for e in fast.events] == [e.as_dict() for e in exact.events]
    assert len(fast.malformed) >= 8 and len(fast.events) >= 10
    # A row read the fast way is rewritten in place (by SQLite, to the same
    # bytes): only its new checksum is kept.
    expected = {seg: {e.event_id: codec.encode(e.purged()) for e in exact.events
                      if e.data.get("purged") is False} for seg in fast.located}
    for rewrites in expected.values():
        for event_id, (_body, digest) in rewrites.items():
            if event_id not in slow:
                rewrites[event_id] = (None, digest)
    assert fast.tombstone_rewrites == expected
    assert any(body is None for r in expected.values() for body, _ in r.values())


def _column_cases() -> list[tuple[Any, ...]]:
    """Rows whose indexed columns disagree with their body in ways a text match could miss."""
    def row(n: int, body_swap: tuple[bytes, bytes] | None = None, **columns: Any
            ) -> tuple[Any, ...]:
        obj = _observation_obj(n)
        body = _canonical(obj)
        if body_swap is not None:
            body = body.replace(*body_swap)
        values = {"event_id": obj["eventId"], "subject": obj["id"], "ts": obj["ts"],
                  "type": "observation", **columns}
        return (values["event_id"], values["subject"], values["ts"], body,
                codec.checksum(body), values["type"])

    return [
        # A quote in a column value splices a key into the body that still matches it.
        row(2001, (b'"eventId":"ev-2001"', b'"eventId":"a","x":"b"'), event_id='a","x":"b'),
        row(2002, (b'"id":"o2002"', b'"id":"o","x":"y"'), subject='o","x":"y'),
        row(2003, (b'"ts":"2025-01-01T00:00:00.000Z"', b'"ts":"t","x":"y"'), ts='t","x":"y'),
        # An escaped backslash in the body is one backslash in the value.
        row(2004, (b'"eventId":"ev-2004"', b'"eventId":"a\\\\b"'), event_id="a\\\\b"),
        row(2005, (b'"id":"o2005"', b'"id":"o\\\\"'), subject="o\\\\"),
        row(2006, (b'"ts":"2025', b'"ts":"\\\\2025'), ts="\\\\2025-01-01T00:00:00.000Z"),
        row(2007, type="entry"),
        row(2008, (b'"observation"', b'"entry"'), type="observation"),
        row(2009, subject=None),
        row(2010, event_id=b"ev-2010"),
        row(2011, ts=b"2025-01-01T00:00:00.000Z"),
        row(2012, subject=b"o2012"),
        # Column and body agree on an empty value, which the exact decoder refuses.
        row(2013, (b'"eventId":"ev-2013"', b'"eventId":""'), event_id=""),
        row(2014, (b'"id":"o2014"', b'"id":""'), subject=""),
        row(2015, (b'"ts":"2025-01-01T00:00:00.000Z"', b'"ts":""'), ts=""),
        # A raw control character is no JSON string (a read that does not ask
        # SQLite whether the body is JSON must see it itself).
        row(2016, (b'"ts":"2025', b'"ts":"\x012025'), ts="\x012025-01-01T00:00:00.000Z"),
        row(2017, (b'"author":"agent"', b'"author":"ag\x01ent"')),
    ]


def test_data_nested_deeper_than_python_parses_is_malformed_to_both_reads(root, cli):
    """SQLite accepts nesting Python's json cannot follow: every read reports the
    row malformed (never a crash), and compaction refuses."""
    check_root(str(root), create=True)
    obj = {**_observation_obj(1), "data": {"tool": "Bash"}}  # no artifact: data is not parsed
    body = _canonical(obj).replace(b'"tool":"Bash"', b'"tool":' + b"[" * 1500 + b"]" * 1500)
    _raw_rows(root, [(obj["eventId"], obj["id"], obj["ts"], body, codec.checksum(body))])
    _compare_reads(root)
    ws = ctx_for(root).open(create=False)
    assert [m["reason"] for m in ws.read().malformed] == ["body nests too deeply to parse"]
    refused = cli("compact", "--json", "--apply")
    assert refused.code == 1 and "1 malformed row(s)" in refused.err


def _read_state(read: compaction_read.CompactionRead) -> tuple[Any, ...]:
    """Everything a compaction read hands the planner and the apply step."""
    return ([e.as_dict() for e in read.events], read.malformed, read.unreadable,
            read.segments, read.high_water, read.located, read.tombstone_checksums,
            read.tombstone_rewrites)


def _mixed_workspace(root: Path) -> None:
    """Segments of mutated observation rows, clean events, and one unreadable file."""
    check_root(str(root), create=True)
    mutations = _mutations()
    for k in range(4):
        rows = []
        for n, (_name, mutate) in enumerate(mutations[k::4]):
            obj = _observation_obj(1000 * k + n)
            body = mutate(obj)
            rows.append((obj["eventId"], obj["id"], obj["ts"], body, codec.checksum(body)))
        _raw_rows(root, rows, name=f"imported-{k}")
    ctx = ctx_for(root)
    writes.record(ctx, kind="finding", entry_id="kept", fields={"claim": "kept"}, anchors=[],
                   depends_on=[], subject=None)
    writes.tombstone(ctx, "o1001", "gone")
    bad = root / "workspaces" / "ws" / "segments" / "imported-9-garbage.sqlite"
    bad.write_bytes(b"not a database at all" * 100)


def test_a_read_shared_with_worker_processes_is_the_serial_read(root, monkeypatch):
    _mixed_workspace(root)
    ws = ctx_for(root).open(create=False)
    started: list[Any] = []
    real = parallel.Worker.__init__

    def counting(self: Any, *args: Any) -> None:
        started.append(args)
        real(self, *args)

    for every in (True, False):
        monkeypatch.setenv(compaction_workers.ENV_COMPACT_WORKERS, "0")
        serial = _read_state(compaction_read.read_located(ws, every_observation=every))
        for workers in ("1", "3"):
            monkeypatch.setenv(compaction_workers.ENV_COMPACT_WORKERS, workers)
            started.clear()
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(parallel.Worker, "__init__", counting)
                shared = _read_state(compaction_read.read_located(ws, every_observation=every))
            assert len(started) == int(workers)
            assert shared == serial
        assert serial[1] and serial[2]  # the workspace holds both kinds of damage
        assert serial[7]  # and a tombstone to rewrite


def test_a_read_of_named_observations_plans_and_compacts_alike(root, tmp_path):
    """Without an observation TTL the read keeps only observations a tombstone
    names or that hold an artifact; the plan and the applied run are those
    of a read of everything."""
    blob_kept = write_artifact_observation(root, "o-blob-kept", KEPT * 10)
    write_artifact_observation(root, "o-blob-gone", SECRET_CLAIM * 10)
    ctx = ctx_for(root)
    for n in range(6):
        writes.observe(ctx, kind="tool_call", obs_id=f"o-{n}", tool="Bash", call_id=f"c{n}",
                        input_value=None, output=f"out {n}", status="ok", exit_code=0,
                        duration_ms=1)
    writes.record(ctx, kind="finding", entry_id="f-cites", fields={"claim": "x"},
                   anchors=["tool_use:o-1", "tool_use:o-2"], depends_on=[], subject=None)
    writes.record(ctx, kind="finding", entry_id="f-old", fields={"claim": "y"}, anchors=[],
                   depends_on=[], subject=None)
    for target in ("o-1", "o-blob-gone", "f-old", "never-here"):
        writes.tombstone(ctx, target, "must go")
    ws = ctx.open(create=False)
    full = compaction_read.read_located(ws)
    named = compaction_read.read_located(ws, every_observation=False)
    kept = {e.id for e in named.events if e.type == "observation"}
    assert kept == {"o-1", "o-blob-kept", "o-blob-gone"}
    assert named.high_water == full.high_water
    assert named.located == {seg: [e for e in ids if e in {ev.event_id for ev in named.events}]
                             for seg, ids in full.located.items()}
    now = clock.now()
    for entry_ttl in (None, 0):
        a = plan_compaction(full.events, now, entry_ttl, None)
        b = plan_compaction(named.events, now, entry_ttl, None)
        assert a.report(apply=False) == b.report(apply=False)
        assert (a.deletions, a.flips, a.citations) == (b.deletions, b.flips, b.citations)
    copy = tmp_path / "copy"
    import shutil

    shutil.copytree(root, copy)
    one = compact.carry_out(compact.Prepared(ws, full, plan_compaction(full.events, now,
                                                                       None, None)))
    ws_copy = ctx_for(copy).open(create=False)
    named_copy = compaction_read.read_located(ws_copy, every_observation=False)
    two = compact.carry_out(compact.Prepared(ws_copy, named_copy,
                                             plan_compaction(named_copy.events, now, None, None)))
    assert one.report == two.report and one.report["tombstoned"]
    assert blob_kept.exists()
    assert (copy / blob_kept.relative_to(root)).exists()
    assert SECRET_CLAIM not in all_bytes_under(copy)


def _serial_reads(root: Path, monkeypatch: Any) -> tuple[Workspace, dict[bool, Any]]:
    """The mixed workspace, and its one-process reads with and without every
    observation."""
    _mixed_workspace(root)
    ws = ctx_for(root).open(create=False)
    monkeypatch.setenv(compaction_workers.ENV_COMPACT_WORKERS, "0")
    return ws, {every: _read_state(compaction_read.read_located(ws, every_observation=every))
                for every in (True, False)}


def test_a_worker_that_cannot_start_or_fails_has_its_share_read_here(root, monkeypatch):
    ws, serial = _serial_reads(root, monkeypatch)
    monkeypatch.setenv(compaction_workers.ENV_COMPACT_WORKERS, "2")
    real = Path(sys.executable)
    # A worker that sends one good-looking part, then half of one, then dies.
    broken = root.parent / "broken-python"
    broken.write_text(f"""#!{real}
import sys, marshal
frame = marshal.dumps((0, ("x", [], {{}}, {{}}, 0, [], None), []), 2)
sys.stdout.buffer.write(len(frame).to_bytes(8, "big") + frame)
sys.stdout.buffer.write((1000).to_bytes(8, "big") + b"partial")
sys.exit(3)
""")
    broken.chmod(0o700)
    for executable in ("/nonexistent/python", "/bin/false", str(broken)):
        monkeypatch.setattr(sys, "executable", executable)
        for every in (True, False):
            read = compaction_read.read_located(ws, every_observation=every)
            assert _read_state(read) == serial[every]


def test_without_a_temporary_file_for_the_queue_the_read_is_done_here(root, monkeypatch):
    _mixed_workspace(root)
    ws = ctx_for(root).open(create=False)
    monkeypatch.setenv(compaction_workers.ENV_COMPACT_WORKERS, "0")
    serial = _read_state(compaction_read.read_located(ws))
    monkeypatch.setenv(compaction_workers.ENV_COMPACT_WORKERS, "2")
    import tempfile

    def no_room(*args: Any, **kwargs: Any) -> Any:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tempfile, "TemporaryFile", no_room)
    started: list[Any] = []
    monkeypatch.setattr(parallel.Worker, "__init__",
                        lambda self, *a: started.append(a))  # never reached
    assert _read_state(compaction_read.read_located(ws)) == serial
    assert started == []


def _claimed_by_workers(monkeypatch) -> Any:
    """A wait for the workers to have claimed, read and sent every segment this
    process did not claim first: the shared segment queue is empty and each
    worker of this read has sent "claimed all" (or its stream ended). Waiting
    for that, instead of sleeping a fixed time, keeps the tests below true on a
    loaded machine where a worker takes seconds to start or to read."""
    import marshal

    queues: list[Any] = []
    workers: list[Any] = []
    first_of_read: list[int] = []  # where each queue's workers start in `workers`
    claimed_all = marshal.dumps("claimed all", 2)

    class Recorded(parallel.Queue):
        def __init__(self, order: list[int]) -> None:
            super().__init__(order)
            self.size = len(order) * parallel.CLAIM
            queues.append(self)
            first_of_read.append(len(workers))

    real_init = parallel.Worker.__init__

    def recording(self: Any, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        workers.append(self)

    monkeypatch.setattr(parallel, "Queue", Recorded)
    monkeypatch.setattr(parallel.Worker, "__init__", recording)

    def sent_everything(worker: Any) -> bool:
        # The collecting thread appends each frame as it arrives; None ends the stream.
        frames = list(worker.frames)
        return worker.proc is None or claimed_all in frames or None in frames

    def wait() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if queues and os.lseek(queues[-1].fd, 0, os.SEEK_CUR) >= queues[-1].size \
                    and all(sent_everything(w) for w in workers[first_of_read[-1]:]):
                return
            time.sleep(0.01)  # polling, with the deadline above
        raise AssertionError("no worker claimed, read and sent the rest of the queue")

    return wait


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads /proc")
def test_a_compaction_read_worker_yields_the_cores_to_hooks():
    """A compaction is background work: its read workers lower their priority
    (the parent keeps its own), so hooks arriving meanwhile get the cores."""
    def nice_of(pid: int) -> int:
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().rpartition(")")[2].split()[16])

    queue = parallel.Queue([])
    proc = parallel.start_worker(queue.fd, background=True)
    try:
        deadline = time.monotonic() + 60
        while nice_of(proc.pid) == nice_of(os.getpid()) and time.monotonic() < deadline:
            time.sleep(0.02)  # (it lowers its priority once it has started)
        assert nice_of(proc.pid) == min(19, nice_of(os.getpid()) + 10)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()  # no request: it exits
        proc.wait(timeout=60)
        queue.close()

def test_a_worker_that_ends_before_this_process_is_waited_for_once(root, monkeypatch):
    """The workers' last part may arrive while this process still reads its
    own: it must not then wait for another."""
    ws, serial = _serial_reads(root, monkeypatch)
    monkeypatch.setenv(compaction_workers.ENV_COMPACT_WORKERS, "1")
    real = compaction_workers.read_segment_for_compaction
    calls: list[str] = []
    claimed = _claimed_by_workers(monkeypatch)

    def slow_here(path: str, rel: str, fast: Any) -> compaction_rows.SegmentRead:
        calls.append(rel)
        if len(calls) == 1:
            claimed()  # the worker claims and sends every other segment meanwhile
        return real(path, rel, fast)

    monkeypatch.setattr(compaction_workers, "read_segment_for_compaction", slow_here)
    import threading

    for every in (True, False):
        calls.clear()
        got: list[Any] = []

        def read(every: bool = every, got: list[Any] = got) -> None:
            got.append(_read_state(compaction_read.read_located(ws, every_observation=every)))

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(timeout=60)
        assert not reader.is_alive(), "the read waited for a part that never comes"
        assert got == [serial[every]]
        assert len(calls) == 1  # the worker read every other segment


def test_a_part_that_a_later_tombstone_adds_to_comes_in_a_second_round(root, monkeypatch):
    """Without an observation TTL a worker sends first the observations its own
    tombstones name; one named by a tombstone read here comes in a second
    round, and when the worker dies before it, its parts are read here."""
    check_root(str(root), create=True)
    rows = []
    for n in range(3):
        obj = _observation_obj(n)
        del obj["data"]["artifact"]
        body = _canonical(obj)
        rows.append((obj["eventId"], obj["id"], obj["ts"], body, codec.checksum(body)))
    _raw_rows(root, rows, name="imported-small")
    ctx = ctx_for(root)
    for n in range(100):  # the largest segment, which this process claims first
        writes.observe(ctx, kind="tool_call", obs_id=f"big-{n}", tool="Bash",
                        call_id=f"c{n}", input_value=None, output="x" * 200, status="ok",
                        exit_code=0, duration_ms=1)
    writes.tombstone(ctx, "o1", "gone")
    ws = ctx.open(create=False)
    monkeypatch.setenv(compaction_workers.ENV_COMPACT_WORKERS, "0")
    serial = _read_state(compaction_read.read_located(ws, every_observation=False))
    assert "o1" in {e["id"] for e in serial[0]}
    real_read = compaction_workers.read_segment_for_compaction
    here: list[str] = []
    claimed = _claimed_by_workers(monkeypatch)

    def slow_here(path: str, rel: str, fast: Any) -> compaction_rows.SegmentRead:
        here.append(rel)
        if len(here) == 1:
            claimed()  # the worker reads the small segment meanwhile
        return real_read(path, rel, fast)

    monkeypatch.setattr(compaction_workers, "read_segment_for_compaction", slow_here)
    monkeypatch.setenv(compaction_workers.ENV_COMPACT_WORKERS, "1")
    dies = root.parent / "dies-in-round-two"
    dies.write_text(f"""#!{sys.executable}
import sys
from agent_journal.storage import parallel
first = parallel.read_frame
asked = []
def once(stream):
    asked.append(stream)
    if len(asked) > 1:
        sys.exit(3)
    return first(stream)
parallel.read_frame = once
parallel.serve(background=True)
""")
    dies.chmod(0o700)
    for executable, read_here in ((sys.executable, 1), (str(dies), 2)):
        monkeypatch.setattr(sys, "executable", executable)
        here.clear()
        assert _read_state(compaction_read.read_located(ws, every_observation=False)) == serial
        assert here[0].endswith(".sqlite") and "imported-small" not in here[0]
        assert len(here) == read_here  # the second: the small segment, read again here


def test_a_part_read_here_that_a_workers_tombstone_adds_to_is_made_again(root, monkeypatch):
    """This process cuts its parts down as it reads them too: an observation of
    its part that a tombstone in a worker's part names is kept all the same."""
    check_root(str(root), create=True)
    ctx = ctx_for(root)
    for n in range(100):  # the largest segment, which this process claims first
        writes.observe(ctx, kind="tool_call", obs_id=f"big-{n}", tool="Bash",
                        call_id=f"c{n}", input_value=None, output="x" * 200, status="ok",
                        exit_code=0, duration_ms=1)
    tomb = _canonical(_tombstone_obj(0) | {"id": "big-7"})
    _raw_rows(root, [("tev-0", "big-7", "2025-01-02T00:00:00.000Z", tomb, codec.checksum(tomb),
                      "tombstone")], name="imported-small")
    ws = ctx.open(create=False)
    monkeypatch.setenv(compaction_workers.ENV_COMPACT_WORKERS, "0")
    serial = _read_state(compaction_read.read_located(ws, every_observation=False))
    assert "big-7" in {e["id"] for e in serial[0] if e["type"] == "observation"}
    real_read = compaction_workers.read_segment_for_compaction
    here: list[str] = []
    claimed = _claimed_by_workers(monkeypatch)

    def slow_here(path: str, rel: str, fast: Any) -> compaction_rows.SegmentRead:
        here.append(rel)
        part = real_read(path, rel, fast)
        claimed()  # the worker reads the small segment meanwhile
        return part

    monkeypatch.setattr(compaction_workers, "read_segment_for_compaction", slow_here)
    monkeypatch.setenv(compaction_workers.ENV_COMPACT_WORKERS, "1")
    assert _read_state(compaction_read.read_located(ws, every_observation=False)) == serial
    assert len(here) == 1 and "imported-small" not in here[0]


def test_a_read_that_stops_early_leaves_no_worker_waiting(root, monkeypatch):
    """Workers without an observation TTL wait for a second round: a read that
    fails before it ends them."""
    ws, _ = _serial_reads(root, monkeypatch)
    monkeypatch.setenv(compaction_workers.ENV_COMPACT_WORKERS, "2")
    started: list[Any] = []
    real_init = parallel.Worker.__init__

    def keeping(self: Any, *args: Any) -> None:
        real_init(self, *args)
        started.append(self.proc)

    def boom(*args: Any) -> Any:
        raise RuntimeError("stopped early")

    monkeypatch.setattr(parallel.Worker, "__init__", keeping)
    monkeypatch.setattr(parallel.Pool, "received", boom)
    with pytest.raises(RuntimeError, match="stopped early"):
        compaction_read.read_located(ws, every_observation=False)
    assert len(started) == 2
    for proc in started:
        assert proc.poll() is not None  # ended, and reaped


def test_the_number_of_read_workers(monkeypatch):
    monkeypatch.delenv(compaction_workers.ENV_COMPACT_WORKERS, raising=False)
    small = [compaction_workers.PARALLEL_READ_MIN_BYTES // 4] * 3
    assert compaction_workers.compaction_workers(small) == 0
    big = [compaction_workers.PARALLEL_READ_MIN_BYTES] * 40
    assert compaction_workers.compaction_workers(big) == min(
        len(os.sched_getaffinity(0)) - 1, compaction_workers.MAX_COMPACT_WORKERS)
    monkeypatch.setenv(compaction_workers.ENV_COMPACT_WORKERS, "5")
    # never more workers than other segments
    assert compaction_workers.compaction_workers(small) == 2
    assert compaction_workers.compaction_workers([1]) == 0
    for bad in ("-1", "two", "1.5"):
        monkeypatch.setenv(compaction_workers.ENV_COMPACT_WORKERS, bad)
        with pytest.raises(errors.UsageError, match="whole number"):
            compaction_workers.compaction_workers(small)


def test_a_bad_worker_count_is_a_usage_error_that_changes_nothing(root, cli):
    _mixed_workspace(root)
    before = all_bytes_under(root)
    result = cli("compact", "--json", "--apply",
                 env={compaction_workers.ENV_COMPACT_WORKERS: "many"})
    assert result.code == 2 and "AGENT_JOURNAL_COMPACT_WORKERS" in result.err
    assert "Traceback" not in result.err and all_bytes_under(root) == before


def test_a_segment_in_another_text_encoding_reads_alike(root):
    """SQLite casts a blob to text in the database's encoding: only UTF-8 is the body's text."""
    check_root(str(root), create=True)
    path = root / "workspaces" / "ws" / "segments" / "imported-utf16.sqlite"
    make_private_dirs(str(path.parent))
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA encoding = 'UTF-16le'")
    conn.executescript(SCHEMA)
    rows = []
    for n, (_name, mutate) in enumerate(_mutations()[:30]):
        obj = _observation_obj(n)
        body = mutate(obj)
        rows.append((obj["eventId"], "observation", obj["id"], obj["ts"], body,
                     codec.checksum(body)))
    conn.executemany("INSERT INTO events(event_id, type, subject, ts, body, checksum) "
                     "VALUES (?, ?, ?, ?, ?, ?)", rows)
    conn.commit()
    conn.close()
    assert _compare_reads(root) == {row[0] for row in rows}


@pytest.mark.parametrize(("version", "check"), [
    ((3, 37, 2), None),
    ((3, 38, 5), None),
    ((3, 39, 0), "json_valid(t)"),
    ((3, 40, 1), "json_valid(t)"),
    ((3, 41, 2), "json_valid(t)"),
    ((3, 42, 0), None),  # JSON5 from here on in json_valid ...
    ((3, 44, 6), None),
    ((3, 45, 0), "json_valid(t, 1)"),  # ... until it can be asked for RFC 8259 only
    ((3, 54, 1), "json_valid(t, 1)"),
])
def test_the_json_check_is_chosen_by_sqlite_version(version, check):
    assert strict_json_check(version) == check
    sql = compaction_rows.compaction_rows_sql(version)
    if check is None:
        assert "json_" not in sql
    else:
        assert f"type = 'observation' AND {check} THEN 1" in sql


def _sqlite_accepts(texts: list[str]) -> list[bool]:
    check = strict_json_check(sqlite3.sqlite_version_info) or "json_valid(t)"
    conn = sqlite3.connect(":memory:")
    try:
        return [bool(conn.execute(f"SELECT {check} FROM (SELECT ? AS t)", (t,)).fetchone()[0])
                for t in texts]
    finally:
        conn.close()


def _python_accepts(text: str) -> bool:
    try:
        codec.parse_json_text(text)
    except codec.MalformedEvent:
        return False
    return True


# What SQLite's JSON check may accept that Python's json refuses; the fast path
# rules each out itself (NUL ends SQLite's text; nesting and digits are counted).
SQLITE_LOOSER = ("\x00", "[" * 1100)


@pytest.mark.parametrize("text", [
    '{"a":"x\x01y"}', '{"a":"x\ty"}', '{"a":"x\ny"}', '{"a":01}', '{"a":-01}', '{"a":00}',
    '{"a":1.}', '{"a":.5}', '{"a":-.5}', '{"a":-}', '{"a":+1}', '{"a":1e}', '{"a":1e+}',
    '{"a":"\\x"}', '{"a":"\\\'"}', '{"a":"\\u12"}', '{"a":"\\u12G4"}', '{"a":"\\0"}',
    '{"a":"\\v"}', '{"a":"x\\\ny"}', '{"a":NaN}', '{"a":Infinity}', '{"a":-Infinity}',
    '{"a":0x10}', "{'a':1}", '{a:1}', '{"a":1,}', '{"a":[1,]}', '{"a":1}//c', '{"a":1}/*c*/',
    '{"a":tru}', '{"a":True}', '{"a":1}\x0b', '{"a":1}\x0c', '\xa0{"a":1}', '{"a":1}\xa0',
    '{"a":"\\/"}', '{"a":-0}', '{"a":1E+5}', '{"a":"\\ud800"}', '{"a":1,"a":2}',
    '{"a":"\x7f\u2028"}', ' {"a":1}\n', '{"a":1}\x00', "[" * 1100 + "]" * 1100,
])
def test_sqlite_accepts_no_json_python_refuses_but_what_the_fast_path_checks(text):
    [sqlite] = _sqlite_accepts([text])
    if sqlite and not _python_accepts(text):
        assert any(mark in text for mark in SQLITE_LOOSER), text


def test_randomly_damaged_json_finds_no_other_text_sqlite_alone_accepts():
    tokens = ['{', '}', '[', ']', ':', ',', '"', '\\', 'a', '0', '1', '-', '+', '.', 'e', 'E',
              'true', 'null', 'nul', 'NaN', ' ', '\t', '\n', '\r', '\x0b', '\x01', '\x7f', 'é',
              '\\u', '\\u00', '41', 'D800', '\\n', '\\/', '\\x', "'", '/', '*', '0x', '"a"',
              '"a":', '{"a":', '[1,', '1e5', '-0', '01', '1.', '.5', '']
    rng = random.Random(7)

    def value(depth: int) -> Any:
        pick = rng.randrange(8 if depth < 3 else 5)
        if pick == 0:
            return rng.choice([None, True, False])
        if pick == 1:
            return rng.choice([0, -1, 12, 1.5, -0.25, 1e21, 10**20])
        if pick in (2, 3, 4):
            return "".join(rng.choice('ab"\\/é\n\x1b') for _ in range(rng.randrange(4)))
        if pick in (5, 6):
            return {rng.choice("abc"): value(depth + 1) for _ in range(rng.randrange(3))}
        return [value(depth + 1) for _ in range(rng.randrange(3))]

    texts = []
    for _ in range(20000):
        text = json.dumps(value(0), ensure_ascii=rng.random() < 0.5,
                          separators=rng.choice([(",", ":"), (", ", ": ")]))
        for _ in range(rng.randint(1, 2)):
            at, cut = rng.randrange(len(text) + 1), rng.randrange(2)
            text = text[:at] + rng.choice(tokens) + text[at + cut:]
        texts.append(text)
    accepted = [t for t, ok in zip(texts, _sqlite_accepts(texts), strict=True) if ok]
    assert len(set(accepted)) > 2000  # the damage is not all fatal
    assert [t for t in accepted if not _python_accepts(t)] == []


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.text(max_size=5) | st.sampled_from(["artifact", '"', "\\", "\x1b", "é", "\x00"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.text(max_size=3) | st.just("artifact"), inner, max_size=3),
    max_leaves=6)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["eventId", "type", "kind", "id", "ts", "author",
                                           "session", "replica", "schema", "data", "extra"]),
                          json_values, st.booleans()), min_size=1, max_size=8))
def test_random_field_damage_is_judged_the_same_by_both_reads(root, changes):
    subprocess.run(["rm", "-rf", str(root)], check=True)
    check_root(str(root), create=True)
    rows = []
    for n, (field, value, drop) in enumerate(changes):
        obj = _observation_obj(n)
        if drop:
            obj.pop(field, None)
        else:
            obj[field] = value
        body = _canonical(obj)
        rows.append((f"ev-{n}", f"o{n}", "2025-01-01T00:00:00.000Z", body, codec.checksum(body)))
    _raw_rows(root, rows)
    _compare_reads(root)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.text(max_size=4) | st.just("artifact"), json_values, max_size=4),
       st.integers(min_value=0, max_value=400),
       st.sampled_from([b" ", b"\n", b",", b"}", b"\\u0061", b'"', b"0", b"\x00", b""]))
def test_random_data_with_a_stray_byte_is_judged_the_same_by_both_reads(root, data, at, stray):
    """Whatever the data object holds, and wherever one stray byte lands in the body."""
    subprocess.run(["rm", "-rf", str(root)], check=True)
    check_root(str(root), create=True)
    obj = {**_observation_obj(0), "data": data}
    body = _canonical(obj)
    at = min(at, len(body))
    body = body[:at] + stray + body[at:]
    _raw_rows(root, [(obj["eventId"], obj["id"], obj["ts"], body, codec.checksum(body))])
    _compare_reads(root)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.text(max_size=4), st.integers() | st.text(max_size=3), max_size=3)
       | st.dictionaries(st.text(max_size=4) | st.just("artifact"), json_values, max_size=3),
       st.lists(st.tuples(st.sampled_from(["author", "data", "zz", "artifact", "eventId", "ts",
                                           "type", "\\u0061uthor", "d\\u0061ta"]),
                          st.integers() | st.text(max_size=3) | json_values,
                          st.sampled_from(["", " "])), min_size=1, max_size=3))
def test_members_between_data_and_event_id_are_judged_the_same_by_both_reads(
        root, data, members):
    """The fast read finds data's end from the fields after it: whatever other
    members stand between, it reads what the exact decoder reads."""
    subprocess.run(["rm", "-rf", str(root)], check=True)
    check_root(str(root), create=True)
    obj = {**_observation_obj(0), "data": data}
    extra = "".join(f',{space}"{key}"{space}:{json.dumps(value, ensure_ascii=False)}'
                    for key, value, space in members)
    body = _canonical(obj).replace(b',"eventId"', extra.encode() + b',"eventId"', 1)
    _raw_rows(root, [(obj["eventId"], obj["id"], obj["ts"], body, codec.checksum(body))])
    _compare_reads(root)


def test_events_of_unknown_types_are_listed_and_never_removed(cli, root):
    ok(cli("record", "--kind", "finding", "--id", "f1", "--claim", "x"))
    ok(cli("tombstone", "f1", "--reason", "r"))
    newer = Event(event_id=new_event_id(), type="retention-hint", kind="hint", id="f1",
                  ts="2020-01-01T00:00:00.000Z", author="agent", session="s", replica="r9",
                  data={"note": "written by a newer replica"})
    build_segment(segments(root)[0].parent / "imported-newer.sqlite", [newer])
    report = ok(cli("compact", "--json", "--entry-ttl-days", "0", "--observation-ttl-days", "0",
                    "--apply")).json()
    assert report["unclassified"] == [newer.event_id] and report["tombstoned"] == ["f1"]
    assert newer.event_id in {e.event_id for e in ctx_for(root).open(create=False).read().events}
    assert ok(cli("compact", "--json", "--apply")).json()["unclassified"] == [newer.event_id]


# -- one applied compaction at a time -------------------------------------------------------------

HOLD_LOCK = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(60)  # holds the lock until the test kills it (it waits on "held", not on time)
"""


def test_a_second_applied_compaction_refuses_while_one_runs(cli, root, monkeypatch):
    ctx = _secret_journal(root)
    ws = ctx.open(create=False)
    before = {p: p.read_bytes() for p in segments(root)}
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, ws.path],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        monkeypatch.setattr(locks, "COMPACT_LOCK_WAIT_S", 0.2)
        with pytest.raises(errors.CompactionRunningError,
                           match="another compact --apply or an import"):
            compact.compact(ctx, entry_ttl_days=None, observation_ttl_days=None, apply=True)
        # A dry run needs no lock.
        dry = compact.compact(ctx, entry_ttl_days=None, observation_ttl_days=None, apply=False)
        assert dry.report["tombstoned"] == ["f-secret"]
        refused = cli("compact", "--json", "--apply")  # waits its full 5 s, then refuses
        assert refused.code == 1 and refused.out == ""
        assert "another compact --apply or an import is running" in refused.err
        assert {p: p.read_bytes() for p in segments(root)} == before
        assert sorted(os.listdir(ws.path)) == ["segments"]  # nothing written, not even a lock
    finally:
        holder.kill()
        holder.wait()
    done = compact.compact(ctx, entry_ttl_days=None, observation_ttl_days=None, apply=True)
    assert done.report["tombstonesMarkedPurged"] and SECRET_CLAIM not in all_bytes_under(root)


def test_a_filesystem_that_cannot_lock_a_folder_still_compacts(root, monkeypatch):
    import errno
    import fcntl

    ctx = _secret_journal(root)
    real = fcntl.flock

    def no_folder_locks(fd, op):
        if os.path.isdir(f"/proc/self/fd/{fd}"):
            raise OSError(errno.EBADF, "Bad file descriptor")
        return real(fd, op)

    monkeypatch.setattr(fcntl, "flock", no_folder_locks)
    done = compact.compact(ctx, entry_ttl_days=None, observation_ttl_days=None, apply=True)
    assert done.report["tombstonesMarkedPurged"] and SECRET_CLAIM not in all_bytes_under(root)
