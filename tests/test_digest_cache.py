"""The digest's cache: a digest read from it is the digest read from the segments,
however the segments moved since (appends, new and vanished segments, edits,
damage), and it never outlives a compaction."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from audit_scenario import SECRET, at, build_scenario, damage, ev, segments_dir
from conftest import all_bytes_under
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agent_journal.core.codec import PeekOnlyEvent
from agent_journal.core.observation_fold import latest_wins
from agent_journal.core.recovery.facts import event_facts
from agent_journal.ops import digest
from agent_journal.storage import digest_cache, digest_point
from agent_journal.storage.cache import cache_lock_path
from agent_journal.storage.locks import FileLock
from agent_journal.storage.root import Root
from agent_journal.storage.segment_reader import read_segment
from agent_journal.storage.workspace import ENV_SEGMENT_MAX_BYTES, Workspace

WS = "ws"


def workspace(root: Path) -> Workspace:
    return Root.open(str(root), create=True).workspace(WS)


def direct(ws: Workspace, session: str | None = None) -> tuple[str, dict]:
    result, d, _ = digest._read(ws, cached=False)
    return digest.build(d, workspace=ws.name, session=session, max_chars=4000,
                        damage={"unreadable": result.unreadable, "malformed": result.malformed})


def cached(ws: Workspace, session: str | None = None) -> tuple[str, dict]:
    result, d, used = digest._read(ws, cached=True)
    assert used, "the cache was not used"
    return digest.build(d, workspace=ws.name, session=session, max_chars=4000,
                        damage={"unreadable": result.unreadable, "malformed": result.malformed})


def calls(start: int, n: int, session: str = "s1") -> list:
    out = []
    for i in range(start, start + n):
        tool = ("Bash", "Edit", "Write", "Read")[i % 4]
        data = {"tool": tool, "callId": f"c{i}", "status": "started",
                "input": {"command": f"run {i}"} if tool == "Bash" else {"file_path": f"f{i}.py"}}
        out.append(ev("observation", "tool_call", f"o{i}", at(i), data, session=session))
        if i % 5:
            done = dict(data, status="error" if i % 7 == 0 else "ok", exitCode=i % 7 == 0)
            out.append(ev("observation", "tool_call", f"o{i}", at(i + 1), done, session=session))
    return out


def test_first_and_later_digests_equal_the_direct_one(root):
    build_scenario(root)
    ws = workspace(root)
    first = cached(ws)
    assert os.path.exists(digest_cache.path_of(ws))
    assert first == direct(ws) == cached(ws)


def test_the_cache_follows_appends_and_new_segments(root, monkeypatch):
    ws = workspace(root)
    ws.append(calls(0, 30))
    assert cached(ws) == direct(ws)
    ws.append(calls(30, 20, session="s2"))
    assert cached(ws) == direct(ws)
    assert cached(ws, session="s2") == direct(ws, session="s2")
    monkeypatch.setenv(ENV_SEGMENT_MAX_BYTES, "2000")
    ws.append(calls(50, 10))
    ws.append(calls(60, 10))
    assert len(ws.segment_paths()) > 1
    assert cached(ws) == direct(ws)


def test_an_edited_row_is_seen_even_after_it_was_cached(root):
    build_scenario(root)
    ws = workspace(root)
    cached(ws)
    damage(root)  # flips a byte in a cached row and adds an unreadable segment
    markdown, report = cached(ws)
    assert (markdown, report) == direct(ws)
    assert len(report["malformed"]) == 1 and len(report["unreadable"]) == 1
    # The unreadable segment is never cached: it is reported every time.
    assert cached(ws) == direct(ws)


def many_segments(root: Path, monkeypatch) -> Workspace:
    """60 tool calls over several small segments."""
    monkeypatch.setenv(ENV_SEGMENT_MAX_BYTES, "3000")
    ws = workspace(root)
    for start in range(0, 60, 10):
        ws.append(calls(start, 10))
    assert len(ws.segment_paths()) >= 4
    return ws


def test_a_removed_row_or_segment_drops_what_was_cached(root, monkeypatch):
    ws = many_segments(root, monkeypatch)
    cached(ws)
    first, *rest = ws.segment_paths()
    conn = sqlite3.connect(rest[0])
    conn.execute("DELETE FROM events WHERE seq = (SELECT min(seq) FROM events)")
    conn.commit()
    conn.close()
    os.unlink(first)
    assert cached(ws) == direct(ws)


def test_a_cache_that_cannot_be_kept_is_not_needed(root):
    build_scenario(root)
    ws = workspace(root)
    (root / "cache").mkdir(mode=0o700, exist_ok=True)
    (root / "cache" / "digest").write_text("not a folder")
    assert digest_cache.read(ws, event_facts) is None
    markdown, report, _ = digest.digest(_ctx(root), max_chars=4000)
    assert (markdown, report) == direct(ws)


def test_a_damaged_cache_file_is_rebuilt(root):
    build_scenario(root)
    ws = workspace(root)
    cached(ws)
    Path(digest_cache.path_of(ws)).write_bytes(b"garbage" * 500)
    assert cached(ws) == direct(ws)


def test_cached_observations_carry_the_facts_a_direct_read_computes(root):
    """The cache keeps, per observation and segment, the fold of its events' recovery facts
    in place of its bodies; it is the fold of the facts computed from the whole events, so
    nothing needs fetching (or folding again) to render."""
    ws = workspace(root)
    ws.append(calls(0, 12))
    digest._read(ws, cached=True)  # fills the cache
    _, d, used = digest._read(ws, cached=True)
    assert used
    whole: dict[str, list] = {}
    for e in sorted(ws.read().events, key=lambda e: (e.ts, e.event_id)):
        whole.setdefault(e.id, []).append(e)
    assert d.observation_events.keys() == whole.keys()
    for obs_id, (e,) in d.observation_events.items():
        assert type(e) is PeekOnlyEvent
        first, *_, last = [whole[obs_id][0], *whole[obs_id]]
        facts = latest_wins(event_facts(x.kind, x.data) for x in whole[obs_id])
        assert (e.ts, e.event_id) == (first.ts, first.event_id)
        assert e.peek == (first.kind, first.session, facts, last.ts, last.event_id)


def _leak(second: int) -> list:
    """A call, a prompt and a finding holding SECRET: all three kinds of row the cache keeps
    (a span's facts, the fold kept, an event kept whole)."""
    return [ev("observation", "tool_call", "leak", at(second),
               {"tool": "Bash", "callId": "cl", "status": "ok", "exitCode": 0,
                "input": {"command": f"export KEY={SECRET}"}, "output": f"{SECRET} set"},
               session="s1"),
            _said(second + 1, f"the key is {SECRET}"),
            ev("entry", "finding", "leaked", at(second + 2),
               {"fields": {"claim": f"the key {SECRET} works"}}, session="s1")]


def _kept_rows(ws: Workspace) -> dict[str, list]:
    """What the cache keeps of each segment (by file name): its mark, and its rows."""
    conn = sqlite3.connect(digest_cache.path_of(ws))
    try:
        return {name: [(high, rows, last)] + [
                    conn.execute(f"SELECT * FROM {table} WHERE segment = ? ORDER BY 2",
                                 (segment,)).fetchall()
                    for table in ("calls", "others", "malformed")]
                for segment, name, high, rows, last in conn.execute(
                    "SELECT id, name, high, rows, last FROM segments").fetchall()}
    finally:
        conn.close()


def _holding(ws: Workspace, text: str) -> set[str]:
    """The segments (file names) with a row whose body holds `text`."""
    found = set()
    for path in ws.segment_paths():
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            if conn.execute("SELECT 1 FROM events WHERE instr(body, ?) > 0 LIMIT 1",
                            (text.encode(),)).fetchone():
                found.add(os.path.basename(path))
        finally:
            conn.close()
    return found


def test_compaction_keeps_the_cache_of_the_segments_it_left_alone_and_nothing_it_purged(
        cli, root, monkeypatch):
    """A warm cache over a purged secret (in one segment) and over other segments: after
    tombstones and `compact --apply`, the rows kept for every segment compaction did not
    change are still there, as they were; nothing of the changed segments or of the fold
    kept is; no file under the root holds a byte of the secret; and the next digest reads
    only the changed segments again, and is the digest of the segments."""
    monkeypatch.setenv(ENV_SEGMENT_MAX_BYTES, "3000")
    ws = workspace(root)
    for start in range(0, 30, 10):
        ws.append(calls(start, 10))
    ws.append(_leak(40))
    for start in range(50, 80, 10):
        ws.append(calls(start, 10))
    (leaked,) = _holding(ws, SECRET)
    assert folded(ws) == direct(ws) and SECRET in folded(ws)[0]
    for target in ("leak", "p41", "leaked"):
        assert cli("tombstone", target, "--reason", "a secret").code == 0
    assert folded(ws) == direct(ws) and SECRET not in folded(ws)[0]
    assert SECRET.encode() in all_bytes_under(root / "cache" / "digest")
    before = _kept_rows(ws)
    changed = {leaked} | _holding(ws, '"type":"tombstone"')
    assert len(before) >= 6 and len(changed) == 2
    # Bytes of the secret in the file's free space, as a page SQLite rebuilt while rows
    # moved can leave them: deleting rows alone would not reach them.
    conn = sqlite3.connect(digest_cache.path_of(ws))
    with conn:
        conn.execute("PRAGMA secure_delete = OFF")
        conn.execute("CREATE TABLE moved (copy TEXT)")
        conn.executemany("INSERT INTO moved VALUES (?)", [(SECRET * 40,)] * 20)
    conn.execute("DROP TABLE moved")
    conn.close()

    assert cli("compact", "--apply").code == 0
    assert SECRET.encode() not in all_bytes_under(root)
    assert os.stat(digest_cache.path_of(ws)).st_mode & 0o777 == 0o600  # written afresh
    assert _kept_state(ws) is None
    after = _kept_rows(ws)
    assert after == {name: rows for name, rows in before.items() if name not in changed}

    read: list[str] = []
    real = digest_cache.read_segment

    def reading(path, **kwargs):
        if not kwargs.get("after"):
            read.append(os.path.basename(path))
        return real(path, **kwargs)

    monkeypatch.setattr(digest_cache, "read_segment", reading)
    assert folded(ws) == direct(ws)
    assert sorted(read) == sorted(changed)
    monkeypatch.undo()
    assert cached(ws) == direct(ws)
    os.unlink(digest_cache.path_of(ws))
    assert folded(ws) == direct(ws)
    assert SECRET.encode() not in all_bytes_under(root)


@settings(max_examples=10, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(["1500", "4000"]),
       st.lists(st.tuples(st.sampled_from(["calls", "calls", "copy", "tombstone", "digest"]),
                          st.integers(0, 9), st.integers(0, 300),
                          st.sampled_from(["started", "ok", "error"])),
                min_size=2, max_size=10))
def test_the_digest_after_a_compaction_is_the_digest_of_the_segments(tmp_path_factory,
                                                                     max_bytes, steps):
    """Calls over several segments (copied into others, finished later), tombstones, and
    digests keeping the cache warm in between: after `compact --apply`, the digest from
    what the cache kept is the digest of the segments read afresh, and of a cache filled
    from nothing; no file under the root holds the command of a call purged."""
    from agent_journal.ops import compact

    base = tmp_path_factory.mktemp("compacted")
    os.chmod(base, 0o700)
    root = base / "journal"
    ws = workspace(root)
    saved = os.environ.get(ENV_SEGMENT_MAX_BYTES)
    os.environ[ENV_SEGMENT_MAX_BYTES] = max_bytes
    purged = set()
    try:
        for step, obs, second, status in steps:
            if step == "digest":
                assert folded(ws) == direct(ws)
            elif step == "tombstone":
                ws.append([ev("tombstone", "tombstone", f"o{obs}", at(second),
                              {"reason": "held a token"})])
                purged.add(obs)
            else:
                one = event_of(obs, second, status)
                ws.append([one])
                if step == "copy":
                    ws.append([one])  # the same event again, maybe in another segment
        assert folded(ws) == direct(ws)
        compact.compact(_ctx(root), entry_ttl_days=None, observation_ttl_days=None,
                        apply=True)
        everything = all_bytes_under(root)
        assert not [obs for obs in purged if f"tests/t{obs}.py".encode() in everything]
        assert folded(ws) == direct(ws)
        assert through_cache(ws) == direct(ws)
        os.unlink(digest_cache.path_of(ws))
        assert folded(ws) == direct(ws)
    finally:
        if saved is None:
            os.environ.pop(ENV_SEGMENT_MAX_BYTES, None)
        else:
            os.environ[ENV_SEGMENT_MAX_BYTES] = saved


def _ctx(root: Path):
    from agent_journal.ops import context

    return context.Context(str(root), WS, None)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(1, 8), st.sampled_from(["s1", "s2"]),
                          st.booleans()), min_size=1, max_size=6))
