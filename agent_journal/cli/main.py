"""The command-line surface: the console script's entry, dispatch, exit codes.

Invariants:
- Each command handler (cli/handlers.py, capture_commands.py, replica_commands.py,
  hook_commands.py) parses nothing itself (argv does, from the command table), calls
  one library function, and renders the result through output.
- Exit codes are decided in one place, `run`: 0 ok, 1 refused or failed
  (JournalError), 2 usage error (UsageError, raised before anything is written).
- No traceback reaches the user: unexpected exceptions become a one-line error.
- A reader that leaves early (`| head`) ends the command quietly: exit 1, nothing on
  stderr, whatever was printing (a result, help, the version).
- The hot path (write commands, the hook) imports neither typer nor click:
  typer is loaded only to render --help. This module, which every process loads,
  imports nothing at its top but the errors: a handler's module is loaded when it runs,
  the renderer when something is printed, so the hook loads neither.
- A hook process ends as soon as its work is durable and its output flushed, without
  the interpreter's teardown (`_end_now`), unless something registered work for exit.
"""

from __future__ import annotations

import os
import sys

from agent_journal.core.errors import JournalError, UsageError

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any

PROG = "agent-journal"


def _output() -> Any:
    from agent_journal.cli import output

    return output


def _log_failed_open(name: str, argv: list[str], exc: BaseException) -> None:
    from agent_journal.cli.common import log_failed_open

    log_failed_open(name, argv, exc)


# -- dispatch ---------------------------------------------------------------------------

def _wants_help(argv: list[str]) -> bool:
    return not argv or any(t in ("--help", "-h") for t in argv if t != "--") \
        or argv[0] == "help"


def run(argv: list[str]) -> int:
    from agent_journal.cli.argv import parse

    if argv[:1] == ["--version"]:
        import agent_journal

        _output().emit_line(f"{PROG} {agent_journal.__version__}")
        return 0
    # Global options before a hook's name (`--root hook claude-code`, its value missing)
    # must not turn the hook into a usage error either: that would block the agent.
    hook = bool(argv) and argv[0].partition("=")[0] in _GLOBAL_FLAGS and _names_a_hook(argv)
    if argv and argv[0].partition("=")[0] in _GLOBAL_FLAGS:
        try:
            argv = _hoist_global_options(argv)
        except UsageError as exc:
            if hook:
                _log_failed_open("hook", argv, exc)
                return 0
            _output().error(exc.message)
            return exc.exit_code
    if _wants_help(argv):
        from agent_journal.cli.help import show_help

        return show_help(argv)
    cmd, rest = _find_command(argv)
    if cmd is not None and cmd.fail_open:
        return _run_failing_open(cmd, rest)
    if cmd is None and (argv[0] == "hook" or hook):
        # A hook entry naming an agent this version does not know must not block the
        # agent either (exit 2 would): it fails open like the hook itself.
        _log_failed_open("hook", argv[1:], UsageError(f"no such hook {' '.join(argv[:2])!r}"))
        return 0
    try:
        if cmd is None:
            from agent_journal.cli.commands import unknown_command

            raise UsageError(unknown_command(argv, PROG))
        values = parse(cmd, rest)
        code = int(_handler(cmd)(values))
        _output().flush()
        return code
    except JournalError as exc:
        _output().error(exc.message)
        return exc.exit_code
    except KeyboardInterrupt:
        _output().error("interrupted")
        return 130
    except BrokenPipeError:
        _discard_stdout()
        return 1
    except Exception as exc:  # never a traceback in front of a user
        _output().error(f"internal error: {exc.__class__.__name__}: {exc}")
        if os.environ.get("AGENT_JOURNAL_DEBUG"):
            raise
        return 1


def _find_command(argv: list[str]) -> tuple[Any, list[str]]:
    """The command argv names, and the words after its name. `hook AGENT` is looked up in
    the hook's own rows: the hook process never builds the command table."""
    if argv[:1] == ["hook"]:
        from agent_journal.cli.hook_commands import HOOK_COMMANDS

        hook = HOOK_COMMANDS.get(" ".join(argv[:2]))
        return (hook, argv[2:]) if hook is not None else (None, argv)
    from agent_journal.cli.commands import find_command

    return find_command(argv)


def _handler(cmd: Any) -> Any:
    """A command's handler: a function of cli/handlers.py, or `module:name`, a function of
    `agent_journal.cli.module`, imported only now."""
    module, _, name = cmd.handler.rpartition(":")
    module = module or "handlers"
    # (__import__, not importlib: importlib costs the hook path two more modules)
    return getattr(__import__(f"agent_journal.cli.{module}", fromlist=[name]), name)


