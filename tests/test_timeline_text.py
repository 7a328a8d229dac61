"""The timeline's text rendering: control characters escaped by one rule, and a
timeline with its header made from one read of the journal."""

from __future__ import annotations

import io

from hypothesis import given
from hypothesis import strategies as st

from agent_journal.cli import render_timeline
from agent_journal.ops.context import Context
from agent_journal.ops.timeline import Filters, Timeline


def _escaped_char_by_char(text: str) -> str:
    out = []
    for ch in text:
        if ch == "\n":
            out.append("⏎ ")
        elif ord(ch) < 32 or ord(ch) == 127 or 0x80 <= ord(ch) < 0xA0:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return "".join(out)


@given(st.text(alphabet=st.characters(max_codepoint=0x2FF)) | st.text())
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
