"""Writes the SYNTHETIC recall-blind2 set: transcripts/ and the question files (see README.md).

These sessions never happened: they were written by hand for this check, in the record
formats of the real Claude Code transcripts under tests/data/claude-code/transcripts (and
their `<session>/subagents/agent-<id>.jsonl` files) and of the Codex session files under
tests/data/codex/sessions. They are long and noisy on purpose (dozens of reads of large
files, searches, retried commands, long passing test output) so that what matters has to
be found among what does not. The questions were written together with the sessions and
committed before the digest was run on any of them. Run
`python tests/data/recall-blind2/generate.py` to rewrite everything; the output is fixed.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "transcripts"

INTERRUPTED = ("The user doesn't want to proceed with this tool use. The tool use was rejected "
               "(eg. if it was a file edit, the new_string was NOT written to the file). STOP "
               "what you are doing and wait for the user to tell you how to proceed.")
DENIED = "Claude requested permissions to use {tool}, but you haven't granted it yet."


class Session:
    """A Claude Code transcript being written, record by record, as a parentUuid chain."""

    def __init__(self, name: str, cwd: str, branch: str, start: str, *,
                 sid: str | None = None, agent: str | None = None) -> None:
        self.name = name
        self.cwd = cwd
        self.branch = branch
        self.sid = sid or str(uuid.uuid5(uuid.NAMESPACE_URL, "blind2/" + name))
        self.agent = agent
        self.t = datetime.fromisoformat(start)
        self.parent: str | None = None
        self.records: list[dict] = []
        self.n = 0

    def _id(self, tag: str) -> str:
        self.n += 1
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"blind2/{self.name}/{tag}/{self.n}"))

    def _ts(self, seconds: int) -> str:
        self.t += timedelta(seconds=seconds)
        return self.t.strftime("%Y-%m-%dT%H:%M:%S.000Z")

    def _base(self, kind: str, seconds: int) -> dict:
        rec = {"parentUuid": self.parent, "isSidechain": self.agent is not None,
               "userType": "external", "cwd": self.cwd, "sessionId": self.sid,
               "version": "2.1.41", "gitBranch": self.branch}
        if self.agent is not None:
            rec["agentId"] = self.agent
        rec.update({"type": kind, "uuid": self._id(kind), "timestamp": self._ts(seconds)})
        self.parent = rec["uuid"]
        return rec

    def title(self, text: str) -> None:
        self.records.append({"type": "summary", "summary": text, "leafUuid": self._id("leaf")})

    def user(self, text: str, seconds: int = 20, **extra: object) -> None:
        rec = self._base("user", seconds)
        rec["message"] = {"role": "user", "content": text}
        rec.update(extra)
        self.records.append(rec)

    def interrupt(self, text: str = "[Request interrupted by user for tool use]") -> None:
        rec = self._base("user", 2)
        rec["message"] = {"role": "user", "content": [{"type": "text", "text": text}]}
        self.records.append(rec)

    def _assistant(self, content: list[dict], seconds: int) -> None:
        rec = self._base("assistant", seconds)
        rec["message"] = {"model": "claude-opus-4-6", "id": "msg_" + self._id("m")[:20],
                          "type": "message", "role": "assistant", "content": content,
                          "stop_reason": None, "stop_sequence": None}
        self.records.append(rec)

    def say(self, text: str, seconds: int = 6) -> None:
        self._assistant([{"type": "text", "text": text}], seconds)

    def call(self, tool: str, inp: dict, seconds: int = 4) -> str:
        tid = "toolu_01" + self._id("t").replace("-", "")[:22]
        self._assistant([{"type": "tool_use", "id": tid, "name": tool, "input": inp}], seconds)
        return tid

    def result(self, tid: str, content: str, *, error: bool = False,
               tool_result: object = None, seconds: int = 3) -> None:
        rec = self._base("user", seconds)
        rec["message"] = {"role": "user", "content": [
            {"tool_use_id": tid, "type": "tool_result", "content": content,
             "is_error": error}]}
        rec["toolUseResult"] = tool_result if tool_result is not None else (
            "Error: " + content if error else {"stdout": content, "stderr": "",
                                               "interrupted": False, "isImage": False})
        self.records.append(rec)

    def bash(self, command: str, output: str, *, exit_code: int = 0, desc: str = "",
             seconds: int = 6) -> None:
        inp = {"command": command}
        if desc:
            inp["description"] = desc
        tid = self.call("Bash", inp)
        if exit_code:
            self.result(tid, f"Exit code {exit_code}\n{output}", error=True, seconds=seconds)
        else:
            self.result(tid, output, seconds=seconds)

    def edit(self, path: str, old: str, new: str) -> None:
        tid = self.call("Edit", {"file_path": path, "old_string": old, "new_string": new})
        self.result(tid, f"The file {path} has been updated. Here's the result of running "
                         f"`cat -n` on a snippet of the edited file:\n     1\t{new}",
                    tool_result={"filePath": path, "oldString": old, "newString": new,
                                 "structuredPatch": [], "userModified": False})

    def multi_edit(self, path: str, edits: list[tuple[str, str]]) -> None:
        tid = self.call("MultiEdit", {"file_path": path, "edits": [
            {"old_string": old, "new_string": new} for old, new in edits]})
        lines = [f"{n}. Replaced \"{old[:40]}...\" with \"{new[:40]}...\""
                 for n, (old, new) in enumerate(edits, 1)]
        self.result(tid, f"Applied {len(edits)} edits to {path}:\n" + "\n".join(lines),
                    tool_result={"filePath": path, "edits": [
                        {"old_string": old, "new_string": new, "replace_all": False}
                        for old, new in edits], "structuredPatch": [],
                        "userModified": False})

    def notebook(self, path: str, cell: str, source: str, mode: str = "replace") -> None:
        tid = self.call("NotebookEdit", {"notebook_path": path, "cell_id": cell,
                                         "new_source": source, "cell_type": "code",
                                         "edit_mode": mode})
        verb = "Inserted" if mode == "insert" else "Updated"
        self.result(tid, f"{verb} cell {cell} with {source}",
                    tool_result={"new_source": source, "cell_id": cell, "cell_type": "code",
                                 "language": "python", "edit_mode": mode, "error": ""})

    def write(self, path: str, content: str) -> None:
        tid = self.call("Write", {"file_path": path, "content": content})
        self.result(tid, f"File created successfully at: {path}",
                    tool_result={"type": "create", "filePath": path, "content": content,
                                 "structuredPatch": []})

    def read(self, path: str, content: str) -> None:
        tid = self.call("Read", {"file_path": path})
        self.result(tid, content, tool_result={"type": "text", "file": {
            "filePath": path, "content": content, "numLines": content.count("\n") + 1}})

    def todos(self, items: list[tuple[str, str]]) -> None:
        tid = self.call("TodoWrite", {"todos": [
            {"content": text, "status": status, "activeForm": text} for text, status in items]})
        self.result(tid, "Todos have been modified successfully. Ensure that you continue to "
                         "use the todo list to track your progress.",
                    tool_result={"oldTodos": [], "newTodos": [
                        {"content": text, "status": status, "activeForm": text}
                        for text, status in items]})

    def save(self, name: str | None = None) -> Path:
        path = OUT / f"{name or self.name}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8") as out:
            for rec in self.records:
                out.write(json.dumps(rec, ensure_ascii=False) + "\n")
        return path

    def system(self, subtype: str, content: str, **extra: object) -> None:
        logical = self.parent
        rec = self._base("system", 1)
        if subtype == "compact_boundary":
            rec["logicalParentUuid"] = logical
        rec.update({"subtype": subtype, "content": content, "isMeta": False, "level": "info"})
        rec.update(extra)
        self.records.append(rec)

    def compact(self, summary: str) -> None:
        """A compaction: the boundary record, then the summary Claude Code continues from."""
        self.system("compact_boundary", "Conversation compacted", parentUuid=None,
                    compactMetadata={"trigger": "auto", "preTokens": 158000})
        self.user("This session is being continued from a previous conversation that ran out "
                  "of context. The conversation is summarized below:\nSummary:\n" + summary,
                  isCompactSummary=True, isVisibleInTranscriptOnly=True)

    def grep(self, pattern: str, output: str) -> None:
        tid = self.call("Grep", {"pattern": pattern, "output_mode": "content", "-n": True})
        self.result(tid, output, tool_result={"mode": "content", "numFiles": output.count("\n"),
                                              "content": output, "numLines": output.count("\n")})

    def glob(self, pattern: str, paths: list[str]) -> None:
        tid = self.call("Glob", {"pattern": pattern})
        self.result(tid, "\n".join(paths), tool_result={"filenames": paths, "durationMs": 41,
                                                        "numFiles": len(paths),
                                                        "truncated": False})

    def explore(self, files: dict[str, str]) -> None:
        """Many reads in a row, as an agent finding its way around does."""
        for path, content in files.items():
            self.read(path, content)

    def think(self, text: str) -> None:
        self._assistant([{"type": "thinking", "thinking": text,
                          "signature": "EqMBCkYIBxgCKkB" + "x" * 60}], 5)

    def wander(self, root: str, area: str, n: int) -> None:
        """n calls of the browsing a real session is full of: reads of large files, searches,
        status and diff checks, with a thought now and then. None of it matters later."""
        for k in range(n):
            step = k % 5
            if step == 0:
                self.read(f"{root}/{area}/part_{k}.py", filler_py(f"{area}.part_{k}", 18 + k))
            elif step == 1:
                self.grep(f"{area}_helper_{k}", "\n".join(
                    f"{area}/part_{j}.py:{4 + 6 * j}:def {area}_helper_{k}(value, *, "
                    f"strict=False):" for j in range(24)))
            elif step == 2:
                self.bash("git status --short", "\n".join(
                    f" M {area}/part_{j}.py" for j in range(0, k, 7)) or "",
                    desc="Check the working tree")
            elif step == 3:
                self.think(f"Checking how {area}_helper_{k} is used before going further; "
                           "the callers all pass strict=False, so nothing changes here.")
            else:
                self.bash(f"wc -l {area}/*.py | tail -20", "\n".join(
                    f"  {40 + 13 * j} {area}/part_{j}.py" for j in range(20)),
                    desc="Size of the module")


REJECT = ("The user doesn't want to proceed with this tool use. The tool use was rejected "
          "(eg. if it was a file edit, the new_string was NOT written to the file). To tell "
          "you how to proceed, the user said:\n")


def numbered(text: str) -> str:
    """A Read tool's output: the file with `cat -n` style line numbers."""
    return "\n".join(f"{n:>6}\u2192{line}" for n, line in enumerate(text.split("\n"), 1))


def filler_py(module: str, n: int) -> str:
    """A plausible, uninteresting Python module of about n functions (reading noise)."""
    out = [f'"""{module}: helpers."""', "", "from __future__ import annotations", ""]
    for k in range(n):
        out += [f"def {module.split('.')[-1]}_helper_{k}(value, *, strict=False):",
                f"    \"\"\"Normalise value for step {k}.\"\"\"",
                "    if value is None:",
                "        return None" if k % 3 else "        raise ValueError('value required')",
                f"    return str(value).strip()[:{40 + k}]", ""]
    return numbered("\n".join(out))


def filler_ts(module: str, n: int) -> str:
    out = ["import { z } from 'zod';", ""]
    for k in range(n):
        out += [f"export function {module}Step{k}(input: string): string {{",
                f"  const v = input.trim().slice(0, {20 + k});",
                "  return v.length ? v : 'n/a';", "}", ""]
    return numbered("\n".join(out))


def passing_pytest(names: list[str], tail: str) -> str:
    lines = [f"{name} PASSED{' ' * 8}[{100 * (k + 1) // len(names):>3}%]"
             for k, name in enumerate(names)]
    return ("============================= test session starts ==============================\n"
            "platform linux -- Python 3.12.3, pytest-8.2.0, pluggy-1.5.0\n"
            f"collected {len(names)} items\n\n" + "\n".join(lines) + "\n\n" + tail)


QUESTIONS: dict[str, dict] = {}


def questions(name: str, note: str, items: list[tuple[str, str, str, list[str]]], *,
              fmt: str | None = None, journal: list[list[str]] | None = None) -> None:
    spec: dict = {"transcript": f"recall-blind2/transcripts/{name}.jsonl"}
    if fmt:
        spec["format"] = fmt
    if journal:
        spec["journal"] = journal
    spec["source_note"] = "SYNTHETIC (written for the blind2 check, not a real session); " + note
    spec["questions"] = [{"id": f"q{n}", "category": cat, "question": q, "answer": a,
                          "must_contain": must}
                         for n, (cat, q, a, must) in enumerate(items, 1)]
    QUESTIONS[name] = spec


