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
