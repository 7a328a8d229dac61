"""The digest's calls as one step-and-state fold: everything the digest shows of them.

Invariants:
- `step` takes the visible calls in (ts, id) order; what the state holds is bounded by
  what the digest can show: the latest items of each section with a count of all, one
  summary per distinct command, file and git hash, the open failures and unfinished calls,
  the latest plan, todo list and git listing. Folding in pieces (`packed`, `unpacked`,
  then the rest) gives the state folding everything at once gives.
- `recentActivity` and the subagents' Task results leave out calls other sections show,
  which are known only at the end: the fold keeps the latest TAIL candidates, and
  `sufficient` says whether they cover what the digest shows (they do unless more than
  TAIL - 25 of the latest candidates are shown elsewhere); when they do not, the caller
  folds again with no bound (tail None).
"""

from __future__ import annotations

from agent_journal.core import tools
from agent_journal.core.recovery import task_list
from agent_journal.core.recovery.calls import Call
from agent_journal.core.recovery.commits import GitFold
from agent_journal.core.recovery.conversation import Said, repeats, said_of
from agent_journal.core.recovery.failures import FailuresFold
from agent_journal.core.recovery.files_touched import FilesFold, ReadsFold
from agent_journal.core.recovery.instructions import InstructionsFold
from agent_journal.core.recovery.pull_requests import PullRequestsFold
from agent_journal.core.recovery.remedies import RemediesFold
from agent_journal.core.recovery.test_runs import TestRunsFold
from agent_journal.core.recovery.working_tree import WorkingTreeFold

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from agent_journal.core.recovery.failures import Failure

# Bump whenever what `packed` holds or how `step` folds changes: a fold kept by another
# version is thrown away with the cache that kept it (storage/digest_cache.py).
FOLD_VERSION = "31"
TAIL = 200
# How many of each the digest can show (ops.digest.CAPS keeps to these).
# (The assistant messages kept cover the earlier ones shown after the outcomes shown are
# left out of them, and the last one: 12 + 10 + 1.)
KEEP = {"asked": 12, "rejections": 12, "assistant": 23, "outcomes": 10, "summaries": 3,
        "subagents": 10,
        "rewound": 6, "meta": 2, "lastActions": 1, "failures": 20, "git": 30,
        "recent": 25}
SHOWN, TASK, RECENT = 0, 1, 2  # a tool call as the end sees it: shown for good, or a candidate


class Latest:
    """The latest `keep` items (None: all) of a sequence, and how many there were."""

    __slots__ = ("items", "total", "keep")

    def __init__(self, keep: int | None) -> None:
        self.items: list[Any] = []
        self.total = 0
        self.keep = keep

    def add(self, item: Any) -> None:
        self.total += 1
        self.items.append(item)
        if self.keep is not None and len(self.items) > self.keep:
            del self.items[0]

    def packed(self, pack: Any) -> list[Any]:
        return [[pack(x) for x in self.items], self.total, self.keep]

    @classmethod
    def unpacked(cls, packed: list[Any], unpack: Any) -> Latest:
        items, total, keep = packed
        latest = cls(keep)
        latest.items = [unpack(x) for x in items]
        latest.total = total
        return latest


def _call(fields: list[Any]) -> Call:
    return Call(*fields)


def _said(fields: list[Any]) -> Said:
    return Said(*fields)


def _pack_call(call: Call) -> list[Any]:
    return list(call.fields())


def _pack_said(said: Said) -> list[Any]:
    return list(said.fields())


def _pack_marked(marked: tuple[Call, int]) -> list[Any]:
    return [list(marked[0].fields()), marked[1]]


def _unpack_marked(packed: list[Any]) -> tuple[Call, int]:
    return Call(*packed[0]), packed[1]


