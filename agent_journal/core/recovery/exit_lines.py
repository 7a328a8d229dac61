"""A command inside a pipe that failed, told by the line its runner prints when it does.

`pnpm test 2>&1 | tail -40` exits with `tail`'s status, 0; what failed is in the output.
Invariant: `failed_line` returns the first line, of the output's last FAILED_LINES, by
which a package manager, a task runner or make says the command it ran failed: pnpm's
`ERR_PNPM_...` and `Exit status N`, npm's `npm ERR!` / `npm error` lifecycle failure,
yarn's `error Command failed with exit code N`, bun's `error: script "x" exited with
code N`, make's `make: *** [...] Error N`; None for any other output. It reads the
output only: whether the call's status was its pipe's is calls.Call's to say.
"""

from __future__ import annotations

import re

FAILED_LINES = 40  # a runner's failure line is among the last lines it prints
_MARKERS = ("ERR_PNPM_", "Exit status ", "npm ERR!", "npm error", "Command failed with exit",
            "exited with code", "*** [")
_FAILED = re.compile(
    r"^\s*(?:ERR_PNPM_\w+|Exit status [1-9]\d*$|npm (?:ERR!|error) (?:code [1-9A-Z]|"
    r"Lifecycle script|command failed)|error Command failed with exit code [1-9]|"
    r"error: script \"[^\"]+\" exited with code [1-9]|"
    r"make(?:\[\d+\])?: \*\*\* .*Error [1-9])")


def failed_line(text: str) -> str | None:
    """The runner's own line saying the command failed, or None."""
    if not any(marker in text for marker in _MARKERS):
        return None
    for line in text.splitlines()[-FAILED_LINES:]:
        if _FAILED.match(line):
            return line.strip()
    return None
