"""SessionStart's bound (issue 27): past its budget the newest work is given at once and
the whole digest is finished in a detached process, so the next start reads it warm."""

from __future__ import annotations

import json
import threading

from agent_journal.ops import digest, digest_warm
from agent_journal.storage.root import Root


def journal(cli) -> None:
    cli("record", "--kind", "objective", "--id", "obj", "--text", "ship the parser")
    for n in range(5):
        cli("observe", "--kind", "tool_call", "--id", f"c{n}", "--tool", "Bash",
            "--input", json.dumps({"command": f"echo CALL{n}"}), "--status", "ok")


def test_past_its_budget_the_start_gives_the_newest_work_and_warms_the_cache(
        cli, root, monkeypatch):
    journal(cli)
    ws = Root(str(root)).workspace("ws")
    release = threading.Event()
    whole = digest._markdown_and_report

    def slow(*args, **kw):  # the whole digest, held until the test lets it go
        release.wait(60)
        return whole(*args, **kw)

    warmed: list[str] = []
    monkeypatch.setattr(digest, "_markdown_and_report", slow)
    monkeypatch.setattr(digest_warm, "warm_later", lambda w: warmed.append(w.name))
    monkeypatch.setenv("AGENT_JOURNAL_SESSION_BUDGET_S", "0.05")
    try:
        text = digest.session_markdown(ws, 10_000)
    finally:
        release.set()
    assert text.startswith("_Built from the newest work only")
    assert "ship the parser" in text and "CALL4" in text
    assert warmed == ["ws"]


def test_within_its_budget_nothing_is_started(cli, root, monkeypatch):
    journal(cli)
    warmed: list[str] = []
    monkeypatch.setattr(digest_warm, "warm_later", lambda w: warmed.append(w.name))
    monkeypatch.setenv("AGENT_JOURNAL_SESSION_BUDGET_S", "120")
    text = digest.session_markdown(Root(str(root)).workspace("ws"), 10_000)
    assert not text.startswith("_Built") and "CALL4" in text and warmed == []


def test_the_detached_digest_keeps_the_whole_digest_in_the_cache(cli, root):
    journal(cli)
    cache = root / "cache" / "digest"
    assert not cache.exists() or not any(cache.iterdir())
    process = digest_warm.warm_later(Root(str(root)).workspace("ws"))
    assert process is not None
    assert process.wait(timeout=120) == 0
    assert any(cache.iterdir())


def test_one_detached_digest_at_a_time(cli, root):
    journal(cli)
    ws = Root(str(root)).workspace("ws")
    first = digest_warm.warm_later(ws)
    assert first is not None
    try:
        assert digest_warm.warm_later(ws) is None  # the first still holds the lock
    finally:
        assert first.wait(timeout=120) == 0
    again = digest_warm.warm_later(ws)
    assert again is not None and again.wait(timeout=120) == 0


def test_a_first_start_past_its_budget_gives_the_newest_work_at_once(cli, root, monkeypatch):
    """Issue 30: when the digest cache lacks more rows than a first fold reads within the
    budget, the start does not spend the budget finding out: the newest work at once, the
    whole digest built where nobody waits. Once the cache holds them, it waits again."""
    journal(cli)
    ws = Root(str(root)).workspace("ws")
    asked: list[str] = []
    whole = digest._markdown_and_report

    def watched(*args, **kw):
        asked.append("whole")
        return whole(*args, **kw)

    warmed: list[str] = []
    monkeypatch.setattr(digest, "_markdown_and_report", watched)
    monkeypatch.setattr(digest_warm, "warm_later", lambda w: warmed.append(w.name))
    # Room for about 2 rows at the first fold's pace; the journal has 6.
    monkeypatch.setenv("AGENT_JOURNAL_SESSION_BUDGET_S",
                       str(2 / digest.FIRST_FOLD_ROWS_PER_S))
    text = digest.session_markdown(ws, 10_000)
    assert text.startswith("_Built from the newest work only")
    assert "ship the parser" in text and "CALL4" in text
    assert asked == [] and warmed == ["ws"]
    cli("digest")  # the cache filled (what the detached digest does)
    monkeypatch.setenv("AGENT_JOURNAL_SESSION_BUDGET_S", "120")
    warm = digest.session_markdown(ws, 10_000)
    assert asked == ["whole"] and not warm.startswith("_Built") and "CALL4" in warm


def test_the_rows_the_digest_cache_has_not_read(cli, root):
    from agent_journal.storage import digest_cache

    journal(cli)
    ws = Root(str(root)).workspace("ws")
    assert digest_cache.unread_rows(ws) == 6  # no cache: every row
    cli("digest")
    assert digest_cache.unread_rows(ws) == 0
    cli("observe", "--kind", "tool_call", "--id", "c9", "--tool", "Bash", "--status", "ok")
    assert digest_cache.unread_rows(ws) == 1
    assert not (root / "cache" / "digest" / "ws.sqlite-journal").exists()


def test_a_cache_locked_by_a_writer_is_not_waited_for(cli, root):
    """The count is a probe: a cache another process is committing to (here: holding it
    exclusively) answers None at once, and the start takes the bounded path."""
    import sqlite3
    import time

    from agent_journal.storage import digest_cache

    journal(cli)
    cli("digest")
    ws = Root(str(root)).workspace("ws")
    holder = sqlite3.connect(digest_cache.path_of(ws), isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        started = time.monotonic()
        assert digest_cache.unread_rows(ws) is None
        assert time.monotonic() - started < 5  # (not the 15 s every other statement waits)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert digest_cache.unread_rows(ws) == 0
