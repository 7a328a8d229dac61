"""An observation row laid out as `codec` writes it, shown to be what the exact
decoder reads, without running the exact decoder.

Observation rows are most of a journal, and the exact decoder
(`codec.decode_checked`: parse the whole body, check its shape, compare the
indexed columns) costs more than everything else a bulk read does with them.
`layout` instead shows, cheaply, that a row is one the exact decoder accepts,
and with which values outside `data`:

- the body's checksum is right, it is strict UTF-8, holds no NUL, and the
  row's event id, subject and time are non-empty and plain (no quote,
  backslash or control character, so the text is the value);
- it begins `{"author":"A","data":{` with A plain and non-empty and, from the
  last place where `,"eventId":"E","id":"S","kind":"` (the row's own event
  id and subject) occurs, ends with the other fields in canonical order, `ts`
  the row's own time, each a plain string or a small integer.

Those last fields hold no bracket, so in valid JSON they are the outer
object's last members: no later duplicate of any can follow. Between `data`'s
value and them the text may hold more members; these are harmless (the exact
decoder ignores unknown keys, and of duplicates takes the last, which are
these) except a second `author` or `data`, so the stretch from `data`'s value
to `,"eventId"` holds neither `"author"` nor `"data"` (a nested key of either
name only costs the exact path). Nesting deeper than a fixed bound, and
integers longer than Python converts, are left to the exact decoder too.

What `layout` does not show is that the stretch is JSON, nor what `data`
holds: its two callers settle that each its own way.
`storage/compaction_rows.py` reads only rows SQLite has found to be JSON by a
test no looser than Python's, and of `data` only its artifact;
`observation_event` (the time order's reads) parses the stretch with the
exact decoder's own parser, which succeeds only when it is one JSON object:
then the body is exactly that object between the fields shown, which is what
the exact decoder would have made of it.

Invariant: neither ever calls a row malformed. A row they cannot vouch for
gives None, and the caller asks the exact decoder, which gives every verdict.
"""

from __future__ import annotations

import re

from xxhash import xxh3_64_hexdigest as _xxh3_hex

from agent_journal.core import codec
from agent_journal.core.model import Event, events_from_values

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any

# A JSON string's text that is its value: no quote, backslash or control character.
PLAIN = r'[^"\\\x00-\x1f]+'

# A character that keeps a string from being its own JSON text.
_UNPLAIN = re.compile(r'["\\\x00-\x1f]')

# What lies between the row's `"kind":"` and `","ts":"`: kind, replica, schema
# (an integer Python converts whatever its digit limit) and session.
_OBSERVATION_MIDDLE = re.compile(
    rf'({PLAIN})","replica":"({PLAIN})","schema":(-?(?:0|[1-9][0-9]{{0,17}})),'
    rf'"session":(?:null|"([^"\\\x00-\x1f]*)")')

# An escape that could spell a letter of a key (`"\u0061rtifact"`, `"\u0061uthor"`).
ESCAPED_LETTER = re.compile(r"\\u00[4-7][0-9A-Fa-f]")

# Deeper data is left to the exact decoder, whose recursion limit decides it.
_FAST_NESTING = 200

_CHECKSUM_PREFIX = codec.CHECKSUM_PREFIX

# (kind, replica, schema, session) of a row
Fields = tuple[str, str, int, "str | None"]


class Layouts:
    """What `layout` remembers across one read: the fields between kind and ts
    it has already judged (a journal repeats a few), the last good one of them
    (rows in a row mostly share it), and Python's limit on the digits of an
    integer it converts (a longer one fails json.loads)."""

    def __init__(self) -> None:
        import sys

        self.middles: dict[str, Fields | None] = {}
        # (A NUL never ends a body layout reads: nothing matches it.)
        self.last: tuple[str, Fields] = ("\x00", ("", "", 0, None))
        limit = sys.get_int_max_str_digits()
        self.digit_limit = limit
        self.long_number = re.compile(f"[0-9]{{{limit + 1}}}") if limit else None

    def middle(self, text: str) -> Fields | None:
        m = _OBSERVATION_MIDDLE.fullmatch(text)
        found = None if m is None else (m[1], m[2], int(m[3]), m[4])
        self.middles[text] = found
        return found