class Rollout:
    """A Codex session file (`rollout-*.jsonl`) being written, line by line."""

    def __init__(self, name: str, cwd: str, branch: str, start: str) -> None:
        self.name = name
        self.cwd = cwd
        self.sid = str(uuid.uuid5(uuid.NAMESPACE_URL, "blind2/" + name))
        self.t = datetime.fromisoformat(start)
        self.lines: list[dict] = []
        self.n = 0
        self.put("session_meta", {"id": self.sid, "timestamp": self.t.strftime(
            "%Y-%m-%dT%H:%M:%S.000Z"), "cwd": cwd, "originator": "codex_cli_rs",
            "cli_version": "0.58.0", "instructions": None, "source": "cli",
            "git": {"commit_hash": "e0d1c2b3a4f5", "branch": branch,
                    "repository_url": f"git@github.com:dev/{Path(cwd).name}.git"}}, 0)
        self.put("response_item", {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": f"<environment_context>\n  <cwd>{cwd}</cwd>\n  "
                                           "<approval_policy>on-request</approval_policy>\n"
                                           "</environment_context>"}]})

    def put(self, kind: str, payload: dict, seconds: int = 5) -> None:
        self.t += timedelta(seconds=seconds)
        self.lines.append({"timestamp": self.t.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
                           "type": kind, "payload": payload})

    def message(self, role: str, text: str) -> None:
        block = "input_text" if role == "user" else "output_text"
        self.put("response_item", {"type": "message", "role": role,
                                   "content": [{"type": block, "text": text}]})
        if role == "user":
            self.put("event_msg", {"type": "user_message", "message": text, "images": []}, 0)
            self.put("turn_context", {"cwd": self.cwd, "approval_policy": "on-request",
                                      "sandbox_policy": {"mode": "workspace-write"},
                                      "model": "gpt-5.1-codex"}, 0)
        else:
            self.put("event_msg", {"type": "agent_message", "message": text}, 0)

    def reasoning(self, summary: str) -> None:
        self.put("response_item", {"type": "reasoning", "summary": [
            {"type": "summary_text", "text": summary}], "content": None,
            "encrypted_content": "gAAAAABp" + "x" * 40})

    def _call_id(self) -> str:
        self.n += 1
        return f"call_{self.name[:6]}{self.n:03d}"

    def exec_command(self, cmd: str, output: str, code: int = 0, workdir: str | None = None
                     ) -> None:
        call_id = self._call_id()
        self.put("response_item", {"type": "function_call", "name": "exec_command",
                                   "call_id": call_id, "arguments": json.dumps(
                                       {"cmd": cmd, "workdir": workdir or self.cwd,
                                        "yield_time_ms": 10000})})
        self.put("response_item", {"type": "function_call_output", "call_id": call_id,
                                   "output": f"Chunk ID: {self.n:04x}\nWall time: 1.8 seconds\n"
                                             f"Process exited with code {code}\nOriginal "
                                             f"token count: {len(output) // 4}\nOutput:\n"
                                             f"{output}"}, 2)

    def shell(self, command: str, output: str, code: int = 0, workdir: str | None = None
              ) -> None:
        call_id = self._call_id()
        self.put("response_item", {"type": "function_call", "name": "shell", "call_id": call_id,
                                   "arguments": json.dumps({"command": ["bash", "-lc", command],
                                                            "workdir": workdir or self.cwd})})
        self.put("response_item", {"type": "function_call_output", "call_id": call_id,
                                   "output": json.dumps({"output": output, "metadata": {
                                       "exit_code": code, "duration_seconds": 3.1}})}, 2)

    def local_shell(self, command: list[str], output: str, code: int = 0) -> None:
        call_id = self._call_id()
        self.put("response_item", {"type": "local_shell_call", "call_id": call_id,
                                   "status": "completed", "action": {
                                       "type": "exec", "command": command,
                                       "working_directory": self.cwd, "timeout_ms": 10000}})
        self.put("response_item", {"type": "function_call_output", "call_id": call_id,
                                   "output": json.dumps({"output": output, "metadata": {
                                       "exit_code": code, "duration_seconds": 0.1}})}, 1)

    def patch(self, text: str, result: str) -> None:
        call_id = self._call_id()
        self.put("response_item", {"type": "custom_tool_call", "status": "completed",
                                   "call_id": call_id, "name": "apply_patch", "input": text})
        self.put("response_item", {"type": "custom_tool_call_output", "call_id": call_id,
                                   "output": json.dumps({"output": result, "metadata": {
                                       "exit_code": 0, "duration_seconds": 0.0}})}, 1)

    def plan(self, explanation: str, steps: list[tuple[str, str]]) -> None:
        call_id = self._call_id()
        self.put("response_item", {"type": "function_call", "name": "update_plan",
                                   "call_id": call_id, "arguments": json.dumps(
                                       {"explanation": explanation, "plan": [
                                           {"step": step, "status": status}
                                           for step, status in steps]})})
        self.put("response_item", {"type": "function_call_output", "call_id": call_id,
                                   "output": "Plan updated"}, 1)

    def save(self) -> None:
        OUT.mkdir(parents=True, exist_ok=True)
        with open(OUT / f"{self.name}.jsonl", "w", encoding="utf-8") as out:
            for line in self.lines:
                out.write(json.dumps(line, ensure_ascii=False) + "\n")

    def wander(self, area: str, n: int, *, old: bool = False, ext: str = "rs") -> None:
        """n commands of browsing noise (large sed and rg outputs) that matter to nothing."""
        for k in range(n):
            if k % 2 == 0:
                cmd = f"sed -n 1,160p src/{area}_{k}.{ext}"
                out = "".join(f"{j:>4}  let v{j} = helper_{k}(&input[{j}..]);\n"
                              for j in range(1, 120))
            else:
                cmd = f"rg -n helper_{k - 1} src"
                out = "".join(f"src/{area}_{j}.{ext}:{3 * j + 1}:    helper_{k - 1}(&x)\n"
                              for j in range(30))
            if old:
                self.shell(cmd, out)
            else:
                self.exec_command(cmd, out)

    def compacted(self, summary: str) -> None:
        self.put("compacted", {"message": summary})



# -- 1. a long Django session over two compactions: the goal replaced after the first one,
#       standing rules said in passing (py3.9, migrations, how to run tests), facts read in
#       code, a file created then deleted, a git checkout, a git rm, a test the user rules on

