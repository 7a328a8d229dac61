"""Test and check runs: the latest result per command, and which failures were fixed.

Invariants: a run is a shell call whose output holds a runner's summary
(checks.parse_run). Runs of the same command (`command_key`) are one history: its latest
run is its state, and a failing run followed by a passing one counts as fixed. A
package manager's way of running a script or tool is the same command whichever manager
ran it (`npm test`, `pnpm test`, `yarn run test`; `npx tsc`, `pnpm tsc`: `run_key`), a
script's `:fix` variant is the script (`lint:fix` fixes what `lint` checks), and
its options do not make it another command (`pytest -x -q` is `pytest`: `check_key`). A
later successful call of a command that has a run history, printing no summary, is a
passing run (tsc and eslint print nothing when clean; their exit status is the verdict),
unless that status was a pipe's last command's and the run printed something
(calls.Call.masked: `pytest | tail -5` says nothing when no summary shows).
A chain `a && b` that passed is also a passing run of each command it chained whose
latest run failed, and so is a passing run of the same runner, in the same directory,
whose selection provably holds a failing command's (`pytest tests/` after a failing
`pytest tests/test_x.py::test_a`: run_coverage.covers). A failing chain `a && b`
passes once each command it chained has passed since it failed. Unrelated calls, and the order
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

from agent_journal.core import tools
from agent_journal.core.recovery.calls import Call, ordered
from agent_journal.core.recovery.record import Record
from agent_journal.core.recovery.run_summary import RunSummary
from agent_journal.core.recovery.text import DIAGNOSIS_CHARS, clip_middle

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

_COMMENTS = re.compile(r"^(?:[ \t]*#[^\n]*\n)+")
# Output plumbing that does not change what ran: `2>&1`, output sent to /dev/null, and a
# pipe into a pager-like tail.
_PLUMBING = re.compile(r"\s+2>&1|\s+[12]?>\s*/dev/null\b|"
                       r"\s*\|\s*(?:tail|head|less|more|cat)\b[^|]*$")


_PACKAGE_RUNNER = re.compile(r"^(?:npm|pnpm|yarn)(?: (?:run|run-script|exec))? (?=\S)|^npx |"
                             r"^bun (?:run|x) (?=\S)|^bunx ")
# What only sets the stage for a command, not what it runs: a leading `cd DIR &&`, a
# `sleep N &&`, comment lines, and words that run the rest as it is (`time`, `rtk`...).
_STAGE = re.compile(r"^(?:\s*#[^\n]*\n)+|^cd \S+ (?:&&|;) |^Set-Location \S+; |"
                    r"^sleep [\d.]+ && |"
                    # a file written from a heredoc first: what runs is what follows it
                    r"^cat\s*>>?\s*\S+\s*<<-?\s*(?P<q>['\"]?)(?P<end>\w+)(?P=q)[^\n]*\n"
                    r"(?s:.*?)\n(?P=end)[ \t]*(?:\n|&&|;)\s*(?=\S)|"
                    r"^(?:time|rtk|nice|nohup|stdbuf -o\S*|unbuffer|command|caffeinate -i) ")
SILENT_PASS = "exit 0, no summary printed"
_FILTERED = re.compile(r"\|\s*(?:grep|rg|select-string)\b", re.IGNORECASE)
# The runner name of a bare tally line ("Passed: 254, Failed: 0", checks._tally): a
# pipeline's own count of a runner's results; the command says which runner it was.
TALLY = "tests"


# A script that fixes what its checker finds is that checker (`lint:fix`, `format-fix`),
# as `--fix` does not make `eslint --fix` another command.
_FIX_SCRIPT = re.compile(r"^(js \S+?)[:-]fix\b")


def run_key(command: str) -> str:
    """The command with a JavaScript package manager's runner prefix made uniform (and a
    script's `:fix` variant taken for the script)."""
    keyed = _PACKAGE_RUNNER.sub("js ", command, count=1)
    return _FIX_SCRIPT.sub(r"\1", keyed, count=1) if keyed.startswith("js ") else keyed


