"""make demo: a throwaway journal, written and read back through the real CLI.

Each step prints the command as a user would type it, then what it printed.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

CLI = str(Path(sys.executable).parent / "agent-journal")


def step(title: str, *args: str, stdin: str | None = None, show: bool = True) -> str:
    # A step that goes on with the one before has no caption of its own.
    print((f"\n# {title}\n" if title else "") + f"$ agent-journal {shlex.join(args)}")
    proc = subprocess.run([CLI, *args], input=stdin, capture_output=True, text=True)
    if show:
        sys.stdout.write(proc.stdout)
    sys.stdout.write(proc.stderr)
    if proc.returncode not in (0,):
        print(f"(exit {proc.returncode})")
    return proc.stdout


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="agent-journal-demo-") as tmp:
        root = os.path.join(tmp, "journal")
        os.environ["AGENT_JOURNAL_ROOT"] = root
        os.environ["AGENT_JOURNAL_WORKSPACE"] = "demo"
        os.environ.pop("AGENT_JOURNAL_SESSION", None)
        print(f"Demo journal at {root} (workspace 'demo'); deleted when the demo ends.")
        step("The objective and a constraint, written by a human", "record", "--kind",
             "objective", "--id", "obj", "--text", "Make the nightly import idempotent")
        step("", "record", "--kind", "constraint", "--id", "no-force", "--text",
             "Never force-push to main")
        step("An agent's tool call starts, then fails", "observe", "--kind", "tool_call",
             "--id", "obs-1", "--tool", "Bash", "--callId", "call-1", "--input",
             '{"command": "pytest tests/test_import.py"}', "--status", "started",
             "--session", "s-42")
        step("", "observe", "--kind", "tool_call", "--id", "obs-1", "--tool", "Bash",
             "--status", "error", "--exit-code", "1", "--output", "-", "--session", "s-42",
             stdin="FAILED tests/test_import.py::test_twice - duplicate row\n")
        step("A finding anchored on that call, and a decision that depends on it", "record",
             "--kind", "finding", "--id", "f-dup", "--claim",
             "Re-running the import inserts duplicate rows", "--anchor", "tool_use:obs-1",
             "--session", "s-42")
        step("", "record", "--kind", "decision", "--id", "d-upsert", "--question",
             "How do we make the import idempotent?", "--chosen",
             "Upsert on the natural key", "--depends-on", "f-dup", "--session", "s-42")
        step("A finding that leaked a credential", "record", "--kind", "finding", "--id",
             "f-leak", "--claim", "The staging password is hunter2", "--session", "s-42")
        step("The finding was wrong: invalidate it (its dependents stop being live too)",
             "invalidate", "f-dup", "--reason", "the duplicates came from a fixture")
        step("The leaked content must not exist: tombstone it (hidden at once)",
             "tombstone", "f-leak", "--reason", "contains a credential")
        step("What show derives from those events (f-leak, tombstoned, is in no read)", "show")
        step("What an agent reads after its context was compacted", "digest")
        step("What compact would do: a dry run, nothing is deleted", "compact")
        print(f"\n  copies of the leaked password on disk before: {_count(root, b'hunter2')}")
        step("The scheduled job: compact --apply erases the tombstoned bytes", "compact",
             "--apply")
        print(f"\n  copies of the leaked password on disk after: {_count(root, b'hunter2')}")
    return 0


def _count(root: str, needle: bytes) -> int:
    """How many times `needle` occurs in the raw bytes of every file under `root`."""
    total = 0
    for folder, _dirs, files in os.walk(root):
        for name in files:
            with open(os.path.join(folder, name), "rb") as fh:
                total += fh.read().count(needle)
    return total


if __name__ == "__main__":
    raise SystemExit(main())
