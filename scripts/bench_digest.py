"""The digest of the largest real transcript in the test data, warm, as a whole process.

The TensorTemplar-slopometry session (tests/data/claude-code) is imported into a fresh
root, one digest fills the digest's cache, then warm digests and bare
`python -c pass` of the same venv alternate. Goal (issue 14): the warm digest within
4x that bare interpreter start.
"""

from __future__ import annotations

import subprocess

from bench import CLI, PY, Ctx, median

RUNS = 21
TRANSCRIPT = "tests/data/claude-code/transcripts/TensorTemplar-slopometry/transcript.jsonl"


def run(ctx: Ctx) -> None:
    from bench import HERE

    root = str(ctx.path("digest") / "root")
    base = ["--root", root, "--workspace", "slopometry"]
    subprocess.run([CLI, "import", "claude-code", str(HERE.parent / TRANSCRIPT), *base],
                   check=True, capture_output=True)
    digest = [CLI, "digest", *base]
    ctx.time_process(lambda _: digest, runs=1)  # fills the cache
    floors: list[float] = []
    warm: list[float] = []
    for _ in range(RUNS):
        floors.extend(ctx.time_process(lambda _: [PY, "-c", "pass"], runs=1))
        warm.extend(ctx.time_process(lambda _: digest, runs=1))
    ctx.report("digest, largest real transcript, warm", median(warm), median(floors),
               goal=4.0)
