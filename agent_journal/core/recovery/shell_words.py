"""What a shell command line names, read off its words: the files a plain read prints, the
files it plainly deletes, moves or puts back, whether its exit status is a pipe's, and a
file written from a heredoc told apart from what runs after it.

Invariant: only literal paths count (no globs, variables, redirections or subshells in a
path): anything whose effect cannot be read off the command is left out, never guessed.
A heredoc that writes a file (`cat > f <<'EOF'` ... `EOF`) keeps its first and last lines
and loses its body past 80 characters: the body is the file's, not the command's.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


_PIPE = re.compile(r"(?<![|>])\|(?!\|)")


def piped(command: str) -> bool:
    """Whether `command`'s exit status is a pipe's last command's (`pytest | tail -5`
    exits 0 whatever pytest did; `pipefail` aside)."""
    return "pipefail" not in command and _PIPE.search(command) is not None


_CD = re.compile(r"(?:^|[;&|(]\s*)(?:cd|pushd)\s")


def changes_directory(command: str) -> bool:
    """Whether a command changes directory on the way (`cd`, `pushd`)."""
    return _CD.search(command) is not None
# A file written from a heredoc (`cat > f <<'EOF'`, then its lines, then `EOF`): the
# lines are the file's, not the command's; the target keeps what ran after them.
_FILE_HEREDOC = re.compile(r"(\bcat\s*>>?\s*\S+\s*<<-?\s*(['\"]?)(\w+)\2[^\n]*\n)"
                           r"(.*?)(\n\3[ \t]*(?:\n|$))", re.DOTALL)


def elide_heredocs(command: str) -> str:
    """`command` with the body of each file it writes from a heredoc elided (`…`) when it
    is over 80 characters."""
    return _FILE_HEREDOC.sub(_elided, command) if "<<" in command else command


def _elided(m: re.Match[str]) -> str:
    body = m.group(4)
    return m.group(0) if len(body) <= 80 else f"{m.group(1)}…{m.group(5)}"


def within(workdir: Any, path: str) -> str:
    """`path` as named in a call that ran in `workdir` (None: unknown, the path as it is)."""
    if not isinstance(workdir, str) or not workdir.startswith("/") or path.startswith("/"):
        return path
    import posixpath

    return posixpath.normpath(posixpath.join(workdir, path))


# A command that starts by printing files (how Codex and shells read them).
MAY_READ = re.compile(r"\s*(?:cat|head|tail|sed|nl|less|bat)\s")
_READERS = frozenset({"cat", "head", "tail", "sed", "nl", "less", "bat"})


def shell_reads(command: str) -> list[str]:
    """The files a plain shell read prints (`cat a b`, `head -n 5 a`, `sed -n 1,80p a`):
    literal paths of the first command of a pipe, never one with globs or variables, and
    nothing for a command that redirects or edits in place."""
    import shlex

    # The first line's first command: `;`, `|`, `&` end it even when not spaced apart.
    lexer = shlex.shlex(command.split("\n", 1)[0], posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    first: list[str] = []
    try:
        for word in lexer:
            if word.strip(";&|") == "":
                break
            first.append(word)
    except ValueError:
        return []
    if not first or first[0] not in _READERS or any(
            w.startswith((">", "-i")) or w == "--in-place" for w in first):
        return []
    args = first[1:]
    paths: list[str] = []
    skip = False
    for i, word in enumerate(args):
        if skip:
            skip = False
            continue
        if word.startswith("-"):
            skip = word in ("-n", "-c", "-e") and first[0] in ("head", "tail", "sed")
            continue
        if first[0] == "sed" and i == 0 or (first[0] == "sed" and not paths and
                                            re.fullmatch(r"[\d,$]+p|\d+q", word)):
            continue  # sed's script
        if any(ch in _UNSAFE for ch in word):
            return []
        paths.append(word)
    return paths[:20]


# Only a command naming rm, mv, git checkout or git restore is split into words.
MAY_MOVE = r"\b(?:rm|mv|checkout|restore)\b"
_SEPARATORS = frozenset({"&&", ";", "||", "|", "&"})
_UNSAFE = frozenset("*?[]{}$`~<>()\\")


def shell_file_ops(command: str) -> list[list[str]]:
    """Files a shell command plainly deletes, moves or reverts: ["deleted", path],
    ["moved", src, dst] and ["reverted", path], from `rm`, `git rm` (not --cached), `mv`,
    `git mv`, `git checkout -- paths` and `git restore paths` (not --staged alone: that
    leaves the file as it is) with literal paths only. Anything with globs, variables,
    redirections or subshells in a path is left out: its effect cannot be read off the
    command."""
    import shlex  # only for shell commands that may move or delete files

    try:
        words = shlex.split(command, comments=True, posix=True)
    except ValueError:
        return []
    ops: list[list[str]] = []
    part: list[str] = []
    for word in [*words, ";"]:
        if word in _SEPARATORS:
            ops.extend(_ops_of(part))
            part = []
        else:
            part.append(word)
    return ops[:50]


def _ops_of(words: list[str]) -> list[list[str]]:
    if not words:
        return []
    if words[0] == "git" and len(words) > 2 and words[1] in ("checkout", "restore"):
        return _reverted(words[1], words[2:])
    if words[0] == "git" and len(words) > 1 and words[1] in ("rm", "mv"):
        verb, args = words[1], words[2:]
    elif words[0] in ("rm", "mv"):
        verb, args = words[0], words[1:]
    else:
        return []
    flags = [a for a in args if a.startswith("-")]
    paths = [a for a in args if not a.startswith("-")]
    if "--cached" in flags or any(ch in _UNSAFE for p in paths for ch in p) or not paths:
        return []
    if verb == "rm":
        return [["deleted", p] for p in paths]
    if len(paths) == 2 and not any(f in ("-t", "--target-directory") for f in flags):
        return [["moved", paths[0], paths[1]]]
    return []


def _reverted(verb: str, args: list[str]) -> list[list[str]]:
    """`git checkout [HEAD] -- paths` (without `--` the first word may be a branch) and
    `git restore [--worktree] paths`: the paths' uncommitted changes are discarded."""
    if verb == "checkout":
        if "--" not in args or args[:args.index("--")] not in ([], ["HEAD"]):
            return []
        paths = args[args.index("--") + 1:]
    else:
        if any(a.startswith("-") and a not in ("-W", "--worktree", "--") for a in args):
            return []  # --staged, --source: not the working tree put back as committed
        paths = [a for a in args if not a.startswith("-")]
    if not paths or any(ch in _UNSAFE for p in paths for ch in p):
        return []
    return [["reverted", p] for p in paths]