def orders_archive() -> None:
    s = Session("cc-orders-archive", "/home/dev/shopdesk", "feat/archive", "2026-05-04T08:30:00")
    s.title("Order soft-delete / archive in admin")
    s.user("Add soft-delete to the Order model in orders/models.py: a deleted_at column and a "
           "manager that hides deleted rows. Don't touch the migrations folder by hand, I "
           "generate migrations myself. And remember we must support py3.9, the customer is "
           "still on RHEL 8.")
    s.say("I'll look around the orders app first.")
    s.glob("orders/**/*.py", [f"orders/{n}.py" for n in (
        "__init__", "admin", "apps", "models", "selectors", "services", "signals", "tasks",
        "urls", "views", "forms", "legacy_filters", "serializers", "permissions")] +
        [f"orders/tests/test_{n}.py" for n in ("admin", "models", "selectors", "views",
                                                 "services", "tasks")])
    models = ("from django.db import models\n\n\nclass Order(models.Model):\n"
              "    number = models.CharField(max_length=20, unique=True)\n"
              "    customer = models.ForeignKey('customers.Customer', on_delete=models.PROTECT)\n"
              "    created_at = models.DateTimeField(auto_now_add=True)\n"
              "    status = models.CharField(max_length=12, choices=STATUS_CHOICES)\n"
              "    total = models.DecimalField(max_digits=10, decimal_places=2)\n\n"
              "    objects = models.Manager()\n\n    class Meta:\n"
              "        ordering = ['-created_at']\n")
    s.read("/home/dev/shopdesk/orders/models.py", numbered(models))
    selectors = ("from django.conf import settings\nfrom django.utils import timezone\n\n"
                 + filler_py("orders.selectors", 8).split("\n", 0)[0] +
                 "\n\ndef get_visible_orders(user):\n    cutoff = timezone.now() - "
                 "timedelta(days=settings.ARCHIVE_AFTER_DAYS)\n    return "
                 "Order.objects.filter(created_at__gte=cutoff)\n")
    s.read("/home/dev/shopdesk/orders/selectors.py", selectors)
    s.explore({f"/home/dev/shopdesk/orders/{n}.py": filler_py(f"orders.{n}", 12 + k)
               for k, n in enumerate(("services", "signals", "tasks", "views", "forms",
                                      "serializers", "permissions"))})
    admin = ("from django.contrib import admin\n\nfrom .legacy_filters import OldOrdersFilter\n"
             "from .models import Order\n\n\n@admin.register(Order)\nclass OrderAdmin("
             "admin.ModelAdmin):\n    list_display = ('number', 'customer', 'status', 'total', "
             "'created_at')\n    list_filter = ('status', OldOrdersFilter)\n    search_fields = "
             "('number', 'customer__email')\n")
    s.read("/home/dev/shopdesk/orders/admin.py", numbered(admin))
    s.read("/home/dev/shopdesk/orders/legacy_filters.py", numbered(
        "from django.contrib import admin\n\n\nclass OldOrdersFilter(admin.SimpleListFilter):\n"
        "    title = 'age'\n    parameter_name = 'age'\n\n    def lookups(self, request, "
        "model_admin):\n        return [('old', 'Older than a year')]\n"))
    base = "\n".join([f"{k} = {v!r}" for k, v in (
        ("DEBUG", False), ("TIME_ZONE", "Europe/Berlin"), ("USE_TZ", True),
        ("LANGUAGE_CODE", "de-de"), ("PAGE_SIZE", 50))] +
        ["", "# Orders older than this are archived: hidden from the admin change list.",
         "ARCHIVE_AFTER_DAYS = 90", "", "CELERY_TASK_ALWAYS_EAGER = False"] +
        [f"FEATURE_{n} = False" for n in range(30)])
    s.read("/home/dev/shopdesk/settings/base.py", numbered(base))
    s.grep("objects\\.filter", "\n".join(
        f"orders/{f}.py:{10 + 7 * k}:    qs = Order.objects.filter(status=status)"
        for k, f in enumerate(["views", "services", "tasks", "selectors", "serializers"] * 8)))
    s.wander(s.cwd, "orders", 30)
    s.bash("pytest orders", "ImportError while loading conftest '/home/dev/shopdesk/conftest.py'."
           "\nconftest.py:3: in <module>\n    from orders.models import Order\n"
           "django.core.exceptions.ImproperlyConfigured: Requested setting INSTALLED_APPS, but "
           "settings are not configured. You must either define the environment variable "
           "DJANGO_SETTINGS_MODULE or call settings.configure() before accessing settings.",
           exit_code=4, desc="Run the orders tests")
    s.user("Run the tests with ./bin/test, it sets DJANGO_SETTINGS_MODULE and the test "
           "database. Never plain pytest.")
    names = [f"orders/tests/test_{m}.py::test_{m}_{k}" for m in ("admin", "models", "selectors",
                                                                 "views", "services", "tasks")
             for k in range(35)]
    s.bash("./bin/test orders", passing_pytest(names[:212], "======================== 212 "
           "passed in 38.12s ========================="), desc="Run the orders tests")
    s.say("Baseline is green: 212 passed. Note for later: ARCHIVE_AFTER_DAYS is 90, set in "
          "settings/base.py, and get_visible_orders() lives in orders/selectors.py; it already "
          "filters on that cutoff for the storefront.")
    s.write("/home/dev/shopdesk/orders/managers.py",
            "from django.db import models\n\n\nclass AliveManager(models.Manager):\n"
            "    def get_queryset(self) -> models.QuerySet | None:\n"
            "        return super().get_queryset().filter(deleted_at__isnull=True)\n")
    s.edit("/home/dev/shopdesk/orders/models.py", "    objects = models.Manager()\n",
           "    deleted_at = models.DateTimeField(null=True, blank=True)\n\n"
           "    objects = AliveManager()\n    all_objects = models.Manager()\n")
    s.bash("./bin/test orders", passing_pytest(names[:212], "======================== 212 "
           "passed in 39.40s ========================="), desc="Run the orders tests")
    s.bash("tox -e py39 -- orders", "py39: install_deps> python -I -m pip install -r "
           "requirements/test.txt\npy39: commands[0]> ./bin/test orders\nImportError while "
           "loading conftest '/home/dev/shopdesk/conftest.py'.\nconftest.py:3: in <module>\n"
           "    from orders.models import Order\norders/models.py:4: in <module>\n    from "
           ".managers import AliveManager\norders/managers.py:5: in AliveManager\n    def "
           "get_queryset(self) -> models.QuerySet | None:\nE   TypeError: unsupported operand "
           "type(s) for |: 'type' and 'NoneType'\n  py39: FAIL code 4 (12.31 seconds)\n"
           "  evaluation failed :( (12.40 seconds)", exit_code=1, desc="Run on Python 3.9")
    s.say("On 3.9 the `X | None` annotation is evaluated when the class body runs. I'll use "
          "Optional[...] instead of the PEP 604 syntax.")
    s.edit("/home/dev/shopdesk/orders/managers.py",
           "    def get_queryset(self) -> models.QuerySet | None:",
           "    def get_queryset(self) -> Optional[models.QuerySet]:")
    s.bash("tox -e py39 -- orders", "py39: commands[0]> ./bin/test orders\n" +
           passing_pytest(names[:212], "212 passed in 44.02s") +
           "\n  py39: OK (51.88=setup[7.86]+cmd[44.02] seconds)\n  congratulations :) "
           "(51.96 seconds)", desc="Run on Python 3.9")
    s.compact("1. Primary request: soft-delete for Order (deleted_at + a manager hiding "
              "deleted rows). Constraints: do not hand-edit migrations; must support py3.9; "
              "run tests with ./bin/test.\n2. Created orders/managers.py (AliveManager), "
              "edited orders/models.py (deleted_at, objects = AliveManager()).\n3. A py3.9 "
              "failure (PEP 604 annotation) was fixed with Optional; 212 tests pass on 3.9 "
              "and 3.12.\n4. No migration was generated; the user will do it.")
    s.user("Change of plan: forget soft-delete for now. Just hide archived orders (older than "
           "ARCHIVE_AFTER_DAYS) from the admin change list. Keep orders/managers.py and the "
           "deleted_at change out of this PR.")
    s.bash("rm orders/managers.py && git checkout -- orders/models.py && git status --short",
           "", desc="Drop the soft-delete work")
    s.wander(s.cwd, "orders", 25)
    s.read("/home/dev/shopdesk/orders/admin.py", numbered(admin))
    s.explore({f"/home/dev/shopdesk/orders/tests/test_{n}.py": filler_py(f"tests.{n}", 15)
               for n in ("admin", "selectors", "views")})
    s.edit("/home/dev/shopdesk/orders/admin.py",
           "from .legacy_filters import OldOrdersFilter\n",
           "from .filters import ArchivedFilter\n")
    s.edit("/home/dev/shopdesk/orders/admin.py", "    list_filter = ('status', OldOrdersFilter)",
           "    list_filter = ('status', ArchivedFilter)\n\n    def get_queryset(self, request):"
           "\n        return ArchivedFilter.hide_archived(super().get_queryset(request), "
           "request)")
    s.write("/home/dev/shopdesk/orders/filters.py",
            "from datetime import timedelta\n\nfrom django.conf import settings\nfrom "
            "django.contrib import admin\nfrom django.utils import timezone\n\n\nclass "
            "ArchivedFilter(admin.SimpleListFilter):\n    title = 'archived'\n    "
            "parameter_name = 'archived'\n")
    s.say("orders/legacy_filters.py only held OldOrdersFilter, which nothing uses now that "
          "admin.py has ArchivedFilter, so I'm removing it.")
    s.bash("git rm orders/legacy_filters.py", "rm 'orders/legacy_filters.py'",
           desc="Remove the unused legacy filter")
    s.bash("./bin/test orders", passing_pytest(names[:30], "") +
           "\n=================================== FAILURES ===================================\n"
           "__________________________ test_changelist_counts ______________________________\n"
           "    def test_changelist_counts(admin_client, order_factory):\n"
           "        order_factory.create_batch(50)\n        resp = admin_client.get(CHANGELIST)"
           "\n>       assert resp.context['cl'].result_count == 50\nE       assert 48 == 50\n\n"
           "orders/tests/test_admin.py:41: AssertionError\n=========================== short "
           "test summary info ============================\nFAILED orders/tests/test_admin.py::"
           "test_changelist_counts - assert 48 == 50\n================== 1 failed, 211 passed "
           "in 40.33s ==================", exit_code=1, desc="Run the orders tests")
    s.say("test_changelist_counts now sees 48 of 50 orders: order_factory makes two orders "
          "dated 91 days ago, which the new filter hides. Should I change the factory or the "
          "test?")
    s.user("The test is what has to change: expect 48, the fixture predates archiving. Don't "
           "touch the factory, other apps use it.")
    s.edit("/home/dev/shopdesk/orders/tests/test_admin.py",
           "        assert resp.context['cl'].result_count == 50",
           "        assert resp.context['cl'].result_count == 48  # two are archived")
    s.bash("./bin/test orders", passing_pytest(names[:212], "======================== 212 "
           "passed in 37.90s ========================="), desc="Run the orders tests")
    s.compact("1. The user dropped soft-delete; the task is now to hide archived orders "
              "(older than ARCHIVE_AFTER_DAYS = 90) from the admin change list.\n2. "
              "orders/managers.py was removed and orders/models.py restored with git "
              "checkout. New orders/filters.py (ArchivedFilter); orders/admin.py uses it; "
              "orders/legacy_filters.py removed with git rm.\n3. test_changelist_counts "
              "updated to expect 48 (the user said the test changes, not the factory).\n4. "
              "212 passed. Standing rules: py3.9, no hand-edited migrations, ./bin/test.")
    s.user("Also add a 'Show archived' toggle to the change list so staff can still see them "
           "when they need to.")
    s.wander(s.cwd, "orders/admin_views", 20)
    s.edit("/home/dev/shopdesk/orders/filters.py", "    parameter_name = 'archived'\n",
           "    parameter_name = 'archived'\n\n    def lookups(self, request, model_admin):\n"
           "        return [('1', 'Show archived')]\n")
    s.write("/home/dev/shopdesk/orders/tests/test_archived_toggle.py",
            "def test_toggle_shows_archived(admin_client, order_factory):\n    url = reverse("
            "'orders_order_changelist') + '?archived=1'\n    assert admin_client.get(url)."
            "context['cl'].result_count == 50\n")
    s.bash("./bin/test orders", passing_pytest(names[:40], "") +
           "\n=================================== FAILURES ===================================\n"
           "_________________________ test_toggle_shows_archived ___________________________\n"
           "E   django.urls.exceptions.NoReverseMatch: Reverse for 'orders_order_changelist' "
           "not found. 'orders_order_changelist' is not a valid view function or pattern name."
           "\n\norders/tests/test_archived_toggle.py:2: NoReverseMatch\nFAILED orders/tests/"
           "test_archived_toggle.py::test_toggle_shows_archived - django.urls.exceptions."
           "NoReverseMatch: Reverse for 'orders_order_changelist' not found.\n"
           "================== 1 failed, 212 passed in 41.07s ==================", exit_code=1,
           desc="Run the orders tests")
    s.edit("/home/dev/shopdesk/orders/tests/test_archived_toggle.py",
           "reverse('orders_order_changelist')", "reverse('admin:orders_order_changelist')")
    s.bash("./bin/test orders", passing_pytest(names[:210] + [
        "orders/tests/test_archived_toggle.py::test_toggle_shows_archived",
        "orders/tests/test_archived_toggle.py::test_toggle_default_hides"],
        "======================== 214 passed in 40.12s ========================="),
        desc="Run the orders tests")
    s.bash("tox -e py39 -- orders", "py39: commands[0]> ./bin/test orders\n214 passed in "
           "45.30s\n  py39: OK (52.10 seconds)\n  congratulations :) (52.18 seconds)",
           desc="Run on Python 3.9")
    s.bash("git add -A && git commit -m \"admin: hide archived orders, add Show archived "
           "toggle\"", "[feat/archive 4be71d0] admin: hide archived orders, add Show archived "
           "toggle\n 5 files changed, 61 insertions(+), 14 deletions(-)\n create mode 100644 "
           "orders/filters.py\n create mode 100644 orders/tests/test_archived_toggle.py\n "
           "delete mode 100644 orders/legacy_filters.py", desc="Commit")
    s.say("Committed 4be71d0: archived orders are hidden from the admin change list, with a "
          "Show archived toggle; 214 passed on 3.12 and on 3.9. Still to do: docs/admin.md "
          "needs a paragraph about the toggle. I'll write that next, then run `tox -e "
          "py39,py312` once more before you open the PR.")
    s.save()
    questions("cc-orders-archive", "a long Django session (hundreds of records, many reads) "
              "over two compactions: the first goal (soft-delete) replaced after the first "
              "compaction, standing rules said in passing (py3.9, no hand-edited migrations, "
              "./bin/test not pytest), facts read in settings and code, a file created and "
              "deleted, a git checkout, a git rm, a failing test the user rules on, a later "
              "request, a commit and a promised next step.", [
                  ("goal", "What is the task now?",
                   "Hide archived orders (older than ARCHIVE_AFTER_DAYS) from the admin change "
                   "list, with a Show archived toggle.", ["hide archived orders"]),
                  ("goal", "What was the task at first, and what happened to it?",
                   "Soft-delete for Order; the user dropped it ('forget soft-delete for now').",
                   ["soft-delete"]),
                  ("instruction", "Which Python version must the code support?",
                   "py3.9 (the customer is on RHEL 8).", ["py3.9"]),
                  ("instruction", "What must not be done with migrations?",
                   "Don't touch the migrations folder by hand; the user generates them.",
                   ["migrations"]),
                  ("instruction", "How must tests be run?",
                   "With ./bin/test, never plain pytest.", ["./bin/test"]),
                  ("failure", "Which error did Python 3.9 raise?",
                   "TypeError: unsupported operand type(s) for |: 'type' and 'NoneType'.",
                   ["unsupported operand type(s) for |"]),
                  ("files", "Which file was created and later removed?",
                   "orders/managers.py.", ["orders/managers.py"]),
                  ("files", "Which file was deleted with git rm?",
                   "orders/legacy_filters.py.", ["orders/legacy_filters.py"]),
                  ("revert", "How was the deleted_at change undone?",
                   "git checkout -- orders/models.py.", ["git checkout -- orders/models.py"]),
                  ("finding", "What is ARCHIVE_AFTER_DAYS set to, and where?",
                   "90, in settings/base.py.", ["ARCHIVE_AFTER_DAYS", "90"]),
                  ("finding", "Where does get_visible_orders() live?",
                   "orders/selectors.py.", ["orders/selectors.py"]),
                  ("decision", "What did the user decide about test_changelist_counts?",
                   "Change the test to expect 48; don't touch the factory.",
                   ["test_changelist_counts", "48"]),
                  ("files", "Which new file holds the archive filter?", "orders/filters.py.",
                   ["orders/filters.py"]),
                  ("failure", "What error did the toggle test hit first?",
                   "NoReverseMatch: Reverse for 'orders_order_changelist' not found.",
                   ["NoReverseMatch"]),
                  ("test", "Do the tests pass now?", "Yes: 214 passed (3.12 and 3.9).",
                   ["214 passed"]),
                  ("commit", "What was committed?", "4be71d0.", ["4be71d0"]),
                  ("stopped", "What did the assistant say it would do next?",
                   "Write the toggle paragraph in docs/admin.md, then run tox -e py39,py312.",
                   ["docs/admin.md"]),
              ])


# -- 2. a leak hunt that records its findings in the journal (`agent-journal record`), one
#       of which is later invalidated; an Explore subagent; an alternative rejected; the
#       user says not to commit yet ---------------------------------------------------------

LEAK_JOURNAL = [
    ["record", "--kind", "objective", "--id", "ops-2291",
     "--text", "Find and fix the RSS growth of worker/ (ticket OPS-2291)"],
    ["record", "--kind", "constraint", "--id", "frozen-reqs",
     "--text", "No new dependencies in worker/: requirements are frozen for release 4.2",
     "--anchor", "file:worker/requirements.txt"],
    ["record", "--kind", "finding", "--id", "leak-thumb-cache",
     "--claim", "The make_thumbnail lru_cache in worker/images.py grows without bound",
     "--anchor", "file:worker/images.py"],
    ["invalidate", "leak-thumb-cache", "--reason",
     "make_thumbnail's lru_cache has maxsize=512; the growth is the _pending dict in "
     "worker/pool.py"],
    ["record", "--kind", "finding", "--id", "leak-pending-futures",
     "--claim", "worker/pool.py keeps every Future in _pending: added in submit_job(), never "
                "removed", "--anchor", "file:worker/pool.py"],
    ["record", "--kind", "decision", "--id", "drop-done-futures",
     "--question", "How do we stop _pending growing?",
     "--chosen", "pop the future in a done-callback and keep finished statuses in a bounded "
                 "OrderedDict (1000)", "--anchor", "file:worker/pool.py",
     "--depends-on", "leak-pending-futures"],
]


def _journal_call(s: Session, args: list[str], out: str) -> None:
    shown = " ".join(a if a.replace("-", "").replace("_", "").replace(":", "").replace(
        "/", "").replace(".", "").isalnum() else json.dumps(a) for a in args)
    s.bash("agent-journal " + shown, out, desc="Record in the journal")