def test_any_sequence_of_appends_and_digests_agrees(tmp_path_factory, steps):
    root = tmp_path_factory.mktemp("cache")
    ws = workspace(root)
    for start, n, session, tombstone in steps:
        ws.append(calls(start, n, session=session))
        if tombstone:
            ws.append([ev("tombstone", "tombstone", f"o{start}", at(start + 2),
                          {"reason": "held a token"})])
        assert cached(ws) == direct(ws)
        assert cached(ws, session="s2") == direct(ws, session="s2")
    assert segments_dir(root, WS).exists()


def test_a_digest_does_not_wait_long_on_another_filling_the_cache(root, monkeypatch):
    build_scenario(root)
    ws = workspace(root)
    monkeypatch.setattr(digest_cache, "LOCK_WAIT_S", 0.2)
    with FileLock(cache_lock_path(ws.root, digest_cache.AREA, WS)):
        assert digest_cache.read(ws, event_facts) is None
        markdown, report, _ = digest.digest(_ctx(root), max_chars=4000)
    assert (markdown, report) == direct(ws)
    assert cached(ws) == direct(ws)


def test_a_fill_stopped_part_way_keeps_the_segments_it_finished(root, monkeypatch):
    ws = many_segments(root, monkeypatch)
    real = read_segment
    seen: list[str] = []

    def stop_at_the_third(path, **kwargs):
        seen.append(path)
        if len(seen) == 3:
            raise KeyboardInterrupt  # the hook's time limit, say
        return real(path, **kwargs)

    monkeypatch.setattr(digest_cache, "read_segment", stop_at_the_third)
    try:
        digest_cache.read(ws, event_facts)
    except KeyboardInterrupt:
        pass
    monkeypatch.setattr(digest_cache, "read_segment", real)
    conn = sqlite3.connect(digest_cache.path_of(ws))
    finished = conn.execute("SELECT count(*) FROM segments").fetchone()[0]
    conn.close()
    assert finished == 2
    assert cached(ws) == direct(ws)


