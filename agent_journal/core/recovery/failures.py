"""Failed calls with their reason, refusals told apart, and what a later success resolved.

Invariants: a failure is `denied` (a permission denial) or `rejected` (the user's
rejection) only by Claude Code's own wording (reasons.refusal), else `error`; a Python
run that exited 0 but printed a traceback (reasons.printed_traceback) is a `traceback`
failure. A call that
failed as a benign no-op (reasons.BENIGN_NOOPS: `nothing to commit, working tree clean`)
is not a failure at all. A failure
is resolved when a later call of the same tool on the same target succeeded (of an MCP
server's tool: when any later call of that server succeeded; for a test
or check command: when a later run of it passed, or a later passing run that
test_runs counts as one of it: a chain that ran it, or a run whose selection holds its
selection), or when a later `a && b` chain that succeeded ran it; it is open otherwise. A
shell failure is known by the invocation it was run for (`principal`: not a lookup, a
sourced file or a variable set first); a later success that ran that very invocation
among other commands, its exit status perhaps another's, resolves it as `maybe` fixed,
said so in words (never for a test or check run, whose verdict is its own output's). A
success whose exit status was a pipe's (calls.Call.masked) resolves no test or check run.
A failure's `diagnosis` is the first thing the agent said after it, before its next tool
call: why it thinks the call failed, in its own words.
"""

from __future__ import annotations

import re

from agent_journal.core import tools
from agent_journal.core.recovery.calls import Call, ordered
from agent_journal.core.recovery.record import Record
from agent_journal.core.recovery.test_runs import (
    TestRunsFold,
    chain_keys,
    check_key,
    command_key,
    core,
    run_key,
)
from agent_journal.core.recovery.text import DIAGNOSIS_CHARS, clip_middle

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

ERROR = "error"
TRACEBACK = "traceback"
_RUNS_CHECKS = re.compile(r"\b(?:test|tests|spec|e2e|lint|vet|check|typecheck|pytest|jest|"
                          r"vitest|playwright|mocha|tsc|mypy|ruff|eslint|clippy)\b")
_RUNS_PYTHON = re.compile(r"\bpython[\d.]*\b|\b(?:uv|poetry|pipenv|pdm|hatch) run\b")


class Failure(Record):
    __slots__ = (
        "call_id", "tool", "target", "kind", "reason", "ts", "exit_code", "words",
        "resolved_by", "description", "summary", "first_failure", "failing", "diagnosis",
        "maybe"
    )
    DEFAULTS = {"exit_code": None, "words": None, "resolved_by": None, "description": None,
                "summary": None, "first_failure": None, "failing": list, "diagnosis": None,
                "maybe": None}
    call_id: str
    tool: str | None
    target: str | None
    kind: str
    reason: str | None
    ts: str
    exit_code: int | None
    words: str | None
    resolved_by: str | None
    description: str | None
    summary: str | None  # a failing test or check run's own summary line(s)
    first_failure: str | None  # and the first failure line it printed
    failing: list[str]  # and the tests or codes it names as failing
    # What the agent said right after it, before its next action: its own diagnosis.
    diagnosis: str | None
    # When it was resolved only by a later command that ran the same invocation among
    # others, its exit status perhaps another's: the time of that run (may be fixed).
    maybe: str | None

    @property
    def resolved(self) -> bool:
        return self.resolved_by is not None


_SHELLS = frozenset({tools.SHELL, tools.OTHER_SHELL})  # kinds of tool (core/tools.py)


def _same(call: Call) -> tuple[str | None, str | None]:
    target = call.target
    server = tools.server_of(call.tool)
    if server is not None:
        return (server, None)  # any later success of the same MCP server resolves it
    if tools.kind_of(call.tool) in _SHELLS and target:
        # A test or check run is the same run whatever its options (check_key); any
        # command is the same wherever it ran from (test_runs.core), and one that is no
        # lookup is the same command whatever its arguments (head).
        if call.get("check") is not None:
            target = check_key(command_key(target))
        else:
            plain = run_key(core(command_key(target)))
            if plain.split()[:1] and (plain.split()[0] in _SETUP or _ASSIGNMENT.match(plain)):
                # (a script that sets up first is known by what it was run for)
                plain = run_key(core(principal(call.tool, target) or plain))
            target = plain if is_lookup(call.tool, target) else head(plain)
    return (call.tool, target)


