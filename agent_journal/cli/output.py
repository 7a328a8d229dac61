"""Rendering: the one place that writes to stdout and stderr.

Invariant: machine-facing output is JSON with the camelCase keys documented in
spec/cli-json.md, printed as one document; human lines are short and exact;
warnings and errors go to stderr, never mixed into a JSON document, each one
line: a control character a message quotes (a path holding a newline, an
escape sequence) is written escaped, and a bidi control as a `<U+XXXX>` marker
(core/bidi.py), as in every text for people (search hits too); JSON keeps them.
A closed stdout (`>&-`) is a JournalError naming it, never an AttributeError; a
closed stderr silences warnings and errors rather than failing the command.
"""

from __future__ import annotations

import sys

from agent_journal.core.errors import JournalError

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any


class OutputClosed(JournalError):
    """stdout was closed before the command started: the result cannot be printed."""


def _stdout() -> Any:
    # Python sets sys.stdout to None when descriptor 1 was closed at start-up.
    if sys.stdout is None:
        raise OutputClosed("cannot print the result: stdout is closed")
    return sys.stdout


def _write(text: str) -> None:
    try:
        _stdout().write(text)
    except BrokenPipeError:
        raise  # the reader left early (`| head`): cli.run says so and exits 1
    except OSError as exc:  # a full disk behind `> file`, a descriptor closed under us
        raise OutputClosed(f"cannot print the result: {exc.strerror or exc}") from None


def flush() -> None:
    """Push out what is buffered, so a failure is reported here and not at exit."""
    if sys.stdout is None:
        return
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise OutputClosed(f"cannot print the result: {exc.strerror or exc}") from None


def _stderr_write(text: str) -> None:
    if sys.stderr is not None:
        sys.stderr.write(text)


def to_json(value: Any) -> str:
    import json  # here: the hook, which prints no JSON document, does not load it

    return json.dumps(value, indent=2, ensure_ascii=False)


def line_encoder() -> Any:
    """`json.JSONEncoder(ensure_ascii=False).encode`, for many small documents:
    its C encoder is made once here, where `encode` makes one per call (the
    setup cost about as much as encoding a view). Documents made from stored
    JSON hold no cycles, so none is looked for."""
    import json

    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return json.JSONEncoder(ensure_ascii=False).encode

    def default(value: Any) -> Any:
        raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")

    encoder = make(None, default, json.encoder.encode_basestring, None, ": ", ", ",
                   False, False, True)
    join = "".join

    def encode(value: Any) -> str:
        return join(encoder(value, 0))

    return encode


def emit_json(value: Any) -> None:
    """One document. A top-level value that is an iterable other than a list
    (a report's stream of items) is written item by item as it is produced."""
    if isinstance(value, dict) and any(_is_stream(v) for v in value.values()):
        _emit_streamed(value)
    else:
        _write(to_json(value) + "\n")


def _is_stream(value: Any) -> bool:
    return hasattr(value, "__iter__") and not isinstance(
        value, (str, bytes, list, tuple, dict))


# Items written per write call: few enough to keep memory flat, many enough that
# the call costs nothing beside the encoding.
_BATCH = 512


def _emit_streamed(doc: dict[str, Any]) -> None:
    """The same document `to_json` prints, except that each item of a streamed
    list is on one line of its own. The items are encoded by json's C encoder
    (the pure-Python one, which any `indent` selects, cost most of a large
    read), and nothing holds more than a batch of them."""
    import json

    encode = line_encoder()
    encode_string = json.encoder.encode_basestring  # type: ignore[attr-defined]
    parts: list[str] = ["{"]
    for n, (key, value) in enumerate(doc.items()):
        parts.append(("\n  " if n == 0 else ",\n  ") + encode(key) + ": ")
        if not _is_stream(value):
            parts.append(to_json(value).replace("\n", "\n  "))
            continue
        count = 0
        for item in value:
            # (A string is what `encode` makes of it, without the call's detour.)
            text = encode_string(item) if type(item) is str else encode(item)
            parts.append(("[\n    " if count == 0 else ",\n    ") + text)
            count += 1
            if len(parts) >= _BATCH:
                _write("".join(parts))
                parts = []
        parts.append("\n  ]" if count else "[]")
    parts.append("\n}\n" if doc else "}\n")
    _write("".join(parts))


def emit_line(text: str) -> None:
    _write(text + "\n")


def emit_text(text: str) -> None:
    """A document that carries its own line endings (the digest's Markdown)."""
    _write(text)


def emit_lines(lines: Any) -> None:
    """Lines as they are produced (a large report is never one string)."""
    batch: list[str] = []
    for line in lines:
        batch.append(line)
        if len(batch) >= _BATCH:
            _write("\n".join(batch) + "\n")
            batch = []
    if batch:
        _write("\n".join(batch) + "\n")


