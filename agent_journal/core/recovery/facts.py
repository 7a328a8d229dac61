"""One observation event reduced to what the recovery derivations read.

Invariants: `event_facts` is a pure function of an event's kind and data; its result is
a small JSON-able dict (so a cache can keep it in place of the event), or None when the
event holds nothing the derivations use. Texts are capped (TEXT_CHARS) at a word
boundary (a prompt keeps its head and its tail); everything else is taken verbatim or
parsed by checks, git_output, reasons and shell_words.
"""

from __future__ import annotations

import re

from agent_journal.core import tools
from agent_journal.core.recovery.patches import PATCH_TOOLS, patch_file_ops, patch_refused
from agent_journal.core.recovery.shell_words import (
    MAY_MOVE,
    MAY_READ,
    changes_directory,
    elide_heredocs,
    piped,
    shell_file_ops,
    shell_reads,
    within,
)
from agent_journal.core.recovery.text import clip, clip_middle

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Bump whenever event_facts would give a different result for some event: caches of the
# facts (storage/digest_cache.py) made by another version are thrown away.
FACTS_VERSION = "31"
TOOL_CALL = "tool_call"
# What the session said, and the older hook kinds that carried the same text in `hook`.
SAID_KINDS = frozenset({"prompt", "assistant_message", "compact_summary", "subagent_result",
                        "session_event"})
LEGACY_SAID = {"user_prompt": ("prompt", "prompt"),
               "stop": ("assistant_message", "last_assistant_message")}
TEXT_CHARS = 4000
PLAN_CHARS = 3000
TARGET_CHARS = 400
DESCRIPTION_CHARS = 160
FAILED_STATUSES = frozenset({"error", "cancelled"})
# The kinds of tool (core/tools.py) whose output is a shell's: only their output is read
# for runs and git output (None: a call that names no tool).
SHELL_TOOLS = frozenset({tools.SHELL, tools.SHELL_OUTPUT, None})
WRITERS = frozenset({tools.WRITE, tools.EDIT, tools.NOTEBOOK_EDIT})
# Kinds whose output is an answer worth a line (a subagent's report, a search's result).
ANSWERING_TOOLS = frozenset({tools.SUBAGENT, tools.WEB, tools.MESSAGE, tools.MCP})

# The input fields that name what a call acted on, tried in order, when its agent's
# vocabulary does not say (tools.target_fields).
_FALLBACK = ("file_path", "path", "notebook_path", "command", "pattern", "url", "query",
             "description")


def target_of(tool: str | None, value: Any) -> str | None:
    """The input field a reader recognises a call by (a command, a path), verbatim."""
    if not isinstance(value, dict):
        return None
    fields = tools.target_fields(tool)
    for name in _FALLBACK if fields is None else fields:
        field = value.get(name)
        if isinstance(field, str) and field.strip():
            return field
        if isinstance(field, int) and not isinstance(field, bool):
            return str(field)
    return None


def output_text(output: Any) -> str | None:
    """A call's output as text: a string as it is; a structured response as its text
    fields (a shell's stdout then stderr, a tool's content, error or result), a list of
    content blocks (a subagent's or an MCP tool's answer) as the text of its text
    blocks; anything else None (its shape is the tool's business)."""
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return _blocks_text(output)
    if isinstance(output, dict):
        parts = [output[k] for k in ("stdout", "stderr", "content", "error", "result")
                 if isinstance(output.get(k), str) and output[k]]
        if isinstance(output.get("content"), list):
            blocks = _blocks_text(output["content"])
            if blocks:
                parts.append(blocks)
        return "\n".join(parts) if parts else None
    return None


def _blocks_text(blocks: list[Any]) -> str | None:
    texts = [b["text"] for b in blocks
             if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
             and b["text"]]
    return "\n".join(texts) if texts else None