# Tools and shell commands that only look something up: one that fails (a file that is
# not there, a pattern with no match) is a question answered "no", not a problem to fix.
_LOOKUP_TOOLS = frozenset({tools.READ, tools.SEARCH, tools.WEB, tools.SHELL_OUTPUT,
                           tools.TASK_OUTPUT})
_LOOKUP_HEADS = frozenset({"grep", "rg", "ag", "ls", "cat", "head", "tail", "awk", "find",
                           "fd", "wc", "file", "stat", "which", "type", "jq", "tree", "du",
                           "echo", "printf", "test", "[", "diff", "readlink", "realpath",
                           "Get-Content", "Get-ChildItem", "Select-String", "Test-Path"})
_GIT_LOOKUPS = frozenset({"diff", "log", "show", "status", "grep", "blame", "rev-parse",
                          "ls-files", "branch", "remote", "cat-file", "describe"})
_SUBCOMMAND = re.compile(r"^[A-Za-z][\w:.-]*$")


def is_lookup(tool: str | None, target: str | None) -> bool:
    """Whether a call of `tool` on `target` only looked something up (a read, a search,
    a listing)."""
    kind = tools.kind_of(tool)
    if kind in _LOOKUP_TOOLS:
        return True
    if kind not in _SHELLS or not target:
        return False
    words = core(target).split()
    if not words:
        return False
    if words[0] == "sed":
        return "-i" not in words
    if words[0] == "git":
        return len(words) > 1 and words[1] in _GIT_LOOKUPS
    return words[0] in _LOOKUP_HEADS


def invocations(command: str, *, whole: bool = False) -> list[str]:
    """The simple commands a compound command ran (`a && b | c; d`), each as command_key
    gives it and only up to a pipe: none after a `||` (which ran only if what came before
    failed), no `cd`. Empty for a command that is not compound, unless `whole`."""
    if not whole and not any(sep in command for sep in (";", "&&", "\n", "|")):
        return []
    found = []
    for group in re.split(r"[;\n]", command):
        if "||" in group:
            continue
        for part in group.split("&&"):
            key = command_key(part).split("|")[0].strip()
            if key and not key.startswith(("cd ", "Set-Location ")):
                found.append(key)
    return found


# What only prints, or sets up what follows: never what a command was run for.
_SETUP = frozenset({"echo", "Write-Host", ".", "source", "set", "export", "unset"})
_ASSIGNMENT = re.compile(r"^(?:\$env:\w+\s*=|[A-Za-z_]\w*=\S*$)")


def principal(tool: str | None, command: str) -> str | None:
    """The invocation a command was run for: its first that is no lookup, no variable
    set for what follows, no string printed (invocations())."""
    for part in invocations(command, whole=True):
        if not _ASSIGNMENT.match(part) and part[0] not in "\"'" and \
                not is_lookup(tool, part) and part.split()[0] not in _SETUP:
            return part
    return None


def head(command: str) -> str:
    """A command's program and subcommands (`gh api graphql`, `js build`, `go build`):
    what it is, whatever it was given."""
    words = command.split()
    while len(words) > 2 and words[0] == "git" and words[1] in ("-C", "-c"):
        del words[1:3]  # git's global options say where or how, not what: `git -C x add`
    kept = words[:1]
    for word in words[1:3]:
        if not _SUBCOMMAND.match(word) or "." in word:
            break
        kept.append(word)
    return " ".join(kept)


Key = tuple  # (tool, target): what a later success must be to resolve a failure


