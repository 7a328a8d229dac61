"""Search: ranking by the documented formula, derivation interplay, and the index's life.

Ranking expectations are computed by hand from the formula in spec/SEARCH.md:
score = sum over matched terms of ln(1 + (N - df + 0.5) / (df + 0.5)),
times 1 + boost / (floor(age_hours / 24) + 1).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sqlite3
import stat
import subprocess
from pathlib import Path

import pytest
from conftest import CLI, clean_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_journal.core import errors, ranking
from agent_journal.core.derive import derive
from agent_journal.core.errors import UsageError
from agent_journal.ops import context, search, search_misses, writes
from agent_journal.ops.context import Context
from agent_journal.storage import search_index, search_query
from agent_journal.storage.cache import publish_cache, segment_signature
from agent_journal.storage.connection import connect, run_write
from agent_journal.storage.files import create_private_file
from agent_journal.storage.root import Root
from agent_journal.storage.segment import init_segment, insert_events

NOW = "2025-03-10T12:00:00.000Z"
EMPTY_SHA = "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"  # sha256("{}")


@pytest.fixture
def cli(inproc):
    """In-process: these tests need no real process."""
    return inproc



def ln_idf(n: int, df: int) -> float:
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def expected(weights: list[float], age_hours: float, boost: float = 1.0) -> float:
    total = 0.0
    for w in weights:
        total += w
    return total * (1 + boost / (math.floor(age_hours / 24) + 1))


class J:
    """In-process writes and searches against one root, with the clock fixed per call."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch, ws: str = "ws") -> None:
        self.root = root
        self.mp = monkeypatch
        self.ws = ws

    @property
    def ctx(self) -> Context:
        return Context(str(self.root), self.ws)

    def at(self, when: str) -> J:
        self.mp.setenv("AGENT_JOURNAL_NOW", when)
        return self

    def note(self, entry_id: str, text: str, *, kind: str = "note", deps: tuple[str, ...] = (),
             when: str = NOW, subject: str | None = None, anchors: tuple[str, ...] = ()) -> None:
        self.at(when)
        fields: dict[str, str | None] = {"claim": None, "question": None, "chosen": None,
                                         "text": None}
        if kind == "finding":
            fields["claim"] = text
        else:
            fields["text"] = text
        writes.record(self.ctx, kind=kind, entry_id=entry_id, fields=fields,
                       anchors=list(anchors), depends_on=list(deps), subject=subject)

    def obs(self, obs_id: str, output: str, *, tool: str = "Bash", when: str = NOW,
            status: str = "ok", input_value: object = None) -> None:
        self.at(when)
        writes.observe(self.ctx, kind="tool_call", obs_id=obs_id, tool=tool, call_id="c-" + obs_id,
                        input_value=input_value, output=output, status=status, exit_code=0,
                        duration_ms=1)

    def invalidate(self, target: str) -> None:
        self.at(NOW)
        writes.invalidate(self.ctx, target, "wrong premise")

    def tombstone(self, target: str) -> None:
        self.at(NOW)
        writes.tombstone(self.ctx, target, "must not exist")

    def search(self, query: str, *, now: str = NOW, **kw: object) -> dict:
        self.at(now)
        return search.search(self.ctx, query, **kw)  # type: ignore[arg-type]

    def ids(self, query: str, **kw: object) -> list[str]:
        return [h["id"] for h in self.search(query, **kw)["hits"]]

    @property
    def index_file(self) -> Path:
        return self.root / "cache" / "search" / f"{self.ws}.sqlite"

    def segments(self) -> list[Path]:
        return sorted((self.root / "workspaces" / self.ws / "segments").glob("*.sqlite"))

    def index_n(self) -> int:
        conn = sqlite3.connect(self.index_file)
        try:
            return int(conn.execute("SELECT value FROM meta WHERE key = 'docs'").fetchone()[0])
        finally:
            conn.close()


@pytest.fixture
def j(root: Path, monkeypatch: pytest.MonkeyPatch) -> J:
    monkeypatch.delenv("AGENT_JOURNAL_SEARCH_BOOST", raising=False)
    return J(root, monkeypatch)


# -- tokenisation, formula, snippets (pure) -------------------------------------------------

def test_words_fold_case_and_keep_underscores_and_unicode():
    assert ranking.words("Run db_migrate on Straße, ÉTÉ-2024!") == \
        ["run", "db_migrate", "on", "strasse", "été", "2024"]


def test_query_terms_are_distinct_in_first_order():
    assert ranking.query_terms("Build the build, then THE deploy") == \
        ["build", "the", "then", "deploy"]


@pytest.mark.parametrize("query", ["", "   ", "?!-- ..."])
def test_query_without_words_is_a_usage_error(query):
    with pytest.raises(UsageError):
        ranking.query_terms(query)


def test_query_with_too_many_words_is_a_usage_error():
    with pytest.raises(UsageError):
        ranking.query_terms(" ".join(f"w{i}" for i in range(ranking.MAX_TERMS + 1)))


@pytest.mark.parametrize("age_ms, factor", [
    (0, 2.0),
    (24 * 3600 * 1000 - 1, 2.0),          # still inside the first 24-hour period
    (24 * 3600 * 1000, 1.5),
    (48 * 3600 * 1000 - 1, 1.5),
    (48 * 3600 * 1000, 1 + 1 / 3),
    (-5 * 3600 * 1000, 2.0),              # a clock-skewed future event counts as new
])
def test_recency_decays_once_per_whole_day(age_ms, factor):
    now = 1_700_000_000_000
    assert ranking.recency(now, now - age_ms, 1.0) == factor


def test_idf_is_the_smoothed_formula():
    assert ranking.idf(4, 1) == math.log(1 + 3.5 / 1.5)
    assert ranking.idf(4, 4) == math.log(1 + 0.5 / 4.5)
    assert ranking.idf(1000, 1) > ranking.idf(1000, 10) > ranking.idf(1000, 999) > 0


def test_snippet_marks_terms_and_cuts_with_ellipses():
    text = " ".join(f"w{i}" for i in range(40)) + " the Migration\nran fine " + \
        " ".join(f"x{i}" for i in range(40))
    out = ranking.snippet(text, ["migration"])
    assert "«Migration»" in out
    assert out.startswith("…") and out.endswith("…")
    assert "\n" not in out
    assert len(out.split()) <= ranking.SNIPPET_WORDS + 2