APPENDER = r"""
import os, sys
from agent_journal.ops import context
from agent_journal.ops import writes
root, stop = sys.argv[1:3]
ctx = context.Context(root, "ws", session="w")
i = 0
while not os.path.exists(stop):
    writes.observe(ctx, kind="tool_call", obs_id=f"w{i}", tool="Edit", call_id=str(i),
                    input_value={"file_path": f"f{i % 7}.py"}, output=None,
                    status="started" if i % 3 else "ok", exit_code=None, duration_ms=None)
    i += 1
"""


def test_digests_while_a_writer_appends_agree_with_a_direct_read(root, tmp_path, monkeypatch):
    """A real process appends while digests fill and follow the cache; once it
    stops, the cached digest is the direct one, and every digest on the way
    counted at least what the previous one did."""
    import subprocess
    import sys
    import time

    from conftest import clean_env

    monkeypatch.setenv(ENV_SEGMENT_MAX_BYTES, "20000")  # rotations during the run
    ws = workspace(root)
    ws.append(calls(0, 20))
    stop = tmp_path / "stop"
    env = clean_env(AGENT_JOURNAL_SEGMENT_MAX_BYTES="20000")
    writer = subprocess.Popen([sys.executable, "-c", APPENDER, str(root), str(stop)], env=env)
    try:
        seen = uses = 0
        started = time.monotonic()
        # At least 6 s of digests, and on until the writer has appended enough to rotate
        # a segment and the cache has served: a loaded machine may start the writer late
        # or schedule it seldom (bounded, so a writer that never writes fails).
        while time.monotonic() - started < 6 or not (
                seen > 20 and uses > 0 and len(ws.segment_paths()) > 1):
            assert time.monotonic() - started < 300, (seen, uses, ws.segment_paths())
            # While the writer runs, a digest may read past the cache (its lock busy, a
            # segment changing under it); it must still agree, and the cache be used.
            result, d, used = digest._read(ws, cached=True)
            uses += used
            _, report = digest.build(d, workspace=ws.name, session=None, max_chars=4000,
                                     damage={"unreadable": result.unreadable,
                                             "malformed": result.malformed})
            count = report["notShown"].get("recentActivity", 0) + len(report["recentActivity"])
            assert count >= seen
            seen = count
    finally:
        stop.touch()
        assert writer.wait(timeout=30) == 0
    assert seen > 20 and uses > 0
    assert len(ws.segment_paths()) > 1
    assert cached(ws) == direct(ws)


