"""The journal's clock.

Invariant: every timestamp the journal writes or compares comes from `now()`,
so AGENT_JOURNAL_NOW fixes time for a whole process (tests, reproducible
compaction). Timestamps are UTC, millisecond precision, ISO 8601 with `Z`,
which makes their string order equal their time order.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime

from agent_journal.core.errors import UsageError

ENV_NOW = "AGENT_JOURNAL_NOW"


def parse_instant(text: str) -> datetime:
    """Parse an ISO 8601 instant; naive values are taken as UTC."""
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        # Only odd spellings reach dateutil; its parser is too slow to import
        # on the write path.
        try:
            from dateutil import parser as _parser

            value = _parser.isoparse(text.strip())
        except (ValueError, OverflowError):
            raise UsageError(f"not an ISO 8601 instant: {text!r}") from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00+05:00 is before year 1 in UTC
        raise UsageError(f"not an ISO 8601 instant between years 1 and 9999 in UTC: "
                         f"{text!r}") from None


def now() -> datetime:
    fixed = os.environ.get(ENV_NOW)
    if fixed:
        return parse_instant(fixed)
    return datetime.now(UTC)


def format_ts(value: datetime) -> str:
    value = value.astimezone(UTC)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


def now_ts() -> str:
    return format_ts(now())
