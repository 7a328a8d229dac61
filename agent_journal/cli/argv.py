"""The lean argument parser every command runs through, and the shape of what it parses
against: a command's row (`Command`, its `Opt`ions and `Arg`uments), whose table is
cli/commands.py.

Invariants:
- A flag that takes a value always needs one: a missing value, an empty one,
  or one of the command's own flags in its place is a usage error, never a
  default. Any other token is the value, even when it starts with a dash
  (`--text "-x is wrong"`, a PEM block); `--text=VALUE` always works.
- Every argument is valid UTF-8: bytes the shell passed that do not decode
  (they arrive as lone surrogates) are a usage error, before anything is
  written, since nothing downstream could store or print them.
- A bare flag takes no value: `--apply=yes` and `--apply true` are refused.
- A value the table types as an id (an option's, an argument's, or the environment
  variable standing in for an option) is a valid journal id.
- The environment a journal command runs under is checked with its arguments: an
  empty variable standing in for an option, or an $AGENT_JOURNAL_NOW that is not an
  instant, is a usage error, not a default (the fail-open hook checks its own).
- Nothing is written before parsing succeeds (parsing happens first).
- A command or option that does not exist is a usage error naming the nearest
  that does, when one is near (`did you mean ...`).
It imports nothing heavy, and not the command table, so the hook and write paths stay fast
(the hook parses against its own rows, cli/hook_commands.py, without building the table).
"""

from __future__ import annotations

import os

from agent_journal.core.errors import UsageError
from agent_journal.core.model import validate_id

TYPE_CHECKING = False  # typing stays unimported at run time; mypy reads this as True
if TYPE_CHECKING:
    from typing import Any


VALUE = "value"   # --flag VALUE, exactly once
MULTI = "multi"   # --flag VALUE, repeatable
BARE = "bare"     # --flag, takes no value

ENV_WORKSPACE = "AGENT_JOURNAL_WORKSPACE"
ENV_SESSION = "AGENT_JOURNAL_SESSION"
ENV_ROOT = "AGENT_JOURNAL_ROOT"  # the same name as storage.root.ENV_ROOT

# Value types argv checks: "str" (any text), "int" (a whole number, see `minimum`), "id" (a
# journal id: core.model.validate_id, so no path separators or control characters and a
# bounded length, refused before anything is opened).


class Opt:
    __slots__ = ("dest", "flag", "kind", "help", "type", "required", "env", "metavar",
                 "minimum", "project", "choices")

    def __init__(self, dest: str, flag: str, help: str, *, kind: str = VALUE,
                 type: str = "str", required: bool = False, env: str | None = None,
                 metavar: str | None = None, minimum: int | None = None,
                 project: str | None = None, choices: tuple[str, ...] | None = None) -> None:
        self.dest = dest
        self.flag = flag
        self.kind = kind
        self.help = help
        self.type = type
        self.required = required
        self.env = env
        self.metavar = metavar or dest.upper()
        self.minimum = minimum
        # The key of .agent-journal.toml that gives the default when neither the flag nor
        # `env` does (cli/project_defaults.py).
        self.project = project
        # The only values the flag accepts (checked by argv, listed in help).
        self.choices = choices


class Arg:
    __slots__ = ("dest", "metavar", "help", "required", "type", "many")

    def __init__(self, dest: str, help: str, *, metavar: str | None = None,
                 required: bool = True, type: str = "str", many: bool = False) -> None:
        self.dest = dest
        self.metavar = metavar or dest.upper()
        self.help = help
        self.required = required
        self.type = type
        # The last argument only: it takes every remaining word, as a list (one at
        # least when required).
        self.many = many


class Command:
    __slots__ = ("name", "help", "args", "opts", "handler", "fail_open")

    def __init__(self, name: str, help: str, handler: str, args: tuple[Arg, ...] = (),
                 opts: tuple[Opt, ...] = (), fail_open: bool = False) -> None:
        self.name = name
        self.help = help
        self.handler = handler
        self.args = args
        self.opts = opts
        # A fail-open command (the agent hook) must never fail its caller: cli.run logs
        # any failure, its own usage errors included, and exits 0.
        self.fail_open = fail_open


