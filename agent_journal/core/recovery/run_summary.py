"""What one test or check run's output says, as parsed by checks.parse_run.

Invariant: a plain record, round-tripping through `as_dict`/`from_dict` unchanged (the
digest cache keeps it as JSON). It lives apart from the parsers so that reading cached
runs never loads (or compiles) them.
"""

from __future__ import annotations

from agent_journal.core.recovery.record import Record


class RunSummary(Record):
    """What one run's output says: `ok` is the runner's verdict, `summary` its line."""

    __slots__ = (
        "runner", "ok", "summary", "passed", "failed", "errors", "skipped", "failing",
        "first_failure"
    )
    DEFAULTS = {
        "passed": None, "failed": None, "errors": None, "skipped": None, "failing": list,
        "first_failure": None
    }

    runner: str
    ok: bool
    summary: str
    passed: int | None
    failed: int | None
    errors: int | None
    skipped: int | None
    failing: list[str]
    first_failure: str | None

    def as_dict(self) -> dict[str, object]:
        return {"runner": self.runner, "ok": self.ok, "summary": self.summary,
                "passed": self.passed, "failed": self.failed, "errors": self.errors,
                "skipped": self.skipped, "failing": list(self.failing),
                "firstFailure": self.first_failure}

    @classmethod
    def from_dict(cls, d: dict[str, object]) -> RunSummary:
        return cls(runner=str(d["runner"]), ok=bool(d["ok"]), summary=str(d["summary"]),
                   passed=_int(d.get("passed")), failed=_int(d.get("failed")),
                   errors=_int(d.get("errors")), skipped=_int(d.get("skipped")),
                   failing=[str(x) for x in d.get("failing") or []],  # type: ignore[attr-defined]
                   first_failure=d.get("firstFailure"))  # type: ignore[arg-type]


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