def test_snippet_prefers_the_window_with_more_distinct_terms():
    text = "alpha " + "filler " * 30 + "alpha beta gamma " + "filler " * 30
    out = ranking.snippet(text, ["alpha", "beta", "gamma"])
    assert "«alpha» «beta» «gamma»" in out


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from("abcdefg"), st.lists(st.sampled_from("abcdefgh"),
                                                           max_size=3), max_size=7),
       st.sets(st.sampled_from("abcdefgh")))
def test_outcomes_follow_derive(deps, invalidated):
    from agent_journal.core.model import Event

    events = []
    for n, (entry_id, on) in enumerate(sorted(deps.items())):
        events.append(Event(event_id=f"e{n}", type="entry", kind="note", id=entry_id,
                            ts="2025-01-01T00:00:00.000Z", author="human", session=None,
                            replica="r", data={"fields": {"text": "t"}, "anchors": [],
                                               "dependsOn": on, "subject": None}))
    for n, target in enumerate(sorted(invalidated)):
        events.append(Event(event_id=f"i{n}", type="invalidation", kind="invalidation",
                            id=target, ts="2025-01-01T00:00:00.000Z", author="human",
                            session=None, replica="r", data={"reason": "x"}))
    assert ranking.outcomes(deps, set(invalidated)) == derive(events).outcome


# -- ranking, hand-computed ----------------------------------------------------------------

def test_rare_term_beats_common_term(j):
    j.obs("o1", "build ok")
    j.obs("o2", "build ok again")
    j.obs("o3", "build failed")
    j.obs("o4", "deadlock in worker")
    report = j.search("build deadlock", now="2025-03-10T13:00:00.000Z")
    hits = report["hits"]
    assert [h["id"] for h in hits] == ["o4", "o1", "o2", "o3"]  # ties: same ts, by id
    rare, common = ln_idf(4, 1), ln_idf(4, 3)
    assert rare > common
    assert hits[0]["score"] == expected([rare], 1)
    assert [h["score"] for h in hits[1:]] == [expected([common], 1)] * 3
    assert hits[0]["terms"] == ["deadlock"] and hits[1]["terms"] == ["build"]


def test_matching_more_terms_adds_their_weights(j):
    j.obs("o1", "deploy staging")
    j.obs("o2", "deploy production")
    j.obs("o3", "rollback production")
    j.obs("o4", "unrelated words")
    hits = j.search("deploy production", now="2025-03-10T12:00:00.000Z")["hits"]
    assert hits[0]["id"] == "o2"
    w = ln_idf(4, 2)
    assert hits[0]["score"] == expected([w, w], 0)
    assert hits[0]["terms"] == ["deploy", "production"]
    # the two single-term hits tie on score and ts: ordered by id
    assert [h["id"] for h in hits[1:]] == ["o1", "o3"]


def test_recent_hit_beats_an_older_equal_one(j):
    j.note("n-old", "cache invalidation bug", when="2025-03-09T06:00:00.000Z")
    j.note("n-new", "cache invalidation bug", when="2025-03-10T11:00:00.000Z")
    j.note("n-other", "nothing to see", when="2025-03-10T11:00:00.000Z")
    hits = j.search("cache", now="2025-03-10T12:00:00.000Z")["hits"]
    assert [h["id"] for h in hits] == ["n-new", "n-old"]
    w = ln_idf(3, 2)
    assert hits[0]["score"] == expected([w], 1)            # x2
    assert hits[1]["score"] == expected([w], 30)           # 30 h old: x1.5
    assert hits[1]["score"] == w * 1.5


def test_equal_scores_in_one_period_are_ordered_by_ts_then_id(j):
    j.note("b", "flaky test", when="2025-03-10T01:00:00.000Z")
    j.note("a", "flaky test", when="2025-03-10T01:00:00.000Z")
    j.note("c", "flaky test", when="2025-03-10T02:00:00.000Z")
    hits = j.search("flaky", now="2025-03-10T12:00:00.000Z")["hits"]
    assert len({h["score"] for h in hits}) == 1
    assert [h["id"] for h in hits] == ["c", "a", "b"]


def test_boost_knob_changes_recency(j, monkeypatch):
    j.note("n1", "vacuum", when="2025-03-01T12:00:00.000Z")
    j.note("n2", "other", when="2025-03-01T12:00:00.000Z")
    monkeypatch.setenv("AGENT_JOURNAL_SEARCH_BOOST", "0")
    assert j.search("vacuum")["hits"][0]["score"] == ln_idf(2, 1)
    monkeypatch.setenv("AGENT_JOURNAL_SEARCH_BOOST", "3")
    assert j.search("vacuum")["hits"][0]["score"] == expected([ln_idf(2, 1)], 9 * 24, 3.0)
    monkeypatch.setenv("AGENT_JOURNAL_SEARCH_BOOST", "-1")
    with pytest.raises(UsageError):
        j.search("vacuum")


def test_limit_and_kind(j):
    for i in range(5):
        j.note(f"n{i}", "shared word")
    j.note("f1", "shared word", kind="finding")
    j.obs("o1", "shared word")
    assert len(j.search("shared", limit=3)["hits"]) == 3
    assert j.ids("shared", kind="finding") == ["f1"]
    assert j.ids("shared", kind="tool_call") == ["o1"]


def test_searches_entry_fields_subject_anchors_and_observation_content(j):
    j.obs("o1", "stdout text", tool="Grep", input_value={"pattern": "needle_pattern",
                                                        "path": "src"})
    j.note("n1", "body", subject="payments-service", anchors=("tool_use:o1",
                                                              "file:src/ledger.py"))
    j.at(NOW)
    writes.record(j.ctx, kind="decision", entry_id="d1",
                   fields={"claim": None, "question": "which queue?", "chosen": "rabbitmq",
                           "text": None}, anchors=[], depends_on=[], subject=None)
    assert j.ids("grep") == ["o1"]
    assert j.ids("needle_pattern") == ["o1"]
    assert j.ids("payments") == ["n1"]
    assert j.ids("ledger") == ["n1"]
    assert j.ids("rabbitmq queue")[0] == "d1"
    assert j.ids("c") == []             # call id c-o1 is bookkeeping, not content