# Far above any count, duration or exit code, and far below the digits Python refuses to
# convert (4300), so a huge number is a usage error, not an internal one.
MAX_INT_DIGITS = 18


def nearest(typed: str, known: list[str]) -> str | None:
    from difflib import get_close_matches  # (loaded here: only a mistake needs it)

    found = get_close_matches(typed, known, n=1, cutoff=0.6)
    return found[0] if found else None


def _unknown_option(flag: str, cmd: Command) -> UsageError:
    near = nearest(flag, [opt.flag for opt in cmd.opts] + ["--help"])
    hint = f"; did you mean {near}?" if near is not None else ""
    return UsageError(f"no such option {flag} for {cmd.name}{hint}")


def _convert(opt: Opt, raw: str, what: str | None = None) -> Any:
    if opt.type == "id":
        return validate_id(raw, what or opt.flag)
    if opt.type == "int":
        # Plain ASCII digits only: int() would also take " 5", "1_000" and
        # non-ASCII digits, none of which a caller means as a number.
        digits = raw[1:] if raw[:1] in ("+", "-") else raw
        if not (digits.isascii() and digits.isdigit()):
            raise UsageError(f"{opt.flag} takes a whole number, not {raw!r}")
        if len(digits) > MAX_INT_DIGITS:
            raise UsageError(f"{opt.flag} is too large ({len(digits)} digits)")
        value = int(raw, 10)
        if opt.minimum is not None and value < opt.minimum:
            raise UsageError(f"{opt.flag} must be at least {opt.minimum}, not {value}")
        return value
    if opt.choices is not None and raw not in opt.choices:
        raise UsageError(f"{opt.flag} must be one of {', '.join(opt.choices)}, not {raw!r}")
    return raw


def _check_utf8(what: str, raw: str) -> str:
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:
        # repr() shows the undecodable bytes as \udcXX escapes: printable, one line.
        raise UsageError(f"{what} is not valid UTF-8: {raw!r}") from None
    if "\x00" in raw:  # no shell can pass one; a caller in-process could
        raise UsageError(f"{what} contains a NUL character")
    return raw


def _is_own_flag(token: str, by_flag: dict[str, Opt]) -> bool:
    """Whether `token` reads as one of the command's options (so it is not a value)."""
    return token == "--" or (token.startswith("--") and token.partition("=")[0] in by_flag)


def parse(cmd: Command, tokens: list[str]) -> dict[str, Any]:
    """Every option's and argument's value by its `dest`, from the tokens, the
    environment and the project's defaults; a UsageError on anything amiss."""
    values: dict[str, Any] = {}
    for opt in cmd.opts:
        values[opt.dest] = [] if opt.kind == MULTI else (False if opt.kind == BARE else None)
    positionals = _read_tokens(cmd, tokens, values)
    # The root first: a workspace the hooks named after this folder is looked for in it.
    for opt in sorted(cmd.opts, key=lambda o: o.project == "workspace"):
        _fill_default(opt, values)
    if not cmd.fail_open and any(opt.dest == "root" for opt in cmd.opts):
        _check_clock()
    for index, arg in enumerate(cmd.args):
        if arg.many:
            values[arg.dest] = positionals[index:]
            if arg.required and not values[arg.dest]:
                raise UsageError(f"missing argument {arg.metavar}")
        elif index < len(positionals):
            values[arg.dest] = positionals[index]
        elif arg.required:
            raise UsageError(f"missing argument {arg.metavar}")
        else:
            values[arg.dest] = None
    return values


