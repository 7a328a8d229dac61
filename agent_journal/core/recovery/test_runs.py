"""Test and check runs: the latest result per command, and which failures were fixed.

Invariants: a run is a shell call whose output holds a runner's summary
(checks.parse_run). Runs of the same command (`command_key`) are one history: its latest
run is its state, and a failing run followed by a passing one counts as fixed. A
package manager's way of running a script or tool is the same command whichever manager
ran it (`npm test`, `pnpm test`, `yarn run test`; `npx tsc`, `pnpm tsc`: `run_key`), and
its options do not make it another command (`pytest -x -q` is `pytest`: `check_key`). A
later successful call of a command that has a run history, printing no summary, is a
passing run (tsc and eslint print nothing when clean; their exit status is the verdict).
A chain `a && b` that passed is also a passing run of each command it chained whose
latest run failed, and so is a passing run of the same runner, in the same directory,
whose selection provably holds a failing command's (`pytest tests/` after a failing
`pytest tests/test_x.py::test_a`: run_coverage.covers). Unrelated calls, and the order
they were read in, change nothing.

Of a command's earlier runs a history keeps two, whatever the number of runs: its first
run and its latest passing one. It shows the latest passing run when the latest run
failed (what the command reported when it last passed), and the first run when that one
reported a figure that neither the latest nor the shown passing run reports (a count or
a benchmark's measure before the work changed it; `earlier_runs`). A passing run of the
command itself right after its failing one, with only reading calls between them (no
edit, no other command run, no prompt: `quiet`), passed on a re-run: the failure may have
been flaky.
"""

from __future__ import annotations

import re
from functools import lru_cache

from agent_journal.core.recovery.calls import Call, ordered
from agent_journal.core.recovery.record import Record
from agent_journal.core.recovery.run_summary import RunSummary

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

# Output plumbing that does not change what ran: `2>&1`, and a pipe into a pager-like tail.
_PLUMBING = re.compile(r"\s+2>&1|\s*\|\s*(?:tail|head|less|more|cat)\b[^|]*$")


_PACKAGE_RUNNER = re.compile(r"^(?:npm|pnpm|yarn)(?: (?:run|run-script|exec))? (?=\S)|^npx ")
SILENT_PASS = "exit 0, no summary printed"


def run_key(command: str) -> str:
    """The command with a JavaScript package manager's runner prefix made uniform."""
    return _PACKAGE_RUNNER.sub("js ", command, count=1)


# The keys are pure functions of a command's text, and a session runs the same few
# commands over and over: each distinct command is keyed once per process.
@lru_cache(maxsize=8192)
def check_key(command: str) -> str:
    """What makes two runs of a test or check command one history: the command (run_key)
    without its options (`-x`, `--tb=short`, `--fix`, `-q`): they change how it reports
    or what it fixes on the way, not what it checks."""
    return " ".join(w for w in run_key(command).split() if not w.startswith("-"))


def chain_keys(command: str) -> list[str]:
    """The run keys of the commands an `a && b && c` chain ran, when it is nothing else
    (no `;`, `||`, or background `&`): its success means each of them succeeded."""
    if "&&" not in command or ";" in command or "||" in command or "\n" in command:
        return []
    parts = [command_key(p) for p in command.split("&&")]
    if any(not p or p.endswith("&") for p in parts):
        return []
    return [check_key(p) for p in parts]


@lru_cache(maxsize=8192)
def command_key(command: str) -> str:
    """The command with output plumbing removed and blanks collapsed."""
    previous = None
    while previous != command:
        previous = command
        command = _PLUMBING.sub("", command)
    return " ".join(command.split())


class RunMark(Record):
    """One earlier run of a command as its run line shows it: what it reported, when."""

    __slots__ = ("summary", "ts", "call_id", "ok")

    summary: str
    ts: str
    call_id: str
    ok: bool

    def as_dict(self) -> dict[str, object]:
        return {"summary": self.summary, "ts": self.ts, "callId": self.call_id, "ok": self.ok}


# A number and the word it counts or measures ("57 passed", "982311 ns/op"), not a part
# of a name ("Benchmark-8", "TS2322"); a wall-clock duration ("in 2.13s") is no figure:
# it changes from run to run whatever the work did.
_FIGURE = re.compile(r"(?<![\w.-])(\d[\d.,]*)\s*([A-Za-z%][\w/%]*)?")
_DURATION = frozenset({"s", "ms", "m", "h", "sec", "secs", "seconds", "us", "µs"})