def test_observation_events_fold_into_one_document(j):
    j.obs("o1", "", status="started", input_value={"command": "pytest -x"})
    j.obs("o1", "3 passed", status="ok")
    report = j.search("pytest passed")
    assert [(h["id"], h["terms"]) for h in report["hits"]] == [("o1", ["pytest", "passed"])]
    assert report["hits"][0]["type"] == "observation"
    assert report["hits"][0]["outcome"] is None


# -- tombstones, invalidations -------------------------------------------------------------

def test_tombstoned_content_is_never_returned_nor_counted(j):
    j.note("n1", "secret token leaked")
    j.note("n2", "token rotation done")
    j.obs("o1", "unrelated")
    assert sorted(j.ids("token")) == ["n1", "n2"]
    j.tombstone("n1")
    report = j.search("token leaked", include_retracted=True)
    assert [h["id"] for h in report["hits"]] == ["n2"]
    # N = 2 (n2, o1), df(token) = 1, df(leaked) = 0
    assert report["hits"][0]["score"] == expected([ln_idf(2, 1)], 0)
    assert j.index_n() == 2


def test_tombstone_before_its_target_keeps_it_out(j, monkeypatch):
    # Writers refuse a tombstoned id; a target can still land after its
    # tombstone by a path that does not look (an older version, a copied segment).
    monkeypatch.setattr(writes, "refuse_tombstoned", lambda *a: None)
    j.tombstone("later")
    j.note("later", "arrives after its tombstone")
    j.note("other", "arrives too")
    assert j.ids("arrives", include_retracted=True) == ["other"]
    assert j.index_n() == 1


def test_invalidated_and_suppressed_only_on_request_and_marked(j):
    j.note("root", "schema migration plan")
    j.note("child", "migration step two", deps=("root",))
    j.note("free", "migration unrelated")
    j.note("pad", "padding")
    assert sorted(j.ids("migration")) == ["child", "free", "root"]
    j.invalidate("root")
    assert j.ids("migration") == ["free"]
    report = j.search("migration", include_retracted=True)
    outcome = {h["id"]: h["outcome"] for h in report["hits"]}
    assert outcome == {"root": "invalidated", "child": "suppressed", "free": "live"}
    # retracted entries still count: N = 4, df = 3 with or without the flag
    w = ln_idf(4, 3)
    assert j.search("migration")["hits"][0]["score"] == expected([w], 0)
    assert {h["score"] for h in report["hits"]} == {expected([w], 0)}


def test_tombstoned_invalidated_root_still_suppresses_its_dependents(j):
    j.note("root", "alpha plan")
    j.note("child", "alpha detail", deps=("root",))
    j.invalidate("root")
    j.tombstone("root")
    report = j.search("alpha", include_retracted=True)
    assert [(h["id"], h["outcome"]) for h in report["hits"]] == [("child", "suppressed")]


def test_invalidation_arriving_before_its_target(j):
    j.invalidate("early")
    j.note("early", "gamma ray")
    j.note("late", "gamma dependent", deps=("early",))
    assert j.ids("gamma") == []
    assert {h["id"]: h["outcome"] for h in j.search("gamma", include_retracted=True)["hits"]} \
        == {"early": "invalidated", "late": "suppressed"}


def test_tombstoning_an_already_indexed_doc_drops_it_incrementally(j):
    j.obs("o1", "password hunter2")
    j.obs("o2", "password reset flow")
    assert len(j.search("password")["hits"]) == 2
    inode = j.index_file.stat().st_ino
    j.tombstone("o1")
    assert j.ids("hunter2") == []
    assert j.ids("password") == ["o2"]
    assert j.index_file.stat().st_ino == inode      # folded in place, no rebuild needed


# -- the index: disposable, incremental, self-checking -------------------------------------

QUERIES = ["migration", "build deadlock", "token", "alpha beta", "gamma", "password",
           "shared word", "zzz"]


def _all_results(j: J) -> list[dict]:
    return [j.search(q, include_retracted=flag, limit=50) for q in QUERIES
            for flag in (False, True)]


def _populate(j: J) -> None:
    j.note("m1", "migration plan alpha", when="2025-03-01T00:00:00.000Z")
    j.note("m2", "migration beta", deps=("m1",), when="2025-03-05T00:00:00.000Z")
    j.obs("o1", "build deadlock", when="2025-03-09T00:00:00.000Z")
    j.obs("o2", "token gamma", when="2025-03-09T05:00:00.000Z", status="started")
    j.obs("o2", "password finished", when="2025-03-09T06:00:00.000Z")
    j.note("s1", "shared word", when="2025-03-10T00:00:00.000Z")


def test_deleting_the_index_loses_nothing(j):
    _populate(j)
    before = _all_results(j)
    j.invalidate("m1")
    j.tombstone("o1")
    middle = _all_results(j)
    assert middle != before
    for p in j.index_file.parent.glob("ws.*"):
        p.unlink()
    assert _all_results(j) == middle


def test_incremental_update_picks_up_new_events_and_equals_a_rebuild(j):
    _populate(j)
    j.search("anything")
    inode = j.index_file.stat().st_ino
    j.obs("o3", "fresh deadlock", when="2025-03-10T11:00:00.000Z")
    j.note("n9", "gamma again", deps=("m2",))
    j.invalidate("m1")
    assert "o3" in j.ids("deadlock")
    assert j.index_file.stat().st_ino == inode
    incremental = _all_results(j)
    j.index_file.unlink()
    assert _all_results(j) == incremental


def test_events_merged_out_of_order_fold_like_a_rebuild(j):
    _populate(j)
    j.search("anything")
    # an imported segment from another replica with older events: an earlier
    # record of s1 (it wins, as in derive) and the start of observation o2
    seg = j.segments()[0].parent / "rother-000001.sqlite"
    create_private_file(str(seg))
    conn = connect(str(seg))
    init_segment(conn, workspace="ws", replica="rother")
    from agent_journal.core.model import Event

    events = [
        Event(event_id="00000000-0000-4000-8000-000000000001", type="entry", kind="note",
              id="s1", ts="2025-02-01T00:00:00.000Z", author="human", session=None,
              replica="rother", data={"fields": {"text": "older wording kiwi"}, "anchors": [],
                                      "dependsOn": [], "subject": None}),
        Event(event_id="00000000-0000-4000-8000-000000000002", type="observation",
              kind="tool_call", id="o2", ts="2025-03-09T04:00:00.000Z", author="agent",
              session="s", replica="rother", data={"tool": "Read", "output": "papaya"}),
    ]
    run_write(conn, lambda c: insert_events(c, events))
    conn.close()
    assert j.ids("kiwi") == ["s1"]
    assert j.ids("word") == []
    hit = j.search("papaya token")["hits"][0]
    assert (hit["id"], hit["ts"]) == ("o2", "2025-03-09T04:00:00.000Z")
    assert hit["snippet"].startswith("Read «papaya»")
    incremental = _all_results(j) + [j.search("kiwi papaya read")]
    j.index_file.unlink()
    assert _all_results(j) + [j.search("kiwi papaya read")] == incremental


