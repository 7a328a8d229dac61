"""Packages a shell call installed, as its package manager printed them.

Invariant: `installed(command, output)` names only what the output of a successful call
says was installed or added, with its version when printed (bun `installed x@1.2`,
pnpm `+ x 1.2` under its `dependencies:` heading, yarn `└─ x@1.2`, pip `Successfully
installed x-1.2`, uv ` + x==1.2`, cargo `Adding x v1.2 to dependencies`, go `go: added
x v1.2`), or, when the output counts
packages without naming them (npm `added 3 packages`), the packages the command itself
names after `npm install`/`add`; at most PACKAGES per call, in the order printed. None
when the call installed nothing it can name. Pure.
"""

from __future__ import annotations

import re

PACKAGES = 12

_NAMED = (
    (re.compile(r"^installed (\S+@\S+)", re.M), lambda m: m.group(1)),  # bun add
    (re.compile(r"^[├└]─ (@?[\w./-]+@\d\S*)", re.M), lambda m: m.group(1)),  # yarn 1
    (re.compile(r"^ \+ ([\w.-]+)==(\S+)", re.M), lambda m: f"{m.group(1)}=={m.group(2)}"),  # uv
    (re.compile(r"^\s*Adding ([\w-]+) v(\S+) to (?:dev-|build-)?dependencies", re.M),
     lambda m: f"{m.group(1)}@{m.group(2)}"),  # cargo add
    (re.compile(r"^go: added (\S+) (v\S+)", re.M), lambda m: f"{m.group(1)}@{m.group(2)}"),
)
# pnpm's `+ x 1.2` lines, read only under its `dependencies:` heading (a diff's added
# lines look the same).
_PNPM = re.compile(r"^(?:dev|optional|peer)?[dD]ependencies:\n((?:[+-] .+\n?)+)", re.M)
_PNPM_LINE = re.compile(r"^\+ (@?[\w./-]+) (\d[\w.+-]*)", re.M)
_PIP = re.compile(r"^Successfully installed (.+)$", re.M)
_NPM_ADDED = re.compile(r"^added \d+ packages?\b", re.M)
_NPM_COMMAND = re.compile(r"\bnpm (?:install|i|add)\s+((?:[^\s;&|]+\s*)+)")


def installed(command: str | None, output: str) -> list[str] | None:
    """What the call installed (see the module), or None."""
    found: list[str] = []
    for pattern, name in _NAMED:
        found.extend(name(m) for m in pattern.finditer(output))
    for block in _PNPM.finditer(output):
        found.extend(f"{m.group(1)}@{m.group(2)}" for m in _PNPM_LINE.finditer(block.group(1)))
    for m in _PIP.finditer(output):
        found.extend(m.group(1).split())
    if not found and command and _NPM_ADDED.search(output):
        args = _NPM_COMMAND.search(command)
        if args:
            found = [w for w in args.group(1).split() if not w.startswith("-")]
    unique = list(dict.fromkeys(found))
    return unique[:PACKAGES] or None