def event_facts(kind: str, data: dict[str, Any]) -> dict[str, Any] | None:
    """What one observation event tells the recovery derivations (see module docstring)."""
    facts: dict[str, Any] = {}
    context = data.get("transcript") if isinstance(data.get("transcript"), dict) else None
    hook = data.get("hook") if isinstance(data.get("hook"), dict) else None
    for source in (hook, context):
        if source is None:
            continue
        cwd = source.get("cwd")
        if isinstance(cwd, str):
            facts["cwd"] = cwd
        branch = source.get("gitBranch")
        if isinstance(branch, str) and branch:
            facts["branch"] = branch
        agent = source.get("agentId", source.get("agent_id"))
        if isinstance(agent, str):
            facts["agent"] = agent
        agent_type = source.get("agent_type")
        if isinstance(agent_type, str):
            facts["agentType"] = agent_type
        if source.get("branch") == "abandoned":
            facts["abandoned"] = True
        if source.get("source") in ("summary", "away_summary"):
            facts["source"] = source["source"]
        event = source.get("hook_event_name")
        if isinstance(event, str) and kind != TOOL_CALL:
            facts["event"] = event
    if kind == TOOL_CALL:
        _call_facts(data, facts)
    else:
        _said_facts(kind, data, hook, facts)
    return facts or None


def _said_facts(kind: str, data: dict[str, Any], hook: dict[str, Any] | None,
                facts: dict[str, Any]) -> None:
    text = data.get("text")
    if kind in LEGACY_SAID and hook is not None:
        facts["said"], field = LEGACY_SAID[kind]
        text = hook.get(field)
    elif kind in SAID_KINDS:
        facts["said"] = kind
    if isinstance(text, str) and text.strip():
        artifact = data.get("artifact")
        size = artifact.get("bytes") if isinstance(artifact, dict) else None
        if isinstance(artifact, dict) and isinstance(artifact.get("tail"), str):
            # A text too long for the event: its end (a prompt's request after a paste, a
            # summary's work in progress) is in the artifact record.
            text = f"{text}\n … \n{artifact['tail']}"
        # A long prompt keeps its end too: the request after a pasted log or spec; a
        # compaction summary its whole opening (what was asked) and its end (the work
        # in progress and the next step), in twice the room.
        said = facts.get("said")
        cap = clip_middle if said in ("prompt", "compact_summary") else clip
        facts["text"] = cap(text, 2 * TEXT_CHARS if said == "compact_summary" else TEXT_CHARS)
        facts["chars"] = size if isinstance(size, int) else len(text)


def _call_facts(data: dict[str, Any], facts: dict[str, Any]) -> None:
    """A tool call's facts: what its input says, then what its output says."""
    name = data.get("tool") if isinstance(data.get("tool"), str) else None
    if name is not None:
        facts["tool"] = name
    tool = tools.kind_of(name)
    status = data.get("status")
    if isinstance(status, str):
        facts["status"] = status
    exit_code = data.get("exitCode")
    if isinstance(exit_code, int) and not isinstance(exit_code, bool):
        facts["exit"] = exit_code
    value = data.get("input")
    output = data.get("output")
    text = output_text(output)
    _target_facts(name, tool, value, facts)
    _input_facts(tool, value, text, facts)
    artifact = data.get("artifact")
    if text is not None and isinstance(artifact, dict) and isinstance(artifact.get("tail"), str):
        middle = artifact.get("middle")
        text = text + "\n" + (middle + "\n" if isinstance(middle, str) else "") + \
            artifact["tail"]
    if tool == tools.WRITE:
        kind = _write_kind(output, text)
        if kind:
            facts["write"] = kind
    if text is None:
        return
    failed = (isinstance(status, str) and status in FAILED_STATUSES) or (
        isinstance(exit_code, int) and not isinstance(exit_code, bool) and exit_code != 0)
    failed = _failure_facts(tool, text, failed, facts)
    if tool in SHELL_TOOLS:
        _shell_output_facts(text, failed, facts)
    elif tool in ANSWERING_TOOLS and isinstance(output, str) and not failed:
        # A subagent's or other tool's answer: its densest sentences (a report's opening
        # is often "Now I have everything I need"; its findings name things).
        from agent_journal.core.recovery.condense import condense

        facts["result"] = condense(output, 600)


