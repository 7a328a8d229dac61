"""The project file's plain form is read without `re` (the hook reads it on every tool
call); what it accepts and the values it reads are exactly those of the pattern it
replaced, and of TOML itself for what it accepts."""

from __future__ import annotations

import re
import tomllib

from hypothesis import given
from hypothesis import strategies as st

from agent_journal.storage import project_file

# The reader this one replaced (a regular expression), kept here as the oracle.
_SIMPLE_LINE = (r'([A-Za-z0-9_-]+)[ \t]*=[ \t]*'
                r'"((?:[^"\\\x00-\x1f\x7f]|\\["\\]|\\u[0-9a-fA-F]{4})*)"[ \t]*')


def oracle(text: str) -> dict[str, str] | None:
    data: dict[str, str] = {}
    for line in text.split("\n"):
        stripped = line.removesuffix("\r").strip(" \t")
        if not stripped or stripped.startswith("#"):
            continue
        match = re.fullmatch(_SIMPLE_LINE, stripped)
        if match is None or match.group(1) in data:
            return None
        data[match.group(1)] = re.sub(
            r'\\(["\\]|u[0-9a-fA-F]{4})',
            lambda m: m.group(1) if len(m.group(1)) == 1 else chr(int(m.group(1)[1:], 16)),
            match.group(2))
    return data


PIECES = st.sampled_from(['workspace', 'root', 'x-y_1', 'a b', '=', ' ', '\t', '"', '\\',
                          '\\"', '\\\\', '\\u00e9', '\\u12', '\\n', '\r', '\n', '#', 'é',
                          '\x7f', '\x01', 'ws', '/tmp/j'])


@given(st.lists(PIECES, max_size=14).map("".join))
def test_the_plain_reader_agrees_with_the_pattern_it_replaced(text):
    assert project_file._read_simple(text) == oracle(text)


@given(st.text(max_size=40))
def test_any_text_the_same(text):
    assert project_file._read_simple(text) == oracle(text)


@given(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=30),
       st.one_of(st.none(), st.text(st.characters(blacklist_categories=("Cs",)),
                                    min_size=1, max_size=30)))
def test_what_render_writes_reads_back_as_toml_reads_it(workspace, root):
    text = project_file.render(workspace, root)
    read = project_file._read_simple(text)
    assert read is not None and read == tomllib.loads(text)


def test_the_plain_form_does_not_load_re():
    import subprocess
    import sys

    code = ("import sys; from agent_journal.storage import project_file as p; "
            "p._read_simple(p.render('ws', '/tmp/j')); "
            "print('re' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "False"