def leak_journal() -> None:
    s = Session("cc-leak-journal", "/home/dev/imgsvc", "fix/ops-2291", "2026-05-06T13:00:00")
    s.title("Worker memory leak OPS-2291")
    s.user("The image worker's RSS grows about 40 MB an hour in prod (ticket OPS-2291). Find "
           "the leak and fix it. Record what you find in the journal as you go (agent-journal "
           "record). No new dependencies in worker/, the requirements are frozen for release "
           "4.2.")
    _journal_call(s, LEAK_JOURNAL[0], "recorded ops-2291")
    _journal_call(s, LEAK_JOURNAL[1], "recorded frozen-reqs")
    s.glob("worker/**/*.py", [f"worker/{n}.py" for n in (
        "__init__", "main", "images", "pool", "queue", "storage", "metrics", "config",
        "codecs", "health")])
    images = ("import functools\n\nfrom PIL import Image\n\n" + "\n" * 80 +
              "@functools.lru_cache(maxsize=512)\ndef make_thumbnail(key: str, size: int) -> "
              "bytes:\n    img = Image.open(storage.open(key))\n    img.thumbnail((size, size))"
              "\n    return encode(img)\n")
    s.read("/home/dev/imgsvc/worker/images.py", numbered(images))
    s.explore({f"/home/dev/imgsvc/worker/{n}.py": filler_py(f"worker.{n}", 14 + k)
               for k, n in enumerate(("main", "queue", "storage", "metrics", "config",
                                      "codecs", "health"))})
    s.wander(s.cwd, "worker", 30)
    s.bash("python -m worker.soak --minutes 2 --tracemalloc 10",
           "soak: 2 minutes, 4 threads, 18211 jobs\nRSS start 141 MB, end 297 MB\n"
           "Top 10 lines by allocated size:\n"
           "#1: worker/images.py:88: size=61.2 MiB, count=12004, average=5347 B\n"
           "#2: worker/pool.py:41: size=18.4 MiB, count=18211, average=1059 B\n"
           + "".join(f"#{n}: /usr/lib/python3.12/{m}:{10 * n}: size={9 - n * 0.7:.1f} MiB, "
                     f"count={400 * n}, average={90 + n} B\n"
                     for n, m in zip(range(3, 11), ("json/decoder.py", "threading.py",
                                                    "queue.py", "logging/__init__.py",
                                                    "ssl.py", "socket.py", "selectors.py",
                                                    "email/parser.py"), strict=True)),
           desc="Soak with tracemalloc")
    s.say("tracemalloc's top line is worker/images.py:88, the thumbnail cache. Recording it.")
    _journal_call(s, LEAK_JOURNAL[2], "recorded leak-thumb-cache")
    task = s.call("Task", {"description": "Find who holds worker futures",
                           "prompt": "In /home/dev/imgsvc/worker, find where "
                                     "ThreadPoolExecutor futures are stored and whether they "
                                     "are ever removed. Also check how make_thumbnail's "
                                     "cache is bounded. Report file:line.",
                           "subagent_type": "Explore"})
    agent = "b71e09c3d2a4f5e68"
    sub = Session("cc-leak-journal/subagents/agent-" + agent, s.cwd, s.branch,
                  "2026-05-06T13:09:00", sid=s.sid, agent=agent)
    sub.user("In /home/dev/imgsvc/worker, find where ThreadPoolExecutor futures are stored "
             "and whether they are ever removed. Also check how make_thumbnail's cache is "
             "bounded. Report file:line.")
    sub.grep("_pending", "worker/pool.py:41:        self._pending[job_id] = fut\n"
             "worker/pool.py:23:        self._pending: dict[str, Future] = {}\n"
             "worker/pool.py:57:        fut = self._pending[job_id]\n")
    sub.read("/home/dev/imgsvc/worker/pool.py", numbered(
        "from concurrent.futures import Future, ThreadPoolExecutor\n\n\nclass Pool:\n" +
        "\n" * 17 + "    def __init__(self, workers: int) -> None:\n        self._ex = "
        "ThreadPoolExecutor(workers)\n        self._pending: dict[str, Future] = {}\n" +
        "\n" * 14 + "    def submit_job(self, job_id, fn, *args):\n        fut = self._ex."
        "submit(fn, *args)\n        self._pending[job_id] = fut\n        return fut\n" +
        "\n" * 12 + "    def get_status(self, job_id):\n        fut = self._pending[job_id]\n"
        "        return 'done' if fut.done() else 'running'\n"))
    sub.grep("lru_cache", "worker/images.py:86:@functools.lru_cache(maxsize=512)\n")
    found = ("Futures are kept in the `_pending` dict of worker/pool.py (line 23, filled at "
             "line 41 in submit_job()); nothing ever removes them, get_status() reads them at "
             "line 57. make_thumbnail's cache is bounded: @functools.lru_cache(maxsize=512) "
             "at worker/images.py:86, so at most 512 thumbnails are held.")
    sub.say(found)
    meta = sub.save().with_suffix(".meta.json")
    meta.write_text(json.dumps({"agentType": "Explore",
                                "description": "Find who holds worker futures"}) + "\n",
                    encoding="utf-8")
    s.result(task, found, tool_result={"status": "completed", "agentId": agent, "content": [
        {"type": "text", "text": found}], "totalDurationMs": 48211, "totalTokens": 22870,
        "totalToolUseCount": 3}, seconds=50)
    s.wander(s.cwd, "worker/codecs", 15)
    s.say("So the thumbnail cache is bounded (maxsize=512) and my first finding was wrong: "
          "the 61 MiB is 512 cached thumbnails at steady state, not growth. The growth is "
          "_pending in worker/pool.py. Invalidating the first finding and recording the real "
          "one.")
    _journal_call(s, LEAK_JOURNAL[3], "invalidated leak-thumb-cache")
    _journal_call(s, LEAK_JOURNAL[4], "recorded leak-pending-futures")
    s.say("Options: (a) make _pending a weakref.WeakValueDictionary: rejected, _pending holds "
          "the only reference, so a future would vanish before get_status() reads it; (b) "
          "pop the future in a done-callback and keep finished statuses in a bounded "
          "OrderedDict. Going with (b); OrderedDict is stdlib, so no new dependency.")
    _journal_call(s, LEAK_JOURNAL[5], "recorded drop-done-futures")
    s.edit("/home/dev/imgsvc/worker/pool.py", "        self._pending[job_id] = fut\n",
           "        self._pending[job_id] = fut\n        fut.add_done_callback(lambda f, "
           "k=job_id: self._finish(k, f))\n")
    s.bash("pytest tests/worker -q", "." * 60 + "F" + "." * 26 + "\n=== FAILURES ===\n"
           "_________________________ test_status_of_finished_job _________________________\n"
           "    def test_status_of_finished_job(pool):\n        pool.submit_job('job-1', noop)"
           "\n        pool.wait_all()\n>       assert pool.get_status('job-1') == 'done'\n\n"
           "worker/pool.py:57: in get_status\n    fut = self._pending[job_id]\nE   KeyError: "
           "'job-1'\n=========================== short test summary info "
           "============================\nFAILED tests/worker/test_pool.py::"
           "test_status_of_finished_job - KeyError: 'job-1'\n1 failed, 86 passed in 6.02s",
           exit_code=1, desc="Run the worker tests")
    s.edit("/home/dev/imgsvc/worker/pool.py",
           "        fut = self._pending[job_id]\n        return 'done' if fut.done() else "
           "'running'\n",
           "        if job_id in self._done:\n            return self._done[job_id]\n"
           "        return 'running' if job_id in self._pending else 'unknown'\n")
    s.bash("pytest tests/worker -q", "." * 87 + "\n87 passed in 5.88s", desc="Run the worker "
           "tests")
    s.bash("python -m worker.soak --minutes 2 --tracemalloc 3",
           "soak: 2 minutes, 4 threads, 18304 jobs\nRSS start 140 MB, end 212 MB\n"
           "Top 3 lines by allocated size:\n#1: worker/images.py:88: size=61.0 MiB, count=512"
           "\n#2: /usr/lib/python3.12/json/decoder.py:353: size=2.1 MiB, count=930\n"
           "#3: worker/pool.py:64: size=0.9 MiB, count=1000\n", desc="Soak with tracemalloc")
    s.say("RSS now ends at 212 MB after 2 minutes (was 297 MB) and flattens after the first "
          "minute; worker/pool.py holds at most 1000 finished statuses. 87 passed.")
    s.user("Good. Don't commit yet, I want to run the 6-hour soak on staging first. Write up "
           "the numbers in a PR description draft at docs/leak-OPS-2291.md.")
    s.write("/home/dev/imgsvc/docs/leak-OPS-2291.md",
            "# OPS-2291: worker RSS growth\n\nCause: worker/pool.py kept every Future in "
            "_pending.\nFix: pop in a done-callback; finished statuses in a bounded "
            "OrderedDict (1000).\n\n| | before | after |\n|---|---|---|\n| RSS after 2 min "
            "| 297 MB | 212 MB |\n")
    s.say("The draft is in docs/leak-OPS-2291.md. Nothing is committed. Once your 6-hour "
          "staging soak looks flat, I'll commit and open the PR.")
    s.save()
    questions("cc-leak-journal", "a memory-leak hunt that records its work in the journal "
              "with `agent-journal record` (objective, constraint, two findings, a decision "
              "that depends on one) and invalidates its first finding after an Explore "
              "subagent's report; the `journal` list replays those commands after the import, "
              "as they were run in the session. An alternative rejected with its reason, a "
              "test broken by the fix and fixed, measurements, the user holding the commit.", [
                  ("goal", "What is the task?", "Find and fix the worker RSS growth (OPS-2291).",
                   ["OPS-2291"]),
                  ("instruction", "What must not be added?",
                   "New dependencies in worker/ (requirements frozen for release 4.2).",
                   ["No new dependencies"]),
                  ("finding", "Which recorded finding was retracted, and why?",
                   "leak-thumb-cache: the lru_cache has maxsize=512.",
                   ["leak-thumb-cache", "maxsize=512"]),
                  ("finding", "What is the leak, according to the live finding?",
                   "worker/pool.py keeps every Future in _pending, never removed.",
                   ["_pending", "worker/pool.py"]),
                  ("finding", "Where are the futures added?", "In submit_job().",
                   ["submit_job()"]),
                  ("decision", "What fix was chosen?",
                   "Pop the future in a done-callback; finished statuses in a bounded "
                   "OrderedDict.", ["done-callback"]),
                  ("rejected", "Which alternative was rejected, and why?",
                   "weakref.WeakValueDictionary: _pending holds the only reference.",
                   ["WeakValueDictionary"]),
                  ("failure", "Which test did the fix break, and with what error?",
                   "test_status_of_finished_job, KeyError: 'job-1'.",
                   ["test_status_of_finished_job", "KeyError"]),
                  ("test", "Do the worker tests pass now?", "Yes: 87 passed.", ["87 passed"]),
                  ("finding", "What did the soak show after the fix?",
                   "RSS 212 MB after 2 minutes, was 297 MB.", ["212 MB"]),
                  ("finding", "Which line did tracemalloc point at first?",
                   "worker/images.py:88.", ["worker/images.py:88"]),
                  ("stopped", "May the agent commit?",
                   "No: don't commit until the 6-hour staging soak.", ["Don't commit yet"]),
                  ("stopped", "What is the agent waiting for?", "The 6-hour soak on staging.",
                   ["6-hour soak"]),
                  ("files", "Which file was written for the PR?", "docs/leak-OPS-2291.md.",
                   ["docs/leak-OPS-2291.md"]),
              ], journal=LEAK_JOURNAL)


# -- 3. a TypeScript monorepo over three compactions: the scope narrowed twice, an approach
#       abandoned with its reason, a dependency added and one removed, a file deleted, a
#       revert of one package, a failure still open at the end, a todo list ------------------

def vitest_pass(files: list[str], total: int) -> str:
    return (" RUN  v1.6.0 /home/dev/acme/packages/billing\n\n" +
            "".join(f" ✓ {f} ({3 + k % 9} tests) {10 + k}ms\n" for k, f in enumerate(files)) +
            f"\n Test Files  {len(files)} passed ({len(files)})\n      Tests  {total} passed "
            f"({total})\n   Start at  10:14:02\n   Duration  4.31s\n")