def _target_facts(name: str | None, tool: str | None, value: Any, facts: dict[str, Any]
                  ) -> None:
    """What the call acted on (`target`), where a shell call ran, whether its exit status
    is a pipe's (`piped`), and the files a shell call moves, removes or reads."""
    target = target_of(name, value)
    # A shell call that names the directory it ran in (Codex's `workdir`), when that is
    # not the session's, says so.
    workdir = value.get("workdir") if isinstance(value, dict) and tool == tools.SHELL \
        else None
    if not (isinstance(workdir, str) and workdir.startswith("/")) or \
            workdir.rstrip("/") == str(facts.get("cwd", "")).rstrip("/"):
        workdir = None
    if workdir is not None:
        facts["workdir"] = workdir
    if target is None:
        return
    if tool == tools.SHELL:
        target = elide_heredocs(target)
    facts["target"] = clip(target, TARGET_CHARS)
    if tool == tools.SHELL:
        # The relative paths a shell call names are resolved in the directory it ran
        # in (so `rm a.py` and an Edit of /w/a.py are one file), unless it changed
        # directory on the way.
        base = None if changes_directory(target) else workdir or facts.get("cwd")
        ops = shell_file_ops(target) if re.search(MAY_MOVE, target) else None
        if ops:
            facts["fileOps"] = [[op[0], *(within(base, p) for p in op[1:])]
                                for op in ops]
        read = shell_reads(target) if MAY_READ.match(target) else None
        if read:
            facts["reads"] = [within(base, p) for p in read]
        if piped(target):
            facts["piped"] = True


def _input_facts(tool: str | None, value: Any, text: str | None, facts: dict[str, Any]
                 ) -> None:
    """What an edit changed and defined, a patch's files, a plan, a task list, a
    description."""
    if tool in WRITERS and tool != tools.WRITE:
        change = edit_change(value)
        if change:
            facts["change"] = change
    if tool in WRITERS or tool in PATCH_TOOLS:
        names, gone = _defined(value)
        if names:
            facts["defines"] = names
        if gone:
            facts["undefines"] = gone
    if tool in PATCH_TOOLS:
        ops = patch_file_ops(value)
        changes = patch_changes(value)
        if changes:
            facts["changes"] = changes
        if ops:
            facts["fileOps"] = ops
            if facts.get("target") is None:
                paths = dict.fromkeys(op[-1] for op in ops)
                facts["target"] = clip(", ".join(paths), TARGET_CHARS)
    if tool == tools.PLAN and isinstance(value, dict) and isinstance(value.get("plan"), str):
        facts["plan"] = clip(value["plan"], PLAN_CHARS)
    _todo_facts(tool, value, text, facts)
    if isinstance(value, dict) and isinstance(value.get("description"), str):
        facts["desc"] = clip(value["description"], DESCRIPTION_CHARS)


def _todo_facts(tool: str | None, value: Any, text: str | None, facts: dict[str, Any]
                ) -> None:
    """A task list: one task's change (a task list kept call by call), or the whole list."""
    if tool in (tools.TASK_CREATE, tools.TASK_UPDATE):
        from agent_journal.core.recovery.task_list import task_facts

        facts.update(task_facts(tool, value, text))
    if tool == tools.TODO_LIST and isinstance(value, dict) and isinstance(value.get("todos"), list):
        facts["todos"] = [[str(t.get("status")), clip(str(t.get("content")), 160)]
                          for t in value["todos"][:20] if isinstance(t, dict)]
    elif tool == tools.PLAN_STEPS and isinstance(value, dict) and isinstance(value.get("plan"),
                                                                            list):
        # {"plan": [{"step", "status"}], "explanation"}.
        facts["todos"] = [[str(t.get("status")), clip(str(t.get("step")), 160)]
                          for t in value["plan"][:20] if isinstance(t, dict)]


