"""Where a hook that failed open says so: one redacted line in <root>/logs/hook.log.

Invariant: a hook never fails the agent (exit 0, nothing on stdout but the SessionStart
context), so its failures are only ever told here, where doctor reads them: each one line,
redacted before it is cut (a cut through a secret would leave a prefix that no rule
recognises any more), in the root the hook chose, or (when it failed before choosing one)
the root the command would have found.
"""

from __future__ import annotations

import os

from agent_journal.core import clock
from agent_journal.core.errors import JournalError, UnsafeRootError
from agent_journal.ops.redaction_config import load_redactor
from agent_journal.storage.config import append_private_log
from agent_journal.storage.root import ENV_ROOT, check_root, resolve_root

LOG_NAME = "hook.log"


def log_failure(command: str, argv: list[str], exc: BaseException, *,
                root: str | None = None) -> None:
    """Append one redacted line about `command` failing with `exc` to <root>/logs/hook.log.

    The root is `root`, the one the hook chose, or (when it failed before choosing) is
    found the way the command would have found it, without trusting the parser (which may
    be what failed): --root in `argv`, $AGENT_JOURNAL_ROOT, the project file nearest the
    working folder, the default. A root that is unsafe or unusable raises here; the caller
    then has nowhere private to log and says so on stderr instead.
    """
    path = root or _failure_root(_root_arg(argv))
    where = ""
    if not isinstance(exc, JournalError) and exc.__traceback__ is not None:
        import traceback

        frame = traceback.extract_tb(exc.__traceback__)[-1]
        where = f" at {os.path.basename(frame.filename)}:{frame.lineno}"
    message = str(exc) or exc.__class__.__name__
    try:
        when = clock.now_ts()
    except JournalError:  # a bad AGENT_JOURNAL_NOW may be the very failure being logged
        import time

        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    log_line(path, f"{command} failed open: {exc.__class__.__name__}{where}: {message}",
             when=when)


def log_line(path: str, text: str, *, when: str | None = None) -> None:
    """Append `text`, redacted and then cut to one bounded line, to <root>/logs/hook.log.

    Redacted before it is cut: a cut through a secret would leave a prefix that no
    rule recognises any more (the first 25 characters of a GitHub token).
    """
    check_root(path, create=True)
    try:
        redactor, _ = load_redactor(path)
    except JournalError:
        from agent_journal.capture.redact import default_redactor

        redactor = default_redactor()
    if when is None:
        when = clock.now_ts()
    line = f"{when} {text}".replace("\r", "\\r").replace("\n", "\\n")
    line = redactor.redact_text(line)[:2000]
    try:
        append_private_log(path, LOG_NAME, line)
    except UnsafeRootError:
        # logs/ (or logs/hook.log) leads out of the root: the line goes beside the root's
        # own files instead, or (if that is a link too) is dropped by the caller.
        append_private_log(path, LOG_NAME, line, folder="")


def _failure_root(root: str | None) -> str:
    from agent_journal.agents.hook_target import root_for
    from agent_journal.storage.project_file import find

    try:
        project = None if root is not None or os.environ.get(ENV_ROOT) else find()
    except JournalError:  # a broken project file may be the very failure being logged
        project = None
    return resolve_root(root_for(root, project))


def _root_arg(argv: list[str]) -> str | None:
    for index, token in enumerate(argv):
        if token == "--root" and index + 1 < len(argv):
            # As the parser reads it: a flag of the hook's in its place is no value (the
            # log of `--root --workspace W` must not make a root called --workspace).
            value = argv[index + 1]
            return None if value.partition("=")[0] in ("--root", "--workspace") else (
                value or None)
        if token.startswith("--root="):
            return token.partition("=")[2] or None
    return None