def datefns_compactions() -> None:
    s = Session("cc-datefns-scope", "/home/dev/acme", "chore/date-fns", "2026-05-11T09:00:00")
    s.title("moment -> date-fns")
    s.user("Replace moment with date-fns across the repo. Use pnpm, never npm: the lockfile "
           "is pnpm-lock.yaml and CI rejects a package-lock.json.")
    users = [f"packages/{p}/src/{f}.ts" for p, fs in (
        ("billing", ("invoice", "due", "report", "legacy/moment-shim", "periods", "tax")),
        ("web", ("calendar", "format", "hooks/useDate", "pages/orders")),
        ("reports", ("monthly", "quarterly", "export"))) for f in fs]
    s.bash("rg -l \"from 'moment'\"", "\n".join(users * 3), desc="Find moment imports")
    s.explore({f"/home/dev/acme/{u}": filler_ts(u.split("/")[-1].replace("-", ""), 9)
               for u in users[:8]})
    s.wander(s.cwd, "packages/billing/src", 25)
    s.read("/home/dev/acme/packages/billing/src/due.ts", numbered(
        "import moment from 'moment';\n\nexport function formatDueDate(raw: string, tz: "
        "string): string {\n  return moment.tz(raw, tz).format('DD/MM/YYYY HH:mm');\n}\n"))
    s.edit("/home/dev/acme/packages/billing/src/due.ts",
           "  return moment.tz(raw, tz).format('DD/MM/YYYY HH:mm');",
           "  return format(new Date(raw), 'dd/MM/yyyy HH:mm');")
    s.edit("/home/dev/acme/packages/web/src/calendar.tsx", "import moment from 'moment';",
           "import { format } from 'date-fns';")
    files = [f"src/{f}.test.ts" for f in ("invoice", "due", "periods", "tax", "report",
                                         "credit", "dunning", "export", "fx", "rounding")]
    s.bash("pnpm -F billing test", " RUN  v1.6.0 /home/dev/acme/packages/billing\n\n"
           " ❯ src/due.test.ts (9 tests | 2 failed)\n   × formatDueDate > parses the API "
           "format\n     → RangeError: Invalid time value\n   × formatDueDate > formats due "
           "date in customer timezone\n     → RangeError: Invalid time value\n" +
           "".join(f" ✓ {f} (12 tests)\n" for f in files[2:]) +
           "\n⎯⎯⎯ Failed Tests 2 ⎯⎯⎯\n\n FAIL  src/due.test.ts > formatDueDate > parses the "
           "API format\nRangeError: Invalid time value\n ❯ format node_modules/date-fns/"
           "format.mjs:351:11\n ❯ formatDueDate src/due.ts:4:10\n\n Test Files  1 failed | "
           "9 passed (10)\n      Tests  2 failed | 141 passed (143)\n", exit_code=1,
           desc="Billing tests")
    s.say("moment parsed '2026-03-01 10:00' leniently; new Date() does not. Trying parseISO.")
    s.edit("/home/dev/acme/packages/billing/src/due.ts", "format(new Date(raw),",
           "format(parseISO(raw),")
    s.bash("pnpm -F billing test", " ❯ src/due.test.ts (9 tests | 1 failed)\n   × "
           "formatDueDate > formats due date in customer timezone\n     → expected '01/03/2026 "
           "10:00' to be '01/03/2026 11:00'\n\n Test Files  1 failed | 9 passed (10)\n      "
           "Tests  1 failed | 142 passed (143)\n", exit_code=1, desc="Billing tests")
    s.edit("/home/dev/acme/packages/billing/src/due.ts", "format(parseISO(raw), 'dd/MM/yyyy "
           "HH:mm')", "parseISO(raw).toLocaleString('en-GB', { timeZone: tz, dateStyle: "
           "'short', timeStyle: 'short' })")
    s.bash("pnpm -F billing test", " ❯ src/due.test.ts (9 tests | 1 failed)\n   × "
           "formatDueDate > formats due date in customer timezone\n     → expected '01/03/2026, "
           "11:00' to be '01/03/2026 11:00'\n\n      Tests  1 failed | 142 passed (143)\n",
           exit_code=1, desc="Billing tests")
    s.bash("node --version && nvm exec 18 node -e \"console.log(new Date('2026-03-01T10:00Z')"
           ".toLocaleString('en-GB',{timeZone:'Europe/Berlin',dateStyle:'short',timeStyle:"
           "'short'}))\"", "v20.12.1\nRunning node v18.19.0 (npm v10.2.3)\n01/03/2026 11:00",
           desc="Compare Node 18 and 20")
    s.say("Abandoning toLocaleString: its output differs between Node 18 and Node 20 (20 adds "
          "a comma), and CI runs both. I'll use formatInTimeZone from date-fns-tz instead, "
          "which formats with an explicit pattern.")
    s.bash("pnpm -F billing add date-fns date-fns-tz", "Packages: +2\n++\nProgress: resolved "
           "812, reused 790, downloaded 2, added 2, done\n\ndependencies:\n+ date-fns 3.6.0\n"
           "+ date-fns-tz 3.1.3\n\nDone in 3.2s", desc="Add date-fns-tz")
    s.edit("/home/dev/acme/packages/billing/src/due.ts",
           "parseISO(raw).toLocaleString('en-GB', { timeZone: tz, dateStyle: 'short', "
           "timeStyle: 'short' })", "formatInTimeZone(parseISO(raw), tz, 'dd/MM/yyyy HH:mm')")
    s.bash("pnpm -F billing test", vitest_pass(files, 143), desc="Billing tests")
    s.compact("1. Task: replace moment with date-fns across the repo; pnpm only, never npm "
              "(pnpm-lock.yaml).\n2. packages/billing/src/due.ts ported; toLocaleString was "
              "abandoned (differs between Node 18 and 20); formatInTimeZone from date-fns-tz "
              "is used; date-fns and date-fns-tz were added to billing.\n3. packages/web/src/"
              "calendar.tsx was also edited.\n4. Billing tests: 143 passed.")
    s.user("Scope it down: only packages/billing in this PR. Revert anything you touched in "
           "packages/web.")
    s.bash("git checkout -- packages/web && git status --short packages/web", "",
           desc="Revert packages/web")
    s.explore({f"/home/dev/acme/{u}": filler_ts(u.split("/")[-1].replace("-", ""), 11)
               for u in users[:6]})
    for f in ("invoice", "periods", "tax"):
        s.edit(f"/home/dev/acme/packages/billing/src/{f}.ts", "import moment from 'moment';",
               "import { addDays, format, parseISO } from 'date-fns';")
        s.bash("pnpm -F billing test", vitest_pass(files, 143), desc="Billing tests")
    s.compact("1. Scope is now packages/billing only (the user's request); packages/web was "
              "reverted with git checkout.\n2. invoice.ts, periods.ts, tax.ts and due.ts use "
              "date-fns; 143 billing tests pass.\n3. pnpm only.")
    s.wander(s.cwd, "packages/billing/src/legacy", 20)
    s.bash("pnpm -F billing lint", "\n/home/dev/acme/packages/billing/src/legacy/"
           "moment-shim.ts\n  1:8  error  'moment' is defined but never used  "
           "@typescript-eslint/no-unused-vars\n\n✖ 1 problem (1 error, 0 warnings)\n",
           exit_code=1, desc="Billing lint")
    s.say("legacy/moment-shim.ts only re-exported moment for the old call sites, which are "
          "all ported now; deleting it.")
    s.bash("git rm packages/billing/src/legacy/moment-shim.ts",
           "rm 'packages/billing/src/legacy/moment-shim.ts'", desc="Delete the shim")
    s.bash("pnpm -F billing lint", "", desc="Billing lint")
    s.user("Also remove moment from packages/billing/package.json while you're at it.")
    s.bash("pnpm -F billing remove moment", "Packages: -1\n-\nProgress: resolved 811, reused "
           "789, downloaded 0, added 0, done\n\ndependencies:\n- moment 2.30.1\n\nDone in 2.1s",
           desc="Remove moment from billing")
    s.compact("1. Scope: packages/billing only; pnpm only.\n2. moment-shim.ts deleted (git rm); "
              "lint clean; moment removed from packages/billing/package.json with pnpm -F "
              "billing remove moment.\n3. Next: typecheck and the full billing tests.")
    s.bash("pnpm -F billing typecheck", "> @acme/billing@4.1.0 typecheck /home/dev/acme/"
           "packages/billing\n> tsc --noEmit\n\nsrc/report.ts(22,15): error TS2307: Cannot "
           "find module 'moment' or its corresponding type declarations.\n\nFound 1 error in "
           "src/report.ts:22\n\n ELIFECYCLE  Command failed with exit code 2.", exit_code=2,
           desc="Billing typecheck")
    s.read("/home/dev/acme/packages/billing/src/report.ts", numbered(
        "\n" * 20 + "import { Quarter } from './periods';\nimport moment from 'moment';\n\n"
        "export function quarterStart(d: Date): Date {\n  return moment(d).startOf('quarter')"
        ".toDate();\n}\n"))
    s.todos([("Port quarterStart() in src/report.ts to date-fns startOfQuarter", "in_progress"),
             ("Run pnpm -F billing typecheck and test", "pending"),
             ("Add a CHANGELOG entry for @acme/billing", "pending")])
    s.say("Typecheck fails: src/report.ts still imports moment (TS2307) for quarterStart(), "
          "which the rg list missed because the import is below a long header. Next I'll "
          "port quarterStart() to startOfQuarter from date-fns, then re-run typecheck and the "
          "tests.")
    s.save()
    questions("cc-datefns-scope", "a TypeScript monorepo session over three compactions: the "
              "scope narrowed by the user after the first (one package, another reverted), a "
              "request after the second, an approach abandoned for a stated reason, a "
              "dependency added and one removed with pnpm, a file deleted with git rm, a "
              "typecheck failure still open at the end, a todo list and a promised next step.",
              [
                  ("goal", "What is the scope of the work now?", "Only packages/billing.",
                   ["only packages/billing"]),
                  ("goal", "What was the original task?",
                   "Replace moment with date-fns across the repo.", ["across the repo"]),
                  ("instruction", "Which package manager must be used?",
                   "pnpm, never npm (CI rejects package-lock.json).", ["never npm"]),
                  ("revert", "How was packages/web reverted?", "git checkout -- packages/web.",
                   ["git checkout -- packages/web"]),
                  ("rejected", "Which approach was abandoned, and why?",
                   "toLocaleString: its output differs between Node 18 and Node 20.",
                   ["toLocaleString", "Node 18"]),
                  ("decision", "What is used for time-zone formatting instead?",
                   "formatInTimeZone from date-fns-tz.", ["formatInTimeZone"]),
                  ("files", "Which dependency was added?", "date-fns-tz (and date-fns).",
                   ["date-fns-tz"]),
                  ("files", "Which file was deleted?",
                   "packages/billing/src/legacy/moment-shim.ts.", ["moment-shim.ts"]),
                  ("failure", "What fails now?",
                   "pnpm -F billing typecheck: src/report.ts TS2307 cannot find module "
                   "'moment'.", ["TS2307", "src/report.ts"]),
                  ("failure", "What error did the first billing test run show?",
                   "RangeError: Invalid time value.", ["RangeError: Invalid time value"]),
                  ("stopped", "What is the next step?",
                   "Port quarterStart() in src/report.ts to date-fns.", ["quarterStart()"]),
                  ("test", "How many billing tests pass?", "143 passed.", ["143 passed"]),
                  ("asked", "How was moment removed from the billing package?",
                   "pnpm -F billing remove moment.", ["pnpm -F billing remove moment"]),
                  ("stopped", "Which todo is still open besides the port and the checks?",
                   "A CHANGELOG entry for @acme/billing.", ["CHANGELOG"]),
              ])


# -- 4. Codex, newer format: a Rust CLI feature under an MSRV rule checked with a pinned
#       toolchain, a std API the MSRV lacks, a user rule on output shape, a compaction, a
#       file added and one deleted by apply_patch, a lint left open on the user's word ------

def cargo_ok(n: int, names: list[str]) -> str:
    return (f"   Compiling tk v0.9.2 (/home/dev/tk)\n    Finished `test` profile [unoptimized "
            f"+ debuginfo] target(s) in 7.41s\n     Running unittests src/main.rs (target/"
            f"debug/deps/tk-5b1e)\n\nrunning {n} tests\n" +
            "".join(f"test {name} ... ok\n" for name in names[:n]) +
            f"\ntest result: ok. {n} passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; "
            "finished in 0.21s\n")