def through_cache(ws: Workspace, session: str | None = None) -> tuple[str, dict]:
    """The digest through the cache, or through the segments where it cannot serve."""
    result, d, _ = digest._read(ws, cached=True)
    return digest.build(d, workspace=ws.name, session=session, max_chars=4000,
                        damage={"unreadable": result.unreadable, "malformed": result.malformed})


def event_of(obs: int, second: int, status: str) -> object:
    data = {"tool": "Bash", "callId": f"c{obs}", "status": status,
            "input": {"command": f"pytest tests/t{obs}.py"}}
    if status != "started":
        data.update(exitCode=0 if status == "ok" else 1,
                    output="3 passed in 0.1s" if status == "ok" else "1 failed in 0.1s")
    return ev("observation", "tool_call", f"o{obs}", at(second), data,
              session=f"s{obs % 2 + 1}")


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from([None, "1500", "5000"]),
       st.lists(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 300),
                                   st.sampled_from(["started", "ok", "error"]),
                                   st.sampled_from(["", "", "", "copy", "tombstone"])),
                         min_size=1, max_size=5), min_size=1, max_size=6))
def test_a_digest_from_kept_spans_is_the_digest_of_a_full_rebuild(tmp_path_factory, max_bytes,
                                                                  appends):
    """Observations whose events arrive in several appends, out of (ts) order, across
    segment boundaries, copied into another segment, or tombstoned after a digest: the
    digest folded from the spans kept so far equals, byte for byte, the digest of the
    segments read afresh (and of a cache rebuilt from nothing)."""
    root = tmp_path_factory.mktemp("spans")
    ws = workspace(root)
    saved = os.environ.get(ENV_SEGMENT_MAX_BYTES)
    if max_bytes is not None:
        os.environ[ENV_SEGMENT_MAX_BYTES] = max_bytes
    try:
        for batch in appends:
            events = []
            for obs, second, status, extra in batch:
                one = event_of(obs, second, status)
                events.append(one)
                if extra == "tombstone":
                    events.append(ev("tombstone", "tombstone", f"o{obs}", at(second + 1),
                                     {"reason": "held a token"}))
            ws.append(events)
            for (_, _, _, extra), one in zip(batch, [e for e in events if e.type != "tombstone"],
                                             strict=True):
                if extra == "copy":
                    ws.append([one])  # the same event again, maybe in another segment
            for session in (None, "s2"):
                assert through_cache(ws, session) == direct(ws, session=session)
        os.unlink(digest_cache.path_of(ws))
        assert through_cache(ws) == direct(ws)
    finally:
        if saved is None:
            os.environ.pop(ENV_SEGMENT_MAX_BYTES, None)
        else:
            os.environ[ENV_SEGMENT_MAX_BYTES] = saved


