"""The command table: the one definition of every command's arguments.

Invariant: each command's name, options, help and handler are declared once, here
(the hook's beside its handlers). Both the lean argument parser (`argv`, used to run
every command, with no typer/click import on the hot path) and the typer application
(`help`, used only to render --help) are built from this table, so they cannot drift.
The hook's rows are declared beside its handlers (cli/hook_commands.py) and added here,
so the hook process parses its arguments without building this table; what a row is
(`Command`, `Opt`, `Arg`) is argv's.
"""

from __future__ import annotations

from agent_journal.cli.argv import (
    BARE,
    ENV_ROOT,
    ENV_SESSION,
    ENV_WORKSPACE,
    MULTI,
    Arg,
    Command,
    Opt,
    nearest,
)
from agent_journal.cli.hook_commands import HOOK_COMMANDS, PLAIN_ROOT

ROOT = Opt("root", "--root", "Journal root folder (default: $AGENT_JOURNAL_ROOT, else the "
           "project file's root, else $XDG_DATA_HOME/agent-journal).", metavar="DIR",
           env=ENV_ROOT, project="root")
WORKSPACE = Opt("workspace", "--workspace", "Workspace id (default: $AGENT_JOURNAL_WORKSPACE, "
                "else the workspace of the nearest .agent-journal.toml, else the one the "
                "hooks named after this folder, when the root holds it).",
                required=True, env=ENV_WORKSPACE, metavar="ID", project="workspace",
                type="id")
SESSION = Opt("session", "--session", "Writing session id (default: $AGENT_JOURNAL_SESSION; "
              "none means a human wrote it).", env=ENV_SESSION, metavar="ID", type="id")
JSON = Opt("json", "--json", "Print JSON instead of a line of text.", kind=BARE)
READ_JSON = Opt("json", "--json", "Print the documented JSON (spec/cli-json.md) instead of text "
                "for people.", kind=BARE)
AS_OF = Opt("as_of", "--as-of", "Derive from the events up to a checkpoint (its name) or an "
            "instant (ISO 8601, or an age such as 2h, 3d), as if later events did not exist; "
            "content tombstoned at any time stays hidden.", metavar="NAME|INSTANT")
REASON = Opt("reason", "--reason", "Why; required and not blank.", required=True)

WRITE_COMMON = (WORKSPACE, ROOT, SESSION, JSON)
READ_COMMON = (WORKSPACE, ROOT)

COMMANDS: dict[str, Command] = {}

# The observation kinds `observe` records: the ones the agent hooks write, so a hand-written
# observation reads like a captured one.
OBSERVE_KINDS = ("tool_call", "user_prompt", "session_start", "pre_compact", "post_compact",
                 "stop", "session_end")

# Help for the first word of two- and three-word commands.
GROUP_HELP = {
    "hook": "What an agent's hooks run: journal what it sends on stdin, or sync (fails open).",
    "hooks": "Install or remove the agent-journal hook in an agent's settings.",
    "hooks install": "Add the hook to an agent's settings.",
    "hooks uninstall": "Remove the hook from an agent's settings.",
    "import": "Replay an agent's session transcript as observations.",
    "remote": "The remotes (a bucket or a shared folder) this workspace syncs through.",
    "alias": "The root's search thesaurus: casual words and the terms they stand for.",
}


def _add(cmd: Command) -> None:
    COMMANDS[cmd.name] = cmd


_add(Command(
    "record", "Record an entry: a finding, decision, constraint, objective, assumption or note.",
    "cmd_record",
    opts=(
        Opt("kind", "--kind", "finding | decision | constraint | objective | assumption | note.",
            required=True),
        Opt("id", "--id", "Entry id (unique in the workspace).", required=True, type="id"),
        Opt("claim", "--claim", "The claim (finding)."),
        Opt("question", "--question", "The question (decision)."),
        Opt("chosen", "--chosen", "The chosen answer (decision)."),
        Opt("text", "--text", "The text (constraint, objective, assumption, note)."),
        Opt("anchor", "--anchor", "Evidence: tool_use:OBS_ID, file:PATH, commit:SHA, url:URL.",
            kind=MULTI, metavar="SCHEME:REF"),
        Opt("depends_on", "--depends-on", "An entry this one depends on.", kind=MULTI,
            metavar="ENTRY_ID", type="id"),
        Opt("subject", "--subject", "What the entry is about."),
    ) + WRITE_COMMON,
))

