"""Points in time as people type them: ISO 8601 instants and `2h`-style ages.

Invariant: a value is an instant only in one of two spellings, so it can
never be mistaken for a name: an ISO 8601 date or date-time (it starts with
`YYYY-MM-DD`; a naive one is UTC), or a whole number and a unit `s`, `m`,
`h`, `d` or `w` meaning that long before the clock's now. Anything else is
not an instant (`looks_like_instant` says which); a value in one of these
spellings that does not parse is a usage error, never a guess.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from agent_journal.core import clock
from agent_journal.core.errors import UsageError

RELATIVE = re.compile(r"^(\d{1,9})([smhdw])$")
ISO_START = re.compile(r"^\d{4}-\d{2}-\d{2}")
UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def looks_like_instant(text: str) -> bool:
    return bool(RELATIVE.match(text) or ISO_START.match(text))


def parse_when(text: str, flag: str) -> datetime:
    """The instant `text` names, in UTC. Raises UsageError naming `flag`."""
    text = text.strip()
    relative = RELATIVE.match(text)
    if relative:
        amount, unit = int(relative.group(1)), relative.group(2)
        try:
            return clock.now() - timedelta(**{UNITS[unit]: amount})
        except OverflowError:
            raise UsageError(f"{flag} {text!r} reaches before year 1") from None
    if not ISO_START.match(text):
        raise UsageError(f"{flag} takes an ISO 8601 instant (2026-05-01T12:00:00Z) or an age "
                         f"such as 2h or 3d, not {text!r}")
    from dateutil import parser as date_parser  # off the hook path: only read commands

    try:
        value = date_parser.isoparse(text.replace("z", "Z"))
    except (ValueError, OverflowError):
        raise UsageError(f"{flag} is not a valid ISO 8601 instant: {text!r}") from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00+05:00 is before year 1 in UTC
        raise UsageError(f"{flag} {text!r} is outside years 1 to 9999 in UTC") from None


def ts_of(value: datetime) -> str:
    """As stored: UTC, millisecond precision, `Z` (string order is time order)."""
    return clock.format_ts(value)