def figures(summary: str) -> set[tuple[str, str]]:
    """The figures a run's summary reports: (number, what it counts)."""
    return {(n.rstrip(".,"), w) for n, w in _FIGURE.findall(summary) if w not in _DURATION}


def earlier_runs(latest: RunSummary, latest_id: str, first: RunMark | None,
                 last_passed: RunMark | None) -> tuple[RunMark | None, RunMark | None]:
    """What a run line shows of its command's earlier runs, given the first run and the
    latest passing one: (the latest passing run, when the latest run failed; the first
    run, when it is neither of those and reported a figure neither of them reports)."""
    passed = last_passed if not latest.ok and last_passed is not None else None
    if first is None or first.call_id in (latest_id, passed.call_id if passed else None):
        return passed, None
    told = figures(latest.summary) | (figures(passed.summary) if passed else set())
    return passed, first if figures(first.summary) - told else None


# Tools that only read: a call of one between a failing run and a re-run changes nothing
# the re-run depends on.
_READING = frozenset({"Read", "Grep", "Glob", "LS", "WebFetch", "WebSearch", "ToolSearch",
                      "TodoWrite", "BashOutput", "NotebookRead"})


def quiet(call: Call) -> bool:
    """Whether a call between two runs leaves what they run as it was: a reading tool, a
    shell call that only prints files (`cat a`), or something said other than a prompt
    (the user may have acted before one)."""
    if not call.is_tool_call:
        return call.said != "prompt"
    if call.tool in _READING:
        return True
    return call.tool == "Bash" and bool(call.get("reads")) and not call.get("fileOps")


class TestRun(Record):
    """The history of one command that ran tests or a checker; `last_passed` and
    `first` are the earlier runs its line shows (earlier_runs); `passed_on_rerun` says
    its latest run passed right after a failing one with only quiet calls between."""

    __slots__ = ("command", "latest", "call_id", "ts", "runs", "failed_runs", "fixed",
                 "call_ids", "last_passed", "first", "passed_on_rerun")
    DEFAULTS = {"call_ids": list, "last_passed": None, "first": None,
                "passed_on_rerun": False}

    command: str
    latest: RunSummary
    call_id: str
    ts: str
    runs: int
    failed_runs: int
    fixed: bool
    call_ids: list[str]
    last_passed: RunMark | None
    first: RunMark | None
    passed_on_rerun: bool

    @property
    def passing(self) -> bool:
        return self.latest.ok


def _failing(call: Call) -> bool:
    run = call.check
    return run is not None and not run.ok