_add(Command(
    "observe", "Record an observation: one tool call and what came of it.", "cmd_observe",
    opts=(
        Opt("kind", "--kind", "Observation kind: " + ", ".join(OBSERVE_KINDS) + ".",
            required=True, choices=OBSERVE_KINDS),
        Opt("id", "--id", "Observation id; observe it again to record how it finished.",
            required=True, type="id"),
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
    args=(Arg("target", "Entry id to retract.", type="id"),),
    opts=(REASON,) + WRITE_COMMON,
))

_add(Command(
    "tombstone", "Mark content that must not exist: hidden from every read now, erased by "
    "the next compact --apply.", "cmd_tombstone",
    args=(Arg("target", "Entry or observation id.", type="id"),),
    opts=(REASON,) + WRITE_COMMON,
))

_add(Command(
    "show", "Show entries as derived from the events: liveness, retractions, constraints.",
    "cmd_show",
    opts=(
        Opt("id", "--id", "Only this entry or observation.", type="id"),
        Opt("observations", "--observations", "Include every observation.", kind=BARE),
        READ_JSON, AS_OF,
    ) + READ_COMMON,
))


# -- search (issue 7) -------------------------------------------------------------------

_add(Command(
    "search", "Find entries and observations by their words (and the words the root's "
    "thesaurus adds), ranked by term rarity and recency; tombstoned content is never "
    "returned.", "cmd_search",
    args=(Arg("query", "Words to look for (quote several words as one argument).",
              required=False),),
    opts=(
        Opt("misses", "--misses", "Instead of searching, list the weak queries the miss log "
            "recorded (config.json: \"search\": {\"missLog\": true}), with counts, newest "
            "first.", kind=BARE),
        Opt("limit", "--limit", "At most N hits (default 10).", type="int", metavar="N",
            minimum=1),
        Opt("kind", "--kind", "Only hits of this kind (finding, decision, tool_call, ...).",
            type="id"),
        Opt("include_retracted", "--include-retracted", "Also return invalidated and "
            "suppressed entries, marked as such.", kind=BARE),
        Opt("json", "--json", "Print JSON instead of a list.", kind=BARE),
    ) + READ_COMMON,
))


ALIAS_WORD = Arg("word", "The casual word (one word).", metavar="WORD")

_add(Command(
    "alias add", "Make WORD also search for each TERM, in the root's thesaurus "
    "(<root>/thesaurus.json; spec/SEARCH.md).", "cmd_alias_add",
    args=(ALIAS_WORD, Arg("terms", "Canonical terms it stands for (a term of several words "
                          "adds each of them).", metavar="TERM", many=True)),
    opts=(ROOT, Opt("json", "--json", "Print the thesaurus as JSON.", kind=BARE)),
))

_add(Command(
    "alias remove", "Forget WORD in the thesaurus, or only the given TERMs of it.",
    "cmd_alias_remove",
    args=(ALIAS_WORD, Arg("terms", "Only these of its terms.", metavar="TERM", many=True,
                          required=False)),
    opts=(ROOT, Opt("json", "--json", "Print the thesaurus as JSON.", kind=BARE)),
))

_add(Command(
    "alias list", "List the thesaurus: each word and the terms it adds to a search.",
    "cmd_alias_list",
    opts=(ROOT, READ_JSON),
))


# -- capture: the agent hook, its installer, transcript import, exact evidence --------

PROJECT = Opt("project", "--project", "Project folder (default: the nearest folder from the "
              "current one upwards holding .agent-journal.toml, .claude, .codex or .git, "
              "else the current folder).", metavar="DIR")
DRY_RUN = Opt("dry_run", "--dry-run", "Print the change as a diff; write nothing.", kind=BARE)
INSTALL_WORKSPACE = Opt("workspace", "--workspace", "Workspace the hook writes to, kept in the "
                        "project's .agent-journal.toml (default: $AGENT_JOURNAL_WORKSPACE, else "
                        "the project file's, else the project folder's name).",
                        env=ENV_WORKSPACE, metavar="ID", type="id")
CLAUDE_SCOPE = Opt("scope", "--scope", "project: the shared .claude/settings.json; local: "
                   ".claude/settings.local.json (personal, not committed); user: "
                   "~/.claude/settings.json (default project).", metavar="SCOPE",
                   choices=("project", "local", "user"))
CODEX_SCOPE = Opt("scope", "--scope", "project: .codex/hooks.json; user: ~/.codex/hooks.json "
                  "($CODEX_HOME/hooks.json when set) (default project).", metavar="SCOPE",
                  choices=("project", "user"))
MCP = Opt("mcp", "--mcp", "Also register `agent-journal mcp` as an MCP server at the same "
          "scope (.mcp.json for project, ~/.claude.json for local and user); uninstall "
          "removes it with the hooks.", kind=BARE)
OTHER_PROJECT = Opt("other_project", "--other-project", "Import even when the workspace "
                    "already holds observations from another project (a cwd neither the "
                    "same folder nor inside or above it); a warning names both.", kind=BARE)
SYNC_HOOKS = Opt("sync", "--sync", "Also sync through the workspace's remote: a pull of at "
                 "most 3 s when a session starts, a push in the background when it ends "
                 "(`hook sync-start|sync-end`; never failing the session). Uninstall removes "
                 "them with the hooks.", kind=BARE)
CLAUDE_INSTALL = (PROJECT, CLAUDE_SCOPE, INSTALL_WORKSPACE, PLAIN_ROOT, DRY_RUN, MCP, SYNC_HOOKS)
CODEX_INSTALL = (PROJECT, CODEX_SCOPE, INSTALL_WORKSPACE, PLAIN_ROOT, DRY_RUN, SYNC_HOOKS)

for _hook in HOOK_COMMANDS.values():  # (declared beside their handlers)
    _add(_hook)

_add(Command(
    "hooks install claude-code", "Add the agent-journal hook to Claude Code's settings at a "
    "scope, keeping everything else in the file, and write the project's .agent-journal.toml.",
    "capture_commands:cmd_hooks_install",
    opts=CLAUDE_INSTALL,
))

_add(Command(
    "hooks uninstall claude-code", "Remove exactly the hook entries `hooks install` added, "
    "the MCP server entry `--mcp` added, and the project file it wrote once no hook of ours "
    "is left in the project.",
    "capture_commands:cmd_hooks_uninstall",
    opts=CLAUDE_INSTALL,
))

_add(Command(
    "hooks install codex", "Add the agent-journal hook to a Codex hooks.json at a scope, "
    "keeping everything else in the file, and write the project's .agent-journal.toml.",
    "capture_commands:cmd_hooks_install_codex",
    opts=CODEX_INSTALL,
))

_add(Command(
    "hooks uninstall codex", "Remove exactly the hook entries `hooks install codex` added.",
    "capture_commands:cmd_hooks_uninstall_codex",
    opts=CODEX_INSTALL,
))

_add(Command(
    "import claude-code", "Replay a Claude Code session transcript's tool calls as "
    "observations (re-importing adds nothing).", "capture_commands:cmd_import_claude_code",
    args=(Arg("transcript", "The session's .jsonl file.", metavar="TRANSCRIPT"),),
    opts=(READ_JSON, OTHER_PROJECT) + READ_COMMON,
))

_add(Command(
    "import codex", "Replay a Codex session file (~/.codex/sessions/.../rollout-*.jsonl) or a "
    "saved `codex exec --json` stream as observations (re-importing adds nothing).",
    "capture_commands:cmd_import_codex",
    args=(Arg("transcript", "The rollout .jsonl file or the saved stream.",
              metavar="FILE"),),
    opts=(READ_JSON, OTHER_PROJECT) + READ_COMMON,
))

_add(Command(
    "get", "Print an observation's exact output (verified against its checksum) or an "
    "entry's full record.", "capture_commands:cmd_get",
    args=(Arg("id", "Observation, entry or event id.", metavar="ID", type="id"),),
    opts=(READ_JSON,) + READ_COMMON,
))

# -- recall inside a session: the MCP server (issue 20) ----------------------------------

_add(Command(
    "mcp", "Serve one workspace's journal to an agent over MCP on stdio: search, get, "
    "timeline, trace, record, invalidate, and the digest as a resource and a prompt "
    "(needs the package's optional mcp extra).", "capture_commands:cmd_mcp",
    opts=(Opt("workspace", "--workspace", "Workspace id (default: $AGENT_JOURNAL_WORKSPACE, "
              "else the workspace of the nearest .agent-journal.toml, else the name of the "
              "folder the client starts it in).", env=ENV_WORKSPACE, metavar="ID",
              project="workspace", type="id"), ROOT,
          Opt("session", "--session", "The agent session its writes belong to (default: "
              "$AGENT_JOURNAL_SESSION, else $CLAUDE_CODE_SESSION_ID; with none, writes are "
              "refused).", env=ENV_SESSION, metavar="ID", type="id")),
))

# -- audit and recovery reads: trace, digest, coverage, decay ----------------------------

_add(Command(
    "trace", "Find every entry that cites ID (by id, subject, anchor or dependsOn) and "
    "every entry built on them.", "cmd_trace",
    args=(Arg("id", "The id (or anchor text) to trace.", metavar="ID", type="id"),),
    opts=(READ_JSON, AS_OF) + READ_COMMON,
))

_add(Command(
    "digest", "What an agent needs to resume work: the goal and later requests, where it "
    "stopped, unfinished calls, open problems, test runs, commits, files, live entries, "
    "recent activity. Keeps what it read under <root>/cache/digest, so the next digest "
    "reads only new rows.", "cmd_digest",
    opts=(
        # No $AGENT_JOURNAL_SESSION default here: that variable names the *writing*
        # session, and a read scoped by it silently would hide other sessions' work.
        Opt("session", "--session", "Only this session's observations (entries are always "
            "shown).", metavar="ID", type="id"),
        Opt("json", "--json", "Print JSON instead of Markdown.", kind=BARE),
        Opt("max_chars", "--max-chars", "Bound the Markdown to N characters (default 10000); "
            "test runs' earlier runs go first, then the least important sections.",
            type="int", metavar="N", minimum=1),
        AS_OF,
    ) + READ_COMMON,
))

_add(Command(
    "coverage", "What a read of the workspace saw and could not see: segments, damage, "
    "counts, unanchored entries, dangling anchors, tombstones.", "cmd_coverage",
    opts=(READ_JSON,) + READ_COMMON,
))

_add(Command(
    "stats", "Calls per tool, failures per command, time per session (tombstoned calls "
    "not counted). Keeps what it folded under <root>/cache/stats, so the next run reads "
    "only new rows.", "cmd_stats",
    opts=(READ_JSON,) + READ_COMMON,
))

_add(Command(
    "decay", "Re-validate every live entry's anchors: list those citing ids that no longer "
    "stand here (tombstoned, purged or absent). Read-only.", "cmd_decay",
    opts=(READ_JSON,) + READ_COMMON,
))


# -- audit views for people: timeline, checkpoints ---------------------------------------

_add(Command(
    "timeline", "What happened, one line per event in time order (a call's start and finish "
    "are one line, also when other calls ran meanwhile), under a header of counts, span, "
    "files changed and latest test results.",
    "cmd_timeline",
    opts=(
        Opt("last", "--last", "Only the last N lines (the text default: the last 200; "
            "--json and --html give every line).", type="int", metavar="N", minimum=1),
        Opt("all", "--all", "Every line in text too (not only the last 200).", kind=BARE),
        Opt("session", "--session", "Only events of this session: its id, its first "
            "characters, or the form shown (…4f2a9c1d, the last characters of a Codex "
            "session's id).", metavar="ID", type="id"),
        Opt("since", "--since", "Only events at or after this instant (ISO 8601, or an age "
            "such as 2h, 3d).", metavar="WHEN"),
        Opt("until", "--until", "Only events at or before this instant.", metavar="WHEN"),
        Opt("tool", "--tool", "Only calls of this tool (Bash, Edit, ...).", metavar="NAME",
            type="id"),
        Opt("kind", "--kind", "Only events of this kind or type (tool_call, user_prompt, "
            "finding, entry, tombstone, checkpoint, ...).", metavar="KIND", type="id"),
        Opt("failures_only", "--failures-only", "Only failed calls, each with its whole "
            "output (verified like get).", kind=BARE),
        AS_OF,
        Opt("html", "--html", "Write the timeline as one self-contained HTML page to FILE "
            "instead of printing it (outside the journal root, where compact --apply could never "
            "erase it).", metavar="FILE"),
        Opt("json", "--json", "Print JSON lines, one object per line of the timeline.",
            kind=BARE),
    ) + READ_COMMON,
))

_add(Command(
    "checkpoint", "Append a checkpoint: a named mark of where every segment stands now, "
    "for --as-of views. Copies nothing.", "cmd_checkpoint",
    args=(Arg("name", "Checkpoint name (unique here; must not read as an instant).",
              type="id"),),
    opts=(Opt("note", "--note", "Why this point matters."),) + WRITE_COMMON,
))

_add(Command(
    "checkpoints", "List the checkpoints, oldest first.", "cmd_checkpoints",
    opts=(READ_JSON,) + READ_COMMON,
))


# -- retention: compact ------------------------------------------------------------------

_add(Command(
    "compact", "Erase tombstoned content and, with TTLs, expired entries and observations. "
    "Prints the plan and changes nothing unless --apply is given.", "cmd_compact",
    opts=(
        Opt("entry_ttl_days", "--entry-ttl-days", "Expire entries whose latest event is at "
            "least N days old (omitted: entries never expire).", type="int", metavar="N",
            minimum=0),
        Opt("observation_ttl_days", "--observation-ttl-days", "Expire observations whose "
            "latest event is at least N days old, unless a live entry cites them (omitted: "
            "observations never expire).", type="int", metavar="N", minimum=0),
        Opt("apply", "--apply", "Carry out the plan (deletes for real). Takes no value.",
            kind=BARE),
        READ_JSON,
    ) + READ_COMMON,
))


# -- replicas: export, merge ----------------------------------------------------------

_add(Command(
    "export", "Write a verifiable snapshot of a workspace (segments, artifacts, manifest) into "
    "DEST, while writers keep appending; or, with --sqlite FILE, one SQLite database of it "
    "for Datasette or sqlite-utils. Refuses, leaving nothing, when a segment cannot be "
    "read whole.", "replica_commands:cmd_export",
    args=(Arg("dest", "Folder to create (or an empty one), outside the journal root (not "
              "with --sqlite).", required=False),),
    opts=(Opt("sqlite", "--sqlite", "Instead of a snapshot folder, write one SQLite database "
              "to FILE: a row per event, per observation and per entry, readable columns, "
              "full-text search; nothing tombstoned (spec/cli-json.md).", metavar="FILE"),
          Opt("overwrite", "--overwrite", "With --sqlite: replace FILE when it exists "
              "(without it, an existing FILE is refused).", kind=BARE),
          READ_JSON) + READ_COMMON,
))

_add(Command(
    "merge", "Union another replica into this workspace: an export folder (verified against "
    "its manifest) or another journal root. Refuses, importing nothing, when either side "
    "is damaged.", "replica_commands:cmd_merge",
    args=(Arg("source", "Export folder or journal root."),),
    opts=(Opt("allow_damaged", "--allow-damaged", "Import a damaged source's readable rows, "
              "skipping and listing its malformed ones, when none of them could be a "
              "tombstone (unreadable segments and a damaged local side still refuse). "
              "Takes no value.", kind=BARE),
          READ_JSON) + READ_COMMON,
))


# -- sync through a bucket or a shared folder (spec/SYNC.md) ---------------------------

REMOTE_NAME = Arg("name", "Remote name (may be omitted when the workspace has one remote).",
                  required=False)

_add(Command(
    "remote add", "Add a remote for this workspace: s3://BUCKET/PREFIX (the prefix is "
    "optional) or file:///PATH (a folder outside the journal root). "
    "Kept in the root's config.json; credentials are never stored (the standard AWS "
    "environment, profiles and config files apply).", "replica_commands:cmd_remote_add",
    args=(Arg("name", "Remote name."), Arg("url", "s3://BUCKET/PREFIX or file:///PATH.",
                                           metavar="URL")),
    opts=(Opt("endpoint_url", "--endpoint-url", "The S3 service's address when it is not "
              "AWS (MinIO, R2, SeaweedFS, Ceph...).", metavar="URL"),
          READ_JSON) + READ_COMMON,
))

_add(Command(
    "remote list", "List this workspace's remotes.", "replica_commands:cmd_remote_list",
    opts=(READ_JSON,) + READ_COMMON,
))

_add(Command(
    "remote remove", "Forget a remote (nothing in the remote is touched).",
    "replica_commands:cmd_remote_remove",
    args=(Arg("name", "Remote name."),),
    opts=(READ_JSON,) + READ_COMMON,
))

_add(Command(
    "remote status", "What the remote holds: each replica's manifest, the tombstones it has "
    "not seen and the objects still holding their content (fetched and checked), and a "
    "warning when the bucket keeps old versions.", "replica_commands:cmd_remote_status",
    args=(REMOTE_NAME,),
    opts=(READ_JSON,) + READ_COMMON,
))

WITHIN = Opt("within", "--within", "Run in a process of its own and wait at most SECONDS "
             "for it (0: not at all); it goes on past that, its output in "
             "<root>/logs/sync.log. Never fails: what the agents' session hooks run.",
             metavar="SECONDS", type="int", minimum=0)

_add(Command(
    "push", "Upload what this replica wrote that the remote lacks (verified snapshots of its "
    "own segments, then its manifest), and delete its keys that no longer hold its data. "
    "When its manifest there was written by another root with this replica id (a copy of "
    "this root, or this root restored from a backup), this root takes a new replica id and "
    "pushes under it.",
    "replica_commands:cmd_push",
    args=(REMOTE_NAME,),
    opts=(READ_JSON, WITHIN) + READ_COMMON,
))

_add(Command(
    "pull", "Fetch the other replicas' new objects from the remote, verify them, and merge "
    "them (the same union merge, never importing tombstoned content).", "replica_commands:cmd_pull",
    args=(REMOTE_NAME,),
    opts=(READ_JSON, WITHIN) + READ_COMMON,
))

_add(Command(
    "sync", "pull, then push.", "replica_commands:cmd_sync",
    args=(REMOTE_NAME,),
    opts=(READ_JSON, WITHIN) + READ_COMMON,
))

# -- checks and conventions: doctor, completion ------------------------------------------

_add(Command(
    "doctor", "Check this installation and the journal it would use: one line per check (ok "
    "or the problem and how to fix it); exit 1 when a problem was found.", "cmd_doctor",
    opts=(PROJECT, PLAIN_ROOT,
          Opt("ack_hook_log", "--ack-hook-log", "Mark the hook failures logged so far as "
              "dealt with (once their cause is fixed): the check reports only later ones. "
              "The one thing doctor writes.", kind=BARE),
          Opt("json", "--json", "Print the checks as JSON.", kind=BARE)),
))

_add(Command(
    "completion", "Print the shell completion script for SHELL (bash, zsh or fish).",
    "cmd_completion",
    args=(Arg("shell", "bash, zsh or fish.", metavar="SHELL"),),
))


def find_command(argv: list[str]) -> tuple[Command | None, list[str]]:
    """Match the longest command name at the start of argv (names may be two words)."""
    for width in (3, 2, 1):
        name = " ".join(argv[:width])
        if len(argv) >= width and name in COMMANDS:
            return COMMANDS[name], argv[width:]
    return None, argv


def unknown_command(argv: list[str], prog: str) -> str:
    """The message for argv that names no command: the nearest command (or group of
    commands) when one is near, the commands of a group named without one."""
    words: list[str] = []
    for token in argv[:3]:
        if token.startswith("-"):
            break
        words.append(token)
    if not words:
        return f"no command given; see {prog} --help"
    typed = " ".join(words)
    under = [name for name in COMMANDS if name.startswith(typed + " ")]
    if under:
        return f"{typed!r} needs a command: {', '.join(under)}"
    best: tuple[float, str, str] | None = None
    from difflib import SequenceMatcher

    for width in range(1, len(words) + 1):
        phrase = " ".join(words[:width])
        known = [name for name in COMMANDS if len(name.split()) == width]
        if width == len(words):  # a group's name is a fair answer to the whole phrase
            known += sorted({" ".join(name.split()[:width]) for name in COMMANDS
                             if len(name.split()) > width})
        near = nearest(phrase, known)
        if near is not None:
            ratio = SequenceMatcher(None, phrase, near).ratio()
            if best is None or ratio > best[0]:
                best = (ratio, phrase, near)
    if best is None:
        return f"no such command {words[0]!r}; see {prog} --help"
    return f"no such command {best[1]!r}; did you mean {best[2]!r}? (see {prog} --help)"
