"""Checkpoints and --as-of: a view as of a checkpoint is the journal that
stopped there, except that every tombstone (of any time) still hides."""

from __future__ import annotations

import json
import shutil
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_journal.core.errors import JournalError
from agent_journal.core.model import TOMBSTONE
from agent_journal.ops import checkpoints, writes
from agent_journal.ops.context import Context
from agent_journal.ops.digest import digest
from agent_journal.ops.show import show
from agent_journal.ops.trace import trace
from agent_journal.storage.root import Root

IDS = ["a", "b", "c", "d"]

step = st.one_of(
    st.tuples(st.just("record"), st.sampled_from(IDS), st.lists(st.sampled_from(IDS),
                                                                max_size=2)),
    st.tuples(st.just("invalidate"), st.sampled_from(IDS), st.just([])),
    st.tuples(st.just("tombstone"), st.sampled_from(IDS), st.just([])),
    st.tuples(st.just("observe"), st.sampled_from(["o1", "o2"]), st.just([])),
)


def apply(ctx: Context, op: tuple[str, str, list[str]]) -> None:
    """One write; a refused one (an id already recorded, a tombstoned id) is
    part of the history too."""
    try:
        _apply(ctx, op)
    except JournalError:
        pass


def _apply(ctx: Context, op: tuple[str, str, list[str]]) -> None:
    kind, target, deps = op
    if kind == "record":
        writes.record(ctx, kind="finding", entry_id=target, fields={"claim": f"{target}!"},
                      anchors=["tool_use:o1"], depends_on=deps, subject=None)
    elif kind == "observe":
        writes.observe(ctx, kind="tool_call", obs_id=target, tool="Bash", call_id=None,
                       input_value={"command": f"run {target}"}, output="out", status="ok",
                       exit_code=0, duration_ms=1)
    elif kind == "invalidate":
        writes.invalidate(ctx, target, "wrong")
    else:
        writes.tombstone(ctx, target, "leak")


def views(ctx: Context, as_of: str | None) -> list[str]:
    shown, _ = show(ctx, observations=True, as_of=as_of)
    traced = [trace(ctx, t, as_of=as_of)[0] for t in ("a", "o1")]
    _, digested, _ = digest(ctx, as_of=as_of)
    return [json.dumps(v, sort_keys=True) for v in (shown, *traced, digested)]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(before=st.lists(step, max_size=8), after=st.lists(step, max_size=8))
def test_as_of_a_checkpoint_equals_the_journal_that_stopped_there(before, after):
    base = tempfile.mkdtemp()
    try:
        full = Context(f"{base}/full", "ws")
        stopped = Context(f"{base}/stopped", "ws")
        for op in before:
            apply(full, op)
        ws = full.open(create=True)
        held = ws.read().events
        checkpoints.checkpoint(full, "cp", None)
        for op in after:
            apply(full, op)
        # The journal that stopped at the checkpoint, plus every tombstone
        # written later (tombstones aside: they hide in every view).
        later_tombstones = [e for e in ws.read().events if e.type == TOMBSTONE
                            and e.event_id not in {h.event_id for h in held}]
        target = Root.open(f"{base}/stopped", create=True).workspace("ws")
        target.append(held + later_tombstones)
        assert views(full, "cp") == views(stopped, None)
    finally:
        shutil.rmtree(base)


def test_checkpoints_list_and_as_of_cli(cli):
    cli("record", "--kind", "finding", "--id", "f1", "--claim", "first")
    assert cli("checkpoint", "pre-test-run", "--note", "before the tests").out == \
        "checkpoint pre-test-run (1 events)\n"
    cli("record", "--kind", "finding", "--id", "f2", "--claim", "second")
    cli("invalidate", "f1", "--reason", "wrong")
    listed = cli("checkpoints", "--json").json()["checkpoints"]
    assert [(c["name"], c["note"], c["events"]) for c in listed] == [
        ("pre-test-run", "before the tests", 1)]
    assert "1. pre-test-run" in cli("checkpoints").out
    then = cli("show", "--json", "--as-of", "pre-test-run").json()["entries"]
    assert [(e["id"], e["outcome"]) for e in then] == [("f1", "live")]
    now = cli("show", "--json").json()["entries"]
    assert [(e["id"], e["outcome"]) for e in now] == [("f1", "invalidated"), ("f2", "live")]
    assert "As of pre-test-run" in cli("show", "--as-of", "pre-test-run").out
    timeline = cli("timeline", "--json", "--as-of", "pre-test-run").out.splitlines()
    assert [json.loads(x)["id"] for x in timeline] == ["f1"]
    # Names are unique on one replica and never read as instants.
    again = cli("checkpoint", "pre-test-run")
    assert again.code == 1 and "already exists" in again.err
    for bad in ("2h", "2026-01-01"):
        result = cli("checkpoint", bad)
        assert result.code == 2 and "reads as an instant" in result.err


def test_as_of_an_instant(cli):
    cli("record", "--kind", "note", "--id", "n1", "--text", "one",
        env={"AGENT_JOURNAL_NOW": "2026-05-01T12:00:00Z"})
    cli("record", "--kind", "note", "--id", "n2", "--text", "two",
        env={"AGENT_JOURNAL_NOW": "2026-05-01T13:00:00Z"})
    now = {"AGENT_JOURNAL_NOW": "2026-05-01T14:00:00Z"}
    ids = [e["id"] for e in cli("show", "--json", "--as-of", "2026-05-01T12:30:00Z",
                                env=now).json()["entries"]]
    assert ids == ["n1"]
    ids = [e["id"] for e in cli("show", "--json", "--as-of", "90m", env=now).json()["entries"]]
    assert ids == ["n1"]
    future = cli("show", "--as-of", "2026-05-01T15:00:00Z", env=now)
    assert future.code == 2 and "in the future" in future.err and future.out == ""


def test_tombstoned_later_stays_hidden_as_of_earlier(cli):
    cli("record", "--kind", "note", "--id", "leak", "--text", "hunter2")
    cli("checkpoint", "cp")
    cli("tombstone", "leak", "--reason", "credential")
    for args in (("show", "--json"), ("show",), ("timeline",), ("timeline", "--json"),
                 ("digest",), ("trace", "leak")):
        result = cli(*args, "--as-of", "cp")
        # A tombstoned id names nothing: trace refuses it, as of any point.
        assert result.code == (1 if args[0] == "trace" else 0), args
        assert "hunter2" not in result.out + result.err, args


def test_a_merged_checkpoint_cuts_the_same_events(cli, tmp_path, root):
    """Replica B merges A's journal, then writes more: as of A's checkpoint, B
    shows exactly what A shows as of it."""
    other = tmp_path / "private" / "other"
    env_b = {"AGENT_JOURNAL_ROOT": str(other)}
    cli("record", "--kind", "finding", "--id", "fa", "--claim", "from a")
    cli("checkpoint", "cp")
    cli("record", "--kind", "finding", "--id", "fa2", "--claim", "after the checkpoint")
    cli("record", "--kind", "finding", "--id", "fb", "--claim", "from b", env=env_b)
    assert cli("merge", str(root), env=env_b).code == 0
    cli("record", "--kind", "finding", "--id", "fb2", "--claim", "b later", env=env_b)
    a = cli("show", "--json", "--as-of", "cp").json()["entries"]
    b = cli("show", "--json", "--as-of", "cp", env=env_b).json()["entries"]
    assert [e["id"] for e in a] == [e["id"] for e in b] == ["fa"]
    assert cli("checkpoints", "--json", env=env_b).json()["checkpoints"][0]["name"] == "cp"