def test_a_tombstone_after_a_warm_digest_hides_its_target_at_once(root):
    ws = workspace(root)
    ws.append([event_of(i, 10 * i, "ok") for i in range(6)])
    ws.append([event_of(6, 70, "started"), event_of(7, 80, "error")])
    cached(ws)
    markdown, report = cached(ws)  # warm: everything comes from kept spans
    assert "tests/t7.py" in markdown and "o7" in str(report)
    ws.append([ev("tombstone", "tombstone", "o7", at(90), {"reason": "held a token"})])
    markdown, report = cached(ws)
    assert "tests/t7.py" not in markdown and "o7" not in str(report)
    assert (markdown, report) == direct(ws)


def test_spans_that_interleave_across_segments_are_read_from_the_segments(root, monkeypatch):
    """An observation's events split over two segments so that neither segment's span
    comes before the other's: the spans cannot be merged, and the digest reads the
    segments instead (and is still the same digest)."""
    monkeypatch.setenv(ENV_SEGMENT_MAX_BYTES, "1500")
    ws = workspace(root)
    ws.append([event_of(1, 10, "started"), event_of(1, 30, "ok")])
    while len(ws.segment_paths()) < 2:
        ws.append([event_of(9, 5, "ok")])
    ws.append([event_of(1, 20, "error")])
    assert digest_cache.read(ws, event_facts) is None
    assert not digest._read(ws, cached=True)[2]
    assert through_cache(ws) == direct(ws)


def test_a_copy_of_an_observations_first_event_in_a_later_segment(root, monkeypatch):
    """Both segments' spans start at the same event: the shorter one (the copy) merges
    first, whatever order the segments were read in."""
    monkeypatch.setenv(ENV_SEGMENT_MAX_BYTES, "1500")
    ws = workspace(root)
    first = event_of(1, 10, "started")
    ws.append([first, event_of(1, 20, "error")])
    while len(ws.segment_paths()) < 2:
        ws.append([event_of(9, 5, "ok")])
    ws.append([first])
    assert cached(ws) == direct(ws)
    assert cached(ws) == direct(ws)


# -- the digest's fold kept at a verified point -------------------------------------------

def folded(ws: Workspace) -> tuple[str, dict]:
    """The digest of every session as the digest and the SessionStart hook read it: the
    calls folded on from the fold kept in the cache. The cache may decline only where
    its design says so: an observation whose spans in two segments interleave."""
    done = digest._cached_digest(ws, max_chars=4000)
    if done is None:
        assert _spans_interleave(ws), "the cache did not serve"
        return direct(ws)
    return done[0], done[1]


def _spans_interleave(ws: Workspace) -> bool:
    spans: dict[str, list[tuple[str, str]]] = {}
    for path in ws.segment_paths():
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            for obs, first, last in conn.execute(
                    "SELECT subject, min(ts), max(ts) FROM events "
                    "WHERE type = 'observation' GROUP BY subject"):
                spans.setdefault(obs, []).append((first, last))
        finally:
            conn.close()
    for held in spans.values():
        held.sort()
        if any(later[0] <= earlier[1] for earlier, later in zip(held, held[1:], strict=False)):
            return True
    return False


def _kept_state(ws: Workspace) -> bytes | None:
    conn = sqlite3.connect(digest_cache.path_of(ws))
    try:
        row = conn.execute("SELECT value FROM state WHERE key = 'digest'").fetchone()
    finally:
        conn.close()
    return None if row is None else bytes(row[0])


def _said(i: int, text: str, session: str = "s1") -> object:
    return ev("observation", "prompt", f"p{i}", at(i), {"text": text}, session=session)