# The keys are pure functions of a command's text, and a session runs the same few
# commands over and over: each distinct command is keyed once per process.
@lru_cache(maxsize=8192)
def check_key(command: str) -> str:
    """What makes two runs of a test or check command one history: the command (run_key)
    without what only sets its stage (core) and its options (`-x`, `--tb=short`, `--fix`,
    `-q`): they change where or how it reports, or what it fixes on the way, not what it
    checks."""
    return " ".join(w for w in run_key(core(command)).split() if not w.startswith("-"))


def core(command: str) -> str:
    """`command` without a leading `cd DIR &&`, `sleep N &&`, comment lines, a file
    written from a heredoc before it (`cat > f <<'EOF' ... EOF`) or a word that runs the
    rest as it is (`time`, `rtk`, `nice`): the same command run from elsewhere, after a
    pause or after writing its input, is the same command."""
    previous = None
    while previous != command:
        previous = command
        command = _STAGE.sub("", command, count=1)
    return command


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
    """The command with leading comment lines and output plumbing removed and blanks
    collapsed (a comment is gone before its line end is)."""
    command = _COMMENTS.sub("", command)
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


# Kinds of tool (core/tools.py) that only read or keep the task list: a call of one between
# a failing run and a re-run changes nothing the re-run depends on.
_READING = frozenset({tools.READ, tools.SEARCH, tools.WEB, tools.TODO_LIST,
                      tools.PLAN_STEPS, tools.TASK_CREATE, tools.TASK_UPDATE,
                      tools.SHELL_OUTPUT})


def quiet(call: Call) -> bool:
    """Whether a call between two runs leaves what they run as it was: a reading tool, a
    shell call that only prints files (`cat a`), or something said other than a prompt
    (the user may have acted before one)."""
    if not call.is_tool_call:
        return call.said != "prompt"
    kind = tools.kind_of(call.tool)
    if kind in _READING:
        return True
    return kind == tools.SHELL and bool(call.get("reads")) and not call.get("fileOps")


class FailedRun(Record):
    """A command's latest failing run: what it reported, its first failure line, what
    the agent said right after it (its diagnosis), if anything, and the command of the
    first run that passed after it (`fixed_by`, as command_key has it), once one did."""

    __slots__ = ("summary", "first_failure", "ts", "call_id", "diagnosis", "fixed_by",
                 "failures")
    DEFAULTS = {"diagnosis": None, "fixed_by": None, "failures": list}
    summary: str
    first_failure: str | None
    ts: str
    call_id: str
    diagnosis: str | None
    fixed_by: str | None
    # What each failing run of the command said (failure_text), distinct, in the order of
    # their latest run, this one's last; at most FAILURES_KEPT.
    failures: list[str]

    @property
    def earlier(self) -> list[str]:
        """How earlier failing runs failed, where that differs from this one's."""
        return self.failures[:-1][-(FAILURES_KEPT - 1):]

    def as_dict(self) -> dict[str, object]:
        return {"summary": self.summary, "firstFailure": self.first_failure, "ts": self.ts,
                "callId": self.call_id, "diagnosis": self.diagnosis, "fixedBy": self.fixed_by,
                "earlier": self.earlier}


FAILURES_KEPT = 4


def failure_text(check: dict[str, Any]) -> str:
    """What a failing run said, in a line: the tests it names failing, and its first
    failure line (else its summary)."""
    failing = check.get("failing") or []
    named = ", ".join(test_title(str(f)) for f in failing[:4]) + ": " if failing else ""
    return named + str(check.get("firstFailure") or check.get("summary") or "failed")


def test_title(test: str) -> str:
    """A failing test as its own title: the last part of a `file › suite › title` or
    `file > suite > title` path (Playwright, Jest, Vitest), where the title says which."""
    for sep in (" › ", " > "):
        if sep in test:
            return test.rsplit(sep, 1)[1].strip() or test
    return test


