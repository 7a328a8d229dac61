"""Help rendering: a typer application built from the command table.

Invariant: typer never parses a command's real arguments (argv does, under the
flag discipline); it only renders --help from the same table, so help text and
behaviour describe the same options. Imported only when help is asked for.
"""

from __future__ import annotations

import inspect
from typing import Any

from agent_journal.cli.argv import BARE, MULTI, Command
from agent_journal.cli.commands import COMMANDS, GROUP_HELP


def _callback(cmd: Command) -> Any:
    import typer

    params = []
    for arg in cmd.args:
        params.append(inspect.Parameter(
            arg.dest, inspect.Parameter.POSITIONAL_OR_KEYWORD,
            default=typer.Argument(... if arg.required else None, metavar=arg.metavar,
                                   help=arg.help, show_default=False),
            annotation=list[str] if arg.many else str))
    for opt in cmd.opts:
        if opt.kind == BARE:
            annotation: Any = bool
            # No metavar: newer typer shows `<bool>` there, which reads as a value to pass
            # (`--apply true`), and a bare flag takes none.
            default = typer.Option(False, opt.flag, help=opt.help, show_default=False,
                                   metavar="")
        else:
            annotation = list[str] if opt.kind == MULTI else (int if opt.type == "int" else str)
            help_text = opt.help + (" Repeatable." if opt.kind == MULTI else "")
            if opt.required:
                help_text = "(required) " + help_text
            default = typer.Option(None, opt.flag, help=help_text, metavar=opt.metavar,
                                   show_default=False)
        params.append(inspect.Parameter(opt.dest, inspect.Parameter.KEYWORD_ONLY,
                                        default=default, annotation=annotation))

    def callback(**_: Any) -> None:  # pragma: no cover - help only
        pass

    callback.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    callback.__doc__ = cmd.help
    return callback


def build_app() -> Any:
    import typer

    app = typer.Typer(help="An append-only event journal for AI coding agents.",
                      add_completion=False, no_args_is_help=True)
    groups: dict[str, Any] = {}
    for name, cmd in COMMANDS.items():
        words = name.split()
        target = app
        for word in words[:-1]:
            key = " ".join(words[: words.index(word) + 1])
            if key not in groups:
                groups[key] = typer.Typer(help=GROUP_HELP.get(key, f"{word} commands"),
                                          no_args_is_help=True)
                target.add_typer(groups[key], name=word)
            target = groups[key]
        target.command(name=words[-1], help=cmd.help)(_callback(cmd))
    return app


def _bare_help_options(command: Any) -> None:
    """Show `--help` itself as the bare flag it is: newer typer gives the help option of
    every command and group the `<bool>` placeholder, as it did our own bare flags."""
    option = command.get_help_option(command.context_class(command))
    if option is not None:  # the object help renders (click caches it on the command)
        option.metavar = ""
    for sub in getattr(command, "commands", {}).values():
        _bare_help_options(sub)


def show_help(argv: list[str]) -> int:
    import typer

    command = typer.main.get_command(build_app())
    _bare_help_options(command)
    words = ["--help" if t == "-h" else t for t in argv if t not in ("help",)]
    if not any(t in ("--help", "-h") for t in words):
        words.append("--help")
    try:
        command.main(args=words, prog_name="agent-journal", standalone_mode=False)
    except SystemExit as exc:
        return int(exc.code or 0)
    except BrokenPipeError:
        raise  # the reader left early: cli.main ends quietly
    except Exception as exc:
        import sys

        sys.stderr.write(f"error: {exc}\n")
        return 2
    return 0