MOVES = st.lists(st.tuples(
    st.sampled_from(["calls", "finish", "old finish", "tombstone", "entry", "earlier",
                     "prompt", "segment", "flip", "edit last", "replace", "drop"]),
    st.integers(1, 12)), min_size=1, max_size=7)


def _rewritten(body: bytes, digest_: str, n: int) -> tuple[bytes, str]:
    """A row's body and checksum with what the digest shows of its event changed (a
    call's command and outcome, a prompt's text, an entry's claim): still a sound row."""
    from agent_journal.core import codec
    from agent_journal.core.model import Event

    try:
        e = codec.decode(body, digest_)
    except codec.MalformedEvent:
        return body, digest_  # damaged by an earlier move: left as it is
    edited = {"input": {"command": f"edited {n}"}, "tool": "Bash", "status": "error",
              "exitCode": 3, "output": f"edited failure {n}"} if "input" in e.data else {
        "text": f"edited {n}"} if "text" in e.data else {
        "fields": {"claim": f"edited {n}"}} if "fields" in e.data else {"reason": "edited"}
    return codec.encode(Event(event_id=e.event_id, type=e.type, kind=e.kind, id=e.id,
                              ts=e.ts, author=e.author, session=e.session,
                              replica=e.replica, data={**e.data, **edited}))


def _damage_move(ws: Workspace, move: str, k: int, n: int) -> None:
    """Damage the census rule must see (cache.not_appended): a byte flipped in a row (no
    row added), the last row read rewritten by a write that also appends, the file
    replaced by an edited copy that also grew, a row deleted."""
    import shutil

    from agent_journal.storage.segment import insert_events

    # The segment and row are picked among those that exist. Picking blindly (segment
    # k % len(paths), row OFFSET k % 3) read a row that does not exist whenever the draw
    # pointed at a segment holding fewer rows than the offset: the small segment a
    # "segment" move starts (a row or two), or one that earlier "drop" moves emptied.
    # fetchone() then gave None and the test failed unpacking it, on no fault of the
    # product. So: the wanted segment if it holds rows, else the nearest earlier one that
    # does (wrapping round), and the row's offset taken modulo that segment's row count.
    paths = ws.segment_paths()
    want = len(paths) - 1 if move in ("edit last", "replace") else k % len(paths)
    counts = {}
    for path in paths:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            counts[path] = conn.execute("SELECT count(*) FROM events").fetchone()[0]
        finally:
            conn.close()
    held = [paths[(want - i) % len(paths)] for i in range(len(paths))
            if counts[paths[(want - i) % len(paths)]]]
    if not held:
        return  # no row anywhere to damage (no draw of MOVES gets here: drops are few)
    path = held[0]
    offset = k % min(3, counts[path])
    if move == "replace":
        shutil.copyfile(path, path + ".copy")
    target = path + ".copy" if move == "replace" else path
    conn = sqlite3.connect(target)
    try:
        with conn:
            if move == "drop":
                conn.execute("DELETE FROM events WHERE seq = (SELECT min(seq) FROM events)")
                return
            seq, body, digest_ = conn.execute(
                "SELECT seq, body, checksum FROM events ORDER BY seq "
                + ("DESC LIMIT 1" if move == "edit last" else "LIMIT 1 OFFSET ?"),
                () if move == "edit last" else (offset,)).fetchone()
            if move == "flip":
                conn.execute("UPDATE events SET body = ? WHERE seq = ?",
                             (bytes(body).replace(b'"', b"'", 1), seq))
                return
            conn.execute("UPDATE events SET body = ?, checksum = ? WHERE seq = ?",
                         (*_rewritten(bytes(body), digest_, n), seq))
            insert_events(conn, calls(n, 1))
    finally:
        conn.close()
    if move == "replace":
        os.replace(target, path)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(MOVES)