def codex_rust_json() -> None:
    r = Rollout("codex-tk-json", "/home/dev/tk", "feat/list-json", "2026-05-13T14:00:00")
    r.message("user", "Add a `--json` flag to `tk list` that prints the tasks as a JSON array. "
                      "MSRV is 1.70: check with `cargo +1.70 check` before you say it's done. "
                      "No new crates.")
    r.reasoning("**Exploring the CLI layout**")
    r.exec_command("ls src tests && wc -l src/*.rs",
                   "cli.rs\nformat_legacy.rs\nlib.rs\nmain.rs\nstore.rs\ntask.rs\ncli.rs\n"
                   "  212 src/cli.rs\n   96 src/format_legacy.rs\n   41 src/lib.rs\n  148 "
                   "src/main.rs\n  377 src/store.rs\n  164 src/task.rs\n 1038 total\n")
    for f, n in (("cli", 212), ("main", 148), ("store", 377), ("task", 164),
                 ("format_legacy", 96)):
        body = "".join(f"{k:>4}  fn {f}_part_{k}(t: &Task) -> String {{ t.title.clone() }}\n"
                       for k in range(1, min(n, 120)))
        r.exec_command(f"sed -n 1,200p src/{f}.rs", body)
    r.wander("cmd", 30)
    r.exec_command("cat Cargo.toml", "[package]\nname = \"tk\"\nversion = \"0.9.2\"\nedition = "
                   "\"2021\"\nrust-version = \"1.70\"\n\n[dependencies]\nclap = { version = "
                   "\"4.4\", features = [\"derive\"] }\nserde = { version = \"1\", features = "
                   "[\"derive\"] }\nserde_json = \"1\"\ntime = \"0.3\"\n")
    r.message("assistant", "serde and serde_json are already dependencies (Cargo.toml), so "
                           "JSON output needs no new crate. src/format_legacy.rs holds the old "
                           "table printer that `tk list` uses today.")
    r.plan("JSON output for tk list", [("Add --json to the list subcommand in src/cli.rs",
                                        "in_progress"),
                                       ("Serialize tasks in a new src/output.rs", "pending"),
                                       ("Check MSRV with cargo +1.70 check", "pending")])
    r.patch("*** Begin Patch\n*** Add File: src/output.rs\n+use std::sync::LazyLock;\n+\n+static "
            "PRETTY: LazyLock<bool> = LazyLock::new(|| std::env::var_os(\"TK_PRETTY\")."
            "is_some());\n+\n+pub fn print_json(tasks: &[Task]) -> serde_json::Result<()> {\n+"
            "    let out = if *PRETTY { serde_json::to_string_pretty(&tasks)? } else { "
            "serde_json::to_string(&tasks)? };\n+    println!(\"{out}\");\n+    Ok(())\n+}\n"
            "*** Update File: src/cli.rs\n@@\n     List {\n+        #[arg(long)]\n+        json: "
            "bool,\n*** Update File: src/main.rs\n@@\n-        Cmd::List => format_legacy::"
            "print_table(&tasks),\n+        Cmd::List { json: true } => output::print_json("
            "&tasks)?,\n+        Cmd::List { json: false } => format_legacy::print_table("
            "&tasks),\n*** End Patch\n", "Success. Updated the following files:\nA "
            "src/output.rs\nM src/cli.rs\nM src/main.rs\n")
    names = [f"{m}::tests::{m}_{k}" for m in ("store", "task", "cli") for k in range(24)]
    r.exec_command("cargo test", cargo_ok(64, names))
    r.exec_command("cargo +1.70 check", "    Checking tk v0.9.2 (/home/dev/tk)\nerror[E0658]: "
                   "use of unstable library feature 'lazy_cell'\n --> src/output.rs:1:5\n  |\n1 "
                   "| use std::sync::LazyLock;\n  |     ^^^^^^^^^^^^^^^^^^^\n  |\n  = note: see "
                   "issue #109736 <https://github.com/rust-lang/rust/issues/109736> for more "
                   "information\n\nerror: could not compile `tk` (bin \"tk\") due to 3 previous "
                   "errors\n", code=101)
    r.reasoning("**LazyLock is 1.80; OnceLock is stable since 1.70**")
    r.message("assistant", "std::sync::LazyLock is only stable since Rust 1.80, above the "
                           "1.70 MSRV. Switching to std::sync::OnceLock, stable in 1.70, so "
                           "still no new crate (once_cell would be one).")
    r.patch("*** Begin Patch\n*** Update File: src/output.rs\n@@\n-use std::sync::LazyLock;\n+"
            "use std::sync::OnceLock;\n@@\n-static PRETTY: LazyLock<bool> = LazyLock::new(|| "
            "std::env::var_os(\"TK_PRETTY\").is_some());\n+static PRETTY: OnceLock<bool> = "
            "OnceLock::new();\n*** End Patch\n",
            "Success. Updated the following files:\nM src/output.rs\n")
    r.exec_command("cargo +1.70 check", "    Checking tk v0.9.2 (/home/dev/tk)\n    Finished "
                   "`dev` profile [unoptimized + debuginfo] target(s) in 2.87s\n")
    r.patch("*** Begin Patch\n*** Update File: tests/cli.rs\n@@\n+#[test]\n+fn "
            "snapshot_json_list() {\n+    let out = tk(&[\"list\", \"--json\"]);\n+    "
            "assert_eq!(out, r#\"[{\"id\":1,\"title\":\"write docs\"}]\"#);\n+}\n"
            "*** End Patch\n", "Success. Updated the following files:\nM tests/cli.rs\n")
    r.exec_command("cargo test", cargo_ok(64, names).replace("test result: ok. 64 passed",
                   "test result: ok. 64 passed") + "     Running tests/cli.rs (target/debug/"
                   "deps/cli-0e1f)\n\nrunning 1 test\ntest snapshot_json_list ... FAILED\n\n"
                   "failures:\n\n---- snapshot_json_list stdout ----\nthread 'snapshot_json_"
                   "list' panicked at tests/cli.rs:88:5:\nassertion `left == right` failed\n  "
                   "left: \"[{\\\"id\\\":1,\\\"title\\\":\\\"write docs\\\",\\\"due\\\":null}]\"\n"
                   " right: \"[{\\\"id\\\":1,\\\"title\\\":\\\"write docs\\\"}]\"\n\nfailures:\n"
                   "    snapshot_json_list\n\ntest result: FAILED. 0 passed; 1 failed; 0 ignored"
                   "\n\nerror: test failed, to rerun pass `--test cli`\n", code=101)
    r.message("assistant", "The snapshot expects no `due` key for a task without a due date, "
                           "but serde writes \"due\":null. Should None fields be null or left "
                           "out?")
    r.message("user", "In the JSON, omit fields that are None rather than writing null. Other "
                      "tools parse this output and treat null as a value.")
    r.patch("*** Begin Patch\n*** Update File: src/task.rs\n@@\n+    #[serde(skip_serializing_if "
            "= \"Option::is_none\")]\n     pub due: Option<Date>,\n*** End Patch\n",
            "Success. Updated the following files:\nM src/task.rs\n")
    r.compacted("The user wants `tk list --json` (a JSON array). Rules: MSRV 1.70, verified "
                "with cargo +1.70 check; no new crates; omit None fields instead of null. "
                "src/output.rs is new (OnceLock, since LazyLock needs 1.80); src/cli.rs, "
                "src/main.rs, src/task.rs and tests/cli.rs changed. snapshot_json_list was "
                "failing on \"due\":null; skip_serializing_if was added.")
    r.wander("store", 16)
    r.exec_command("rg -n format_legacy src", "src/main.rs:3:mod format_legacy;\nsrc/main.rs:"
                   "57:        Cmd::List { json: false } => format_legacy::print_table(&tasks),\n")
    r.patch("*** Begin Patch\n*** Delete File: src/format_legacy.rs\n*** Update File: "
            "src/main.rs\n@@\n-mod format_legacy;\n@@\n-        Cmd::List { json: false } => "
            "format_legacy::print_table(&tasks),\n+        Cmd::List { json: false } => "
            "output::print_table(&tasks),\n*** End Patch\n",
            "Success. Updated the following files:\nD src/format_legacy.rs\nM src/main.rs\n")
    r.exec_command("cargo test", cargo_ok(64, names) + "     Running tests/cli.rs\n\nrunning "
                   "1 test\ntest snapshot_json_list ... ok\n\ntest result: ok. 1 passed; 0 "
                   "failed\n")
    r.exec_command("cargo +1.70 check", "    Finished `dev` profile [unoptimized + debuginfo] "
                   "target(s) in 2.51s\n")
    r.exec_command("cargo clippy -- -D warnings", "    Checking tk v0.9.2 (/home/dev/tk)\n"
                   "error: the borrowed expression implements the required traits\n  --> "
                   "src/output.rs:27:42\n   |\n27 |     let out = serde_json::to_string(&tasks)"
                   "?;\n   |                                          ^^^^^^ help: change this "
                   "to: `tasks`\n   |\n   = help: for further information visit https://"
                   "rust-lang.github.io/rust-clippy/master/index.html#needless_borrow\n   = "
                   "note: `-D clippy::needless-borrow` implied by `-D warnings`\n\nerror: could "
                   "not compile `tk` (bin \"tk\") due to 1 previous error\n", code=101)
    r.message("user", "Leave clippy for now, commit what you have and push to feat/list-json.")
    r.exec_command("git add -A && git commit -m \"list: add --json output\"",
                   "[feat/list-json 7d2c9e4] list: add --json output\n 6 files changed, 88 "
                   "insertions(+), 104 deletions(-)\n create mode 100644 src/output.rs\n delete "
                   "mode 100644 src/format_legacy.rs\n")
    r.exec_command("git push -u origin feat/list-json", "To github.com:dev/tk.git\n * [new "
                   "branch]      feat/list-json -> feat/list-json\nbranch 'feat/list-json' set "
                   "up to track 'origin/feat/list-json'.\n")
    r.message("assistant", "Committed 7d2c9e4 and pushed feat/list-json. cargo test and cargo "
                           "+1.70 check pass. Still open: clippy's needless_borrow at "
                           "src/output.rs:27, which you asked me to leave. Next I'll update "
                           "the README usage section for --json.")
    r.save()
    questions("codex-tk-json", "a Codex session file in the newer exec_command format: a Rust "
              "CLI feature under an MSRV checked with a pinned toolchain, a std API newer than "
              "the MSRV replaced, a user rule on the JSON shape given in answer to a question, "
              "a `compacted` summary, apply_patch adding and deleting files, a clippy failure "
              "left open on the user's word, a commit and a push.", [
                  ("goal", "What is the feature?", "`tk list --json`: tasks as a JSON array.",
                   ["--json", "tk list"]),
                  ("instruction", "Which Rust version must the code build with, and how is "
                   "it checked?", "MSRV 1.70, with cargo +1.70 check.",
                   ["cargo +1.70 check"]),
                  ("instruction", "What may not be added?", "New crates.", ["No new crates"]),
                  ("failure", "Why did the first MSRV check fail?",
                   "E0658: LazyLock is an unstable library feature 'lazy_cell' in 1.70.",
                   ["E0658", "lazy_cell"]),
                  ("decision", "What replaced LazyLock?", "std::sync::OnceLock.",
                   ["OnceLock"]),
                  ("instruction", "How must None fields appear in the JSON?",
                   "Omitted, not null.", ["omit fields that are None"]),
                  ("files", "Which file was created?", "src/output.rs.", ["src/output.rs"]),
                  ("files", "Which file was deleted?", "src/format_legacy.rs.",
                   ["src/format_legacy.rs"]),
                  ("failure", "What is still failing?",
                   "cargo clippy -D warnings: needless_borrow at src/output.rs:27.",
                   ["needless_borrow"]),
                  ("commit", "What was committed and pushed?", "7d2c9e4 to feat/list-json.",
                   ["7d2c9e4", "feat/list-json"]),
                  ("stopped", "What is the next step?",
                   "Update the README usage section for --json.", ["README"]),
                  ("finding", "Which JSON crate does the project already depend on?",
                   "serde_json.", ["serde_json"]),
                  ("test", "Which test failed on the JSON shape?", "snapshot_json_list.",
                   ["snapshot_json_list"]),
              ], fmt="codex")


# -- 5. two Explore subagents run in parallel whose reports hold the facts (a config value,
#       a function's location), an integration run retried after an infrastructure error,
#       a cause outside what the user allows to change, a test skipped on the user's word --

def _subagent(s: Session, agent: str, start: str, prompt: str, steps: list[tuple[str, str,
              str]], report: str, desc: str) -> None:
    sub = Session(f"{s.name}/subagents/agent-{agent}", s.cwd, s.branch, start, sid=s.sid,
                  agent=agent)
    sub.user(prompt)
    for kind, arg, out in steps:
        if kind == "grep":
            sub.grep(arg, out)
        else:
            sub.read(arg, out)
    sub.say(report)
    meta = sub.save().with_suffix(".meta.json")
    meta.write_text(json.dumps({"agentType": "Explore", "description": desc}) + "\n",
                    encoding="utf-8")


def go_ok(pkgs: list[str]) -> str:
    return "".join(f"ok  \texample.com/files/{p}\t0.{(7 * k) % 90 + 10}s\n"
                   for k, p in enumerate(pkgs))