def _delete_rows(segment: Path, subject: str) -> None:
    conn = sqlite3.connect(segment)
    conn.execute("DELETE FROM events WHERE subject = ?", (subject,))
    conn.commit()
    conn.execute("VACUUM")
    conn.close()


def test_rows_removed_from_a_segment_are_noticed_and_purged_from_the_index(j):
    _populate(j)
    j.tombstone("o1")
    j.obs("o5", "unique zebra", when="2025-03-10T00:00:00.000Z")
    assert j.ids("zebra") == ["o5"]
    n_before = j.index_n()
    # what compaction does to the segment: the tombstoned target's rows go, and an
    # untombstoned observation expires; the cache files are left alone here
    for seg in j.segments():
        _delete_rows(seg, "o1")
        _delete_rows(seg, "o5")
    assert j.ids("zebra") == []
    assert j.index_n() == n_before - 1
    data = b"\n".join(p.read_bytes() for p in j.index_file.parent.iterdir() if p.is_file())
    for word in (b"deadlock", b"zebra"):
        assert word not in data


def test_a_cache_sweep_during_a_build_is_survived(j, monkeypatch):
    """compact --apply may delete <ws>.* under cache/ while a search builds."""
    _populate(j)
    real = publish_cache
    swept = []

    def sweeping(conn, tmp, path):
        if not swept:
            swept.append(tmp)
            os.unlink(tmp)
        real(conn, tmp, path)

    monkeypatch.setattr(search_index, "publish_cache", sweeping)
    assert j.ids("deadlock") == ["o1"]
    assert len(swept) == 1
    assert not Path(swept[0]).exists()


def test_a_vanished_segment_is_noticed(j):
    j.note("n1", "walrus")
    j.search("walrus")
    for seg in j.segments():
        seg.unlink()
    assert j.search("walrus")["hits"] == []
    j.note("n2", "walrus again")
    assert j.ids("walrus") == ["n2"]


def test_segment_signature_moves_on_every_commit_even_with_mtime_restored(j):
    j.note("n1", "first")
    seg = j.segments()[0]
    sig1 = segment_signature(str(seg))
    st1 = seg.stat()
    conn = sqlite3.connect(seg)
    conn.execute("INSERT INTO meta(key, value) VALUES ('probe', 'x')")
    conn.commit()
    conn.close()
    os.utime(seg, ns=(st1.st_atime_ns, st1.st_mtime_ns))
    assert seg.stat().st_size == st1.st_size
    assert segment_signature(str(seg)) != sig1


@pytest.mark.parametrize("damage", ["garbage", "truncate", "format", "workspace"])
def test_a_damaged_index_is_rebuilt(j, damage):
    _populate(j)
    good = _all_results(j)
    path = j.index_file
    if damage == "garbage":
        path.write_bytes(b"not a database at all" * 500)
    elif damage == "truncate":
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    else:
        conn = sqlite3.connect(path)
        key = "format" if damage == "format" else "workspace"
        conn.execute("UPDATE meta SET value = 'other' WHERE key = ?", (key,))
        conn.commit()
        conn.close()
    assert _all_results(j) == good
    assert j.index_n() == 5


@pytest.mark.parametrize("where", ["id = 10", "id > 10"])  # structure record, leaves
def test_a_corrupt_fts_record_met_by_a_query_is_rebuilt(j, where):
    _populate(j)
    good = _all_results(j)
    import random

    conn = sqlite3.connect(j.index_file)
    garble = random.Random(7)  # the same garbled bytes on every run
    rows = conn.execute(f"SELECT id, length(block) FROM wordindex_data WHERE {where}").fetchall()
    for row_id, size in rows:
        conn.execute("UPDATE wordindex_data SET block = ? WHERE id = ?",
                     (garble.randbytes(size or 0), row_id))
    conn.commit()
    conn.close()
    assert _all_results(j) == good


def test_malformed_and_unreadable_segments_are_reported_each_time(j):
    j.note("n1", "lychee one")
    j.note("n2", "lychee two")
    seg = j.segments()[0]
    conn = sqlite3.connect(seg)
    conn.execute("UPDATE events SET body = CAST(replace(CAST(body AS TEXT), 'two', 'TWO') "
                 "AS BLOB) WHERE subject = 'n2'")
    conn.commit()
    conn.close()
    (seg.parent / "junk.sqlite").write_bytes(b"this is no sqlite file" * 100)
    for _ in range(2):  # the second search reads nothing new but reports the same
        report = j.search("lychee")
        assert [h["id"] for h in report["hits"]] == ["n1"]
        assert report["malformed"] == [{"segment": f"workspaces/ws/segments/{seg.name}",
                                        "row": 2, "reason": "checksum mismatch"}]
        assert [u["path"] for u in report["unreadable"]] == \
            ["workspaces/ws/segments/junk.sqlite"]


def test_a_segment_becoming_unreadable_drops_its_content(j):
    j.note("n1", "durian")
    assert j.ids("durian") == ["n1"]
    seg = j.segments()[0]
    seg.write_bytes(b"garbage" * 1000)
    report = j.search("durian")
    assert report["hits"] == []
    assert len(report["unreadable"]) == 1


def test_nothing_is_created_for_a_missing_root_or_workspace(j):
    report = j.search("anything")
    assert report["hits"] == [] and report["unreadable"] == []
    assert not j.root.exists()
    j.note("n1", "here")
    j.ws = "other"
    assert j.search("here")["hits"] == []
    assert not (j.root / "cache" / "search" / "other.sqlite").exists()


def test_cache_files_are_private(j):
    _populate(j)
    j.search("migration")
    cache = j.root / "cache"
    for p in [cache, *cache.rglob("*")]:
        mode = stat.S_IMODE(p.stat().st_mode)
        assert mode == (0o700 if p.is_dir() else 0o600), p