def _failure_facts(tool: str | None, text: str, failed: bool, facts: dict[str, Any]) -> bool:
    """Why a failed call failed, a refusal told apart, a patch Codex did not apply; whether
    the call failed (such a patch did, whatever its status)."""
    from agent_journal.core.recovery.reasons import (
        REJECTED,
        benign,
        error_reason,
        refusal,
        rejection_words,
    )

    refused_patch = patch_refused(text) if tool in PATCH_TOOLS and not failed else None
    if refused_patch:
        # Codex reports a patch that did not apply in its output, with no exit code: the
        # call failed and changed no file, whatever the patch names.
        failed = True
        facts["status"] = "error"
        facts.pop("fileOps", None)
        facts["reason"] = clip(refused_patch, 300)
    if not failed and tool == tools.SHELL:
        _http_failure(facts, text)
    if not failed:
        return False
    reason = error_reason(text)
    if reason:
        facts["reason"] = reason
        if benign(reason):
            facts["noop"] = True
    refused = refusal(text)
    if refused:
        facts["refusal"] = refused
        if refused == REJECTED:
            # Claude Code's fixed wording says only that the user said no, which the
            # refusal says; what the user said, when they said something, is `words`.
            facts.pop("reason", None)
        words = rejection_words(text)
        if words:
            facts["words"] = clip(words, 1000)
    return True


def _http_failure(facts: dict[str, Any], text: str) -> None:
    """An error answer an HTTP client printed, exiting 0 all the same (http_errors): kept
    as `httpError`, whatever the event's command (an import keeps the command on the
    call's start and its output on its end); calls.Call makes the call a failure when its
    command ran an HTTP client."""
    if "HTTP/" not in text and '"status' not in text:
        return  # no status line and no JSON status: most outputs stop here
    from agent_journal.core.recovery.http_errors import http_error

    reason = http_error(text)
    if reason is not None:
        facts["httpError"] = reason


def _failed_line(text: str, facts: dict[str, Any]) -> None:
    """The line by which a runner said the command it ran failed (exit_lines), with the
    output's error line: what a pipe's exit status hid (calls.Call reads them)."""
    from agent_journal.core.recovery.exit_lines import failed_line
    from agent_journal.core.recovery.reasons import error_reason

    line = failed_line(text)
    if line is not None:
        facts["failedLine"] = line
        facts["failedReason"] = error_reason(text) or line


def _shell_output_facts(text: str, failed: bool, facts: dict[str, Any]) -> None:
    """What a shell call's output says: a test or check run, a traceback, commits, pushes,
    a branch switched, files git removed, a `git log` listing, a merge, packages."""
    # The parsers compile their patterns on import: a digest served from its cache never
    # needs them, so they load only when an output is read.
    from agent_journal.core.recovery.checks import parse_run
    from agent_journal.core.recovery.reasons import printed_traceback

    run = parse_run(text)
    if run is not None:
        facts["check"] = run.as_dict()
    elif not failed:
        crashed = printed_traceback(text)
        if crashed:
            facts["traceback"] = crashed
        if text.strip():
            facts["printed"] = True  # with `piped`: a run whose verdict is unknown
            _failed_line(text, facts)
    _git_facts(text, failed, facts)
    if not failed and "github.com/" in text:
        from agent_journal.core.recovery.pull_requests import urls_in

        pulls = urls_in(text)
        if pulls:
            facts["pullUrls"] = pulls
    if not failed:
        from agent_journal.core.recovery.dependencies import installed

        packages = installed(facts.get("target"), text)
        if packages:
            facts["installs"] = packages


# A pipe (`|` or `|&`), not `||` and not the `>|` redirection.
def _git_facts(text: str, failed: bool, facts: dict[str, Any]) -> None:
    from agent_journal.core.recovery.git_output import (
        branches_deleted_in,
        commits_in,
        log_lines,
        push_rejections_in,
        pushes_in,
        ran_status,
        removed_by_git_clean,
        removed_by_git_rm,
        switched_branch,
        working_tree,
    )

    made = commits_in(text)
    if made:
        facts["commits"] = [list(c) for c in made]
    pushed = pushes_in(text)
    if pushed:
        facts["pushes"] = [list(p) for p in pushed]
    gone = branches_deleted_in(text)
    if gone:
        facts["branchesDeleted"] = [list(b) for b in gone]
    refused_refs = push_rejections_in(text)
    if refused_refs:
        facts["pushRejected"] = [list(p) for p in refused_refs]
    switched = switched_branch(text)
    if switched:
        facts["switched"] = switched
    # git names the files it removed relative to the directory it ran in.
    base = facts.get("workdir") or facts.get("cwd")
    removed = removed_by_git_rm(text)
    if removed:
        facts["removed"] = [within(base, p) for p in removed]
    # `Removing path` is git clean's; the output alone cannot say it was git clean
    # (an import keeps the command on the call's start), so files_touched checks.
    cleaned = removed_by_git_clean(text) if not failed else None
    if cleaned:
        facts["cleaned"] = [within(base, p) for p in cleaned]
    # An import keeps a call's command on its start and its output on its end: the
    # end's listing is kept whatever its target, and commits() reads it only for a
    # call whose command ran `git log`.
    target = facts.get("target")
    if not failed and (target is None or "git log" in target):
        listed = log_lines(text)
        if listed:
            facts["log"] = [list(x) for x in listed[:12]]
    if not failed and "Merge made by" in text:
        facts["merged"] = True
    if not failed and (target is None or ran_status(target)):
        tree = working_tree(text)
        if tree is not None:
            facts["tree"] = [list(x) for x in tree]