def _read_tokens(cmd: Command, tokens: list[str], values: dict[str, Any]) -> list[str]:
    """Set the options' values the tokens give; the positional arguments, in order."""
    by_flag = {opt.flag: opt for opt in cmd.opts}
    positionals: list[str] = []
    seen: set[str] = set()
    after_bare: str | None = None
    only_positionals = False
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if only_positionals or not token.startswith("--") or token == "--":
            if token == "--" and not only_positionals:
                only_positionals = True
                continue
            positionals.append(_positional(cmd, token, positionals, by_flag, after_bare,
                                           only_positionals))
            after_bare = None
            continue
        flag, has_eq, inline = token.partition("=")
        opt = by_flag.get(flag)
        if opt is None:
            raise _unknown_option(flag, cmd)
        after_bare = None
        if opt.kind == BARE:
            if has_eq:
                raise UsageError(f"{flag} takes no value; pass it as a bare flag")
            values[opt.dest] = True
            after_bare = flag
            continue
        if has_eq:
            raw = inline
        elif i < len(tokens) and not _is_own_flag(tokens[i], by_flag):
            raw = tokens[i]
            i += 1
        else:
            raw = ""
        _set_value(opt, flag, raw, values, seen)
    return positionals


def _positional(cmd: Command, token: str, positionals: list[str], by_flag: dict[str, Opt],
                after_bare: str | None, only_positionals: bool) -> str:
    """The token as the next positional argument's value."""
    # (A last argument taking many words takes none right after a bare flag:
    # `--json true` is a mistake, not a word.)
    if after_bare is not None and (len(positionals) >= len(cmd.args)
                                   or cmd.args[len(positionals)].many):
        raise UsageError(f"{after_bare} takes no value; pass it as a bare flag")
    if len(positionals) >= len(cmd.args) and not (cmd.args and cmd.args[-1].many):
        near = None
        if token.startswith("-") and not only_positionals:  # `-json` for `--json`
            near = nearest("-" + token.partition("=")[0], list(by_flag))
        hint = f"; did you mean {near}?" if near is not None else ""
        raise UsageError(f"unexpected argument {token!r}{hint}")
    arg = cmd.args[min(len(positionals), len(cmd.args) - 1)]
    _check_utf8(arg.metavar, token)
    return validate_id(token, arg.metavar) if arg.type == "id" else token


def _set_value(opt: Opt, flag: str, raw: str, values: dict[str, Any], seen: set[str]) -> None:
    if raw == "":
        raise UsageError(f"{flag} needs a value")
    _check_utf8(flag, raw)
    if opt.kind == MULTI:
        values[opt.dest].append(_convert(opt, raw))
    else:
        if flag in seen:
            raise UsageError(f"{flag} was given more than once")
        values[opt.dest] = _convert(opt, raw)
    seen.add(flag)


def _fill_default(opt: Opt, values: dict[str, Any]) -> None:
    """An option not given: from its environment variable, else the project's
    default, else (the workspace) the one the hooks named after this folder, when the root
    holds it; a usage error when it is required and still has no value."""
    if opt.kind != BARE and opt.kind != MULTI and values[opt.dest] is None and opt.env:
        env = os.environ.get(opt.env)
        if env is not None:
            if env == "":
                raise UsageError(f"{opt.flag} is not given and ${opt.env} is empty")
            _check_utf8(f"${opt.env}", env)
            values[opt.dest] = _convert(opt, env, f"${opt.env}")
    if values[opt.dest] is None and opt.project is not None:
        from agent_journal.cli.project_defaults import project_default

        values[opt.dest] = project_default(opt.project)
    if values[opt.dest] is None and opt.project == "workspace":
        from agent_journal.cli.project_defaults import folder_workspace

        values[opt.dest] = folder_workspace(values.get("root"))
    if opt.required and values[opt.dest] is None:
        hint = f" (or set ${opt.env})" if opt.env else ""
        if opt.project is not None and hint:
            hint = hint[:-1] + ", or run it inside a project with .agent-journal.toml)"
        raise UsageError(f"{opt.flag} is required{hint}")


def _check_clock() -> None:
    """A set $AGENT_JOURNAL_NOW must be an instant: otherwise a command that reads the
    clock only late (a push after its uploads) would fail half done, and one that never
    reads it would hide the mistake."""
    from agent_journal.core.clock import ENV_NOW, parse_instant

    fixed = os.environ.get(ENV_NOW)
    if fixed is not None:
        try:
            parse_instant(fixed)
        except UsageError as exc:
            raise UsageError(f"${ENV_NOW} is {exc.message}") from None