def test_pruned_ranking_equals_the_full_query(root, monkeypatch):
    """Reading only the rare words' documents must never change the answer."""
    import random

    from agent_journal.core.model import Event

    rng = random.Random(3)
    vocab = [f"w{i}" for i in range(60)]
    weights = [1 / (i + 1) for i in range(60)]
    events = []
    for k in range(400):
        ts = f"2025-03-{1 + k % 9:02d}T{k % 24:02d}:00:00.000Z"
        text = " ".join(rng.choices(vocab, weights=weights, k=rng.randint(2, 8)))
        if k % 5 == 0:
            events.append(Event(event_id=f"00000000-0000-4000-8000-{k:012d}", type="entry",
                                kind=rng.choice(["note", "finding"]), id=f"e{k}", ts=ts,
                                author="human", session=None, replica="r",
                                data={"fields": {"text": text}, "anchors": [],
                                      "dependsOn": [f"e{k - 5}"] if k % 15 == 0 else [],
                                      "subject": None}))
        else:
            events.append(Event(event_id=f"00000000-0000-4000-8000-{k:012d}",
                                type="observation", kind="tool_call", id=f"o{k}", ts=ts,
                                author="agent", session="s", replica="r",
                                data={"tool": "Bash", "output": text}))
        if k % 37 == 0:
            events.append(Event(event_id=f"00000000-0000-4000-9000-{k:012d}",
                                type="invalidation", kind="invalidation", id=f"e{k - 2}",
                                ts=ts, author="human", session=None, replica="r",
                                data={"reason": "x"}))
    ws = Root.open(str(root), create=True).workspace("ws")
    conn = ws.open_for_append()
    run_write(conn, lambda c: insert_events(c, events))
    conn.close()
    index = search_index.refresh(ws)
    pruned = []
    original = search_query.pruned

    def spy(*args, **kwargs):
        result = original(*args, **kwargs)
        pruned.append(result is not None)
        return result

    monkeypatch.setattr(search_query, "pruned", spy)
    try:
        for _ in range(300):
            terms = list(dict.fromkeys(rng.choices(vocab, k=rng.randint(2, 5))))
            kw = dict(limit=rng.randint(1, 12), kind=rng.choice([None, None, "note"]),
                      include_retracted=rng.random() < 0.5,
                      now_ms=ranking.ts_millis("2025-03-10T00:00:00.000Z"),
                      boost=rng.choice([0.0, 1.0, 4.0]))
            fast = search_query.query(index.conn, terms, prune=True, **kw)
            full = search_query.query(index.conn, terms, prune=False, **kw)
            assert fast == full, (terms, kw)
    finally:
        index.conn.close()
    assert sum(pruned) > 50, sum(pruned)  # the shortcut was taken, and agreed
    assert not all(pruned)       # and so was the fallback


# -- law: the index agrees with derive -----------------------------------------------------

OPS = st.lists(st.one_of(
    st.tuples(st.just("note"), st.sampled_from("abcde"), st.lists(st.sampled_from("abcde"),
                                                                 max_size=2)),
    st.tuples(st.just("obs"), st.sampled_from("pqr"), st.just([])),
    st.tuples(st.just("invalidate"), st.sampled_from("abcdepq"), st.just([])),
    st.tuples(st.just("tombstone"), st.sampled_from("abcdepq"), st.just([])),
    st.tuples(st.just("search"), st.just(""), st.just([])),
), max_size=14)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_index_agrees_with_derive(tmp_path_factory, monkeypatch, ops):
    base = tmp_path_factory.mktemp("law")
    os.chmod(base, 0o700)
    jj = J(base / "journal", monkeypatch)
    jj.note("seed", "word seed")
    for n, (op, target, deps) in enumerate(ops):
        when = f"2025-03-0{1 + n % 9}T00:00:00.000Z"
        if op == "note":
            try:
                jj.note(target, f"word note {target}", deps=tuple(deps), when=when)
            except Exception:
                pass  # an id already recorded or tombstoned: refused, as it should be
        elif op == "obs":
            with contextlib.suppress(errors.TombstonedError):
                jj.obs(target, f"word obs {target} {n}", when=when)
        elif op == "invalidate":
            with contextlib.suppress(errors.TombstonedError):
                jj.invalidate(target)
        elif op == "tombstone":
            jj.tombstone(target)
        else:
            jj.search("word")
    report = jj.search("word", include_retracted=True, limit=100)
    _, d = context.read_workspace(jj.ctx)
    want = {("entry", i): d.outcome[i] for i in d.visible_entry_ids()}
    want.update({("observation", i): None for i in d.visible_observation_ids()})
    got = {(h["type"], h["id"]): h["outcome"] for h in report["hits"]}
    assert got == want
    assert jj.index_n() == len(want)
    live = {(h["type"], h["id"]) for h in jj.search("word", limit=100)["hits"]}
    assert live == {k for k, v in want.items() if v in (None, "live")}


# -- the command line ----------------------------------------------------------------------

def test_cli_human_list_and_json(cli, root):
    env = {"AGENT_JOURNAL_NOW": "2025-03-10T10:00:00.000Z"}
    assert cli("record", "--kind", "decision", "--id", "d1", "--question", "Which queue?",
               "--chosen", "RabbitMQ for the migration", env=env).code == 0
    assert cli("record", "--kind", "finding", "--id", "f1", "--claim",
               "migration doubles latency", env=env).code == 0
    assert cli("record", "--kind", "note", "--id", "n1", "--text", "unrelated", env=env
               ).code == 0
    assert cli("invalidate", "f1", "--reason", "measured wrong").code == 0
    env["AGENT_JOURNAL_NOW"] = "2025-03-11T12:00:00.000Z"
    w = ln_idf(3, 2)
    human = cli("search", "migration", "--include-retracted", env=env)
    assert human.code == 0 and human.err == ""
    score = f"{expected([w], 26):8.3f}"
    assert human.out == (
        f"{score}  d1  entry/decision  2025-03-10T10:00:00.000Z\n"
        "          Which queue? RabbitMQ for the «migration»\n"
        f"{score}  f1  entry/finding  2025-03-10T10:00:00.000Z  [invalidated]\n"
        "          «migration» doubles latency\n")
    out = cli("search", "Migration", "--json", env=env)
    doc = out.json()
    assert list(doc) == ["query", "terms", "expansions", "unmatched", "thesaurusSha256",
                         "hits", "warnings", "unreadable", "malformed"]
    assert doc["expansions"] == {} and doc["unmatched"] == [] and doc["warnings"] == []
    assert doc["thesaurusSha256"] == EMPTY_SHA
    assert doc["query"] == "Migration" and doc["terms"] == ["migration"]
    assert doc["hits"] == [{
        "id": "d1", "type": "entry", "kind": "decision", "ts": "2025-03-10T10:00:00.000Z",
        "score": expected([w], 26), "outcome": "live", "terms": ["migration"],
        "snippet": "Which queue? RabbitMQ for the «migration»"}]
    assert cli("search", "nothing-like-it", env=env).out == (
        "no document holds: nothing like it\nno matches\n")


