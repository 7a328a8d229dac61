"""The command table: the one definition of every command's arguments.

Invariant: each command's name, options, help and handler are declared here
once. Both the lean argument parser (`argv`, used to run every command, with
no typer/click import on the hot path) and the typer application (`help`,
used only to render --help) are built from this table, so they cannot drift.
"""

from __future__ import annotations

VALUE = "value"   # --flag VALUE, exactly once
MULTI = "multi"   # --flag VALUE, repeatable
BARE = "bare"     # --flag, takes no value

ENV_WORKSPACE = "AGENT_JOURNAL_WORKSPACE"
ENV_SESSION = "AGENT_JOURNAL_SESSION"


class Opt:
    __slots__ = ("dest", "flag", "kind", "help", "type", "required", "env", "metavar",
                 "minimum")

    def __init__(self, dest: str, flag: str, help: str, *, kind: str = VALUE,
                 type: str = "str", required: bool = False, env: str | None = None,
                 metavar: str | None = None, minimum: int | None = None) -> None:
        self.dest = dest
        self.flag = flag
        self.kind = kind
        self.help = help
        self.type = type
        self.required = required
        self.env = env
        self.metavar = metavar or dest.upper()
        self.minimum = minimum


class Arg:
    __slots__ = ("dest", "metavar", "help", "required")

    def __init__(self, dest: str, help: str, *, metavar: str | None = None,
                 required: bool = True) -> None:
        self.dest = dest
        self.metavar = metavar or dest.upper()
        self.help = help
        self.required = required


class Command:
    __slots__ = ("name", "help", "args", "opts", "handler")

    def __init__(self, name: str, help: str, handler: str, args: tuple[Arg, ...] = (),
                 opts: tuple[Opt, ...] = ()) -> None:
        self.name = name
        self.help = help
        self.handler = handler
        self.args = args
        self.opts = opts


ROOT = Opt("root", "--root", "Journal root folder (default: $AGENT_JOURNAL_ROOT, else "
           "$XDG_DATA_HOME/agent-journal).", metavar="DIR")
WORKSPACE = Opt("workspace", "--workspace", "Workspace id (default: $AGENT_JOURNAL_WORKSPACE).",
                required=True, env=ENV_WORKSPACE, metavar="ID")
SESSION = Opt("session", "--session", "Writing session id (default: $AGENT_JOURNAL_SESSION; "
              "none means a human wrote it).", env=ENV_SESSION, metavar="ID")
JSON = Opt("json", "--json", "Print JSON instead of a line of text.", kind=BARE)
REASON = Opt("reason", "--reason", "Why; required and not blank.", required=True)

WRITE_COMMON = (WORKSPACE, ROOT, SESSION, JSON)
READ_COMMON = (WORKSPACE, ROOT)

COMMANDS: dict[str, Command] = {}


def _add(cmd: Command) -> None:
    COMMANDS[cmd.name] = cmd


_add(Command(
    "record", "Record an entry: a finding, decision, constraint, objective, assumption or note.",
    "cmd_record",
    opts=(
        Opt("kind", "--kind", "finding | decision | constraint | objective | assumption | note.",
            required=True),
        Opt("id", "--id", "Entry id (unique in the workspace).", required=True),
        Opt("claim", "--claim", "The claim (finding)."),
        Opt("question", "--question", "The question (decision)."),
        Opt("chosen", "--chosen", "The chosen answer (decision)."),
        Opt("text", "--text", "The text (constraint, objective, assumption, note)."),
        Opt("anchor", "--anchor", "Evidence: tool_use:OBS_ID, file:PATH, commit:SHA, url:URL.",
            kind=MULTI, metavar="SCHEME:REF"),
        Opt("depends_on", "--depends-on", "An entry this one depends on.", kind=MULTI,
            metavar="ENTRY_ID"),
        Opt("subject", "--subject", "What the entry is about."),
    ) + WRITE_COMMON,
))

_add(Command(
    "observe", "Record an observation: one tool call and what came of it.", "cmd_observe",
    opts=(
        Opt("kind", "--kind", "Observation kind (tool_call).", required=True),
        Opt("id", "--id", "Observation id; observe it again to record how it finished.",
            required=True),
        Opt("tool", "--tool", "Tool name."),
        Opt("call_id", "--callId", "The tool call id.", metavar="ID"),
        Opt("input", "--input", "Tool input as JSON.", metavar="JSON"),
        Opt("output", "--output", "File holding the tool output, or - for stdin.",
            metavar="FILE"),
        Opt("status", "--status", "started | ok | error | partial | cancelled (default ok)."),
        Opt("exit_code", "--exit-code", "Exit code.", type="int", metavar="N"),
        Opt("duration_ms", "--duration-ms", "Duration in milliseconds.", type="int",
            metavar="N", minimum=0),
    ) + WRITE_COMMON,
))

_add(Command(
    "invalidate", "Retract an entry whose reasoning was wrong (it and its dependents stop "
    "being live; the content stays readable).", "cmd_invalidate",
    args=(Arg("target", "Entry id to retract."),),
    opts=(REASON,) + WRITE_COMMON,
))

_add(Command(
    "tombstone", "Mark content that must not exist: hidden from every read now, erased by "
    "the next compact --apply.", "cmd_tombstone",
    args=(Arg("target", "Entry or observation id."),),
    opts=(REASON,) + WRITE_COMMON,
))

_add(Command(
    "show", "Show entries as derived from the events: liveness, retractions, constraints.",
    "cmd_show",
    opts=(
        Opt("id", "--id", "Only this entry or observation."),
        Opt("observations", "--observations", "Include every observation.", kind=BARE),
        Opt("json", "--json", "Accepted for symmetry; show always prints JSON.", kind=BARE),
    ) + READ_COMMON,
))


# -- replicas: export, merge ----------------------------------------------------------

_add(Command(
    "export", "Write a verifiable snapshot of a workspace (segments, artifacts, manifest) into "
    "DEST, while writers keep appending.", "cmd_export",
    args=(Arg("dest", "Folder to create (or an empty one)."),),
    opts=(Opt("json", "--json", "Accepted for symmetry; export always prints JSON.",
              kind=BARE),) + READ_COMMON,
))

_add(Command(
    "merge", "Union another replica into this workspace: an export folder (verified against "
    "its manifest) or another journal root.", "cmd_merge",
    args=(Arg("source", "Export folder or journal root."),),
    opts=(Opt("json", "--json", "Accepted for symmetry; merge always prints JSON.",
              kind=BARE),) + READ_COMMON,
))