# C0 and C1 controls and DEL, as Python escapes them; tab, too, so a message stays the
# one field a log line's reader splits it into.
_ONE_LINE = {code: repr(chr(code))[1:-1] for code in (*range(32), *range(127, 160))}


def _one_line(text: str) -> str:
    from agent_journal.core.bidi import visible  # (loaded here: off the hook's path)

    return visible(text).translate(_ONE_LINE)


def warn(text: str) -> None:
    _stderr_write(f"WARNING: {_one_line(text)}\n")


def error(text: str) -> None:
    _stderr_write(f"error: {_one_line(text)}\n")


def floor_warning(unreadable: list[Any], malformed: list[Any]) -> None:
    """Every read on a damaged journal says so, and says what it means."""
    if unreadable or malformed:
        warn(f"{len(unreadable)} unreadable segment(s), {len(malformed)} malformed row(s): "
             "this result is a floor, not a total")


# -- search (issue 7) -------------------------------------------------------------------

def search_lines(report: dict[str, Any]) -> None:
    """One line per hit (score, id, type/kind, ts, retraction mark), its snippet below."""
    from agent_journal.core.bidi import visible

    hits = report["hits"]
    for word, added in report["expansions"].items():
        emit_line(visible(f"thesaurus: {word} also searched as {' '.join(added)}"))
    if report["unmatched"]:
        emit_line(visible(f"no document holds: {' '.join(report['unmatched'])}"))
    if not hits:
        emit_line("no matches")
        return
    for hit in hits:
        mark = f"  [{hit['outcome']}]" if hit["outcome"] not in (None, "live") else ""
        emit_line(visible(f"{hit['score']:8.3f}  {hit['id']}  {hit['type']}/{hit['kind']}  "
                          f"{hit['ts']}{mark}"))
        emit_line(f"          {visible(hit['snippet'])}")



def misses_lines(report: dict[str, Any]) -> None:
    """One line per logged weak query: count, last time, best score, query; its ids below."""
    from agent_journal.core.bidi import visible

    if not report["missLog"]:
        emit_line('the miss log is off (config.json: "search": {"missLog": true} turns it on)')
    if not report["misses"]:
        emit_line("no weak queries logged")
        return
    for miss in report["misses"]:
        score = miss["bestScore"] if isinstance(miss["bestScore"], (int, float)) else 0.0
        emit_line(visible(f"{miss['count']:5d}  {miss['lastTs']}  {score:6.3f}  "
                          f"{miss['query']}"))
        emit_line(visible(f"       ids: {' '.join(miss['ids'])}"))


def alias_lines(report: dict[str, Any]) -> None:
    """One line per thesaurus word: the word, then the terms it adds."""
    from agent_journal.core.bidi import visible

    if not report["aliases"]:
        emit_line(f"no aliases ({report['path']})")
        return
    for word, terms in report["aliases"].items():
        emit_line(visible(f"{word}: " + ", ".join(terms)))


# -- capture ----------------------------------------------------------------------------

def emit_raw(data: bytes) -> None:
    """Exact bytes on stdout (get prints stored evidence verbatim, no newline added)."""
    flush()
    try:
        _stdout().buffer.write(data)
        _stdout().buffer.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise OutputClosed(f"cannot print the result: {exc.strerror or exc}") from None


class _StatusLine:
    """One line on stderr a long command keeps rewriting (rich's Live display): each text
    is drawn when it is given (the callers give one per batch or stage, not per row)."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.live import Live
        from rich.text import Text

        self._text = Text
        self.live = Live(Text(""), console=Console(stderr=True), auto_refresh=False,
                         transient=False)
        self.live.start()
        self.last = ""

    def show(self, text: str) -> None:
        self.last = text
        self.live.update(self._text(text), refresh=True)

    def stop(self) -> None:
        self.live.update(self._text(self.last), refresh=True)
        self.live.stop()


_COUNTER: _StatusLine | None = None  # the line `progress` is counting on, while it counts


def progress(done: int, total: int, what: str) -> None:
    """`what: done/total` on one rewritten line on stderr (called only when stderr is a
    terminal); the line stays once done reaches total."""
    global _COUNTER
    if _COUNTER is None:
        _COUNTER = _StatusLine()
    _COUNTER.show(f"{what}: {done}/{total}")
    if done >= total:
        _COUNTER.stop()
        _COUNTER = None


# -- progress ---------------------------------------------------------------------------

def progress_for_terminal() -> Any:
    """A progress callback for long commands when stderr is a terminal, else None: each
    call shows its text on one line (rich), which `progress_done` takes away.

    Progress is for a person watching; in a pipe or a log it would be noise.
    """
    if sys.stderr is None or not sys.stderr.isatty():
        return None
    line = _StatusLine()

    def show(text: str) -> None:
        line.show(text)

    show.line = line  # type: ignore[attr-defined]
    return show


def progress_done(progress: Any) -> None:
    line = getattr(progress, "line", None)
    if line is not None:
        line.live.transient = True  # the work is done: its progress line goes
        line.stop()