@pytest.mark.parametrize("args", [
    ["search"],
    ["search", "   "],
    ["search", "x", "--limit", "0"],
    ["search", "x", "--limit", "ten"],
    ["search", "x", "--limit"],
    ["search", "x", "--kind", ""],
    ["search", "x", "--kind", "a/b"],
    ["search", "x", "--include-retracted=yes"],
    ["search", "x", "--json", "true"],
    ["search", "x", "--workspace", "--json"],
])
def test_cli_usage_errors_exit_2(cli, args):
    result = cli(*args)
    assert result.code == 2, result
    assert result.out == ""


def test_cli_reports_damage_with_the_floor_warning(cli, root):
    assert cli("record", "--kind", "note", "--id", "n1", "--text", "fig").code == 0
    seg_dir = root / "workspaces" / "ws" / "segments"
    (seg_dir / "broken.sqlite").write_bytes(b"nope" * 100)
    result = cli("search", "fig", "--json")
    assert result.code == 0
    assert [h["id"] for h in result.json()["hits"]] == ["n1"]
    assert result.json()["unreadable"][0]["path"] == "workspaces/ws/segments/broken.sqlite"
    assert "floor, not a total" in result.err


@pytest.mark.parametrize("edit", [
    "UPDATE events SET subject = 'n2' WHERE type = 'tombstone'",
    "UPDATE events SET type = 'entry' WHERE type = 'tombstone'",
    "UPDATE events SET type = 'tombstone' WHERE subject = 'n2'",
])
@pytest.mark.parametrize("indexed_first", [True, False])
def test_cli_reports_a_row_whose_lookup_column_was_edited(cli, root, edit, indexed_first):
    """Issue 32: a tombstone row whose lookup column lies is malformed to every read;
    search reports it too, and hides (or shows) just what `show` does, never going by
    the column."""
    assert cli("record", "--kind", "note", "--id", "n1", "--text", "secret apple").code == 0
    assert cli("record", "--kind", "note", "--id", "n2", "--text", "other apple").code == 0
    assert cli("tombstone", "n1", "--reason", "held a secret").code == 0
    if indexed_first:  # the index already holds the tombstone's verdict
        assert [h["id"] for h in cli("search", "apple", "--json").json()["hits"]] == ["n2"]
    [segment] = (root / "workspaces" / "ws" / "segments").glob("*.sqlite")
    with contextlib.closing(sqlite3.connect(segment)) as conn:
        conn.execute(edit)
        conn.commit()
    shown = cli("show", "--json").json()
    assert len(shown["malformed"]) == 1
    assert shown["malformed"][0]["reason"] == "indexed columns do not match body"
    found = cli("search", "apple", "--json")
    assert found.code == 0
    assert found.json()["malformed"] == shown["malformed"]
    assert "1 malformed row(s)" in found.err and "floor, not a total" in found.err
    assert sorted(h["id"] for h in found.json()["hits"]) == \
        sorted(e["id"] for e in shown["entries"])
    human = cli("search", "apple")
    assert human.code == 0
    assert "1 malformed row(s)" in human.err and "floor, not a total" in human.err
    assert cli("search", "apple", "--json").json() == found.json()  # and again, unchanged


