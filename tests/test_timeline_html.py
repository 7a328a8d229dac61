"""`timeline --html FILE`: one self-contained page, opened in headless Chromium.

Chromium is required: .ci/run installs it when missing, and this test fails
without it, unless AGENT_JOURNAL_SKIP_BROWSER=1 says, on a machine of one's
own, that the browser check is knowingly left out.
"""

from __future__ import annotations

import base64
import json
import os
import re
from pathlib import Path

import pytest
from cdp import Browser, find_chromium
from test_timeline import at, call

INJECTED = '<script>window.__injected = 1</script><img src=x onerror="window.__injected = 2">'


@pytest.fixture
def page_journal(cli, tmp_path):
    call(cli, "o1", "ls", 0)
    call(cli, "o2", "pytest -q", 10, status="error", exit_code=1, tmp=tmp_path,
         output=f"FAILED test_x\n{INJECTED}\n1 failed\n")
    call(cli, "o3", "src/app.py", 20, tool="Edit")
    cli("record", "--kind", "finding", "--id", "f1", "--claim", "pytest fails <b>here</b>",
        "--anchor", "tool_use:o2", env=at(30))
    cli("invalidate", "f1", "--reason", "it was a fixture", env=at(31))
    cli("record", "--kind", "note", "--id", "leak", "--text", "hunter2", env=at(32))
    cli("tombstone", "leak", "--reason", "credential", env=at(33))
    cli("checkpoint", "cp", "--note", "after the first run", env=at(34))
    call(cli, "o4", "make", 40, session="sess-bbbb2222")
    return cli


def test_page_is_self_contained_escaped_and_free_of_tombstoned_content(page_journal, tmp_path):
    out = tmp_path / "timeline.html"
    result = page_journal("timeline", "--html", str(out))
    assert result.code == 0 and result.out == f"wrote 8 timeline rows to {out}\n"
    html = out.read_text()
    assert "hunter2" not in html
    assert "<script>window.__injected" not in html and "&lt;script&gt;window.__injected" in html
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html)
    assert html.count("<script>") == 1 and "Content-Security-Policy" in html
    assert html.count('<details class="row') == 8
    # Over an existing page: replaced whole, nothing left beside it.
    assert page_journal("timeline", "--html", str(out)).code == 0
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_page_in_headless_chromium(page_journal, tmp_path):
    binary = find_chromium()
    if binary is None:
        if os.environ.get("AGENT_JOURNAL_SKIP_BROWSER") == "1":
            pytest.skip("chromium missing and AGENT_JOURNAL_SKIP_BROWSER=1")
        pytest.fail("chromium is not installed (.ci/run installs it; set "
                    "AGENT_JOURNAL_SKIP_BROWSER=1 to leave this check out knowingly)")
    out = tmp_path / "timeline.html"
    assert page_journal("timeline", "--html", str(out)).code == 0
    expected = [json.loads(x) for x in page_journal("timeline", "--json").out.splitlines()]
    browser = Browser(binary)
    try:
        for domain in ("Runtime", "Log", "Page"):
            browser.call(f"{domain}.enable")
        browser.call("Page.navigate", url=out.as_uri())
        browser.wait_for_load()
        rows = browser.evaluate("document.querySelectorAll('.row').length")
        assert rows == len(expected) == 8
        failed = browser.evaluate(
            "(() => { const r = document.querySelector('.row.failed');"
            " const s = getComputedStyle(r);"
            " return [s.borderLeftColor, s.color, r.textContent.includes('pytest -q')]; })()")
        assert failed == ["rgb(221, 0, 0)", "rgb(160, 0, 0)", True]
        ok_row = browser.evaluate(
            "getComputedStyle(document.querySelector('.row.k-read, .row.k-bash:not(.failed)'))"
            ".borderLeftColor")
        assert ok_row != "rgb(221, 0, 0)"
        expanded = browser.evaluate(
            "(() => { const d = document.querySelector('.row.failed');"
            " const before = d.open; d.querySelector('summary').click();"
            " const pre = [...d.querySelectorAll('pre')].map(p => p.textContent).join('');"
            " return [before, d.open, pre.includes('<script>window.__injected = 1</script>')];"
            " })()")
        assert expanded == [False, True, True]
        assert browser.evaluate("typeof window.__injected") == "undefined"
        shown = browser.evaluate(
            "(() => { const f = document.getElementById('failures-only'); f.checked = true;"
            " f.dispatchEvent(new Event('change'));"
            " return [...document.querySelectorAll('.row')].filter(r => !r.hidden).length; })()")
        assert shown == sum(1 for e in expected if e["failed"]) == 1
        sessions = browser.evaluate(
            "[...document.querySelectorAll('#session option')].map(o => o.value)")
        assert sessions == ["", "sess-aaaa1111", "sess-bbbb2222"]
        kinds = browser.evaluate(
            "['t-entry', 't-invalidation', 't-tombstone', 't-checkpoint']"
            ".map(c => document.querySelectorAll('.row.' + c).length)")
        assert kinds == [1, 1, 1, 1]
        browser.evaluate("(() => { const f = document.getElementById('failures-only');"
                         " f.checked = false; f.dispatchEvent(new Event('change')); })()")
        shot = browser.call("Page.captureScreenshot", format="png")
        path = Path(tmp_path) / "timeline.png"
        path.write_bytes(base64.b64decode(shot["data"]))
        print(f"screenshot: {path}")
        browser.evaluate("1")  # drain events that arrived meanwhile
        errors = [e for e in browser.events
                  if e.get("method") == "Runtime.exceptionThrown"
                  or (e.get("method") == "Runtime.consoleAPICalled"
                      and e["params"].get("type") == "error")
                  or (e.get("method") == "Log.entryAdded"
                      and e["params"]["entry"].get("level") == "error")]
        assert errors == []
    finally:
        browser.close()
    assert path.stat().st_size > 1000