@example([("earlier", 1), ("segment", 1), ("earlier", 1)])  # spans that interleave
@example([("segment", 1), ("flip", 1)])  # a damaged row in a segment of one or two rows
@example([("segment", 1), ("drop", 2), ("drop", 2), ("replace", 2)])  # an emptied segment
def test_a_digest_folded_on_from_the_kept_state_is_the_digest_read_whole(tmp_path_factory,
                                                                         moves):
    # Every way the journal moves after a digest kept its fold: new calls, outcomes of
    # calls started before (recent, or long folded), tombstones, entries citing calls,
    # calls stamped before the kept point, a new segment, damage the census rule sees.
    # Each time, the digest from the kept fold is the digest of the segments, byte for
    # byte.
    base = tmp_path_factory.mktemp("fold")
    os.chmod(base, 0o700)
    ws = workspace(base / "journal")
    ws.append(calls(100, 40) + [_said(99, "always run make lint before committing")])
    assert folded(ws) == direct(ws)
    assert _kept_state(ws) is not None
    n = 140
    for move, k in moves:
        if move == "calls":
            ws.append(calls(n, k))
            n += k
        elif move == "finish":
            done = [c for c in calls(n - 5, 5) if c.data["status"] != "started"]
            ws.append([ev("observation", "tool_call", c.id, at(n + 1), dict(c.data))
                       for c in done])
        elif move == "old finish":
            ws.append([ev("observation", "tool_call", f"o{100 + k}", at(n + 2),
                          {"tool": "Bash", "status": "error", "exitCode": 2,
                           "output": "boom"})])
        elif move == "tombstone":
            ws.append([ev("tombstone", "tombstone", f"o{n - k}", at(n + 3), {"reason": "x"}),
                       ev("tombstone", "tombstone", "p99", at(n + 3), {"reason": "x"})])
        elif move == "entry":
            ws.append([ev("entry", "finding", f"f{n}", at(n + 4),
                          {"fields": {"claim": "x"}, "anchors": [f"tool_use:o{n - k}"]},
                          session="s1")])
        elif move == "earlier":
            ws.append(calls(k, 3, session="s2"))
        elif move == "prompt":
            ws.append([_said(n, f"from now on use pnpm {k}")])
            n += 1
        elif move in ("flip", "edit last", "replace", "drop"):
            _damage_move(ws, move, k, n)
            n += 1
        else:
            os.environ[ENV_SEGMENT_MAX_BYTES] = "3000"
            try:
                ws.append(calls(n, k))
                ws.append(calls(n + k, 2))
            finally:
                del os.environ[ENV_SEGMENT_MAX_BYTES]
            n += k + 2
        assert folded(ws) == direct(ws), move


def test_a_warm_digest_folds_only_what_is_new(root, monkeypatch):
    ws = workspace(root)
    ws.append(calls(0, 400))
    first = folded(ws)
    steps: list[str] = []
    original = digest.DigestFold.step
    monkeypatch.setattr(digest.DigestFold, "step",
                        lambda self, call: (steps.append(call.id), original(self, call))[1])
    assert folded(ws) == first
    ws.append(calls(400, 3))
    again = folded(ws)
    # The calls still settling at the end of the kept fold and the new ones, not all 400.
    assert 3 <= len(steps) <= 2 * (digest.SETTLE + 3), len(steps)
    assert again == direct(ws)


def test_a_tombstone_takes_effect_at_once_and_the_kept_fold_forgets_it(root):
    ws = workspace(root)
    ws.append(calls(0, 30) + [_said(40, f"the key is {SECRET}")] + calls(41, 80))
    assert SECRET in folded(ws)[0]
    assert SECRET.encode() in (_kept_state(ws) or b"")
    ws.append([ev("tombstone", "tombstone", "p40", at(200), {"reason": "a secret"})])
    markdown, report = folded(ws)
    assert SECRET not in markdown and SECRET not in str(report)
    assert (markdown, report) == direct(ws)
    assert SECRET.encode() not in (_kept_state(ws) or b"")


def test_a_kept_fold_that_does_not_load_is_folded_again(root):
    import marshal

    ws = workspace(root)
    ws.append(calls(0, 90))
    first = folded(ws)
    for value in (b"not marshal", marshal.dumps(["", "", [], ["not", "a", "fold"]], 2)):
        conn = sqlite3.connect(digest_cache.path_of(ws))
        conn.execute("UPDATE state SET value = ? WHERE key = 'digest'", (value,))
        conn.commit()
        conn.close()
        markdown, report, _ = digest._markdown_and_report(ws, session=None, max_chars=4000)
        assert (markdown, report) == first == direct(ws)


def test_a_cache_that_fails_while_a_digest_folds_through_it_is_not_needed(root, monkeypatch):
    ws = workspace(root)
    ws.append(calls(0, 50))
    expected = direct(ws)

    def failing(self, cursor):
        yield from ()
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(digest_point.FoldRead, "_spans", failing)
    markdown, report, _ = digest._markdown_and_report(ws, session=None, max_chars=4000)
    assert (markdown, report) == expected


# -- following a segment that grew: the census rule (cache.not_appended) ----------------

def _bodies_read(monkeypatch, read):
    """The statements that fetched bodies while `read()` ran, and its result."""
    from agent_journal.storage import cache, segment_reader

    statements: list[str] = []
    real = segment_reader.open_segment_for_read

    def traced(path):
        conn = real(path)
        conn.set_trace_callback(statements.append)
        return conn

    monkeypatch.setattr(cache, "open_segment_for_read", traced)
    monkeypatch.setattr(segment_reader, "open_segment_for_read", traced)
    try:
        got = read()
    finally:
        monkeypatch.undo()
    return [sql for sql in statements if "body" in sql], got


