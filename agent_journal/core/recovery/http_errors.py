"""An HTTP client's call that exited 0 on an error answer: `curl -s` prints a 500 and
succeeds.

Invariant: a shell command that runs an HTTP client (curl, wget, HTTPie, xh, PowerShell's
Invoke-WebRequest / Invoke-RestMethod) failed when its output shows an answer of status 400
or more other than 404 (a "not found" answers a lookup): the last status line printed
(`HTTP/1.1 500 ...`, with or without curl -v's `< `), else a JSON body's `statusCode` /
`status_code` (or `status` beside a `message` or `error`). Its reason is `HTTP <status>:`
and the API's own words (`message`, `error_description`, `detail`, `error`), else the
status line's phrase. Any other output, or a command that runs no HTTP client, is no
failure here.
"""

from __future__ import annotations

import re

_CLIENT = re.compile(r"(?:^|[\s;&|(])(?:curl|wget|http|https|xh|Invoke-WebRequest|"
                     r"Invoke-RestMethod|iwr|irm)\s", re.IGNORECASE)
_STATUS_LINE = re.compile(r"^\s*(?:< )?HTTP/\d(?:\.\d)? (\d{3})\b ?(.*)$", re.MULTILINE)
_JSON_STATUS = re.compile(r'"(?:statusCode|status_code)"\s*:\s*(\d{3})\b')
_PLAIN_STATUS = re.compile(r'"status"\s*:\s*(\d{3})\b')
_MESSAGE = re.compile(r'"(message|error_description|detail|error)"\s*:\s*'
                      r'"((?:[^"\\]|\\.){1,300})"')
_PREFERRED = ("message", "error_description", "detail", "error")
REASON_CHARS = 240


def runs_http_client(command: str) -> bool:
    """Whether a shell command runs an HTTP client."""
    return _CLIENT.search(" " + command) is not None


def http_error(text: str) -> str | None:
    """`HTTP <status>: <what the API said>` for an error answer in `text`, else None."""
    lines = _STATUS_LINE.findall(text)
    status, phrase = (int(lines[-1][0]), lines[-1][1].strip()) if lines else (None, "")
    messages = {key: value for key, value in _MESSAGE.findall(text[:20_000])}
    if status is None:
        found = _JSON_STATUS.search(text) or (
            _PLAIN_STATUS.search(text) if messages else None)
        status = int(found.group(1)) if found else None
    if status is None or status < 400 or status == 404 or status > 599:
        return None
    said = next((messages[k] for k in _PREFERRED if k in messages), None) or phrase
    reason = f"HTTP {status}: {said}" if said else f"HTTP {status}"
    return reason if len(reason) <= REASON_CHARS else reason[:REASON_CHARS - 1] + "…"