class TestRun(Record):
    """The history of one command that ran tests or a checker; `last_passed` and
    `first` are the earlier runs its line shows (earlier_runs); `passed_on_rerun` says
    its latest run passed right after a failing one with only quiet calls between;
    `last_failed` is its latest failing run."""

    __slots__ = ("command", "latest", "call_id", "ts", "runs", "failed_runs", "fixed",
                 "call_ids", "last_passed", "first", "passed_on_rerun", "maybe_covered_by",
                 "last_failed")
    DEFAULTS = {"call_ids": list, "last_passed": None, "first": None,
                "passed_on_rerun": False, "maybe_covered_by": None, "last_failed": None}

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
    # A wrapper (make test, mise run test...) that passed after the latest failing run:
    # suggestive, not proof (wrappers.py). Its summary is the wrapper's command.
    maybe_covered_by: RunMark | None
    last_failed: FailedRun | None

    @property
    def passing(self) -> bool:
        return self.latest.ok

    @property
    def unresolved(self) -> bool:
        """Failing, with no later evidence that it may pass now."""
        return not self.latest.ok and self.maybe_covered_by is None


def _failing(call: Call) -> bool:
    run = call.check
    return run is not None and not run.ok


class TestRunsFold:
    """test_runs as a step-and-state fold over calls in (ts, id) order. Its state is one
    summary per distinct command (the latest run, how many runs, how many failed, and the
    first and latest passing runs as RunMarks); with `keep_ids` each history also keeps
    every call id that took part in it."""

    __slots__ = ("history", "keys", "shown", "keep_ids", "covered", "changes", "failing",
                 "just_failed", "settled")

    def __init__(self, keep_ids: bool = True) -> None:
        # run key -> [latest call, runs, failed runs, call ids, runner, first run, latest
        # passing run, `changes` after its latest run when that failed (else None), whether
        # the latest run passed on a re-run, the wrapper run that may cover its latest
        # failing run (else None), its latest failing run as FailedRun fields (else
        # None), for a failing `a && b` chain the run keys of its commands that have not
        # passed since (else None)]; a summary is built for the latest run only (a busy
        # journal holds many runs of few commands), the runs as [summary, ts, id, ok].
        self.history: dict[str, list[Any]] = {}
        # The keys whose latest run failed, in no particular order: what a passing run
        # may cover is looked for among these only, so a fold stays linear in its calls.
        self.failing: dict[str, None] = {}
        self.keys: dict[str, str] = {}  # target -> command_key(target), computed once
        self.shown: dict[str, str] = {}  # run key -> the latest run's command, as displayed
        self.keep_ids = keep_ids
        # The run keys the latest step counted as passing runs by coverage (not state).
        self.covered: list[str] = []
        self.changes = 0  # how many calls so far were not quiet
        # The run key whose latest run the latest tool call was, when that run failed:
        # what the agent says next is its diagnosis (diagnose).
        self.just_failed: str | None = None
        self.settled: list[str] = []  # the failing runs the latest step made pass

    def step(self, call: Call) -> bool:
        """Fold in one call (or something said); whether it took part in some command's
        run history."""
        self.covered = []
        self.settled = []
        before = self.changes
        if not quiet(call):
            self.changes += 1
        if not call.is_tool_call:
            return False
        self.just_failed = None
        raw = call.facts.get("check")
        if not isinstance(raw, dict) and not call.succeeded:
            return False
        history = self.history
        target = call.target or call.tool or ""
        command = self.keys.get(target)
        if command is None:
            command = self.keys[target] = command_key(target)
        key = check_key(command)
        if call.masked:
            # Its exit was its pipe's: no verdict. A pipe that filters the output down to
            # failures and showed none may cover a failing run (noted, never a pass).
            if self.failing and _FILTERED.search(target):
                self._maybe_cover(call, key, command)
            return False
        seen = history.get(key)
        joined = False
        if call.succeeded and (not isinstance(raw, dict) or raw.get("ok") is True):
            # A chain that passed ran each of its commands successfully: a command of it
            # whose latest run failed is followed by this passing one.
            for part in chain_keys(command):
                part_seen = history.get(part)
                if part != key and part_seen is not None and _failing(part_seen[0]):
                    self._add(part, part_seen, call, True)
                    joined = True
            joined = self._parts_passed(call, {key, *chain_keys(command)}) or joined
        if isinstance(raw, dict) and raw.get("ok") is True and call.succeeded:
            joined = self._cover(call, key, command, raw.get("runner")) or joined
        if call.succeeded and self.failing and (not isinstance(raw, dict) or raw.get("ok")):
            self._maybe_cover(call, key, command)
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
                            None if ok else self.changes, False, None,
                            None if ok else _failed(call), None if ok else _parts(key, command)]
            if not ok:
                self.failing[key] = None
                self.just_failed = key
            return True
        rerun = ok and seen[7] == before  # seen[7] is None unless its latest run failed
        self._add(key, seen, call, ok)
        seen[8] = rerun
        return True

    def _add(self, key: str, seen: list[Any], call: Call, ok: bool) -> None:
        """`call` as the latest run of the history `seen` (of run key `key`)."""
        seen[0] = call
        seen[1] += 1
        seen[8] = False
        seen[9] = None
        if ok:
            seen[6] = _mark(call)
            seen[7] = None
            seen[11] = None
            if self.failing.pop(key, 0) is None and seen[10] is not None:
                self.settled.append(seen[10][3])
                target = call.target or call.tool or ""
                seen[10][5] = self.keys.get(target) or command_key(target)
        else:
            seen[2] += 1
            seen[7] = self.changes
            seen[10] = _failed(call, seen[10])
            target = call.target or call.tool or ""
            seen[11] = _parts(key, self.keys.get(target) or command_key(target))
            self.failing[key] = None
            self.just_failed = key
        if self.keep_ids:
            seen[3].append(call.id)

    def _parts_passed(self, call: Call, passed: set[str]) -> bool:
        """A failing `a && b` chain whose every command has passed since it failed (run
        keys `passed` just did) passes with the last of them: what it ran now passes."""
        done = False
        for other in list(self.failing):
            seen = self.history[other]
            left = seen[11]
            if not left or other in passed or not passed.intersection(left):
                continue
            seen[11] = [p for p in left if p not in passed]
            if not seen[11]:
                self._add(other, seen, call, True)
                self.covered.append(other)
                done = True
        return done

    def _cover(self, call: Call, key: str, command: str, runner: Any) -> bool:
        """Count this passing run as a passing run of each failing command of the same
        runner, in the same directory, whose selection it provably holds."""
        cwd = call.get("cwd")
        for other in list(self.failing):
            seen = self.history[other]
            latest = seen[0]
            if other == key:
                continue
            if latest.check.runner != runner and runner != TALLY:
                continue
            # Loaded only once a passing run meets a failing one of its runner: the
            # session-start hook's digest seldom needs it (tests/data/hook_modules).
            from agent_journal.core.recovery.run_coverage import covers_any, folder, same_files

            if folder(command, cwd) != folder(self.shown[other], latest.get("cwd")) and \
                    not same_runner_files(command, self.shown[other]):
                continue
            if not covers_any(command, self.shown[other]) and \
                    not same_files(command, self.shown[other]):
                continue
            self._add(other, seen, call, True)
            self.covered.append(other)
        return bool(self.covered)

    def _maybe_cover(self, call: Call, key: str, command: str) -> None:
        """A passing wrapper (`make test`, `mise run test:integration`) may cover the
        failing runs of its kind in its directory or below, and so may a passing command
        that printed no runner summary but holds runs of the same runner taking in the
        failing one's (`for c in ...; do out=$(go test ./... | grep FAIL); ...`): noted,
        never counted as a pass (wrappers.py)."""
        from agent_journal.core.recovery.wrappers import may_cover, wrapper_scope

        scope = wrapper_scope(command)
        held: list[str] = []
        if scope is None:
            if isinstance(call.facts.get("check"), dict):
                return  # it printed its own verdict: that counts, or it does not
            from agent_journal.core.recovery.run_coverage import embedded_runs

            held = embedded_runs(call.target or "")
            if not held:
                return
        cwd = call.get("cwd") or ""
        for other in self.failing:
            seen = self.history[other]
            latest = seen[0]
            if other == key or latest.check is None:
                continue
            where = latest.get("cwd") or ""
            if cwd and where and where != cwd and not where.startswith(cwd.rstrip("/") + "/"):
                continue
            if scope is not None and may_cover(scope, latest.check.runner) or \
                    held and self._holds(held, latest):
                seen[9] = [command, call.ts, call.id, True]

    @staticmethod
    def _holds(held: list[str], latest: Call) -> bool:
        from agent_journal.core.recovery.run_coverage import holds_runs

        return holds_runs(held, latest.target or "")

    def diagnose(self, text: str) -> None:
        """What the agent said right after the latest tool call, a failing run: kept on
        that run as its diagnosis (the first said)."""
        key = self.just_failed
        failed = self.history[key][10] if key is not None else None
        if failed is not None and failed[4] is None:
            failed[4] = clip_middle(text, DIAGNOSIS_CHARS)

    def failed_ids(self) -> set[str]:
        """The call ids of each command's latest failing run."""
        return {h[10][3] for h in self.history.values() if h[10] is not None}

    def result(self) -> list[TestRun]:
        runs = []
        for key, (call, count, failed, ids, runner, first, passed, _, rerun, maybe, last_failed,
                  _) in self.history.items():
            latest = call.check
            if latest is None:  # a silent successful run of a command with a history
                latest = RunSummary(str(runner), True, SILENT_PASS)
            last_passed, first_run = earlier_runs(
                latest, call.id, RunMark(*first), None if passed is None else RunMark(*passed))
            runs.append(TestRun(self.shown[key], latest, call.id, call.ts, count, failed,
                                latest.ok and failed > 0, list(ids), last_passed, first_run,
                                rerun, None if maybe is None else RunMark(*maybe),
                                None if last_failed is None else FailedRun(*last_failed)))
        return sorted(runs, key=lambda r: (r.ts, r.call_id))

    def packed(self) -> list[Any]:
        return [{k: [v[0].fields(), *v[1:]] for k, v in self.history.items()}, self.shown,
                self.changes, self.just_failed]

    @classmethod
    def unpacked(cls, packed: list[Any]) -> TestRunsFold:
        fold = cls(keep_ids=False)
        history, fold.shown, fold.changes, fold.just_failed = packed
        fold.history = {k: [Call(*v[0]), *v[1:]] for k, v in history.items()}
        fold.failing = {k: None for k, v in fold.history.items() if _failing(v[0])}
        return fold


def same_runner_files(broad: str, narrow: str) -> bool:
    """Whether the two commands name the same test files (run_coverage.same_files), which
    holds wherever each ran from; loads the coverage rules only when both name files."""
    if "/" not in broad and "." not in broad:
        return False
    from agent_journal.core.recovery.run_coverage import same_files

    return same_files(broad, narrow)


def _parts(key: str, command: str) -> list[str] | None:
    """The run keys of a failing `a && b` chain's commands, other than its own."""
    parts = [p for p in chain_keys(command) if p != key]
    return sorted(set(parts)) or None


def _failed(call: Call, before: list[Any] | None = None) -> list[Any]:
    """A failing run as kept in the state: FailedRun's fields, no diagnosis yet, and the
    failures of the command's earlier failing runs (`before`: the previous one's)."""
    raw = call.facts.get("check")
    if not isinstance(raw, dict):
        raw = {"summary": str(call.get("reason") or "failed")}
    first = raw.get("firstFailure")
    what = failure_text(raw)
    failures = [w for w in (before[6] if before is not None else []) if w != what] + [what]
    return [str(raw["summary"]), None if first is None else str(first), call.ts, call.id,
            None, None, failures[-FAILURES_KEPT:]]


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