class FailuresFold:
    """failures as a step-and-state fold over calls in (ts, id) order.

    A failure stepped in as `hidden` shows elsewhere while it is open (with its test run).
    With `keep` None the state is every failure. With `keep` N it is bounded by what can
    show: of the open failures of each key (and of those no success can resolve), the
    latest N hidden and the latest N not hidden, with counts of the rest (a key's
    failures are resolved all at once, so an older one can never show while a newer one
    of its key does not); of the resolved ones the latest N by their own (ts, id)."""

    __slots__ = ("open", "waiting", "stuck", "dropped", "visible_open", "resolved",
                 "resolved_total", "keep", "n", "chains", "settled", "invoked")

    def __init__(self, keep: int | None = None) -> None:
        # call id -> [order, failure, hidden, key]: the open failures kept
        self.open: dict[str, list[Any]] = {}
        self.waiting: dict[Key, list[str]] = {}  # key -> its open failures kept, in order
        self.stuck: list[str] = []  # open failures no success can resolve, in order
        # key (None: stuck) -> [hidden, not hidden] open failures no longer kept
        self.dropped: dict[Key | None, list[int]] = {}
        self.visible_open = 0  # open failures not hidden, kept or not
        self.resolved: list[tuple[int, Failure]] = []  # in (ts, id) order
        self.resolved_total = 0
        self.keep = keep
        self.n = 0  # failures seen: each one's place in (ts, id) order
        # open failure of an `a && b` chain -> the run keys of its commands that have not
        # succeeded since: it is resolved once each of them has.
        self.chains: dict[str, list[str]] = {}
        self.settled: list[str] = []  # the failures the latest step resolved
        # invocation (invocations()) -> the open failed shell calls that ran it, for a
        # later success that runs it again among other commands (_invocations_step)
        self.invoked: dict[str, list[str]] = {}

    def step(self, call: Call, hidden: bool = False, covered: Iterable[str] = ()
             ) -> Failure | None:
        """Fold in one call; the failure it is, if it is one. `covered` holds the run keys
        of the failing commands this passing run counts for (TestRunsFold.covered)."""
        self.settled = []
        if not call.is_tool_call or call.unfinished:
            return None
        if call.failed and call.get("noop"):
            return None  # nothing needed doing: nothing is lost, nothing is open
        if call.succeeded and call.get("traceback") and _RUNS_PYTHON.search(call.target or ""):
            # Exit 0, yet the Python it ran crashed (and printed it): a failure all the same.
            failure = Failure(call.id, call.tool, call.target, TRACEBACK,
                              call.get("traceback"), call.ts, description=call.get("desc"))
            self._add(failure, _same(call), hidden)
            return failure
        if call.failed:
            check = call.get("check") or {}
            failure = Failure(call.id, call.tool, call.target, call.get("refusal") or ERROR,
                              call.get("reason"), call.ts, call.get("exit"), call.get("words"),
                              description=call.get("desc"), summary=check.get("summary"),
                              first_failure=check.get("firstFailure"),
                              failing=list(check.get("failing") or []))
            key = _same(call)
            # A call of a tool that names no target is resolved by any later success of
            # that tool (a browser tool that timed out, then worked).
            self._add(failure, key if key[0] is not None or key[1] is not None else None,
                      hidden)
            parts = chain_keys(call.target) if tools.kind_of(call.tool) == tools.SHELL \
                and call.target else []
            if parts and call.id in self.open:
                self.chains[call.id] = sorted(set(parts))
            return failure
        if not self.waiting:
            return None  # nothing open that a success could resolve
        run = call.check
        if run is not None and not run.ok:
            return None  # the command ran again and still fails
        if run is None and call.masked:
            self._masked_step(call)
            self._invocations_step(call)
            return None
        keys = [_same(call), (call.tool, None)]
        if tools.kind_of(call.tool) in _SHELLS and call.target:
            keys.append((call.tool, check_key(command_key(call.target))))
            # A failure that printed no run summary was keyed by the command itself,
            # or (not a lookup) by its head.
            plain = run_key(core(command_key(call.target)))
            keys.append((call.tool, plain))
            keys.append((call.tool, head(plain)))
            parts = chain_keys(call.target)
            keys += [(call.tool, part) for part in parts]
            if parts:
                keys += [(call.tool, head(run_key(core(command_key(p)))))
                         for p in call.target.split("&&")]
            keys += [(call.tool, other) for other in covered]
        for same in keys:
            for call_id in self.waiting.pop(same, ()):
                self._settle(call_id, call.id)
            hidden_n, visible_n = self.dropped.pop(same, (0, 0))
            self.resolved_total += hidden_n + visible_n
            self.visible_open -= visible_n
        if self.chains:
            self._chains_step({k for _, k in keys}, call.id)
        if tools.kind_of(call.tool) in _SHELLS and call.target:
            self._invocations_step(call)
        return None

    def _invocations_step(self, call: Call) -> None:
        """A success that ran, among other commands, the very invocation a failed command
        ran (`omp export x | head -3; grep y out`): the failure may be fixed, as far as a
        status that may be another command's tells. Settled and marked `maybe`, unless it
        was a test or check run, whose verdict needs a summary of its own (test_runs)."""
        if not self.invoked:
            return  # no open failure ran an invocation to look for
        for part in invocations(call.target or ""):
            for call_id in list(self.invoked.get(part, ())):
                held = self.open.get(call_id)
                if held is None or held[1].tool != call.tool:
                    continue
                key = held[3]
                group = self.stuck if key is None else self.waiting.get(key, [])
                if call_id in group:
                    group.remove(call_id)
                if key is not None and not group:
                    self.waiting.pop(key, None)
                held[1].maybe = call.ts
                self._settle(call_id, call.id)

    def _index(self, failure: Failure, add: bool) -> None:
        """Keep `invoked` to the open failed shell calls that are no test or check run."""
        if failure.summary is not None or tools.kind_of(failure.tool) not in _SHELLS:
            return
        part = principal(failure.tool, failure.target or "")
        if part is None or _RUNS_CHECKS.search(part):
            return
        ids = self.invoked.setdefault(part, [])
        if add and failure.call_id not in ids:
            ids.append(failure.call_id)
        elif failure.call_id in ids:
            ids.remove(failure.call_id)
        if not ids:
            del self.invoked[part]

    def _masked_step(self, call: Call) -> None:
        """A success whose exit was its pipe's last command's, with no runner summary:
        it resolves a failure of the same call, never a test or check run's (whose
        verdict it does not know)."""
        key = _same(call)
        waiting = self.waiting.pop(key, [])
        runs = [i for i in waiting if self.open[i][1].summary is not None]
        if runs:
            self.waiting[key] = runs
        for call_id in waiting:
            if call_id not in runs:
                self._settle(call_id, call.id)

    def _settle(self, call_id: str, by: str) -> None:
        order, failure, was_hidden, _ = self.open.pop(call_id)
        self._index(failure, False)
        self.chains.pop(call_id, None)
        failure.resolved_by = by
        self.settled.append(call_id)
        self._resolve(order, failure, was_hidden)

    def _chains_step(self, succeeded: set[str | None], by: str) -> None:
        """A success of one command of a failed chain: the chain is resolved once every
        command it chained has succeeded since it failed."""
        for call_id, parts in list(self.chains.items()):
            left = [p for p in parts if p not in succeeded]
            if left:
                self.chains[call_id] = left
                continue
            key = self.open[call_id][3]
            group = self.stuck if key is None else self.waiting.get(key, [])
            if call_id in group:
                group.remove(call_id)
            if key is not None and not group:
                self.waiting.pop(key, None)
            self._settle(call_id, by)

    def _add(self, failure: Failure, key: Key | None, hidden: bool) -> None:
        self.open[failure.call_id] = [self.n, failure, hidden, key]
        self._index(failure, True)
        self.n += 1
        if not hidden:
            self.visible_open += 1
        group = self.stuck if key is None else self.waiting.setdefault(key, [])
        group.append(failure.call_id)
        if self.keep is not None and len(group) > self.keep:
            alike = [i for i in group if self.open[i][2] == hidden]
            if len(alike) > self.keep:
                oldest = alike[0]
                group.remove(oldest)
                self._index(self.open.pop(oldest)[1], False)
                self.chains.pop(oldest, None)
                self.dropped.setdefault(key, [0, 0])[0 if hidden else 1] += 1

    def _resolve(self, order: int, failure: Failure, hidden: bool) -> None:
        from bisect import insort

        self.resolved_total += 1
        if not hidden:
            self.visible_open -= 1
        insort(self.resolved, (order, failure), key=lambda p: p[0])
        if self.keep is not None and len(self.resolved) > self.keep:
            del self.resolved[0]

    def diagnose(self, call_id: str, text: str) -> None:
        """The agent's words right after failure `call_id`, kept on it (the first said)."""
        held = self.open.get(call_id)
        found = held[1] if held is not None else next(
            (f for _, f in reversed(self.resolved) if f.call_id == call_id), None)
        if found is not None and found.diagnosis is None:
            found.diagnosis = clip_middle(text, DIAGNOSIS_CHARS)

    def diagnosis_of(self, call_id: str) -> str | None:
        """The diagnosis kept on the open failure `call_id`, if any."""
        held = self.open.get(call_id)
        return held[1].diagnosis if held is not None else None

    def lookups_dropped(self) -> int:
        """Open failed lookups (not hidden) no longer kept."""
        return sum(v[1] for k, v in self.dropped.items()
                   if k is not None and is_lookup(k[0], k[1]))

    def open_failures(self, *, hidden: bool = True) -> list[Failure]:
        """The open failures kept (without the hidden ones unless `hidden`), in (ts, id)
        order; visible_open counts those not hidden, kept or not."""
        kept = sorted(self.open.values(), key=lambda p: p[0])
        return [p[1] for p in kept if hidden or not p[2]]

    def resolved_failures(self) -> list[Failure]:
        """The resolved failures kept, in (ts, id) order (resolved_total counts them all)."""
        return [f for _, f in self.resolved]

    def packed(self) -> list[Any]:
        return [[[n, list(f.fields()), hidden, None if key is None else list(key)]
                 for n, f, hidden, key in self.open.values()],
                [[list(k), ids] for k, ids in self.waiting.items()], self.stuck,
                [[None if k is None else list(k), v] for k, v in self.dropped.items()],
                self.visible_open, [[n, list(f.fields())] for n, f in self.resolved],
                self.resolved_total, self.keep, self.n, self.chains, self.invoked]

    @classmethod
    def unpacked(cls, packed: list[Any]) -> FailuresFold:
        opened, waiting, stuck, dropped, visible, resolved, total, keep, n, chains, invoked = \
            packed
        fold = cls(keep)
        fold.open = {f[0]: [i, Failure(*f), hidden, None if key is None else tuple(key)]
                     for i, f, hidden, key in opened}
        fold.waiting = {tuple(k): list(ids) for k, ids in waiting}
        fold.stuck = list(stuck)
        fold.dropped = {None if k is None else tuple(k): list(v) for k, v in dropped}
        fold.visible_open = visible
        fold.resolved = [(i, Failure(*f)) for i, f in resolved]
        fold.resolved_total, fold.n = total, n
        fold.chains = {k: list(v) for k, v in chains.items()}
        fold.invoked = {k: list(v) for k, v in invoked.items()}
        return fold


def failures(calls: Iterable[Call]) -> list[Failure]:
    """Every failed tool call, in (ts, id) order, each marked resolved or open."""
    fold = FailuresFold()
    runs = TestRunsFold(keep_ids=False)  # which passing runs count for other commands
    for call in ordered(calls):
        runs.step(call)
        fold.step(call, covered=runs.covered)
    found = [(p[0], p[1]) for p in fold.open.values()] + fold.resolved
    return [f for _, f in sorted(found, key=lambda p: p[0])]