def _write_kind(output: Any, text: str | None) -> str | None:
    if isinstance(output, dict) and output.get("type") in ("create", "update"):
        return "created" if output["type"] == "create" else "updated"
    if isinstance(text, str):
        if text.startswith("File created successfully"):
            return "created"
        if "has been updated" in text[:300] or text.startswith("File updated"):
            return "updated"
    return None


CHANGE_CHARS = 160
_DIFF_CAP = 20_000  # characters of an edit's old and new text compared


def _first_new(lines: list[str], other: set[str]) -> str | None:
    for line in lines:
        stripped = line.strip()
        if stripped and stripped not in other:
            return clip(stripped, CHANGE_CHARS)
    return None


def _defined(value: Any) -> tuple[list[str], list[str]]:
    """(the names an Edit, MultiEdit, Write or patch defines, and those it took out:
    defined in what it replaced, not in what it wrote) (symbols.changed_names)."""
    from agent_journal.core.recovery.symbols import changed_names, defined_names

    if isinstance(value, str):  # a patch's text: its added lines against its removed ones
        lines = value.splitlines()
        return changed_names("\n".join(x[1:] for x in lines if x.startswith("+")),
                             "\n".join(x[1:] for x in lines if x.startswith("-")))
    if not isinstance(value, dict):
        return [], []
    if isinstance(value.get("content"), str):
        return defined_names(value["content"]), []
    if isinstance(value.get("input"), str):  # Codex's apply_patch {"input": patch}
        return _defined(value["input"])
    edits: list[Any] = value["edits"] if isinstance(value.get("edits"), list) else [value]
    added = "\n".join(e["new_string"] for e in edits
                      if isinstance(e, dict) and isinstance(e.get("new_string"), str))
    taken = "\n".join(e["old_string"] for e in edits
                      if isinstance(e, dict) and isinstance(e.get("old_string"), str))
    return changed_names(added, taken)


def patch_changes(value: Any) -> dict[str, list[str | None]]:
    """Of each file a patch updates, [first added line, first removed line], as
    edit_change gives them for an Edit (files whose hunks changed no line that can be
    told left out)."""
    from agent_journal.core.recovery.patches import patch_lines

    found: dict[str, list[str | None]] = {}
    for path, (new_lines, old_lines) in patch_lines(value).items():
        added = _first_new(new_lines, {x.strip() for x in old_lines})
        removed = _first_new(old_lines, {x.strip() for x in new_lines})
        if added or removed:
            found[path] = [added, removed]
    return found


def edit_change(value: Any) -> list[str | None] | None:
    """[first added line, first removed line] of an Edit or MultiEdit (its first edit):
    the lines of new_string not in old_string and the reverse, stripped; None when the edit
    changed no line that can be told."""
    if not isinstance(value, dict):
        return None
    edit = value
    if isinstance(value.get("edits"), list) and value["edits"]:
        edit = value["edits"][0] if isinstance(value["edits"][0], dict) else {}
    old, new = edit.get("old_string"), edit.get("new_string")
    if not isinstance(old, str) or not isinstance(new, str):
        return None
    old_lines, new_lines = old[:_DIFF_CAP].splitlines(), new[:_DIFF_CAP].splitlines()
    added = _first_new(new_lines, {x.strip() for x in old_lines})
    removed = _first_new(old_lines, {x.strip() for x in new_lines})
    return [added, removed] if added or removed else None