def test_a_session_start_follows_a_grown_segment_without_reading_its_older_rows(
        root, monkeypatch):
    """The SessionStart context (strict=False) after an append reads the rows above the
    segment's mark and counts the rest: no row at or below the mark is fetched again (a
    session start costs the new rows, not the live segment). The next `digest` a person
    runs (strict) verifies the rows the session start took on the census alone, once.
    A digest that took rows on the census alone names the segments (ReadResult.census)
    and says so on its first line; one that verified them does not."""
    ws = workspace(root)
    ws.append(calls(0, 40))
    folded(ws)
    conn = sqlite3.connect(digest_cache.path_of(ws))
    (high,) = conn.execute("SELECT high FROM segments").fetchone()
    conn.close()
    ws.append(calls(40, 2))
    reads, got = _bodies_read(
        monkeypatch, lambda: digest._cached_digest(ws, max_chars=4000, strict=False))
    assert reads and all(f"seq > {high}" in sql for sql in reads), reads
    assert got is not None and got[2].census == [ws.rel(p) for p in ws.segment_paths()]
    markdown, report = direct(ws)
    assert got[0] == digest.census_note(got[2]) + markdown
    assert got[0].startswith("_Older rows of 1 segment(s) counted, not re-verified")
    assert got[1] == {**report, "chars": len(got[0])}
    assert censused(ws) == [1]
    again = digest._cached_digest(ws, max_chars=4000, strict=False)  # unchanged: still one
    assert again is not None and again[2].census and again[0] == got[0]
    reads, got = _bodies_read(monkeypatch, lambda: digest._cached_digest(ws, max_chars=4000))
    assert any("seq <= " in sql for sql in reads), reads
    assert got is not None and got[:2] == direct(ws) and got[2].census == []
    assert censused(ws) == [0]  # verified: a later strict read has only new rows to check


def censused(ws: Workspace) -> list[int]:
    conn = sqlite3.connect(digest_cache.path_of(ws))
    try:
        return [int(c) for (c,) in conn.execute("SELECT censused FROM segments ORDER BY id")]
    finally:
        conn.close()


def test_an_older_row_damaged_by_a_write_that_also_appends(root):
    """What the census rule does not see (digest_cache's docstring says why): an older row
    damaged by the same write that appends. The SessionStart context may miss it; the
    `digest` command (strict) reports it as a direct read does, also after a session start
    took the segment on the census alone."""
    from agent_journal.storage.segment import insert_events

    ws = workspace(root)
    ws.append(calls(0, 20))
    kept = folded(ws)
    (path,) = ws.segment_paths()
    conn = sqlite3.connect(path)
    with conn:
        body = conn.execute("SELECT body FROM events WHERE seq = 2").fetchone()[0]
        conn.execute("UPDATE events SET body = ? WHERE seq = 2",
                     (bytes(body).replace(b'"', b"'", 1),))
        insert_events(conn, calls(20, 1))
    conn.close()
    expected = direct(ws)
    assert len(expected[1]["malformed"]) == 1
    hook = digest._cached_digest(ws, max_chars=4000, strict=False)
    assert hook is not None and hook[1]["malformed"] == [] and hook[0] != kept[0]
    assert folded(ws) == expected
    assert cached(ws) == expected
    os.unlink(digest_cache.path_of(ws))
    assert cached(ws) == direct(ws)


def test_an_other_event_kept_damaged_in_the_cache_is_read_from_the_segments(root):
    """`others` rows carry a digest of their blob: one that unmarshals but is not the blob
    kept (a damaged page, a row swapped) makes the digest read the segments, and the cache
    is filled again from them."""
    import marshal

    ws = workspace(root)
    ws.append(calls(0, 20) + [ev("entry", "finding", "f1", at(30),
                                 {"fields": {"claim": "the cache is sound"}}, session="s1")])
    expected = direct(ws)

    def tamper() -> None:
        conn = sqlite3.connect(digest_cache.path_of(ws))
        with conn:
            seq, blob = conn.execute("SELECT seq, payload FROM others").fetchone()
            values = marshal.loads(blob)
            values[8]["fields"]["claim"] = "the cache was tampered with"
            conn.execute("UPDATE others SET payload = ? WHERE seq = ?",
                         (marshal.dumps(values, 2), seq))
        conn.close()

    assert folded(ws) == expected
    tamper()
    assert digest._cached_digest(ws, max_chars=4000) is None
    assert not os.path.exists(digest_cache.path_of(ws))
    assert folded(ws) == expected and "tampered" not in expected[0]
    assert digest._cached_digest(ws, max_chars=4000) is not None
    tamper()  # the plain read (a digest of one session) throws it away too
    assert digest_cache.read(ws, event_facts) is None
    assert not os.path.exists(digest_cache.path_of(ws))
    assert cached(ws, session="s1") == direct(ws, session="s1")