class TestRunsFold:
    """test_runs as a step-and-state fold over calls in (ts, id) order. Its state is one
    summary per distinct command (the latest run, how many runs, how many failed, and the
    first and latest passing runs as RunMarks); with `keep_ids` each history also keeps
    every call id that took part in it."""

    __slots__ = ("history", "keys", "shown", "keep_ids", "covered", "changes")

    def __init__(self, keep_ids: bool = True) -> None:
        # run key -> [latest call, runs, failed runs, call ids, runner, first run, latest
        # passing run, `changes` after its latest run when that failed (else None), whether
        # the latest run passed on a re-run]; a summary is built for the latest run only (a
        # busy journal holds many runs of few commands), the two runs as [summary, ts, id, ok].
        self.history: dict[str, list[Any]] = {}
        self.keys: dict[str, str] = {}  # target -> command_key(target), computed once
        self.shown: dict[str, str] = {}  # run key -> the latest run's command, as displayed
        self.keep_ids = keep_ids
        # The run keys the latest step counted as passing runs by coverage (not state).
        self.covered: list[str] = []
        self.changes = 0  # how many calls so far were not quiet

    def step(self, call: Call) -> bool:
        """Fold in one call (or something said); whether it took part in some command's
        run history."""
        self.covered = []
        before = self.changes
        if not quiet(call):
            self.changes += 1
        if not call.is_tool_call:
            return False
        raw = call.facts.get("check")
        if not isinstance(raw, dict) and not call.succeeded:
            return False
        history = self.history
        target = call.target or call.tool or ""
        command = self.keys.get(target)
        if command is None:
            command = self.keys[target] = command_key(target)
        key = check_key(command)
        seen = history.get(key)
        joined = False
        if call.succeeded and (not isinstance(raw, dict) or raw.get("ok") is True):
            # A chain that passed ran each of its commands successfully: a command of it
            # whose latest run failed is followed by this passing one.
            for part in chain_keys(command):
                part_seen = history.get(part)
                if part != key and part_seen is not None and _failing(part_seen[0]):
                    self._add(part_seen, call, True)
                    joined = True
        if isinstance(raw, dict) and raw.get("ok") is True and call.succeeded:
            joined = self._cover(call, key, command, raw.get("runner")) or joined
        if not isinstance(raw, dict):
            if seen is None:
                return joined  # a command that never printed a summary is not a run
            ok = True
        else:
            ok = raw.get("ok") is True
        self.shown[key] = command
        if seen is None:
            # seen is None here only for a call that carried a summary (raw is its dict)
            runner = raw.get("runner") if isinstance(raw, dict) else None
            mark = _mark(call)
            history[key] = [call, 1, 0 if ok else 1, [call.id] if self.keep_ids else [],
                            runner, mark, mark if ok else None,
                            None if ok else self.changes, False]
            return True
        rerun = ok and seen[7] == before  # seen[7] is None unless its latest run failed
        self._add(seen, call, ok)
        seen[8] = rerun
        return True

    def _add(self, seen: list[Any], call: Call, ok: bool) -> None:
        """`call` as the latest run of the history `seen`."""
        seen[0] = call
        seen[1] += 1
        seen[8] = False
        if ok:
            seen[6] = _mark(call)
            seen[7] = None
        else:
            seen[2] += 1
            seen[7] = self.changes
        if self.keep_ids:
            seen[3].append(call.id)

    def _cover(self, call: Call, key: str, command: str, runner: Any) -> bool:
        """Count this passing run as a passing run of each failing command of the same
        runner, in the same directory, whose selection it provably holds."""
        cwd = call.get("cwd")
        for other, seen in self.history.items():
            latest = seen[0]
            if other == key or not _failing(latest) or latest.get("cwd") != cwd:
                continue
            if latest.check.runner != runner:
                continue
            # Loaded only once a passing run meets a failing one of its runner: the
            # session-start hook's digest seldom needs it (tests/data/hook_modules).
            from agent_journal.core.recovery.run_coverage import covers

            if not covers(command, self.shown[other]):
                continue
            self._add(seen, call, True)
            self.covered.append(other)
        return bool(self.covered)

    def result(self) -> list[TestRun]:
        runs = []
        for key, (call, count, failed, ids, runner, first, passed, _, rerun) in \
                self.history.items():
            latest = call.check
            if latest is None:  # a silent successful run of a command with a history
                latest = RunSummary(str(runner), True, SILENT_PASS)
            last_passed, first_run = earlier_runs(
                latest, call.id, RunMark(*first), None if passed is None else RunMark(*passed))
            runs.append(TestRun(self.shown[key], latest, call.id, call.ts, count, failed,
                                latest.ok and failed > 0, list(ids), last_passed, first_run,
                                rerun))
        return sorted(runs, key=lambda r: (r.ts, r.call_id))

    def packed(self) -> list[Any]:
        return [{k: [v[0].fields(), *v[1:]] for k, v in self.history.items()}, self.shown,
                self.changes]

    @classmethod
    def unpacked(cls, packed: list[Any]) -> TestRunsFold:
        fold = cls(keep_ids=False)
        history, fold.shown, fold.changes = packed
        fold.history = {k: [Call(*v[0]), *v[1:]] for k, v in history.items()}
        return fold


def _mark(call: Call) -> list[Any]:
    """A run as kept in the state: what its line would say of it ([summary, ts, id, ok])."""
    raw = call.facts.get("check")  # read as Call.check would, without building it
    if not isinstance(raw, dict):
        return [SILENT_PASS, call.ts, call.id, True]
    return [str(raw["summary"]), call.ts, call.id, bool(raw["ok"])]


def test_runs(calls: Iterable[Call]) -> list[TestRun]:
    """Every command that ran tests or a checker, in order of its latest run."""
    fold = TestRunsFold()
    for call in ordered(calls):
        fold.step(call)
    return fold.result()
