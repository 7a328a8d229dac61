"""The tool vocabulary: what the core knows a tool call to be, whatever an agent calls it.

A call is stored with its agent's own tool name (`Bash`, `apply_patch`, `mcp__x__y`). The
core never compares those names: it asks `kind_of(name)` for one of the kinds below, and
`target_fields(name)` for the input fields that name what a call acted on. Which of an
agent's names is which kind is said with the agent's capture, in capture/tool_vocabulary.py,
which installs every agent's table here when the package is imported (agent_journal/
__init__.py): a new agent adds its table there, and no line of the core.

Invariant: a name has at most one kind, whichever agent maps it (`install` refuses a second,
different mapping); a name no agent maps has no kind (None) and the core's fallback fields.
Each kind says what the core reads of such a call's input, so an agent maps a tool into a
kind only when its input has that shape.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    # (kind, target fields); fields None: the core's fallback fields, () none at all
    Tool = tuple[str, tuple[str, ...] | None]

SHELL = "shell"                  # a POSIX shell command line, `command` (parsed: files, git)
OTHER_SHELL = "other-shell"      # a command in a shell whose syntax is not parsed
SHELL_OUTPUT = "shell-output"    # reads what a running shell command printed since
SHELL_STOP = "shell-stop"        # stops a running shell command
SHELL_INPUT = "shell-input"      # writes to (or polls) a running command
TASK_OUTPUT = "task-output"      # reads a background task's output
READ = "read"                    # reads one file
SEARCH = "search"                # looks something up: a pattern, a listing, a tool search
WEB = "web"                      # fetches a page or searches the web (an answer)
WRITE = "write"                  # writes a whole file; its output says created or updated
EDIT = "edit"                    # edits a file in place (`old_string`/`new_string`, `edits`)
NOTEBOOK_EDIT = "notebook-edit"  # edits a notebook's cell
PATCH = "patch"                  # applies a patch that names its files (`*** Add File: p`)
SUBAGENT = "subagent"            # hands a task to a subagent (its answer)
MESSAGE = "message"              # sends a message to another agent (its answer)
MCP = "mcp"                      # a tool of an MCP server (its answer)
SKILL = "skill"                  # runs a skill or a slash command
PLAN = "plan"                    # proposes a plan, `plan` as text
TODO_LIST = "todo-list"          # the whole task list, `todos` [{status, content}]
PLAN_STEPS = "plan-steps"        # the whole task list as steps, `plan` [{status, step}]
TASK_CREATE = "task-create"      # adds one task; its result says `Task #N created`
TASK_UPDATE = "task-update"      # changes one task: `taskId`, `status`, `subject`

_TOOLS: dict[str, Tool] = {}
_KINDS: dict[str, str] = {}
_FIELDS: dict[str, tuple[str, ...]] = {}
_PREFIXES: list[tuple[str, str]] = []


def install(names: Mapping[str, Tool], prefixes: Mapping[str, str] | None = None) -> None:
    """Add one agent's table: tool name -> (kind, target fields), and name prefix -> kind
    (an MCP server's tools). A name already mapped to something else is refused."""
    for name, (kind, fields) in names.items():
        if _TOOLS.setdefault(name, (kind, fields)) != (kind, fields):
            raise ValueError(f"tool {name!r} is mapped twice, differently")
        _KINDS[name] = kind
        if fields is not None:
            _FIELDS[name] = fields
    for prefix, kind in (prefixes or {}).items():
        if (prefix, kind) not in _PREFIXES:
            _PREFIXES.append((prefix, kind))


def kind_of(name: str | None) -> str | None:
    """The kind of the tool an agent calls `name`, or None when no agent maps it."""
    if name is None:
        return None
    found = _KINDS.get(name)
    if found is None:
        for prefix, kind in _PREFIXES:
            if name.startswith(prefix):
                return kind
    return found


def target_fields(name: str | None) -> tuple[str, ...] | None:
    """The input fields that name what a call of `name` acted on, tried in order; None
    when its agent does not say (the caller's fallback applies)."""
    return _FIELDS.get(name) if name is not None else None


def server_of(name: str | None) -> str | None:
    """The server a tool of an MCP server belongs to: its name up to its last `__`
    (`mcp__browser` for `mcp__browser__find`); None for any other tool."""
    if name is None or kind_of(name) != MCP:
        return None
    head, sep, tool = name.rpartition("__")
    return head if sep and head and tool else None