def upload_limit_subagents() -> None:
    s = Session("cc-upload-limit", "/home/dev/files", "feat/enterprise-uploads",
                "2026-05-15T10:20:00")
    s.title("Enterprise upload limit")
    s.user("Raise the upload limit to 100 MB for enterprise plans only; everyone else stays at "
           "25 MB. Don't change deploy/nginx.conf, ops owns it; if it needs changing, ask them.")
    prompt_a = ("Find where the upload size limit is configured in /home/dev/files and how the "
                "Go code loads it. Report file:line and the current value.")
    prompt_b = ("Find where uploads are validated in /home/dev/files and how that code can "
                "know the account's plan. Report file:line.")
    ta = s.call("Task", {"description": "Find the upload limit config", "prompt": prompt_a,
                         "subagent_type": "Explore"})
    tb = s.call("Task", {"description": "Find upload validation", "prompt": prompt_b,
                         "subagent_type": "Explore"})
    report_a = ("The limit is `max_upload_mb: 25` in config/limits.yaml (line 7). "
                "internal/config/limits.go:31 loads it into Limits.MaxUploadMB; it is "
                "read once at start-up.")
    report_b = ("Uploads are validated by validateUpload() in internal/upload/checks.go:142; it "
                "compares r.ContentLength with cfg.Limits.MaxUploadMB. The plan is available "
                "there through auth.FromContext(ctx).Account.Plan (internal/auth/context.go:18).")
    yaml = "\n".join(["# limits", "rate_per_minute: 600", "burst: 60", "max_files_per_upload: 20",
                      "retention_days: 30", "thumbnail_px: 256", "max_upload_mb: 25",
                      "chunk_kb: 512"])
    _subagent(s, "c1d2e3f4a5b6c7d80", "2026-05-15T10:20:30", prompt_a, [
        ("grep", "max_upload", "config/limits.yaml:7:max_upload_mb: 25\ninternal/config/"
                               "limits.go:31:\tMaxUploadMB int `yaml:\"max_upload_mb\"`\n"),
        ("read", "/home/dev/files/config/limits.yaml", numbered(yaml)),
        ("read", "/home/dev/files/internal/config/limits.go", numbered(
            "package config\n\n" + "\n".join(f"// field {k}" for k in range(26)) +
            "\ntype Limits struct {\n\tMaxUploadMB int `yaml:\"max_upload_mb\"`\n}\n"))],
        report_a, "Find the upload limit config")
    _subagent(s, "d9e8f7a6b5c4d3e21", "2026-05-15T10:20:31", prompt_b, [
        ("grep", "func validateUpload", "internal/upload/checks.go:142:func validateUpload(ctx "
                                        "context.Context, r *http.Request, cfg *config.Config) "
                                        "error {\n"),
        ("read", "/home/dev/files/internal/upload/checks.go", numbered(
            "package upload\n" + "\n" * 140 + "func validateUpload(ctx context.Context, r "
            "*http.Request, cfg *config.Config) error {\n\tif r.ContentLength > int64(cfg."
            "Limits.MaxUploadMB)<<20 {\n\t\treturn ErrTooLarge\n\t}\n\treturn nil\n}\n")),
        ("read", "/home/dev/files/internal/auth/context.go", numbered(
            "package auth\n" + "\n" * 16 + "func FromContext(ctx context.Context) *Session {\n"
            "\treturn ctx.Value(sessionKey{}).(*Session)\n}\n"))],
        report_b, "Find upload validation")
    for tid, report, agent in ((ta, report_a, "c1d2e3f4a5b6c7d80"),
                               (tb, report_b, "d9e8f7a6b5c4d3e21")):
        s.result(tid, report, tool_result={"status": "completed", "agentId": agent, "content": [
            {"type": "text", "text": report}], "totalDurationMs": 30500, "totalTokens": 15000,
            "totalToolUseCount": 3}, seconds=30)
    s.explore({f"/home/dev/files/internal/{p}.go": numbered("package x\n" + "\n".join(
        f"func step{k}() error {{ return nil }}" for k in range(40 + 3 * n)))
        for n, p in enumerate(("upload/handler", "upload/store", "upload/chunks",
                               "config/config", "auth/session", "billing/plans"))})
    s.wander(s.cwd, "internal/upload", 30)
    s.edit("/home/dev/files/config/limits.yaml", "max_upload_mb: 25\n",
           "max_upload_mb: 25\nenterprise_max_upload_mb: 100\n")
    s.edit("/home/dev/files/internal/config/limits.go",
           "\tMaxUploadMB int `yaml:\"max_upload_mb\"`\n",
           "\tMaxUploadMB int `yaml:\"max_upload_mb\"`\n\tEnterpriseMaxUploadMB int "
           "`yaml:\"enterprise_max_upload_mb\"`\n")
    s.edit("/home/dev/files/internal/upload/checks.go",
           "\tif r.ContentLength > int64(cfg.Limits.MaxUploadMB)<<20 {",
           "\tlimit := cfg.Limits.MaxUploadMB\n\tif auth.FromContext(ctx).Account.Plan == "
           "billing.PlanEnterprise {\n\t\tlimit = cfg.Limits.EnterpriseMaxUploadMB\n\t}\n\tif "
           "r.ContentLength > int64(limit)<<20 {")
    pkgs = ["internal/auth", "internal/billing", "internal/config", "internal/upload",
            "internal/upload/chunks", "internal/store", "internal/api", "internal/jobs"]
    s.bash("go test ./internal/...", go_ok(pkgs), desc="Unit tests")
    s.bash("make integration", "go test -tags integration ./integration/... -count=1\n"
           "--- FAIL: TestMain (0.00s)\n    main_test.go:22: db: dial tcp 127.0.0.1:5432: "
           "connect: connection refused\nFAIL\texample.com/files/integration\t0.031s\n"
           "make: *** [Makefile:41: integration] Error 1", exit_code=2,
           desc="Integration tests")
    s.bash("make integration", "go test -tags integration ./integration/... -count=1\n"
           "--- FAIL: TestMain (0.00s)\n    main_test.go:22: db: dial tcp 127.0.0.1:5432: "
           "connect: connection refused\nFAIL\texample.com/files/integration\t0.029s\n"
           "make: *** [Makefile:41: integration] Error 1", exit_code=2,
           desc="Integration tests (retry)")
    s.bash("docker compose up -d postgres minio", " ✔ Container files-postgres-1  Started\n"
           " ✔ Container files-minio-1     Started", desc="Start the integration services")
    runs = "".join(f"=== RUN   TestUpload{n}\n--- PASS: TestUpload{n} (0.{k}s)\n"
                   for k, n in enumerate(("Small", "Chunked", "Resume", "Quota", "Thumbs",
                                          "Delete", "Rename", "Share", "Expire")))
    fail = ("=== RUN   TestUploadEnterpriseLimit\n    upload_test.go:77: upload 80 MB as "
            "enterprise: expected status 200, got 413 Request Entity Too Large\n    "
            "upload_test.go:78: body: <html><head><title>413 Request Entity Too Large</title>"
            "</head><body><center><h1>413 Request Entity Too Large</h1></center><hr><center>"
            "nginx/1.25.4</center></body></html>\n--- FAIL: TestUploadEnterpriseLimit (2.41s)\n")
    s.bash("make integration", "go test -tags integration ./integration/... -count=1 -v\n" +
           runs + fail + runs.replace("TestUpload", "TestShare") + "FAIL\nFAIL\texample.com/"
           "files/integration\t38.112s\nmake: *** [Makefile:41: integration] Error 1",
           exit_code=2, desc="Integration tests")
    s.bash("make integration RUN=TestUploadEnterpriseLimit", "go test -tags integration "
           "./integration/... -count=1 -run TestUploadEnterpriseLimit -v\n" + fail +
           "FAIL\nFAIL\texample.com/files/integration\t3.020s", exit_code=2,
           desc="Retry the failing test alone")
    s.read("/home/dev/files/deploy/nginx.conf", numbered(
        "server {\n    listen 8080;\n" + "".join(f"    # rule {k}\n" for k in range(30)) +
        "    location /upload {\n        client_max_body_size 30m;\n        proxy_pass "
        "http://app:9000;\n    }\n}\n"))
    s.say("The 413 comes from nginx, not from the app: deploy/nginx.conf sets "
          "client_max_body_size 30m on /upload, so an 80 MB enterprise upload never reaches "
          "validateUpload(). You said not to change deploy/nginx.conf, so I've left it. How do "
          "you want to proceed?")
    s.user("Right, don't touch it. Draft a message to ops asking for client_max_body_size 110m "
           "on the /upload location, and skip that integration test for now with t.Skip "
           "pointing at OPS-88.")
    s.edit("/home/dev/files/integration/upload_test.go",
           "func TestUploadEnterpriseLimit(t *testing.T) {\n",
           "func TestUploadEnterpriseLimit(t *testing.T) {\n\tt.Skip(\"needs nginx "
           "client_max_body_size 110m on /upload, OPS-88\")\n")
    s.write("/home/dev/files/docs/ops-request-upload-limit.md",
            "Hi ops, enterprise uploads now go up to 100 MB in the app. Could you raise "
            "client_max_body_size on the /upload location of deploy/nginx.conf from 30m to "
            "110m? Tracked as OPS-88. Thanks!\n")
    s.bash("make integration", "go test -tags integration ./integration/... -count=1\n"
           "ok  \texample.com/files/integration\t41.207s", desc="Integration tests")
    s.say("Enterprise accounts get 100 MB in validateUpload() (enterprise_max_upload_mb in "
          "config/limits.yaml), everyone else keeps 25 MB. Unit and integration tests pass, "
          "with TestUploadEnterpriseLimit skipped until OPS-88 is done. The message for ops is "
          "in docs/ops-request-upload-limit.md. Nothing is committed yet.")
    s.save()
    questions("cc-upload-limit", "a Go service: two Explore subagents started in parallel, "
              "each with its own transcript, whose reports carry the facts (a config value "
              "and where, a function's location, where the plan comes from); an integration "
              "run failing on infrastructure, retried, then on a real cause outside what the "
              "user allows to change; a test skipped and a message drafted on the user's "
              "word; nothing committed.", [
                  ("goal", "What is the task?",
                   "100 MB uploads for enterprise plans only.", ["100 MB", "enterprise"]),
                  ("instruction", "What limit do other plans keep?", "25 MB.", ["25 MB"]),
                  ("instruction", "Which file must not be changed?", "deploy/nginx.conf.",
                   ["deploy/nginx.conf"]),
                  ("finding", "Where is the upload limit configured?",
                   "config/limits.yaml (max_upload_mb: 25).", ["config/limits.yaml"]),
                  ("finding", "Where are uploads validated?",
                   "validateUpload() in internal/upload/checks.go:142.",
                   ["internal/upload/checks.go"]),
                  ("finding", "How does the check know the plan?",
                   "auth.FromContext(ctx).Account.Plan.", ["auth.FromContext"]),
                  ("failure", "What status did the enterprise upload test get?",
                   "413 Request Entity Too Large.", ["413"]),
                  ("finding", "What causes the 413?",
                   "nginx client_max_body_size 30m on /upload.",
                   ["client_max_body_size 30m"]),
                  ("failure", "Why did the first integration runs fail?",
                   "Postgres was not running: connection refused on 127.0.0.1:5432.",
                   ["connection refused"]),
                  ("test", "What was done with TestUploadEnterpriseLimit?",
                   "Skipped with t.Skip pointing at OPS-88.",
                   ["TestUploadEnterpriseLimit", "OPS-88"]),
                  ("files", "Where is the message for ops?",
                   "docs/ops-request-upload-limit.md.", ["docs/ops-request-upload-limit.md"]),
                  ("asked", "What value is ops asked for?", "client_max_body_size 110m.",
                   ["110m"]),
                  ("commit", "Was anything committed?", "No.", ["Nothing is committed"]),
                  ("files", "How were the integration services started?",
                   "docker compose up -d postgres minio.", ["docker compose up -d postgres"]),
              ])


# -- 6. Codex, older format: a command that must be run a certain way (uv run), a missing
#       service started, a test failing twice for two different reasons, a rule on which
#       files may be edited, a file deleted on request, a compaction, a commit, a draft PR --

def codex_alembic() -> None:
    r = Rollout("codex-evstore-backfill", "/home/dev/evstore", "feat/events-index",
                "2026-05-18T07:30:00")
    r.message("user", "Add an index on events(created_at) and make scripts/backfill.py "
                      "idempotent. Use `uv run` for everything, never pip install into the "
                      "system python. Migrations already applied in prod (up to 0006) must "
                      "never be edited; add a new one.")
    r.shell("pytest tests/db -x", "bash: line 1: pytest: command not found\n", code=127)
    r.shell("uv run pytest tests/db -x", "============================= test session starts "
            "==============================\ncollected 31 items\n\nERROR at setup of "
            "test_insert_event\nE   sqlalchemy.exc.OperationalError: (psycopg.OperationalError)"
            " connection failed: Connection refused\nE   \tIs the server running on host "
            "\"localhost\" (127.0.0.1) and accepting TCP/IP connections on port 5433?\n"
            "!!!!!!!!!!!!!!!!!!!!!!!!!! stopping after 1 failures !!!!!!!!!!!!!!!!!!!!!!!!!!\n"
            "1 error in 0.88s\n", code=1)
    r.shell("cat docker-compose.yml && cat README.md | sed -n 1,80p", "services:\n  db:\n    "
            "image: postgres:16\n    ports: [\"5433:5432\"]\n\n" + "".join(
                f"README line {k}: evstore stores events; see docs/{k}.md\n" for k in range(70))
            + "Tests need the db service: `docker compose up -d db` first.\n")
    r.wander("evstore", 24, old=True, ext="py")
    r.shell("docker compose up -d db", " ✔ Container evstore-db-1  Started\n")
    names = [f"tests/db/test_{m}.py::test_{m}_{k}" for m in ("events", "queries", "backfill")
             for k in range(11)]
    r.shell("uv run pytest tests/db -x", "collected 31 items\n\n" + "".join(
        f"{n} PASSED\n" for n in names[:31]) + "\n31 passed in 4.12s\n")
    r.shell("ls migrations/versions && sed -n 1,60p migrations/versions/0006_events_source.py",
            "0001_init.py\n0002_users.py\n0003_events.py\n0004_event_payload_jsonb.py\n"
            "0005_sources.py\n0006_events_source.py\n\nrevision = \"0006\"\ndown_revision = "
            "\"0005\"\n\ndef upgrade():\n    op.add_column(\"events\", sa.Column(\"source\", "
            "sa.Text()))\n")
    r.shell("sed -n 1,200p scripts/backfill.py", "".join(
        f"{k:>4}  # step {k}: copy rows from legacy_events\n" for k in range(1, 60)) +
        "  60  cur.execute(\"INSERT INTO events (event_id, source, created_at) SELECT "
        "event_id, source, created_at FROM legacy_events WHERE created_at >= %s\", (since,))\n")
    r.patch("*** Begin Patch\n*** Add File: migrations/versions/0007_events_created_at_idx.py\n+"
            "revision = \"0007\"\n+down_revision = \"0006\"\n+\n+def upgrade():\n+    "
            "op.create_index(\"ix_events_created_at\", \"events\", [\"created_at\"])\n+\n+def "
            "downgrade():\n+    op.drop_index(\"ix_events_created_at\", \"events\")\n"
            "*** End Patch\n", "Success. Updated the following files:\nA migrations/versions/"
            "0007_events_created_at_idx.py\n")
    r.shell("uv run alembic upgrade head", "INFO  [alembic.runtime.migration] Context impl "
            "PostgresqlImpl.\nINFO  [alembic.runtime.migration] Running upgrade 0006 -> 0007, "
            "events created_at index\n")
    r.patch("*** Begin Patch\n*** Add File: tests/db/test_backfill_idempotent.py\n+def "
            "test_backfill_idempotent(db):\n+    run_backfill(db, since=DAY)\n+    "
            "run_backfill(db, since=DAY)\n+    assert count(db, 'events') == 1\n*** End Patch\n",
            "Success. Updated the following files:\nA tests/db/test_backfill_idempotent.py\n")
    r.shell("uv run pytest tests/db -x", "collected 32 items\n\n" + "".join(
        f"{n} PASSED\n" for n in names[:31]) + "tests/db/test_backfill_idempotent.py::"
        "test_backfill_idempotent FAILED\n\n=================================== FAILURES "
        "===================================\n__________________________ test_backfill_"
        "idempotent ___________________________\n>       assert count(db, 'events') == 1\nE"
        "       AssertionError: assert 2 == 1\n\ntests/db/test_backfill_idempotent.py:4: "
        "AssertionError\nFAILED tests/db/test_backfill_idempotent.py::test_backfill_"
        "idempotent - AssertionError: assert 2 == 1\n1 failed, 31 passed in 4.40s\n", code=1)
    r.patch("*** Begin Patch\n*** Update File: scripts/backfill.py\n@@\n-WHERE created_at >= "
            "%s\", (since,))\n+WHERE created_at >= %s ON CONFLICT (event_id) DO NOTHING\", "
            "(since,))\n*** End Patch\n",
            "Success. Updated the following files:\nM scripts/backfill.py\n")
    r.shell("uv run pytest tests/db -x -k backfill", "collected 32 items / 20 deselected / 12 "
            "selected\n\ntests/db/test_backfill_idempotent.py::test_backfill_idempotent FAILED"
            "\nE       psycopg.errors.InvalidColumnReference: there is no unique or exclusion "
            "constraint matching the ON CONFLICT specification\n\nFAILED tests/db/test_"
            "backfill_idempotent.py::test_backfill_idempotent - psycopg.errors."
            "InvalidColumnReference: there is no unique or exclusion constraint matching the "
            "ON CONFLICT specification\n1 failed, 11 passed, 20 deselected in 1.02s\n", code=1)
    r.message("assistant", "ON CONFLICT needs a unique constraint on events.event_id, which "
                           "does not exist. Migrations up to 0006 are off limits, but 0007 is "
                           "new and not applied in prod, so I'm adding the unique constraint "
                           "to 0007.")
    r.patch("*** Begin Patch\n*** Update File: migrations/versions/0007_events_created_at_idx."
            "py\n@@\n     op.create_index(\"ix_events_created_at\", \"events\", [\"created_at\"]"
            ")\n+    op.create_unique_constraint(\"uq_events_event_id\", \"events\", "
            "[\"event_id\"])\n*** End Patch\n", "Success. Updated the following files:\nM "
            "migrations/versions/0007_events_created_at_idx.py\n")
    r.shell("uv run alembic downgrade 0006 && uv run alembic upgrade head",
            "INFO  [alembic.runtime.migration] Running downgrade 0007 -> 0006\nINFO  "
            "[alembic.runtime.migration] Running upgrade 0006 -> 0007, events created_at "
            "index\n")
    r.shell("uv run pytest tests/db", "collected 32 items\n\n" + "".join(
        f"{n} PASSED\n" for n in names[:31]) + "tests/db/test_backfill_idempotent.py::"
        "test_backfill_idempotent PASSED\n\n32 passed in 4.38s\n")
    r.compacted("Task: index events(created_at) and an idempotent scripts/backfill.py. Rules: "
                "uv run for everything; never edit migrations up to 0006 (applied in prod). "
                "New migrations/versions/0007_events_created_at_idx.py (index + unique "
                "constraint on event_id); backfill uses ON CONFLICT (event_id) DO NOTHING; "
                "tests/db: 32 passed. The db service must be up (docker compose up -d db).")
    r.message("user", "Nice. Delete scripts/backfill_old.py too, nobody uses it since March.")
    r.shell("rg -n backfill_old", "")
    r.patch("*** Begin Patch\n*** Delete File: scripts/backfill_old.py\n*** End Patch\n",
            "Success. Updated the following files:\nD scripts/backfill_old.py\n")
    r.shell("uv run pytest", "collected 118 items\n\n" + "." * 118 + "\n118 passed in 9.77s\n")
    r.shell("git add -A && git commit -m \"db: index events.created_at, idempotent backfill\"",
            "[feat/events-index a91c3e0] db: index events.created_at, idempotent backfill\n 4 "
            "files changed, 41 insertions(+), 77 deletions(-)\n create mode 100644 migrations/"
            "versions/0007_events_created_at_idx.py\n create mode 100644 tests/db/test_"
            "backfill_idempotent.py\n delete mode 100644 scripts/backfill_old.py\n")
    r.message("user", "Open the PR with gh as a draft, against release/2.4, not main.")
    r.shell("git push -u origin feat/events-index && gh pr create --draft --base release/2.4 "
            "--fill", "branch 'feat/events-index' set up to track 'origin/feat/events-index'.\n"
            "\nCreating draft pull request for feat/events-index into release/2.4 in "
            "dev/evstore\n\nhttps://github.com/dev/evstore/pull/311\n")
    r.message("assistant", "Draft PR https://github.com/dev/evstore/pull/311 is open against "
                           "release/2.4 with a91c3e0. Still to do, per the runbook: run the "
                           "backfill against staging with --dry-run before anyone merges.")
    r.save()
    questions("codex-evstore-backfill", "a Codex session file in the older `shell` format: a "
              "rule on how every command is run (uv run) after a bare command failed, a "
              "database service started after a connection error, one test failing twice "
              "for two different reasons, a rule on which migrations may be edited, a file "
              "deleted on request after a `compacted` summary, a commit, a draft PR against a "
              "named base, an open step.", [
                  ("goal", "What is the task?",
                   "Index events(created_at) and make scripts/backfill.py idempotent.",
                   ["created_at", "idempotent"]),
                  ("instruction", "How must commands be run?",
                   "With uv run; never pip install into the system python.", ["uv run"]),
                  ("instruction", "Which migrations must never be edited?",
                   "Those already applied in prod, up to 0006.", ["0006"]),
                  ("files", "Which migration was added?",
                   "migrations/versions/0007_events_created_at_idx.py.",
                   ["0007_events_created_at_idx.py"]),
                  ("failure", "Why did the db tests first fail to run?",
                   "Connection refused: the db service was not running.",
                   ["Connection refused"]),
                  ("files", "How was the database started?", "docker compose up -d db.",
                   ["docker compose up -d db"]),
                  ("failure", "Why did ON CONFLICT fail at first?",
                   "No unique or exclusion constraint matching the ON CONFLICT specification.",
                   ["no unique or exclusion constraint"]),
                  ("test", "Which test checks idempotence, and how did it first fail?",
                   "test_backfill_idempotent: assert 2 == 1.",
                   ["test_backfill_idempotent", "assert 2 == 1"]),
                  ("test", "Do the tests pass now?", "Yes: 118 passed.", ["118 passed"]),
                  ("files", "Which file was deleted?", "scripts/backfill_old.py.",
                   ["scripts/backfill_old.py"]),
                  ("commit", "What was committed?", "a91c3e0.", ["a91c3e0"]),
                  ("commit", "Where is the PR, and against which branch?",
                   "Draft PR #311 against release/2.4.", ["pull/311", "release/2.4"]),
                  ("stopped", "What is still to do?",
                   "Run the backfill against staging with --dry-run.", ["--dry-run"]),
              ], fmt="codex")


