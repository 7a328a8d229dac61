"""The timeline's text rendering: control characters escaped by one rule, and a
timeline with its header made from one read of the journal."""

from __future__ import annotations

import io
import json

from hypothesis import given
from hypothesis import strategies as st

from agent_journal.cli import render_timeline
from agent_journal.ops.context import Context
from agent_journal.ops.timeline import Filters, Timeline

# The bidi controls (issue 32): embeddings and overrides, isolates, marks.
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"


def _escaped_char_by_char(text: str) -> str:
    out = []
    for ch in text:
        if ch == "\n":
            out.append("⏎ ")
        elif ord(ch) < 32 or ord(ch) == 127 or 0x80 <= ord(ch) < 0xA0:
            out.append(f"\\x{ord(ch):02x}")
        elif ch in BIDI:
            out.append(f"<U+{ord(ch):04X}>")
        else:
            out.append(ch)
    return "".join(out)


@given(st.text(alphabet=st.characters(max_codepoint=0x2FF)) | st.text()
       | st.text(alphabet=st.sampled_from(BIDI + "ab\n\x1b<U+>")))
def test_one_line_escapes_exactly_what_the_rule_names(text: str) -> None:
    assert render_timeline.one_line(text) == _escaped_char_by_char(text)


def test_the_header_and_the_lines_come_from_one_read(root, inproc, monkeypatch) -> None:
    for n in range(3):
        assert inproc("observe", "--kind", "tool_call", "--id", f"o{n}", "--tool", "Bash",
                      "--input", '{"command": "ls"}', "--status", "ok").code == 0
    passes = []
    real = Timeline.lines

    def counted(self: Timeline):  # type: ignore[no-untyped-def]
        passes.append(1)
        return real(self)

    monkeypatch.setattr(Timeline, "lines", counted)
    with Timeline(Context(str(root), "ws"), Filters()) as timeline:
        out = io.StringIO()
        assert render_timeline.write_text(out, "ws", timeline, header=True) == 3
    assert len(passes) == 1
    text = out.getvalue()
    assert text.startswith("Timeline of workspace ws\n  lines: 3 (observation 3)")
    assert text.count(" ls\n") == 3


def test_bidi_controls_are_shown_in_every_text_for_people_and_kept_in_json(
        inproc, tmp_path) -> None:
    """Issue 32: `ls <RLO>txt.exe` would read as `ls exe.txt`; every rendering for
    people shows the control as a marker instead, and JSON keeps the stored text."""
    command = "ls \u202etxt.exe \u2066x\u2069"
    marked = "ls <U+202E>txt.exe <U+2066>x<U+2069>"
    output = tmp_path / "out.txt"
    output.write_text("FAILED \u202eyes\n")
    assert inproc("observe", "--kind", "tool_call", "--id", "o1", "--tool", "Bash", "--input",
                  json.dumps({"command": command}), "--status", "error", "--exit-code", "1",
                  "--output", str(output)).code == 0
    assert inproc("record", "--kind", "finding", "--id", "f1", "--claim",
                  f"{command} is safe", "--anchor", "tool_use:o1").code == 0
    page = tmp_path / "timeline.html"
    texts = {
        "timeline": inproc("timeline").out,
        "timeline --failures-only": inproc("timeline", "--failures-only").out,
        "timeline --html": (inproc("timeline", "--html", str(page)), page.read_text())[1],
        "show": inproc("show", "--observations").out,
        "get": inproc("get", "f1").out,
        "digest": inproc("digest").out,
    }
    for name, text in texts.items():
        assert not set(text) & set(BIDI), name
        shown = marked.replace("<", "&lt;").replace(">", "&gt;") if "html" in name else marked
        assert shown in text, (name, text)
    assert "FAILED <U+202E>yes" in texts["timeline --failures-only"]
    # JSON is exact.
    [line] = [json.loads(x) for x in inproc("timeline", "--json", "--kind", "tool_call")
              .out.splitlines()]
    assert line["target"] == command
    shown = json.loads(inproc("show", "--observations", "--json").out)
    assert {e["id"]: e for e in shown["entries"]}["f1"]["fields"]["claim"] == (
        f"{command} is safe")
    assert json.loads(inproc("get", "f1", "--json").out)["fields"]["claim"] == (
        f"{command} is safe")
    digest = json.dumps(json.loads(inproc("digest", "--json").out), ensure_ascii=False)
    assert command in digest and "<U+" not in digest
