"""Real transcripts with their structure broken: import and the reads answer or refuse.

A transcript from a newer agent version, a truncated write or a hand-edited
file can put any JSON value where another was expected. Each case takes a real
transcript (tests/data, provenance in its README), replaces values with values
of other types and drops keys at random, and imports it: the import either
succeeds or refuses with one of our errors (never another exception), and the
digest and the observation view of what it wrote still build. The seeds are
fixed, so a failure names the seed that finds it.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from agent_journal.agents.claude_code_import import import_claude_code
from agent_journal.agents.codex_import import import_codex
from agent_journal.core.errors import JournalError
from agent_journal.ops import context, digest, show

DATA = Path(__file__).parent / "data"
TRANSCRIPTS = DATA / "claude-code/transcripts"
CLAUDE = [
    TRANSCRIPTS / "DRMacIver-claude-reliability/coverage-test-fix/transcript.jsonl",
    TRANSCRIPTS / "daaain-claude-code-log/2b4ed4c0-b905-41de-9238-273db3ec737a.jsonl",
    DATA / "recall-heldout/transcripts/ts-invoice-jest.jsonl",
]
CODEX = [
    DATA / "claude-code/codex/agentcmd-exec-json/stream-output-2.jsonl",
    DATA / "claude-code/codex/agentcmd-exec-json/stream-output-3.jsonl",
    DATA / "codex/sessions/rollout-2025-10-29T00-59-38-019a2d7a-41c4-78b1-b7cc-a45d62a89cd5.jsonl",
    DATA / "recall-heldout/transcripts/codex-ledger-since.jsonl",
]
ODD_VALUES: list[Any] = [None, 0, -1, 1.5, "", "x", [], {}, [None], {"a": None}, True, "é",
                         10**30, "2025-13-45T99:99:99Z", {"type": {}}, ["text"]]


def _broken(value: Any, rng: random.Random) -> Any:
    if rng.random() < 0.06:
        return rng.choice(ODD_VALUES)
    if isinstance(value, dict):
        return {k: _broken(v, rng) for k, v in value.items() if rng.random() > 0.04}
    if isinstance(value, list):
        return [_broken(v, rng) for v in value if rng.random() > 0.04]
    return value


def _broken_copy(source: Path, seed: int, to: Path) -> Path:
    rng = random.Random(seed)
    lines = []
    for line in source.read_bytes().splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            lines.append(line)
            continue
        lines.append(json.dumps(_broken(obj, rng)).encode() if rng.random() < 0.5 else line)
    to.write_bytes(b"\n".join(lines) + b"\n")
    return to


@pytest.mark.parametrize("seed", range(24))
@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_a_broken_transcript_is_imported_or_refused(tmp_path, agent, seed):
    sources = CLAUDE if agent == "claude-code" else CODEX
    path = _broken_copy(sources[seed % len(sources)], seed, tmp_path / "t.jsonl")
    ctx = context.Context(str(tmp_path / "root"), "ws")
    importer = import_claude_code if agent == "claude-code" else import_codex
    try:
        importer(ctx, str(path))
    except JournalError:
        return
    digest.digest(ctx)
    show.show(ctx, observations=True)