class DigestFold:
    """The calls' part of a digest, folded one call at a time (see the module docstring)."""

    def __init__(self, tail: int | None = TAIL) -> None:
        bound = tail is not None
        self.tail = tail
        self.sessions: set[str] = set()
        self.cwd: str | None = None
        self.goal: Said | None = None
        self.asked = Latest(KEEP["asked"] if bound else None)  # prompts after the first
        self.rejections = Latest(KEEP["rejections"] if bound else None)
        self.instructions = InstructionsFold()
        self.assistant = Latest(KEEP["assistant"] if bound else None)
        # The agent's last message before each prompt after it: what that turn came to.
        self.outcomes = Latest(KEEP["outcomes"] if bound else None)
        self.turn_end: Said | None = None  # the latest message since the latest prompt
        self.after_failure: str | None = None  # the last tool call, when it failed
        self.summaries = Latest(KEEP["summaries"] if bound else None)
        self.titles: list[Said] = []
        self.subagent_results = Latest(KEEP["subagents"] if bound else None)
        self.rewound = Latest(KEEP["rewound"] if bound else None)
        self.meta: dict[str, Said] = {}  # text -> its latest saying, the latest last
        self.meta_texts: set[str] = set()  # every distinct text said
        self.last_said: dict[str, Said] = {}  # kind -> its latest saying (copies count once)
        # Tool calls and prompts since the latest compaction summary.
        self.calls_since = 0
        self.prompts_since = 0
        self.last_actions = Latest(KEEP["lastActions"])  # (call, SHOWN | TASK | RECENT)
        self.plan: tuple[Call, int] | None = None
        self.todo: tuple[Call, int] | None = None
        self.task_table: dict[str, list[str]] = {}  # TaskCreate/TaskUpdate (task_list.py)
        self.unfinished: list[Call] = []
        self.runs = TestRunsFold(keep_ids=False)
        self.failures = FailuresFold(KEEP["failures"] if bound else None)
        self.failure_marks: dict[str, int] = {}  # failure call id -> SHOWN | TASK | RECENT
        self.remedies = RemediesFold()  # what was done after each failure and failing run
        self.git = GitFold(KEEP["git"] if bound else None)
        self.pulls = PullRequestsFold()
        self.tree = WorkingTreeFold()
        self.merge_marks: dict[str, int] = {}  # merge call id -> its mark, while it waits
        self.files = FilesFold(keep_ids=False)
        self.reads = ReadsFold()
        self.tasks = Latest(tail)  # Task and Agent calls with a result, not shown for good
        self.recent = Latest(tail)  # every other tool call not shown for good

    # -- stepping -----------------------------------------------------------------------

    def step(self, call: Call) -> None:
        if call.session:
            self.sessions.add(call.session)
        cwd = call.get("cwd")
        if cwd:
            self.cwd = cwd
        if not call.is_tool_call:
            self.runs.step(call)  # a prompt between two runs: the user may have acted
            self.git.step(call)  # the branch a session's context names
            said = said_of(call)
            if said is not None:
                self._said(said)
            return
        self.calls_since += 1
        self.after_failure = None
        words = call.get("words")
        if call.get("refusal") == "rejected" and words:
            self.rejections.add(call)
        joined = self.runs.step(call)
        # An open failure of a test or check run shows with its run.
        failure = self.failures.step(call, hidden=joined, covered=self.runs.covered)
        self._remedies(call, failure)
        listed = self.git.step(call)
        for merge in self.git.named:
            self._shown_later(merge)
        self.files.step(call)
        self.reads.step(call)
        self.pulls.step(call)
        self.tree.step(call)
        if joined or listed or call.unfinished:
            mark = SHOWN
        elif tools.kind_of(call.tool) == tools.SUBAGENT and call.get("result"):
            mark = TASK
        else:
            mark = RECENT
        if call.unfinished:
            self.unfinished.append(call)
        if failure is not None:
            self.failure_marks[call.id] = mark
            self.after_failure = call.id
            self._prune_failures()
        elif self.runs.just_failed is not None:
            self.after_failure = call.id
        if call.get("merged"):
            self.merge_marks[call.id] = mark
            if len(self.merge_marks) > 64:
                waiting = {c.id for c in self.git.merges.values()}
                self.merge_marks = {k: v for k, v in self.merge_marks.items() if k in waiting}
        self.last_actions.add((call, mark))
        if call.get("plan") and not call.unfinished:
            self.plan = (call, mark)
        if call.get("todos") and call.succeeded:
            self.todo = (call, mark)
        elif call.get("taskId"):
            todos = task_list.step(self.task_table, call)
            if todos is not None:
                # The task list as a whole list would have carried it, on this call.
                self.todo = (Call(call.id, call.kind, call.session, call.ts, call.last_ts,
                                  dict(call.facts, todos=todos)), mark)
        if mark == TASK:
            self.tasks.add(call)
        elif mark == RECENT:
            self.recent.add(call)

    def _said(self, said: Said) -> None:
        if repeats(said, self.last_said):
            return
        kind = said.kind
        if kind == "prompt":
            if said.agent is not None:
                return  # a subagent's brief, not the user's words
            if said.abandoned:
                self.rewound.add(said)
                return
            if self.turn_end is not None:
                self.outcomes.add(self.turn_end)
                self.turn_end = None
            if self.goal is None:
                self.goal = said
            else:
                self.asked.add(said)
            self.instructions.step(said)
            self.prompts_since += 1
        elif kind == "assistant_message":
            if not said.abandoned and said.agent is None:
                self.assistant.add(said)
                self.turn_end = said
                if self.after_failure is not None:
                    self.failures.diagnose(self.after_failure, said.text)
                    self.runs.diagnose(said.text)
        elif kind == "compact_summary":
            if said.source == "summary":
                self.titles.append(said)
            else:
                if self.goal is None:
                    # The journal begins with the client's summary of an earlier
                    # conversation: what it says was asked is the goal.
                    self.goal = said
                self.summaries.add(said)
                self.calls_since = self.prompts_since = 0
        elif kind == "subagent_result":
            self.subagent_results.add(said)
        elif kind == "session_event":
            self.meta_texts.add(said.text)
            self.meta.pop(said.text, None)
            self.meta[said.text] = said
            if self.tail is not None and len(self.meta) > KEEP["meta"]:
                # Only the latest texts show; one said again counts once all the same.
                del self.meta[next(iter(self.meta))]

    def _remedies(self, call: Call, failure: Failure | None) -> None:
        """What was done after each failure: a failure (or failing run) the call resolved
        is no longer watched; the call is an action of those still open; a new one is
        watched from now on."""
        remedies = self.remedies
        for settled in (self.failures.settled, self.runs.settled):
            for failure_id in settled:
                remedies.settle(failure_id)
        remedies.step(call)
        if failure is not None or self.runs.just_failed is not None:
            remedies.watch(call.id)
            if len(remedies) > 4 * KEEP["failures"] + len(self.runs.failing) + 64:
                keep = set(self.failures.open) | self.runs.failed_ids() | {
                    f.call_id for f in self.failures.resolved_failures()}
                remedies.forget(keep)

    def _shown_later(self, call_id: str) -> None:
        """A merge a later listing named: its call is shown with its commit from now on."""
        mark = self.merge_marks.pop(call_id, SHOWN)
        for latest in (self.tasks, self.recent):
            if mark == (TASK if latest is self.tasks else RECENT):
                latest.total -= 1
                latest.items = [c for c in latest.items if c.id != call_id]
        if self.plan is not None and self.plan[0].id == call_id:
            self.plan = (self.plan[0], SHOWN)
        if self.todo is not None and self.todo[0].id == call_id:
            self.todo = (self.todo[0], SHOWN)
        self.last_actions.items = [(c, SHOWN if c.id == call_id else m)
                                   for c, m in self.last_actions.items]
        if call_id in self.failure_marks:
            self.failure_marks[call_id] = SHOWN

    def _prune_failures(self) -> None:
        if len(self.failure_marks) <= 2 * len(self.failures.open) + 64:
            return
        kept = set(self.failures.open) | {f.call_id for f in
                                          self.failures.resolved_failures()}
        self.failure_marks = {k: v for k, v in self.failure_marks.items() if k in kept}

    # -- the end ------------------------------------------------------------------------

    def shown_elsewhere(self) -> set[str]:
        """The calls other sections show that are candidates for recent activity or the
        subagents' results: the latest actions, plan and todo list, and the failures
        listed (unfinished calls, runs, commits and pushes are shown for good)."""
        shown = {c.id for c, _ in self.last_actions.items}
        for marked in (self.plan, self.todo):
            if marked is not None:
                shown.add(marked[0].id)
        shown.update(f.call_id for f in self.open_failures()[-KEEP["failures"]:])
        shown.update(f.call_id for f in self.failures.resolved_failures()[-KEEP["failures"]:])
        return shown

    def open_failures(self) -> list[Failure]:
        """The open failures the digest lists, kept (failures.visible_open counts them all;
        an open failure of a run shows with its run)."""
        return self.failures.open_failures(hidden=False)

    def _marks(self) -> dict[str, int]:
        marks = dict(self.failure_marks)
        marks.update((c.id, m) for c, m in self.last_actions.items)
        for marked in (self.plan, self.todo):
            if marked is not None:
                marks[marked[0].id] = marked[1]
        return marks

    def candidates(self, mark: int, shown: set[str]) -> tuple[list[Call], int]:
        """The kept calls marked `mark` that `shown` does not hold, and how many there are
        in all."""
        latest = self.tasks if mark == TASK else self.recent
        marks = self._marks()
        total = latest.total - sum(1 for i in shown if marks.get(i) == mark)
        return [c for c in latest.items if c.id not in shown], total

    def sufficient(self) -> bool:
        """Whether the kept candidates cover what the digest shows of them."""
        if self.tail is None:
            return True
        shown = self.shown_elsewhere()
        for mark, need in ((TASK, KEEP["subagents"]), (RECENT, KEEP["recent"])):
            kept, total = self.candidates(mark, shown)
            if len(kept) < min(need, total):
                return False
        return True

    # -- keeping ------------------------------------------------------------------------

    def packed(self) -> list[Any]:
        """The state as plain values (lists, dicts, strings, numbers)."""
        return [
            self.tail, sorted(self.sessions), self.cwd,
            None if self.goal is None else _pack_said(self.goal),
            self.asked.packed(_pack_said), self.rejections.packed(_pack_call),
            self.instructions.packed(), self.assistant.packed(_pack_said),
            self.summaries.packed(_pack_said), [_pack_said(t) for t in self.titles],
            self.subagent_results.packed(_pack_said), self.rewound.packed(_pack_said),
            [_pack_said(m) for m in self.meta.values()], sorted(self.meta_texts),
            self.calls_since, self.prompts_since, self.last_actions.packed(_pack_marked),
            None if self.plan is None else _pack_marked(self.plan),
            None if self.todo is None else _pack_marked(self.todo),
            [_pack_call(c) for c in self.unfinished], self.runs.packed(),
            self.failures.packed(), self.failure_marks,
            self.git.packed(), self.merge_marks, self.files.packed(), self.reads.packed(),
            self.tasks.packed(_pack_call), self.recent.packed(_pack_call),
            {k: _pack_said(v) for k, v in self.last_said.items()},
            self.outcomes.packed(_pack_said),
            None if self.turn_end is None else _pack_said(self.turn_end), self.after_failure,
            self.task_table, self.remedies.packed(), self.pulls.packed(),
            self.tree.packed(),
        ]

    @classmethod
    def unpacked(cls, packed: list[Any]) -> DigestFold:
        (tail, sessions, cwd, goal, asked, rejections, instructions, assistant, summaries,
         titles, subagent_results, rewound, meta, meta_texts, calls_since, prompts_since,
         last_actions, plan, todo, unfinished, runs, failures, failure_marks, git,
         merge_marks, files, reads, tasks, recent, last_said, outcomes, turn_end,
         after_failure, task_table, remedies, pulls, tree) = packed
        fold = cls(tail)
        fold.sessions = set(sessions)
        fold.cwd = cwd
        fold.goal = None if goal is None else _said(goal)
        fold.asked = Latest.unpacked(asked, _said)
        fold.rejections = Latest.unpacked(rejections, _call)
        fold.instructions = InstructionsFold.unpacked(instructions)
        fold.assistant = Latest.unpacked(assistant, _said)
        fold.summaries = Latest.unpacked(summaries, _said)
        fold.titles = [_said(t) for t in titles]
        fold.subagent_results = Latest.unpacked(subagent_results, _said)
        fold.rewound = Latest.unpacked(rewound, _said)
        fold.meta = {m[2]: _said(m) for m in meta}
        fold.meta_texts = set(meta_texts)
        fold.calls_since, fold.prompts_since = calls_since, prompts_since
        fold.last_actions = Latest.unpacked(last_actions, _unpack_marked)
        fold.plan = None if plan is None else _unpack_marked(plan)
        fold.todo = None if todo is None else _unpack_marked(todo)
        fold.unfinished = [_call(c) for c in unfinished]
        fold.runs = TestRunsFold.unpacked(runs)
        fold.failures = FailuresFold.unpacked(failures)
        fold.failure_marks = dict(failure_marks)
        fold.git = GitFold.unpacked(git)
        fold.merge_marks = dict(merge_marks)
        fold.files = FilesFold.unpacked(files)
        fold.reads = ReadsFold.unpacked(reads)
        fold.tasks = Latest.unpacked(tasks, _call)
        fold.recent = Latest.unpacked(recent, _call)
        fold.last_said = {k: _said(v) for k, v in last_said.items()}
        fold.outcomes = Latest.unpacked(outcomes, _said)
        fold.turn_end = None if turn_end is None else _said(turn_end)
        fold.after_failure = after_failure
        fold.task_table = {k: list(v) for k, v in task_table.items()}
        fold.remedies = RemediesFold.unpacked(remedies)
        fold.pulls = PullRequestsFold.unpacked(pulls)
        fold.tree = WorkingTreeFold.unpacked(tree)
        return fold