def test_cli_concurrent_first_searches_agree(cli, root):
    for i in range(20):
        assert cli("observe", "--kind", "tool_call", "--id", f"o{i}", "--tool", "Bash",
                   "--input", json.dumps({"command": f"make step{i % 3}"})).code == 0
    env = clean_env(AGENT_JOURNAL_ROOT=str(root), AGENT_JOURNAL_WORKSPACE="ws",
                    AGENT_JOURNAL_NOW="2025-03-10T10:00:00.000Z")
    procs = [subprocess.Popen([CLI, "search", "make step1", "--json", "--limit", "50"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(4)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert len({o[0] for o in outs}) == 1
    assert len(json.loads(outs[0][0])["hits"]) == 20


def _edit_and_append(segment: Path, edit_seq: int, old: str, new: str, extra: J,
                     extra_id: str) -> None:
    """One write that rewrites row `edit_seq` (a valid body: `old` becomes `new`) and
    appends the newest event of workspace `extra`, as a hand edit or a restore might."""
    from agent_journal.core import codec

    conn = sqlite3.connect(segment)
    body, digest = conn.execute("SELECT body, checksum FROM events WHERE seq = ?",
                                (edit_seq,)).fetchone()
    ev = codec.decode(body, digest)
    new_body = bytes(body).replace(old.encode(), new.encode())
    assert new_body != bytes(body)
    new_digest = codec.checksum(new_body)
    assert codec.decode(new_body, new_digest).event_id == ev.event_id
    (other,) = Root.open(str(extra.root), create=False).workspace(extra.ws).events_about(
        extra_id)
    with conn:
        conn.execute("UPDATE events SET body = ?, checksum = ? WHERE seq = ?",
                     (new_body, new_digest, edit_seq))
        insert_events(conn, [other])
    conn.close()


@pytest.mark.parametrize("where", ["last row", "older row, file replaced"])
def test_a_row_changed_in_place_by_a_write_that_also_appends_is_noticed(j, tmp_path,
                                                                          monkeypatch, where):
    j.obs("o1", "walrus first", when="2025-03-01T00:00:00.000Z")
    j.obs("o2", "walrus second", when="2025-03-02T00:00:00.000Z")
    assert sorted(j.ids("walrus")) == ["o1", "o2"]
    other = J(tmp_path / "other", monkeypatch)
    other.obs("o3", "penguin third", when="2025-03-03T00:00:00.000Z")
    (seg,) = j.segments()
    if where == "last row":
        _edit_and_append(seg, 2, "walrus second", "narwhal second", other, "o3")
    else:
        # Edited in a copy that then replaces the segment (rsync, a restore from backup).
        copy = tmp_path / "copy.sqlite"
        copy.write_bytes(seg.read_bytes())
        _edit_and_append(copy, 1, "walrus first", "narwhal first", other, "o3")
        os.replace(copy, seg)
    assert j.ids("penguin") == ["o3"]
    edited = "o2" if where == "last row" else "o1"
    assert j.ids("narwhal") == [edited]
    assert j.ids("walrus") == ["o1" if edited == "o2" else "o2"]


def test_an_index_that_cannot_be_written_says_why(j, monkeypatch):
    # A full disk makes every build fail the same way; "the segments kept changing" would
    # send the user looking in the wrong place.
    j.note("n1", "walrus")

    def full(ws, path):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(search_index, "_build", full)
    with pytest.raises(errors.JournalError) as caught:
        j.search("walrus")
    assert "database or disk is full" in caught.value.message
    assert "kept changing" not in caught.value.message


# -- the thesaurus, the fallback, the weak-query log (issue 34) ------------------------------

def _thesaurus(j: J, text: str) -> None:
    j.root.mkdir(mode=0o700, exist_ok=True)
    (j.root / "thesaurus.json").write_text(text)


def test_thesaurus_parse_canonical_form_and_expansion():
    from agent_journal.core import thesaurus as th

    a, problem = th.parse(b'{"Firmware": ["fwupd", "UEFI  capsule", "fwupd"], "x": []}')
    assert problem is None and a == {"firmware": ["fwupd", "uefi capsule"]}
    b, _ = th.parse(b'{"firmware": ["uefi-capsule", "FWUPD"]}')
    assert th.sha256(a) == th.sha256(b) != th.sha256({})  # same expansions, same hash
    assert th.sha256({}) == EMPTY_SHA
    for bad in (b'{"a": ["b"], "a": ["c"]}', b'{"two words": ["b"]}', b'{"a": "b"}',
                b'{"a": ["!!"]}', b'["a"]', b'{"a": [NaN]}', b'{', b'\xff{}'):
        assert th.parse(bad)[0] == {} and th.parse(bad)[1], bad
    searched, added = th.expand(["login", "page"], {"login": ["oauth callback", "page"]})
    assert searched == ["login", "page", "oauth", "callback"]
    assert added == {"login": ["oauth", "callback"]}
    many = {"w": [f"t{i}" for i in range(40)]}
    searched, added = th.expand(["w"], many)
    assert len(searched) == ranking.MAX_TERMS and len(added["w"]) == ranking.MAX_TERMS - 1


def test_a_casual_word_finds_documents_holding_only_its_canonical_term(j):
    j.note("n1", "fwupd refused the capsule update")
    j.note("n2", "lunch order for friday")
    assert j.ids("firmware") == []
    _thesaurus(j, '{"firmware": ["fwupd"]}')
    report = j.search("firmware")
    assert [h["id"] for h in report["hits"]] == ["n1"]
    assert report["expansions"] == {"firmware": ["fwupd"]}
    assert report["unmatched"] == ["firmware"]
    assert report["hits"][0]["terms"] == ["fwupd"]
    assert report["hits"][0]["snippet"] == "«fwupd» refused the capsule update"
    # Additive: the casual word itself still finds what holds it, ranked with the rest.
    j.note("n3", "firmware of the dock")
    assert sorted(j.ids("firmware")) == ["n1", "n3"]


def test_an_edit_to_the_thesaurus_changes_the_next_answer_and_its_hash(j):
    j.note("n1", "fwupd refused the capsule update")
    j.note("n2", "the bios setup screen")
    _thesaurus(j, '{"firmware": ["fwupd"]}')
    first = j.search("firmware")
    _thesaurus(j, '{"firmware": ["bios"]}')
    second = j.search("firmware")
    assert [h["id"] for h in first["hits"]] == ["n1"]
    assert [h["id"] for h in second["hits"]] == ["n2"]
    assert first["thesaurusSha256"] != second["thesaurusSha256"]
    assert EMPTY_SHA not in (first["thesaurusSha256"], second["thesaurusSha256"])
    (j.root / "thesaurus.json").unlink()
    third = j.search("firmware")
    assert third["hits"] == [] and third["thesaurusSha256"] == EMPTY_SHA


def test_a_broken_thesaurus_counts_as_empty_warns_and_doctor_reports_it(j, cli):
    from agent_journal.agents import doctor

    j.note("n1", "fwupd refused the capsule update")
    _thesaurus(j, '{"firmware": ["fwupd"], "firmware": ["bios"]}')
    report = j.search("firmware")
    assert report["hits"] == [] and report["thesaurusSha256"] == EMPTY_SHA
    assert len(report["warnings"]) == 1 and "duplicate key" in report["warnings"][0]
    result = cli("search", "firmware")
    assert result.code == 0 and "broken" in result.err
    checks = {c.name: c for c in doctor.run_checks(project=str(j.root), root=str(j.root))}
    assert not checks["thesaurus"].ok and "duplicate key" in checks["thesaurus"].detail
    _thesaurus(j, '{"firmware": ["fwupd"]}')
    checks = {c.name: c for c in doctor.run_checks(project=str(j.root), root=str(j.root))}
    assert checks["thesaurus"].ok


def test_alias_commands_round_trip(cli, root):
    assert cli("record", "--kind", "note", "--id", "n1", "--text", "OAuth callback fails"
               ).code == 0
    added = cli("alias", "add", "Login", "oauth-callback", "SSO", "--json")
    assert added.code == 0, added.err
    assert added.json()["aliases"] == {"login": ["oauth callback", "sso"]}
    path = root / "thesaurus.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text() == '{\n  "login": ["oauth callback", "sso"]\n}\n'
    listed = cli("alias", "list", "--json").json()
    assert listed["aliases"] == added.json()["aliases"]
    from agent_journal.core import thesaurus as th

    assert listed["thesaurusSha256"] == th.sha256(listed["aliases"])
    assert listed["thesaurusSha256"] == cli("search", "login", "--json").json()[
        "thesaurusSha256"]
    assert cli("alias", "list").out == "login: oauth callback, sso\n"
    assert [h["id"] for h in cli("search", "login", "--json").json()["hits"]] == ["n1"]
    assert cli("alias", "add", "login", "sso").code == 0  # already there: nothing new
    assert cli("alias", "remove", "login", "SSO").code == 0
    assert cli("alias", "list", "--json").json()["aliases"] == {"login": ["oauth callback"]}
    assert cli("alias", "remove", "login").code == 0
    assert cli("alias", "list", "--json").json()["aliases"] == {}
    assert cli("search", "login", "--json").json()["thesaurusSha256"] == EMPTY_SHA
    # Usage errors (exit 2) and refusals (exit 1) write nothing.
    before = path.read_bytes()
    for args, code in ((["alias", "add", "two words", "x"], 2), (["alias", "add", "w"], 2),
                       (["alias", "add", "w", "!!"], 2), (["alias", "add", "w", "--json", "x"], 2),
                       (["alias", "remove", "nothere"], 1),
                       (["alias", "remove", "", "x"], 2)):
        result = cli(*args)
        assert result.code == code and result.out == "", (args, result)
        assert path.read_bytes() == before
    path.write_text("{oops")
    assert cli("alias", "add", "w", "x").code == 1 and path.read_text() == "{oops"
    assert "broken" in cli("alias", "list").err


def test_a_word_that_occurs_nowhere_does_not_hide_the_others(j, cli):
    j.note("n1", "clock drift between the runners")
    j.note("n2", "the clock in the status bar")
    j.note("n3", "unrelated text")
    report = j.search("clock skew")
    assert sorted(h["id"] for h in report["hits"]) == ["n1", "n2"]
    assert report["unmatched"] == ["skew"]
    assert all(h["terms"] == ["clock"] for h in report["hits"])
    # Documents matching more (and rarer) of the words rank first.
    assert j.ids("clock drift skew")[0] == "n1"
    text = cli("search", "clock skew", env={"AGENT_JOURNAL_NOW": NOW}).out
    assert text.splitlines()[0] == "no document holds: skew"
    assert "«clock»" in text


def _miss_log(j: J, on: bool) -> None:
    j.root.mkdir(mode=0o700, exist_ok=True)
    (j.root / "config.json").write_text(json.dumps({"search": {"missLog": on}}))


def _segment_bytes(j: J) -> dict[str, bytes]:
    folder = j.root / "workspaces" / j.ws / "segments"
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_the_miss_log_records_weak_queries_only_when_on(j, cli):
    j.note("n1", "the deploy script needs the staging token")
    for i in range(8):
        j.note(f"pad{i}", f"filler note number {i}")
    before = _segment_bytes(j)
    assert j.search("kubernetes")["hits"] == []  # off (no config): nothing is recorded
    _miss_log(j, False)
    assert j.search("kubernetes")["hits"] == []
    assert _segment_bytes(j) == before
    assert cli("search", "--misses", "--json").json()["misses"] == []
    _miss_log(j, True)
    strong = j.search("deploy staging")
    assert strong["hits"][0]["score"] >= search_misses.MISS_SCORE
    weak = j.search("Kubernetes  pods")
    assert weak["hits"] == []
    j.search("kubernetes pods", now="2025-03-10T13:00:00.000Z")
    j.search("filler", now="2025-03-10T14:00:00.000Z")  # held by 8 of 9: weak, not empty
    listed = cli("search", "--misses", "--json", env={"AGENT_JOURNAL_NOW": NOW}).json()
    assert listed["missLog"] is True
    assert [(m["query"], m["count"]) for m in listed["misses"]] == [
        ("filler", 1), ("kubernetes pods", 2)]
    assert listed["misses"][0]["bestScore"] == j.search("filler")["hits"][0]["score"] or \
        listed["misses"][0]["bestScore"] < search_misses.MISS_SCORE
    assert all(i.startswith("search-miss-") for m in listed["misses"] for i in m["ids"])
    # A logged query never finds its own record.
    assert j.search("kubernetes")["hits"] == []
    text = cli("search", "--misses").out.splitlines()
    assert text[0].split()[0] == "2" or text[0].split()[0] == "1"
    assert "kubernetes pods" in "\n".join(text)
    assert cli("search", "x", "--misses").code == 2


def test_a_logged_query_is_redacted_and_erased_by_tombstone_and_compact(j, cli):
    _miss_log(j, True)
    j.note("n1", "something else entirely")
    secret = "sk-ant-api03-" + "Q" * 40
    j.search(f"zanzibarquux {secret}")
    listed = cli("search", "--misses", "--json").json()["misses"]
    assert len(listed) == 1 and "zanzibarquux" in listed[0]["query"]
    assert secret not in listed[0]["query"]

    def holders(needle: bytes) -> list[str]:
        return [str(p) for p in j.root.rglob("*") if p.is_file() and needle in p.read_bytes()]

    assert holders(b"zanzibarquux") and not holders(secret.encode())
    (obs_id,) = listed[0]["ids"]
    assert cli("tombstone", obs_id, "--reason", "private query").code == 0
    assert cli("search", "--misses", "--json").json()["misses"] == []
    assert cli("compact", "--apply").code == 0
    assert holders(b"zanzibarquux") == []


README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_tour_search_finds_what_it_shows(cli, tmp_path):
    """The tour's commands, run as written; each `search` line of it finds the id its
    comment names."""
    import re
    import shlex

    text = README.read_text()
    tour = text[text.index("## A tour"):text.index("### Auditing")]
    blocks = re.findall(r"```sh\n(.*?)```", tour, flags=re.S)
    commands = []
    for block in blocks:
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("  #")[0].strip()
            if line.startswith("agent-journal "):
                commands.append(line)
    searches = [c for c in commands if c.startswith("agent-journal search ")]
    assert searches
    (tmp_path / "test-output.txt").write_text("FAILED tests/test_sync.py\n")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        for command in commands:
            args = shlex.split(command)[1:]
            if args[0] == "search":
                continue
            assert cli(*args).code == 0, command
        for command in searches:
            line = next(line for line in tour.splitlines() if line.startswith(command))
            shown = re.findall(r"finds ([\w-]+)", line)
            assert shown, line
            doc = cli(*shlex.split(command)[1:], "--json").json()
            assert {h["id"] for h in doc["hits"]} >= set(shown), (command, doc)
    finally:
        os.chdir(cwd)