# -- 7. a plan rejected with the user's reasons, a second plan approved, a standing rule on
#       output format, an edit outside the agreed scope interrupted and restored, a file
#       deleted whose importer fails at the end -------------------------------------------

def structlog_plan() -> None:
    s = Session("cc-structlog-plan", "/home/dev/syncer", "chore/structlog", "2026-05-20T15:00:00")
    s.title("structlog migration")
    s.user("Move our logging to structlog.")
    mods = [f"{pkg}/{m}.py" for pkg, ms in (
        ("cli", ("main", "commands/sync", "commands/status", "commands/prune", "legacy_log")),
        ("lib/sync", ("engine", "diff", "remote", "retry", "state")),
        ("lib/store", ("sqlite", "s3", "local")), ("lib/util", ("paths", "timing")))
        for m in ms]
    s.glob("**/*.py", mods + [f"tests/{m}" for m in mods])
    s.grep("logging\\.getLogger", "\n".join(f"{m}:{3 + k}:log = logging.getLogger(__name__)"
                                           for k, m in enumerate(mods * 3)))
    s.explore({f"/home/dev/syncer/{m}": filler_py(m[:-3].replace("/", "."), 10 + k)
               for k, m in enumerate(mods[:12])})
    s.wander(s.cwd, "cli/commands", 30)
    s.read("/home/dev/syncer/cli/legacy_log.py", numbered(
        "import logging\n\nFORMAT = '%(asctime)s %(levelname)s %(name)s: %(message)s'\n\n\n"
        "def setup(level=logging.INFO):\n    logging.basicConfig(level=level, format=FORMAT)\n"))
    tid = s.call("ExitPlanMode", {"plan": (
        "# Plan: structlog everywhere\n\n1. Add structlog\n2. Replace logging.getLogger with "
        "structlog.get_logger in all 15 modules (cli/ and lib/)\n3. Render JSON lines with "
        "structlog.processors.JSONRenderer\n4. Delete cli/legacy_log.py")})
    s.result(tid, REJECT + "Too broad. Only the cli/ package; lib/ is vendored into two other "
             "tools. And the log format must stay byte-identical: Splunk parses "
             "'%(asctime)s %(levelname)s %(name)s: %(message)s'. No JSON.", error=True)
    tid = s.call("ExitPlanMode", {"plan": (
        "# Plan: structlog in cli/ only\n\n1. poetry add structlog\n2. New cli/logsetup.py: "
        "structlog with a stdlib ProcessorFormatter that renders exactly "
        "'%(asctime)s %(levelname)s %(name)s: %(message)s'\n3. Use it in cli/main.py and "
        "cli/commands/*\n4. Delete cli/legacy_log.py\n5. A test that pins the format")})
    s.result(tid, "User has approved your plan. You can now start coding.",
             tool_result={"plan": "approved"})
    s.todos([("Add structlog with poetry", "in_progress"), ("Write cli/logsetup.py", "pending"),
             ("Switch cli/main.py and cli/commands/* to it", "pending"),
             ("Delete cli/legacy_log.py", "pending"), ("Pin the format in a test", "pending")])
    s.bash("poetry add structlog@^24.1", "Using version ^24.1.0 for structlog\n\nUpdating "
           "dependencies\nResolving dependencies... (0.9s)\n\nPackage operations: 1 install, 0 "
           "updates, 0 removals\n\n  - Installing structlog (24.1.0)\n\nWriting lock file",
           desc="Add structlog")
    s.write("/home/dev/syncer/cli/logsetup.py",
            "import logging\n\nimport structlog\n\nFORMAT = '%(asctime)s %(levelname)s "
            "%(name)s: %(message)s'\n\n\ndef setup(level=logging.INFO):\n    handler = "
            "logging.StreamHandler()\n    handler.setFormatter(structlog.stdlib."
            "ProcessorFormatter(processor=structlog.dev.ConsoleRenderer()))\n")
    for m in ("main", "commands/sync", "commands/status", "commands/prune"):
        s.edit(f"/home/dev/syncer/cli/{m}.py", "log = logging.getLogger(__name__)",
               "log = structlog.get_logger(__name__)")
    s.write("/home/dev/syncer/tests/cli/test_log_format.py",
            "def test_format_unchanged(caplog_text):\n    setup()\n    structlog.get_logger("
            "'cli.main').info('started')\n    assert caplog_text() == '2026-04-20 10:00:00,000 "
            "INFO cli.main: started'\n")
    s.bash("pytest tests/cli -q", "." * 57 + "F\n=================================== FAILURES "
           "===================================\n____________________________ test_format_"
           "unchanged _____________________________\n>       assert caplog_text() == "
           "'2026-04-20 10:00:00,000 INFO cli.main: started'\nE       AssertionError: assert "
           "'2026-04-20 10:00:00 [info     ] started' == '2026-04-20 10:00:00,000 INFO "
           "cli.main: started'\n\ntests/cli/test_log_format.py:4: AssertionError\nFAILED tests/"
           "cli/test_log_format.py::test_format_unchanged - AssertionError\n1 failed, 57 passed "
           "in 2.31s", exit_code=1, desc="CLI tests")
    s.say("ConsoleRenderer has its own layout. I'll hand the event to the stdlib formatter "
          "instead, with FORMAT, so the line is byte-identical to the old one.")
    s.edit("/home/dev/syncer/cli/logsetup.py",
           "processor=structlog.dev.ConsoleRenderer()))",
           "processor=structlog.stdlib.render_to_log_kwargs, fmt=FORMAT))")
    s.bash("pytest tests/cli -q", "." * 58 + "\n58 passed in 2.20s", desc="CLI tests")
    s.read("/home/dev/syncer/lib/sync/engine.py", filler_py("lib.sync.engine", 20))
    tid = s.call("Edit", {"file_path": "/home/dev/syncer/lib/sync/engine.py",
                          "old_string": "log = logging.getLogger(__name__)",
                          "new_string": "log = structlog.get_logger(__name__)"})
    s.result(tid, INTERRUPTED, error=True)
    s.interrupt()
    s.user("No. lib/ stays on stdlib logging, I said cli/ only. Undo anything you did there.")
    s.bash("git status --short lib/ && git restore lib/sync/engine.py && git status --short "
           "lib/", " M lib/sync/engine.py\n", desc="Restore lib/sync/engine.py")
    s.say("Restored lib/sync/engine.py; lib/ is untouched now. Back to cli/ only.")
    s.bash("git rm cli/legacy_log.py", "rm 'cli/legacy_log.py'", desc="Delete the old helper")
    s.bash("pytest -q", "." * 140 + "F" + "." * 37 + "\n=================================== "
           "FAILURES ===================================\n_____________________________ "
           "test_examples_run ______________________________\n    def test_examples_run():\n"
           ">       runpy.run_path('docs/examples/logging.py')\n\ndocs/examples/logging.py:1: "
           "in <module>\n    from cli.legacy_log import setup\nE   ModuleNotFoundError: No "
           "module named 'cli.legacy_log'\n\ntests/test_docs.py:12: ModuleNotFoundError\n"
           "FAILED tests/test_docs.py::test_examples_run - ModuleNotFoundError: No module named "
           "'cli.legacy_log'\n1 failed, 177 passed in 8.02s", exit_code=1, desc="All tests")
    s.say("One failure left: tests/test_docs.py::test_examples_run, because docs/examples/"
          "logging.py still imports cli.legacy_log, which I deleted. Next I'll point that "
          "example at cli.logsetup and re-run the whole suite; nothing is committed yet.")
    s.save()
    questions("cc-structlog-plan", "a Python CLI: a plan-mode plan rejected with the user's "
              "reasons (scope and a byte-identical log format), a second plan approved, a "
              "todo list, a format test red then green, an edit outside the agreed scope "
              "interrupted by the user and restored with git restore, a file deleted whose "
              "remaining importer fails at the end.", [
                  ("goal", "What is the task, and in which scope?",
                   "Move logging to structlog, only in the cli/ package.",
                   ["structlog", "cli/"]),
                  ("rejected", "Why was the first plan rejected?",
                   "Too broad (lib/ is vendored into two other tools); the format must stay "
                   "byte-identical for Splunk; no JSON.", ["Splunk"]),
                  ("instruction", "Which log format must be kept?",
                   "'%(asctime)s %(levelname)s %(name)s: %(message)s', byte-identical.",
                   ["%(asctime)s %(levelname)s %(name)s: %(message)s"]),
                  ("instruction", "What must stay on stdlib logging?", "lib/.",
                   ["lib/ stays on stdlib logging"]),
                  ("files", "Which file was created for the setup?", "cli/logsetup.py.",
                   ["cli/logsetup.py"]),
                  ("files", "Which file was deleted?", "cli/legacy_log.py.",
                   ["cli/legacy_log.py"]),
                  ("revert", "Which file was restored, and how?",
                   "lib/sync/engine.py with git restore.", ["git restore lib/sync/engine.py"]),
                  ("failure", "What fails now?",
                   "tests/test_docs.py::test_examples_run: No module named 'cli.legacy_log'.",
                   ["test_examples_run", "No module named 'cli.legacy_log'"]),
                  ("test", "Which test failed first and is fixed now?",
                   "test_format_unchanged.", ["test_format_unchanged"]),
                  ("stopped", "What is the next step?",
                   "Point docs/examples/logging.py at cli.logsetup and re-run the suite.",
                   ["docs/examples/logging.py"]),
                  ("files", "How was structlog added?", "poetry add structlog@^24.1.",
                   ["poetry add structlog"]),
                  ("plan", "What does the approved plan use to keep the format?",
                   "A stdlib ProcessorFormatter.", ["ProcessorFormatter"]),
                  ("commit", "Was anything committed?", "No.", ["nothing is committed"]),
              ])


if __name__ == "__main__":
    orders_archive()
    leak_journal()
    datefns_compactions()
    codex_rust_json()
    upload_limit_subagents()
    codex_alembic()
    structlog_plan()
    for name, spec in QUESTIONS.items():
        with open(HERE / f"{name}.json", "w", encoding="utf-8") as out:
            out.write(json.dumps(spec, indent=2, ensure_ascii=False) + "\n")
