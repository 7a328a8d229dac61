"""What every capture module returns, whichever agent it reads: an observation dict with
fixed keys, the kinds of what a session said, and the journal ids made from an agent's own.

Invariant: every agent's hook payloads and transcripts become dicts with exactly
OBSERVATION_KEYS (plus `ts` and `endTs` for replays); an agent's raw id becomes a journal id
by `safe_id` alone and a folder a workspace by `sanitise_workspace_id` alone, so the hook
and `import` of every agent name the same call, session and workspace the same way. Pure:
nothing here reads files or imports `re` (the hook loads this module on every tool call).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    import re
    from typing import Any

OBSERVATION_KEYS = (
    "id", "kind", "session", "tool", "callId", "input", "output", "status", "durationMs",
    "exitCode", "text", "data",
)

DEFAULT_WORKSPACE = "default"
_MAX_ID_CHARS = 128
# model.MAX_ID_BYTES: an id names files with suffixes added, under the usual 255-byte cap.
_MAX_ID_BYTES = 128

# What the session said: the kinds of the observations whose `text` holds it.
PROMPT = "prompt"
ASSISTANT = "assistant_message"
SUBAGENT = "subagent_result"
COMPACT = "compact_summary"
SESSION_EVENT = "session_event"
SAID_KINDS = frozenset({PROMPT, ASSISTANT, SUBAGENT, COMPACT, SESSION_EVENT})


class NotATranscriptError(ValueError):
    """Input that is not an agent's session transcript; the message says why."""


def said_id(kind: str, session: str | None, text: str, agent: str | None = None,
            occurrence: int = 1) -> str:
    """The observation id of something the session said, from what was said.

    The hook and `import` derive it alike from the redacted text, the session and the
    agent, so a prompt captured live is recognised when its transcript is imported.
    `occurrence` numbers a text said again in the same session (the import counts them;
    the hook cannot, and folds a repeat into the first).
    """
    import hashlib  # only for what was said: a few events per turn, not per tool call

    raw = "\x1f".join((kind, session or "", agent or "", text))
    digest = hashlib.blake2s(raw.encode("utf-8", errors="surrogatepass"), digest_size=8)
    base = f"{kind}-{digest.hexdigest()}"
    return base if occurrence == 1 else f"{base}-{occurrence}"


def sanitise_workspace_id(cwd: str | None) -> str:
    """The folder name of `cwd` made into a valid workspace id, or "default".

    The name is kept as far as it can be. Dropped: control and format characters (they could
    hide or spoof text), surrogates (they cannot be encoded), surrounding whitespace and
    leading dashes (an id must not read as a flag). The result is cut to 128 characters and
    128 UTF-8 bytes (model.MAX_ID_BYTES), which leaves room for the suffixes the journal
    adds to file names under the usual 255-byte cap.
    """
    if not cwd:
        return DEFAULT_WORKSPACE
    import unicodedata  # only here: the hook path calls this at most once per process

    # The last part after either separator, `/` or `\`.
    name = cwd.rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(ch for ch in name if unicodedata.category(ch) not in ("Cc", "Cf", "Cs"))
    name = name.strip().lstrip("-").strip()
    name = name[:_MAX_ID_CHARS]
    while len(name.encode("utf-8")) > _MAX_ID_BYTES:
        name = name[:-1]
    name = name.rstrip()
    if name in ("", ".", ".."):
        return DEFAULT_WORKSPACE
    return name


def safe_id(raw: str) -> str:
    """`raw` itself when it is a valid journal id, else a valid id derived from it alone.

    Tool-use and session ids become observation ids and session names, which must pass
    model.validate_id (whose rules `_is_valid_id` repeats; this package imports nothing of
    the journal). An id that does not pass is not dropped: its path separators and control
    characters become `_`, surrounding blanks and leading dashes go, it is cut to fit, and
    `~` plus 12 hex digits of a hash of the original is appended, so two different raw ids
    never meet and the hook and `import` derive the same id from the same raw one.
    """
    if _is_valid_id(raw):
        return raw
    import hashlib  # only for ids that need it: rare, and off the common path

    digest = hashlib.blake2s(raw.encode("utf-8", errors="surrogatepass"), digest_size=6)
    base = "".join("_" if ch in "/\\" or _is_control(ch) else ch for ch in raw)
    base = base.encode("utf-8", errors="replace").decode("utf-8")  # lone surrogates -> ?
    base = base.strip().lstrip("-").strip()[: _MAX_ID_CHARS - 13]
    while len(base.encode("utf-8")) > _MAX_ID_BYTES - 13:
        base = base[:-1]
    base = base.rstrip() or "id"
    return f"{base}~{digest.hexdigest()}"


def _is_control(ch: str) -> bool:
    """C0 and C1 controls and DEL, which model.validate_id refuses."""
    return ord(ch) < 32 or 127 <= ord(ch) <= 159


def _is_valid_id(value: str) -> bool:
    if not value or len(value) > _MAX_ID_CHARS or value in (".", "..") or value[0] == "-":
        return False
    if value.strip() != value:
        return False
    try:
        if len(value.encode("utf-8")) > _MAX_ID_BYTES:
            return False
    except UnicodeEncodeError:
        return False
    return not _has_unsafe_char(value)


def _has_unsafe_char(value: str) -> bool:
    """Whether `value` holds what `_is_valid_id` refuses anywhere in an id: a path
    separator, or a character `_is_control` names. A few scans in C, not a Python test per
    character (every record of a transcript carries several ids): a printable string holds
    no control character (C0, DEL and C1 are all unprintable); only one that is not
    printable is searched with the regular expression."""
    if value.isprintable():
        return "/" in value or "\\" in value
    global _unsafe_id_char
    if _unsafe_id_char is None:
        import re

        _unsafe_id_char = re.compile("[/\\\\\x00-\x1f\x7f-\x9f]")
    return _unsafe_id_char.search(value) is not None


_unsafe_id_char: re.Pattern[str] | None = None


def code_at(text: str, at: int) -> int | None:
    """The number the regex `(\\d{1,9})\\b` matches at `at` in `text`, read without it: one
    to nine decimal digits, then no word character (or the end)."""
    end = at
    while end < len(text) and end - at <= 9 and text[end].isdecimal():
        end += 1
    if end == at or end - at > 9:
        return None
    if end < len(text) and (text[end].isalnum() or text[end] == "_"):
        return None
    return int(text[at:end])


def str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def json_type(value: Any) -> str:
    """The JSON name of a parsed value's type, for messages."""
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if value is None:
        return "null"
    return type(value).__name__