def layout(seen: Layouts, body: Any, digest: Any, event_id: Any, subject: Any, ts: Any
           ) -> tuple[str, int, int, str, Fields] | None:
    """(text, start, end, author, fields) of an observation row in canonical
    layout: its body as text, where `data`'s value starts and where the
    stretch after it ends (`,"eventId"`), and the values around it; None when
    only the exact decoder may judge the row (see the module's docstring).

    Written for speed: a million rows pass here, so operators stand in for
    method calls wherever they say the same.
    """
    if type(body) is not bytes or digest != _CHECKSUM_PREFIX + _xxh3_hex(body):
        return None
    try:
        text = body.decode()
    except UnicodeDecodeError:
        return None
    # The column values must be plain, non-empty strings for the text matches
    # below to mean the values match (the exact decoder refuses an empty one).
    if type(event_id) is not str or type(subject) is not str or type(ts) is not str \
            or not event_id or not subject or not ts or "\x00" in text:
        return None
    quote = text.find('","data":{', 11)
    author = text[11:quote]
    plain = author + event_id + subject + ts
    # (A printable string holds no control character: the test costs a tenth of
    # the pattern's, which only the rare string that is not printable needs.)
    if quote <= 11 or text[:11] != '{"author":"' or '"' in plain or "\\" in plain \
            or (not plain.isprintable() and _UNPLAIN.search(plain)):
        return None
    start = quote + 9  # the data object's "{"
    # The fields after data as they would read with the last row's middle
    # fields: one test, where finding them afresh takes a search and a lookup.
    middle, fields = seen.last
    suffix = f',"eventId":"{event_id}","id":"{subject}","kind":"{middle},"ts":"{ts}",' \
        '"type":"observation"}'
    if text.endswith(suffix):
        end = len(text) - len(suffix)
    else:
        ids = f',"eventId":"{event_id}","id":"{subject}","kind":"'
        end = text.rfind(ids)  # just past the data object, unless more members follow it
        tail = f',"ts":"{ts}","type":"observation"}}'
        if end < 0 or not text.endswith(tail):
            return None
        middle = text[end + len(ids):len(text) - len(tail)]
        found = seen.middles[middle] if middle in seen.middles else seen.middle(middle)
        if found is None:
            return None
        fields = found
        seen.last = (middle, found)
    if end <= start or text.find('"author"', start, end) >= 0 \
            or text.find('"data"', start, end) >= 0:
        return None
    if end - start > 2 * _FAST_NESTING and \
            text.count("{", start, end) + text.count("[", start, end) > _FAST_NESTING:
        return None
    if seen.long_number is not None and end - start > seen.digit_limit \
            and seen.long_number.search(text, start, end):
        return None
    return text, start, end, author, fields


def observation_event(seen: Layouts, body: Any, digest: Any, event_id: Any, subject: Any,
                      ts: Any) -> Event | None:
    """The Event the exact decoder makes of an observation row (the caller
    knows its type column says observation), or None when only the exact
    decoder may judge the row. Any body: no JSON check by SQLite is needed,
    as `data` is parsed here by the exact decoder's own parser."""
    found = layout(seen, body, digest, event_id, subject, ts)
    if found is None:
        return None
    text, start, end, author, (kind, replica, schema, session) = found
    try:
        # One JSON value or nothing: a stretch holding more members fails here.
        data = codec.parse_json_text(text[start:end])
    except codec.MalformedEvent:
        return None
    if type(data) is not dict:
        return None
    return events_from_values([(event_id, "observation", kind, subject, ts, author, session,
                                replica, data, schema)])[0]