# Options every journal command takes, accepted before the command too, like git's.
_GLOBAL_FLAGS = ("--root", "--workspace")


def _names_a_hook(argv: list[str]) -> bool:
    """Whether the words `hook AGENT` of a fail-open command stand somewhere in argv."""
    from agent_journal.cli.hook_commands import HOOK_COMMANDS

    return any(word == "hook" and f"hook {argv[i + 1]}" in HOOK_COMMANDS
               for i, word in enumerate(argv[:-1]))


def _hoist_global_options(argv: list[str]) -> list[str]:
    """`--root R show ...` becomes `show --root R ...`: leading global options move to just
    after the command's name, where the command's own parser checks them as usual."""
    moved: list[str] = []
    i = 0
    while i < len(argv) and argv[i].partition("=")[0] in _GLOBAL_FLAGS:
        if "=" in argv[i]:
            moved.append(argv[i])
            i += 1
            continue
        if i + 1 >= len(argv) or argv[i + 1].startswith("-"):
            raise UsageError(f"{argv[i]} needs a value")
        moved += argv[i:i + 2]
        i += 2
    cmd, rest = _find_command(argv[i:])
    if cmd is None:
        if i < len(argv):
            return argv[i:] + moved
        raise UsageError(f"no command after {' '.join(moved)}; see {PROG} --help")
    return cmd.name.split() + moved + rest


def _discard_stdout() -> None:
    """Point descriptor 1 at /dev/null, so what is still buffered is not written at exit
    into the closed pipe (Python would print "Exception ignored" about it)."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
    except OSError:
        pass


def _hold_standard_fds() -> None:
    """Open /dev/null on any of descriptors 0-2 that was closed (`>&-`).

    Otherwise the next file opened (a log, an artifact) would get that number, and
    anything written to "stdout" would land in it. sys.stdout stays None, so printing
    a result is still reported as impossible.
    """
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            try:
                got = os.open(os.devnull, os.O_RDWR)
            except OSError:
                return
            if got != fd:  # a lower descriptor was free after all; leave things as they are
                os.close(got)


def _run_failing_open(cmd: Any, rest: list[str]) -> int:
    """Run a fail-open command: every failure is logged and the exit code is 0.

    The agent hook's caller treats exit 2 as "block this tool call" and other codes as
    errors shown to the user, so nothing it does may surface as anything but 0. (The hook
    logs what fails once it has chosen a root itself, at that root: agents/hook.py.)
    """
    from agent_journal.cli.argv import parse

    try:
        _handler(cmd)(parse(cmd, rest))
        if sys.stdout is not None:
            sys.stdout.flush()
    except BaseException as exc:  # all of them, KeyboardInterrupt and SystemExit included
        _log_failed_open(cmd.name, rest, exc)
    return 0


def _end_now(code: int) -> None:
    """End this process now, its streams flushed, without the interpreter's teardown (a
    hook's work is durable by now: every file it wrote is closed and synced, and freeing
    a few thousand objects one by one cost it about 2 ms of the agent's tool call). Not
    when anything registered work for exit (an atexit callback: a worker pool's, logging's)
    or another thread still runs: then the process ends as every other does."""
    import atexit

    pending = getattr(atexit, "_ncallbacks", None)
    threading = sys.modules.get("threading")
    if pending is None or pending() or (threading is not None
                                        and threading.active_count() > 1):
        return
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except BaseException:
        return  # the ordinary exit reports it
    os._exit(code)


def main(argv: list[str] | None = None) -> int:
    # Files and folders the journal creates are private whatever the caller's umask.
    os.umask(0o077)
    _hold_standard_fds()
    args = list(sys.argv[1:] if argv is None else argv)
    # The console script's own process (argv None), running the hook, ends without
    # teardown; a caller in the same process (tests, `python -m` callers) is left alone.
    end_now = argv is None and (args[:1] == ["hook"] or (
        bool(args) and args[0].partition("=")[0] in _GLOBAL_FLAGS and _names_a_hook(args)))
    try:
        code = run(args)
        if sys.stdout is not None:
            sys.stdout.flush()  # here, where a closed pipe can still be caught
    except BrokenPipeError:
        _discard_stdout()
        return 1
    except JournalError as exc:  # `--version > /dev/full`: what run could not catch
        _discard_stdout()
        _output().error(exc.message)
        return exc.exit_code
    except OSError as exc:
        _discard_stdout()
        _output().error(f"cannot print the result: {exc.strerror or exc}")
        return 1
    if end_now:
        _end_now(code)
    return code
