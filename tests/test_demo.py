"""`make demo`'s story (scripts/demo.py): it runs from nothing, reads as text a person
follows (captions, the commands, their text answers; no page of JSON), and ends with the
tombstoned password's bytes gone from disk."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import clean_env

DEMO = Path(__file__).resolve().parents[1] / "scripts" / "demo.py"


def test_the_demo_reads_as_a_story_and_ends_with_the_bytes_gone(tmp_path):
    env = clean_env(HOME=str(tmp_path), TMPDIR=str(tmp_path))
    proc = subprocess.run([sys.executable, str(DEMO)], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    captions = [line for line in out.splitlines() if line.startswith("# ")]
    assert len(captions) >= 8 and all(len(c) > 6 for c in captions)
    assert not [line for line in out.splitlines() if line.lstrip().startswith(("{", '"'))]
    assert "[INVALIDATED" in out and "[SUPPRESSED" in out and "## Open problems" in out
    assert "copies of the leaked password on disk before: 2" in out
    assert out.rstrip().endswith("copies of the leaked password on disk after: 0")
    assert "\n(exit " not in out and proc.stderr == ""  # (step() prints it for a failed step)