LONG = "python -m pytest tests/integration/test_upload.py -k 'retry and not slow' " + "-x " * 60


@pytest.fixture
def readable_journal(cli, tmp_path):
    """A failed Bash call with a command far wider than the page, an Edit, a task list,
    and two Codex sessions begun in the same minute (ids alike in their first 8)."""
    call(cli, "o1", LONG, 0, status="error", exit_code=2, tmp=tmp_path,
         output="collected 12 items\n\nE   AssertionError: upload retried 0 times\n"
                "1 failed, 11 passed in 0.5s\n")
    edit = {"file_path": "src/upload.py", "old_string": "def retry():\n    return 0\n",
            "new_string": "def retry():\n    return backoff(3)\n"}
    todos = {"todos": [{"content": "reproduce the flake", "status": "completed"},
                       {"content": "fix the retry", "status": "in_progress"},
                       {"content": "run the whole suite", "status": "pending"}]}
    for obs_id, tool, value, second in (("o2", "Edit", edit, 10), ("o3", "TodoWrite", todos, 20)):
        assert cli("observe", "--kind", "tool_call", "--id", obs_id, "--tool", tool, "--input",
                   json.dumps(value), "--status", "ok", "--session", "sess-aaaa1111",
                   env=at(second)).code == 0
    for obs_id, session, second in (("c1", "019a2d7a-41c4-78b1-b7cc-a45d62a89cd5", 30),
                                    ("c2", "019a2d7a-9f00-7a11-8c3d-0123456789ab", 31)):
        assert cli("observe", "--kind", "tool_call", "--id", obs_id, "--tool", "Bash", "--input",
                   json.dumps({"command": "ls"}), "--status", "ok", "--session", session,
                   env=at(second)).code == 0
    return cli


def test_page_reads_as_a_person_needs_in_headless_chromium(readable_journal, tmp_path):
    """Issue 33: the failed row keeps its badge in view and says its first error line; an
    edit is a diff, the task list a list; times are short, the whole instant on hover;
    sessions alike in their first characters are told apart. Screenshot kept."""
    binary = find_chromium()
    if binary is None:
        if os.environ.get("AGENT_JOURNAL_SKIP_BROWSER") == "1":
            pytest.skip("chromium missing and AGENT_JOURNAL_SKIP_BROWSER=1")
        pytest.fail("chromium is not installed")
    out = tmp_path / "timeline.html"
    assert readable_journal("timeline", "--html", str(out)).code == 0
    browser = Browser(binary)
    try:
        browser.call("Page.enable")
        browser.call("Page.navigate", url=out.as_uri())
        browser.wait_for_load()
        badge = browser.evaluate(
            "(() => { const r = document.querySelector('.row.failed');"
            " const b = r.querySelector('.badge').getBoundingClientRect();"
            " const box = r.getBoundingClientRect();"
            " return [r.querySelector('.badge').textContent, b.width > 0,"
            " b.right <= box.right, b.right <= window.innerWidth,"
            " r.querySelector('.errline').textContent,"
            " r.querySelector('.errline').getBoundingClientRect().height > 0]; })()")
        assert badge == ["error exit 2", True, True, True,
                         "E   AssertionError: upload retried 0 times", True]
        edit = browser.evaluate(
            "(() => { const d = [...document.querySelectorAll('details.row')]"
            ".find(r => r.textContent.includes('src/upload.py')); d.open = true;"
            " return [[...d.querySelectorAll('.diff .del')].map(e => e.textContent),"
            " [...d.querySelectorAll('.diff .add')].map(e => e.textContent),"
            " d.textContent.includes('old_string')]; })()")
        assert edit == [["-    return 0"], ["+    return backoff(3)"], False]
        tasks = browser.evaluate(
            "(() => { const d = [...document.querySelectorAll('details.row')]"
            ".find(r => r.querySelector('.tool').textContent === 'TodoWrite'); d.open = true;"
            " return [...d.querySelectorAll('ul.tasks li')].map(li => li.textContent); })()")
        assert tasks == ["[x]reproduce the flake", "[~]fix the retry",
                         "[ ]run the whole suite"]
        assert browser.evaluate(
            "[...document.querySelectorAll('.row .tgt')].map(t => t.textContent)[2]") == (
            "3 tasks, 1 done; now: fix the retry")
        times = browser.evaluate(
            "[...document.querySelectorAll('.row time')].map(t => [t.textContent, t.title])")
        assert times[0] == ["12:00:00", "2026-05-01T12:00:00.000Z"]
        assert browser.evaluate("[...document.querySelectorAll('.day')]"
                                ".map(d => d.textContent)") == ["2026-05-01"]
        sessions = browser.evaluate(
            "[...document.querySelectorAll('.row .ses')].map(s => s.textContent)")
        assert sessions[-2:] == ["…62a89cd5", "…456789ab"]
        browser.evaluate("document.querySelectorAll('details.row')[0].open = true")
        shot = browser.call("Page.captureScreenshot", format="png")
        path = Path(tmp_path) / "timeline-readable.png"
        path.write_bytes(base64.b64decode(shot["data"]))
        print(f"screenshot: {path}")
    finally:
        browser.close()
