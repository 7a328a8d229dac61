"""Writes the SYNTHETIC blind recall set: transcripts/ and the question files (see README.md).

These sessions never happened: they were written by hand for this check, in the record
formats of the real Claude Code transcripts under tests/data/claude-code/transcripts (and
their `<session>/subagents/agent-<id>.jsonl` files) and of the Codex session files under
tests/data/codex/sessions. The questions were written together with the sessions, before
the digest was run on any of them. Run `python tests/data/recall-blind/generate.py` to
rewrite everything; the output is fixed.
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
        self.sid = sid or str(uuid.uuid5(uuid.NAMESPACE_URL, "blind/" + name))
        self.agent = agent
        self.t = datetime.fromisoformat(start)
        self.parent: str | None = None
        self.records: list[dict] = []
        self.n = 0

    def _id(self, tag: str) -> str:
        self.n += 1
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"blind/{self.name}/{tag}/{self.n}"))

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


QUESTIONS: dict[str, dict] = {}


def questions(name: str, note: str, items: list[tuple[str, str, str, list[str]]], *,
              fmt: str | None = None, earlier: list[str] | None = None) -> None:
    spec: dict = {"transcript": f"recall-blind/transcripts/{name}.jsonl"}
    if fmt:
        spec["format"] = fmt
    if earlier:
        spec["earlier"] = [f"recall-blind/transcripts/{e}.jsonl" for e in earlier]
    spec["source_note"] = "SYNTHETIC (written for the blind check, not a real session); " + note
    spec["questions"] = [{"id": f"q{n}", "category": cat, "question": q, "answer": a,
                          "must_contain": must}
                         for n, (cat, q, a, must) in enumerate(items, 1)]
    QUESTIONS[name] = spec


# -- 1. requests that override earlier ones, a file created then deleted, a revert, an
#       approach abandoned with its reason, red -> green -> red, an interrupt at the end ----

def cache_override() -> None:
    s = Session("cc-cache-override", "/home/dev/quotes-api", "feat/cache", "2026-04-02T09:00:00")
    s.title("Cache quote lookups")
    s.user("Quote lookups in quotes/service.py are slow. Add a Redis cache in front of "
           "get_quote() with a 60 second TTL. Do not change the public signature of "
           "get_quote().")
    s.say("I'll read the service first.")
    s.read("/home/dev/quotes-api/quotes/service.py",
           "def get_quote(symbol: str) -> Quote:\n    return _fetch(symbol)\n\n"
           "def get_quotes_bulk(symbols: list[str]) -> list[Quote]:\n"
           "    return [_fetch(s) for s in symbols]\n\n"
           "def update_quote(symbol: str, price: float) -> None:\n    _store(symbol, price)\n")
    s.write("/home/dev/quotes-api/quotes/redis_client.py",
            "import redis\n\nclient = redis.Redis.from_url(settings.REDIS_URL)\n")
    s.edit("/home/dev/quotes-api/quotes/settings.py", "DEBUG = False",
           "DEBUG = False\nREDIS_URL = \"redis://localhost:6379/0\"")
    s.edit("/home/dev/quotes-api/quotes/service.py",
           "def get_quote(symbol: str) -> Quote:\n    return _fetch(symbol)",
           "def get_quote(symbol: str) -> Quote:\n    cached = client.get(symbol)\n"
           "    if cached:\n        return Quote.parse(cached)\n    return _fetch(symbol)")
    s.bash("uv run pytest -q",
           "......F.................\n" + "=" * 30 + " FAILURES " + "=" * 30 + "\n"
           "_________________ test_get_quote_hits_cache _________________\n"
           "E   redis.exceptions.ConnectionError: Error 111 connecting to localhost:6379. "
           "ConnectionRefusedError: [Errno 111] Connection refused\n"
           "=========================== short test summary info ===========================\n"
           "FAILED tests/test_service.py::test_get_quote_hits_cache - redis.exceptions."
           "ConnectionError: Error 111 connecting to localhost:6379.\n1 failed, 23 passed in "
           "1.92s", exit_code=1, desc="Run the tests")
    s.user("Actually, don't use Redis: we can't add infrastructure for this. Use an "
           "in-process cache instead (cachetools TTLCache), and keep the TTL at 300 seconds, "
           "not 60.")
    s.say("Understood: no Redis. I'll remove the client and the setting and use a TTLCache.")
    s.bash("rm quotes/redis_client.py", "", desc="Remove the Redis client")
    s.bash("git checkout -- quotes/settings.py", "", desc="Drop the REDIS_URL setting")
    s.edit("/home/dev/quotes-api/quotes/service.py",
           "    cached = client.get(symbol)\n    if cached:\n        return Quote.parse(cached)\n"
           "    return _fetch(symbol)",
           "    return _cached_fetch(symbol)\n\n\n_cache = TTLCache(maxsize=1024, ttl=300)\n\n\n"
           "@cached(_cache)\ndef _cached_fetch(symbol: str) -> Quote:\n    return _fetch(symbol)")
    s.edit("/home/dev/quotes-api/pyproject.toml", "dependencies = [\n",
           "dependencies = [\n    \"cachetools>=5.3\",\n")
    s.bash("uv run pytest -q", "........................\n24 passed in 1.41s",
           desc="Run the tests")
    s.say("Now a test that an entry expires after the TTL. I'll freeze time with freezegun.")
    s.edit("/home/dev/quotes-api/tests/test_service.py", "# ttl tests",
           "@freeze_time(\"2026-04-02 09:00\")\ndef test_entry_expires(frozen):\n"
           "    get_quote(\"ACME\")\n    frozen.tick(301)\n    assert fetch_calls() == 2")
    s.bash("uv run pytest -q tests/test_service.py::test_entry_expires",
           "F\n" + "=" * 30 + " FAILURES " + "=" * 30 + "\n"
           "_____________________ test_entry_expires _____________________\n"
           "E   assert 1 == 2\n"
           "FAILED tests/test_service.py::test_entry_expires - assert 1 == 2\n1 failed in "
           "0.31s", exit_code=1, desc="Run the new test")
    s.say("Freezing time with freezegun does not work here: cachetools' TTLCache reads "
          "time.monotonic, which freezegun does not patch. I'll drop freezegun and give the "
          "cache a fake timer in the test instead.")
    s.edit("/home/dev/quotes-api/tests/test_service.py",
           "@freeze_time(\"2026-04-02 09:00\")\ndef test_entry_expires(frozen):",
           "def test_entry_expires(fake_timer):")
    s.edit("/home/dev/quotes-api/quotes/service.py", "_cache = TTLCache(maxsize=1024, ttl=300)",
           "_cache = TTLCache(maxsize=1024, ttl=300, timer=_timer)")
    s.bash("uv run pytest -q", ".........................\n25 passed in 1.38s",
           desc="Run the tests")
    s.bash("git add -A && git commit -m \"service: cache get_quote in-process (TTL 300s)\"",
           "[feat/cache 5e8a0b2] service: cache get_quote in-process (TTL 300s)\n 3 files "
           "changed, 31 insertions(+), 2 deletions(-)", desc="Commit")
    s.user("Also cache get_quotes_bulk() the same way.")
    s.edit("/home/dev/quotes-api/quotes/service.py",
           "    return [_fetch(s) for s in symbols]",
           "    return [_cached_fetch(s) for s in symbols]")
    s.bash("uv run pytest -q",
           "..........F...............\n" + "=" * 30 + " FAILURES " + "=" * 30 + "\n"
           "__________ test_bulk_returns_fresh_after_update __________\n"
           "E   assert 101.5 == 99.0\n"
           "=========================== short test summary info ===========================\n"
           "FAILED tests/test_service.py::test_bulk_returns_fresh_after_update - assert 101.5 "
           "== 99.0\n1 failed, 25 passed in 1.44s", exit_code=1, desc="Run the tests")
    s.say("test_bulk_returns_fresh_after_update fails: after update_quote() the bulk call "
          "still returns the cached price. I'll lower the TTL for bulk lookups.")
    tid = s.call("Edit", {"file_path": "/home/dev/quotes-api/quotes/service.py",
                          "old_string": "ttl=300", "new_string": "ttl=5"})
    s.result(tid, INTERRUPTED, error=True, tool_result="User rejected tool use")
    s.interrupt()
    s.user("Stop there. Invalidate the bulk cache when update_quote() is called, don't just "
           "lower the TTL.")
    s.save()
    questions("cc-cache-override", "a Python service: a Redis cache asked for, then replaced by "
              "the user with an in-process cache; a file created then deleted; a git checkout "
              "revert; freezegun tried and abandoned with its reason; tests red, green, red "
              "again; a commit; an edit interrupted by the user, whose last words say what to "
              "do instead.", [
                  ("goal", "What kind of cache must be built now?",
                   "An in-process cachetools TTLCache (not Redis).", ["cachetools TTLCache"]),
                  ("asked", "What did the user reject, and why?",
                   "Redis: they can't add infrastructure for this.",
                   ["don't use Redis", "infrastructure"]),
                  ("instruction", "What TTL must the cache use?", "300 seconds, not 60.",
                   ["300 seconds"]),
                  ("instruction", "What must not change?",
                   "The public signature of get_quote().", ["public signature"]),
                  ("asked", "What did the user ask last?",
                   "Invalidate the bulk cache when update_quote() is called, not lower the TTL.",
                   ["Invalidate the bulk cache", "update_quote()"]),
                  ("asked", "Which second function was to be cached?", "get_quotes_bulk().",
                   ["get_quotes_bulk()"]),
                  ("test", "Which test fails now?", "test_bulk_returns_fresh_after_update.",
                   ["test_bulk_returns_fresh_after_update"]),
                  ("failure", "Why does it fail?",
                   "assert 101.5 == 99.0: the bulk call returns the stale cached price.",
                   ["assert 101.5 == 99.0"]),
                  ("commit", "What was committed?",
                   "5e8a0b2 service: cache get_quote in-process (TTL 300s).", ["5e8a0b2"]),
                  ("files", "Which file was created and then deleted?",
                   "quotes/redis_client.py.", ["quotes/redis_client.py", "deleted"]),
                  ("revert", "How was the Redis setting undone?",
                   "git checkout -- quotes/settings.py.",
                   ["git checkout -- quotes/settings.py"]),
                  ("rejected", "What approach to testing expiry was abandoned, and why?",
                   "freezegun: TTLCache reads time.monotonic, which freezegun does not patch.",
                   ["freezegun", "time.monotonic"]),
                  ("failure", "What failed while Redis was used?",
                   "test_get_quote_hits_cache: Connection refused to localhost:6379.",
                   ["Connection refused"]),
                  ("stopped", "Where did the work stop?",
                   "The user interrupted the Edit lowering the TTL to 5.", ["interrupted"]),
                  ("files", "Which files were changed?",
                   "quotes/service.py, tests/test_service.py, pyproject.toml.",
                   ["quotes/service.py", "tests/test_service.py", "pyproject.toml"]),
              ])


# -- 2. a subagent whose result carries the key finding, a revert tried and aborted, a long
#       output whose failure is in the middle, MultiEdit, WebFetch ---------------------------

def bisect_subagent() -> None:
    s = Session("cc-bisect-subagent", "/home/dev/tilestore", "perf/encode", "2026-04-03T13:30:00")
    s.user("`go test -bench=BenchmarkEncode ./codec` got 3x slower since v1.8.0. Find the "
           "commit that caused it and fix it. Don't touch the wire format: old clients must "
           "still decode tiles.")
    s.bash("go test -run '^$' -bench=BenchmarkEncode ./codec",
           "goos: linux\ngoarch: amd64\npkg: github.com/acme/tilestore/codec\n"
           "BenchmarkEncode-8   \t    1204\t    982311 ns/op\t  412 allocs/op\nPASS\n"
           "ok  \tgithub.com/acme/tilestore/codec\t2.361s", desc="Benchmark Encode")
    task = s.call("Task", {"description": "Bisect the encode regression",
                           "prompt": "Run git bisect between v1.8.0 (good) and HEAD (bad) on "
                                     "/home/dev/tilestore, judging each commit by "
                                     "BenchmarkEncode in ./codec (bad above 600000 ns/op). "
                                     "Report the first bad commit and what it changed.",
                           "subagent_type": "general-purpose"})
    agent = "a5c81d0e2b7f94416"
    sub = Session("cc-bisect-subagent/subagents/agent-" + agent, s.cwd, s.branch,
                  "2026-04-03T13:30:40", sid=s.sid, agent=agent)
    sub.user("Run git bisect between v1.8.0 (good) and HEAD (bad) on /home/dev/tilestore, "
             "judging each commit by BenchmarkEncode in ./codec (bad above 600000 ns/op). "
             "Report the first bad commit and what it changed.")
    sub.bash("git bisect start HEAD v1.8.0",
             "Bisecting: 6 revisions left to test after this (roughly 3 steps)\n"
             "[77ab310] wire: document the header layout")
    sub.bash("git bisect run ./scripts/bench-gate.sh 600000",
             "running  './scripts/bench-gate.sh' '600000'\nBenchmarkEncode-8  3650  "
             "320114 ns/op\nBisecting: 3 revisions left to test after this (roughly 2 steps)\n"
             "running  './scripts/bench-gate.sh' '600000'\nBenchmarkEncode-8  1190  "
             "979004 ns/op\nBisecting: 0 revisions left to test after this (roughly 1 step)\n"
             "3d9f1c7 is the first bad commit\ncommit 3d9f1c7\n    codec: encode tiles through "
             "encoding/json for debuggability\n\n codec/encode.go | 58 ++++-----\n"
             "bisect found first bad commit")
    sub.bash("git bisect reset", "Previous HEAD position was 3d9f1c7\nSwitched to branch "
             "'perf/encode'")
    sub.say("The first bad commit is 3d9f1c7 (codec: encode tiles through encoding/json for "
            "debuggability). It replaced the hand-written encoder with json.Marshal on every "
            "tile; allocations went from 12 to 412 per op.")
    meta = sub.save().with_suffix(".meta.json")
    meta.write_text(json.dumps({"agentType": "general-purpose",
                                "description": "Bisect the encode regression"}) + "\n",
                    encoding="utf-8")
    s.result(task, "The first bad commit is 3d9f1c7 (codec: encode tiles through encoding/json "
             "for debuggability). It replaced the hand-written encoder with json.Marshal on "
             "every tile; allocations went from 12 to 412 per op.",
             tool_result={"status": "completed", "agentId": agent, "content": [
                 {"type": "text", "text": "The first bad commit is 3d9f1c7 (codec: encode "
                  "tiles through encoding/json for debuggability). It replaced the "
                  "hand-written encoder with json.Marshal on every tile; allocations went "
                  "from 12 to 412 per op."}],
                 "totalDurationMs": 61234, "totalTokens": 18211, "totalToolUseCount": 3},
             seconds=60)
    tid = s.call("WebFetch", {"url": "https://github.com/acme/tilestore/issues/212",
                              "prompt": "Why was JSON encoding added to the codec?"})
    s.result(tid, "Issue #212 asks for a human-readable view of tiles on the /debug/tiles "
             "endpoint. The maintainers agreed JSON is only needed there.",
             tool_result={"bytes": 48211, "code": 200, "codeText": "OK",
                          "result": "Issue #212 asks for a human-readable view of tiles on the "
                                    "/debug/tiles endpoint.", "durationMs": 1410,
                          "url": "https://github.com/acme/tilestore/issues/212"})
    s.bash("git revert --no-edit 3d9f1c7",
           "Auto-merging codec/encode.go\nCONFLICT (content): Merge conflict in codec/debug.go\n"
           "error: could not revert 3d9f1c7... codec: encode tiles through encoding/json for "
           "debuggability\nhint: after resolving the conflicts, mark the corrected paths",
           exit_code=1, desc="Revert the bad commit")
    s.bash("git revert --abort", "", desc="Abort the revert")
    s.say("Reverting 3d9f1c7 conflicts with codec/debug.go, which later commits built on, so I "
          "aborted the revert. I'll restore the hand-written encoder in codec/encode.go by "
          "hand and keep json.Marshal only for the /debug/tiles view that issue #212 needs.")
    s.multi_edit("/home/dev/tilestore/codec/encode.go", [
        ("func Encode(t *Tile) ([]byte, error) {\n\treturn json.Marshal(t)\n}",
         "func Encode(t *Tile) ([]byte, error) {\n\tbuf := make([]byte, 0, t.Size())\n"
         "\treturn appendTile(buf, t), nil\n}"),
        ("import \"encoding/json\"\n", ""),
    ])
    s.bash("go test -run '^$' -bench=BenchmarkEncode ./codec",
           "BenchmarkEncode-8   \t    3671\t    318877 ns/op\t   12 allocs/op\nPASS\n"
           "ok  \tgithub.com/acme/tilestore/codec\t2.104s", desc="Benchmark Encode")
    passing = "".join(f"=== RUN   TestCase{n:03d}\n--- PASS: TestCase{n:03d} (0.00s)\n"
                      for n in range(1, 91))
    more = "".join(f"=== RUN   TestWire{n:03d}\n--- PASS: TestWire{n:03d} (0.00s)\n"
                   for n in range(1, 81))
    s.bash("go test -v ./...",
           passing + "=== RUN   TestDecodeV17Fixture\n    compat_test.go:31: decode: unexpected "
           "field tag 0x1f at offset 64\n--- FAIL: TestDecodeV17Fixture (0.00s)\n" + more +
           "FAIL\nFAIL\tgithub.com/acme/tilestore/codec\t0.412s\n"
           "ok  \tgithub.com/acme/tilestore/wire\t0.120s\nFAIL", exit_code=1,
           desc="Run all tests verbosely")
    s.say("Encode is back to 318877 ns/op (12 allocs/op), but TestDecodeV17Fixture now fails: "
          "the restored encoder writes the tile header in the v1.9 order, so v1.7 tiles no "
          "longer decode. I have not committed anything; next I will write the header in the "
          "v1.7 order again.")
    s.save()
    questions("cc-bisect-subagent", "a Go library: a benchmark regression bisected by a Task "
              "subagent (its own transcript under subagents/), whose result names the bad "
              "commit; a WebFetch of an issue; a git revert that conflicts and is aborted; a "
              "MultiEdit; a verbose test run whose one failure sits in the middle of a long "
              "output; nothing committed.", [
                  ("goal", "What is the task?",
                   "Find and fix the 3x BenchmarkEncode regression since v1.8.0.",
                   ["BenchmarkEncode", "v1.8.0"]),
                  ("instruction", "What must not change?", "The wire format.", ["wire format"]),
                  ("finding", "Which commit caused the regression?",
                   "3d9f1c7 codec: encode tiles through encoding/json for debuggability.",
                   ["3d9f1c7"]),
                  ("finding", "Why is it slower?",
                   "json.Marshal on every tile: 412 allocs/op instead of 12.",
                   ["json.Marshal"]),
                  ("test", "What were the benchmark figures before and after the fix?",
                   "982311 ns/op before, 318877 ns/op after.",
                   ["982311 ns/op", "318877 ns/op"]),
                  ("rejected", "What was tried and abandoned, and why?",
                   "git revert of 3d9f1c7: it conflicts in codec/debug.go; aborted.",
                   ["revert", "codec/debug.go"]),
                  ("decision", "Where is json.Marshal still kept, and why?",
                   "For the /debug/tiles view, which issue #212 needs.",
                   ["/debug/tiles"]),
                  ("test", "Which test fails now?", "TestDecodeV17Fixture.",
                   ["TestDecodeV17Fixture"]),
                  ("failure", "What is its error?",
                   "decode: unexpected field tag 0x1f at offset 64.",
                   ["unexpected field tag 0x1f"]),
                  ("files", "Which file was changed?", "codec/encode.go.", ["codec/encode.go"]),
                  ("commit", "Was anything committed?", "No.", ["not committed"]),
                  ("finding", "How was the bad commit found?", "git bisect (by a subagent).",
                   ["bisect"]),
                  ("stopped", "What is the next step?",
                   "Write the tile header in the v1.7 order again.", ["v1.7 order"]),
              ])


# -- 3. a very long pasted log, a long build output with the cause in the middle, work in a
#       second repository (cwd changes), a commit moved off main with git reset ---------------

def ci_two_repos() -> None:
    s = Session("cc-ci-two-repos", "/home/dev/packer", "ci/fix-release", "2026-04-06T10:00:00")
    noise = "".join(f"[{n:3d}/212] Building C object src/CMakeFiles/packer.dir/part{n:03d}.c.o\n"
                    for n in range(1, 150))
    tail = "".join(f"[{n:3d}/212] Building C object tests/CMakeFiles/t{n:03d}.dir/main.c.o\n"
                   for n in range(150, 212))
    log = ("2026-04-05T23:10:02Z ##[group]Run cmake --build build-rel\n" + noise +
           "[150/212] Linking C executable packer\n"
           "/usr/bin/ld: libpacker.a(stream.o): in function `packer_flush':\n"
           "stream.c:(.text+0x1a4): undefined reference to `ZSTD_compressStream2'\n"
           "collect2: error: ld returned 1 exit status\n" + tail +
           "gmake: *** [Makefile:146: all] Error 2\n##[error]Process completed with exit "
           "code 2.\n")
    s.user("CI fails on the release build only. Here's the log:\n```\n" + log + "```\nFix it "
           "without bumping the minimum CMake version (3.16).")
    s.bash("cmake -S . -B build-rel -DCMAKE_BUILD_TYPE=Release && cmake --build build-rel",
           "-- Configuring done (0.4s)\n-- Generating done (0.0s)\n" + noise +
           "[150/212] Linking C executable packer\n/usr/bin/ld: libpacker.a(stream.o): in "
           "function `packer_flush':\nstream.c:(.text+0x1a4): undefined reference to "
           "`ZSTD_compressStream2'\ncollect2: error: ld returned 1 exit status\n" + tail +
           "gmake: *** [Makefile:146: all] Error 2", exit_code=2, desc="Release build")
    s.read("/home/dev/packer/CMakeLists.txt",
           "cmake_minimum_required(VERSION 3.16)\nadd_subdirectory(../zstd-vendor/build/cmake "
           "zstd)\ntarget_link_libraries(packer PRIVATE zstd::libzstd_shared)\n")
    s.say("The release build links the vendored zstd from ../zstd-vendor statically, but its "
          "CMake only exports zstd::libzstd_shared. I'll add a static target there first.")
    s.cwd = "/home/dev/zstd-vendor"
    s.branch = "main"
    s.bash("cd /home/dev/zstd-vendor && git log --oneline -2",
           "2c7d915 Update to zstd 1.5.6\n91be0a3 Import zstd 1.5.5")
    s.edit("/home/dev/zstd-vendor/build/cmake/CMakeLists.txt",
           "add_library(zstd::libzstd_shared ALIAS libzstd_shared)",
           "add_library(zstd::libzstd_shared ALIAS libzstd_shared)\n"
           "add_library(zstd::libzstd_static ALIAS libzstd_static)")
    s.bash("git commit -am \"cmake: export libzstd_static target\"",
           "[main 8b41f0e] cmake: export libzstd_static target\n 1 file changed, 1 "
           "insertion(+)", desc="Commit in zstd-vendor")
    s.cwd = "/home/dev/packer"
    s.branch = "ci/fix-release"
    s.edit("/home/dev/packer/CMakeLists.txt",
           "target_link_libraries(packer PRIVATE zstd::libzstd_shared)",
           "target_link_libraries(packer PRIVATE zstd::libzstd_static)")
    s.bash("cd /home/dev/packer && cmake --build build-rel",
           tail + "[212/212] Linking C executable packer\n[100%] Built target packer",
           desc="Release build")
    s.bash("ctest --test-dir build-rel --output-on-failure",
           "Test project /home/dev/packer/build-rel\n" +
           "".join(f"{n:2d}/14 Test #{n:2d}: case_{n:02d} .........   Passed    0.0{n % 9} sec\n"
                   for n in range(1, 14)) +
           "14/14 Test #14: fuzz_smoke .......***Timeout  60.01 sec\n\n93% tests passed, 1 "
           "tests failed out of 14\n\nTotal Test time (real) =  60.44 sec\n\nThe following "
           "tests FAILED:\n\t 14 - fuzz_smoke (Timeout)\nErrors while running CTest",
           exit_code=8, desc="Run the tests")
    s.user("fuzz_smoke times out on CI too, it's a known flake, ignore it. But don't commit to "
           "zstd-vendor's main branch directly, put it on a branch.")
    s.cwd = "/home/dev/zstd-vendor"
    s.branch = "main"
    s.bash("cd /home/dev/zstd-vendor && git branch export-static && git reset --hard HEAD~1",
           "HEAD is now at 2c7d915 Update to zstd 1.5.6", desc="Move the commit to a branch")
    s.bash("git switch export-static", "Switched to branch 'export-static'")
    s.branch = "export-static"
    s.cwd = "/home/dev/packer"
    s.branch = "ci/fix-release"
    s.bash("cd /home/dev/packer && git commit -am \"link the static zstd target in release "
           "builds\"", "[ci/fix-release e41a7c2] link the static zstd target in release builds"
           "\n 1 file changed, 1 insertion(+), 1 deletion(-)", desc="Commit in packer")
    s.say("packer's release build links again (e41a7c2). The zstd-vendor change (8b41f0e) is "
          "now on its branch export-static, no longer on main. Next step: open a pull request "
          "for export-static in zstd-vendor.")
    s.save()
    questions("cc-ci-two-repos", "a C project built with CMake: a very long pasted CI log "
              "whose cause sits in its middle, the same in a long build output; work in a "
              "second repository (the records' cwd changes), a commit there moved off main "
              "with git branch + git reset --hard; a ctest timeout the user calls a known "
              "flake; commits in both repositories.", [
                  ("goal", "What is the task?", "Fix the CI failure of the release build.",
                   ["release build"]),
                  ("failure", "What was the root cause of the failure?",
                   "undefined reference to ZSTD_compressStream2 at link time.",
                   ["ZSTD_compressStream2"]),
                  ("instruction", "What must not be bumped?",
                   "The minimum CMake version, 3.16.", ["3.16"]),
                  ("files", "Which other repository was worked in?", "/home/dev/zstd-vendor.",
                   ["/home/dev/zstd-vendor"]),
                  ("files", "Which file changed in that repository?",
                   "build/cmake/CMakeLists.txt.",
                   ["zstd-vendor/build/cmake/CMakeLists.txt"]),
                  ("instruction", "What did the user forbid about the vendor repository?",
                   "Committing to zstd-vendor's main branch directly.",
                   ["don't commit to zstd-vendor's main branch"]),
                  ("test", "Which test fails now, and does it matter?",
                   "fuzz_smoke times out; the user says it is a known flake.",
                   ["fuzz_smoke", "known flake"]),
                  ("commit", "Which commits were made?",
                   "e41a7c2 in packer, 8b41f0e in zstd-vendor (now on export-static).",
                   ["e41a7c2", "8b41f0e"]),
                  ("revert", "How was the vendor commit taken off main?",
                   "git branch export-static && git reset --hard HEAD~1.",
                   ["git reset --hard HEAD~1"]),
                  ("commit", "Which branch holds the vendor change?", "export-static.",
                   ["export-static"]),
                  ("stopped", "What is the next step?",
                   "Open a pull request for export-static in zstd-vendor.",
                   ["pull request for export-static"]),
                  ("decision", "What does packer link against now?", "zstd::libzstd_static.",
                   ["zstd::libzstd_static"]),
                  ("test", "How many tests fail out of how many?", "1 of 14.",
                   ["1 tests failed out of 14"]),
              ])


# -- 4. French prompts, NotebookEdit, MultiEdit, three todo lists, a denied WebFetch --------

def notebook_french() -> None:
    s = Session("cc-notebook-fr", "/home/camille/churn-analysis", "main", "2026-04-07T08:30:00")
    s.user("Ajoute une analyse de rétention par cohorte mensuelle dans "
           "notebooks/retention.ipynb. Ne modifie jamais data/raw/clients.csv : c'est l'export "
           "brut du CRM.")
    s.say("D'accord. Je commence par regarder les données.")
    s.todos([("Charger les données clients", "in_progress"),
             ("Calculer les cohortes mensuelles", "pending"),
             ("Tracer la courbe de rétention", "pending")])
    s.read("/home/camille/churn-analysis/data/raw/clients.csv",
           "client_id,signup_date,last_order_date,plan\n1,2025-01-04,2025-06-30,pro\n")
    s.notebook("/home/camille/churn-analysis/notebooks/retention.ipynb", "cell-3",
               "df['cohorte'] = df['date_inscription'].dt.to_period('M')", mode="insert")
    s.bash("uv run jupyter nbconvert --execute --to notebook --inplace "
           "notebooks/retention.ipynb",
           "[NbConvertApp] Converting notebook notebooks/retention.ipynb to notebook\n"
           "Traceback (most recent call last):\n  Cell In[3], line 1\n"
           "----> 1 df['cohorte'] = df['date_inscription'].dt.to_period('M')\n"
           "KeyError: 'date_inscription'", exit_code=1, desc="Exécuter le notebook")
    s.say("La colonne s'appelle signup_date, pas date_inscription. Je corrige la cellule.")
    s.notebook("/home/camille/churn-analysis/notebooks/retention.ipynb", "cell-3",
               "df['cohorte'] = pd.to_datetime(df['signup_date']).dt.to_period('M')")
    s.bash("uv run jupyter nbconvert --execute --to notebook --inplace "
           "notebooks/retention.ipynb",
           "[NbConvertApp] Converting notebook notebooks/retention.ipynb to notebook\n"
           "[NbConvertApp] Writing 48211 bytes to notebooks/retention.ipynb",
           desc="Exécuter le notebook")
    s.todos([("Charger les données clients", "completed"),
             ("Calculer les cohortes mensuelles", "completed"),
             ("Tracer la courbe de rétention", "in_progress"),
             ("Exporter le graphique en PNG", "pending")])
    s.user("Utilise plotly plutôt que matplotlib, et exporte aussi en HTML.")
    s.multi_edit("/home/camille/churn-analysis/src/churn/plots.py", [
        ("import matplotlib.pyplot as plt", "import plotly.express as px"),
        ("    fig.savefig(path)", "    fig.write_image(path)\n    fig.write_html(path.with_suffix"
                                  "('.html'))"),
    ])
    s.bash("uv add plotly", "Resolved 48 packages in 612ms\nInstalled 2 packages in 41ms\n"
           " + narwhals==1.31.0\n + plotly==6.0.1", desc="Ajouter plotly")
    tid = s.call("WebFetch", {"url": "https://plotly.com/python/static-image-export/",
                              "prompt": "Which package does fig.write_image need?"})
    s.result(tid, DENIED.format(tool="WebFetch"), error=True)
    s.bash("uv run pytest -q tests/test_plots.py",
           "..F.\n" + "=" * 30 + " FAILURES " + "=" * 30 + "\n"
           "_______________________ test_export_png _______________________\n"
           "E   ValueError: Image export using the \"kaleido\" engine requires the kaleido "
           "package, which can be installed using pip:\n"
           "=========================== short test summary info ===========================\n"
           "FAILED tests/test_plots.py::test_export_png - ValueError: Image export using the "
           "\"kaleido\" engine requires the kaleido package\n1 failed, 3 passed in 2.07s",
           exit_code=1, desc="Tests des graphiques")
    s.todos([("Charger les données clients", "completed"),
             ("Calculer les cohortes mensuelles", "completed"),
             ("Tracer la courbe de rétention", "completed"),
             ("Exporter le graphique en PNG et HTML", "in_progress")])
    s.say("L'export HTML fonctionne ; l'export PNG échoue encore : kaleido n'est pas installé "
          "dans l'environnement de test. Prochaine étape : ajouter kaleido aux dépendances de "
          "dev.")
    s.save()
    questions("cc-notebook-fr", "a data-analysis session in French: NotebookEdit inserting then "
              "replacing a cell, a notebook run failing then passing, a MultiEdit, three todo "
              "lists of which only the last holds, a request that overrides the plotting "
              "library, a WebFetch denied by permission, a test still failing.", [
                  ("goal", "What is the task?",
                   "A monthly cohort retention analysis in notebooks/retention.ipynb.",
                   ["rétention par cohorte"]),
                  ("instruction", "Which file must never be modified?",
                   "data/raw/clients.csv (the raw CRM export).",
                   ["Ne modifie jamais data/raw/clients.csv"]),
                  ("asked", "Which plotting library must be used?",
                   "plotly rather than matplotlib.", ["plotly plutôt que matplotlib"]),
                  ("asked", "What else did the user ask for?", "Also export as HTML.",
                   ["exporte aussi en HTML"]),
                  ("stopped", "What is the task in progress on the todo list now?",
                   "Exporter le graphique en PNG et HTML.",
                   ["Exporter le graphique en PNG et HTML"]),
                  ("test", "Which test fails now?", "tests/test_plots.py::test_export_png.",
                   ["test_export_png"]),
                  ("failure", "Why does it fail?",
                   "Image export with the kaleido engine requires the kaleido package.",
                   ["requires the kaleido package"]),
                  ("failure", "What was the notebook error, and how was it fixed?",
                   "KeyError 'date_inscription'; the column is signup_date.",
                   ["date_inscription", "signup_date"]),
                  ("files", "Which files were changed?",
                   "notebooks/retention.ipynb and src/churn/plots.py.",
                   ["notebooks/retention.ipynb", "src/churn/plots.py"]),
                  ("failure", "Which tool was denied?", "WebFetch (permission not granted).",
                   ["WebFetch"]),
                  ("stopped", "What is the next step?",
                   "Add kaleido to the dev dependencies.",
                   ["kaleido aux dépendances de dev"]),
                  ("files", "Which dependency was added?", "plotly (uv add plotly).",
                   ["uv add plotly"]),
              ])


# -- Codex session files ----------------------------------------------------------------

class Rollout:
    """A Codex session file (`rollout-*.jsonl`) being written, line by line."""

    def __init__(self, name: str, cwd: str, branch: str, start: str) -> None:
        self.name = name
        self.cwd = cwd
        self.sid = str(uuid.uuid5(uuid.NAMESPACE_URL, "blind/" + name))
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


# -- 5. Codex, newer format: exec_command, update_plan, an interrupted turn and an override,
#       apply_patch adding and deleting files, a web search, reasoning items ---------------

def codex_deprecate() -> None:
    r = Rollout("codex-exec-deprecate", "/home/dev/httpkit", "feat/max-retries",
                "2026-04-08T15:00:00")
    r.message("user", "Rename the `retry_count` parameter of `Client.get()` to `max_retries`. "
                      "Run tests with `make test`, never with bare pytest.")
    r.reasoning("**Planning the rename**")
    r.plan("Rename in three steps", [("Rename the parameter in httpkit/client.py",
                                      "in_progress"),
                                     ("Update the callers", "pending"),
                                     ("Update the docs", "pending")])
    r.exec_command("rg -n retry_count", "httpkit/client.py:41:    def get(self, url, "
                   "retry_count=3):\nhttpkit/session.py:17:        return self.client.get(url, "
                   "retry_count=self.retries)\ntests/test_retry_legacy.py:5:    c.get(u, "
                   "retry_count=0)\n")
    r.patch("*** Begin Patch\n*** Update File: httpkit/client.py\n@@\n-    def get(self, url, "
            "retry_count=3):\n+    def get(self, url, max_retries=3):\n*** Update File: "
            "httpkit/session.py\n@@\n-        return self.client.get(url, retry_count="
            "self.retries)\n+        return self.client.get(url, max_retries=self.retries)\n"
            "*** End Patch\n",
            "Success. Updated the following files:\nM httpkit/client.py\nM httpkit/session.py\n")
    r.exec_command("make test",
                   "uv run pytest -q\n..........F.....................\n"
                   "FAILED tests/test_client.py::test_retry_backoff - TypeError: Client.get() "
                   "got an unexpected keyword argument 'retry_count'\n1 failed, 31 passed in "
                   "0.92s\nmake: *** [Makefile:12: test] Error 1", code=2)
    r.message("assistant", "test_retry_backoff still passes retry_count; I'll update it to "
                           "max_retries.")
    r.put("event_msg", {"type": "turn_aborted", "reason": "interrupted"})
    r.message("user", "Scratch that: downstream services still pass retry_count. Keep "
                      "retry_count working as a deprecated alias that emits a "
                      "DeprecationWarning, and add max_retries next to it.")
    r.reasoning("**Keeping a deprecated alias**")
    r.patch("*** Begin Patch\n*** Update File: httpkit/client.py\n@@\n-    def get(self, url, "
            "max_retries=3):\n+    def get(self, url, max_retries=3, retry_count=None):\n+"
            "        if retry_count is not None:\n+            warnings.warn(\"retry_count is "
            "deprecated, use max_retries\", DeprecationWarning)\n+            max_retries = "
            "retry_count\n*** Update File: httpkit/session.py\n@@\n-        return "
            "self.client.get(url, max_retries=self.retries)\n+        return self.client.get("
            "url, retry_count=self.retries)\n*** End Patch\n",
            "Success. Updated the following files:\nM httpkit/client.py\nM httpkit/session.py\n")
    r.patch("*** Begin Patch\n*** Add File: tests/test_deprecation.py\n+import pytest\n+\n+def "
            "test_retry_count_warns(client):\n+    with pytest.deprecated_call():\n+        "
            "client.get(\"/\", retry_count=1)\n*** Delete File: tests/test_retry_legacy.py\n"
            "*** End Patch\n",
            "Success. Updated the following files:\nA tests/test_deprecation.py\nD "
            "tests/test_retry_legacy.py\n")
    r.put("response_item", {"type": "web_search_call", "status": "completed", "action": {
        "type": "search", "query": "python warnings.warn stacklevel deprecated keyword "
                                   "argument"}})
    r.exec_command("make test", "uv run pytest -q\n" + "." * 58 + "\n58 passed in 1.03s\n")
    r.exec_command("make lint", "uv run ruff check httpkit tests\nhttpkit/client.py:44:13: "
                   "B028 No explicit `stacklevel` keyword argument found\nFound 1 error.\n"
                   "make: *** [Makefile:15: lint] Error 1", code=2)
    r.plan("Alias kept; lint left", [("Keep retry_count as a deprecated alias", "completed"),
                                     ("Add max_retries", "completed"),
                                     ("Fix the B028 lint error", "in_progress"),
                                     ("Update docs/CHANGELOG.md", "pending")])
    r.patch("*** Begin Patch\n*** Update File: httpkit/client.py\n@@\n-            "
            "warnings.warn(\"retry_count is deprecated, use max_retries\", "
            "DeprecationWarning)\n+            warnings.warn(\"retry_count is deprecated, use "
            "max_retries\", DeprecationWarning, stacklevel=2)\n*** End Patch\n",
            "Success. Updated the following files:\nM httpkit/client.py\n")
    r.exec_command("make lint", "uv run ruff check httpkit tests\nAll checks passed!\n")
    r.exec_command("git add -A && git commit -m \"client: add max_retries, deprecate "
                   "retry_count\"", "[feat/max-retries 0b7c3aa] client: add max_retries, "
                   "deprecate retry_count\n 4 files changed, 19 insertions(+), 11 deletions(-)"
                   "\n create mode 100644 tests/test_deprecation.py\n delete mode 100644 "
                   "tests/test_retry_legacy.py\n")
    r.message("assistant", "Committed 0b7c3aa. retry_count still works and warns with "
                           "stacklevel=2; make test (58 passed) and make lint pass. Left: the "
                           "CHANGELOG entry in docs/CHANGELOG.md.")
    r.save()
    questions("codex-exec-deprecate", "a Codex session file in the newer format: exec_command "
              "calls whose output says `Process exited with code N`, update_plan twice, "
              "reasoning items, apply_patch updating, adding and deleting files, a web_search "
              "call, a turn aborted by the user followed by a request that overrides the "
              "first one, a lint failure fixed, a commit.", [
                  ("goal", "What must be built now?",
                   "retry_count kept as a deprecated alias with a DeprecationWarning, plus "
                   "max_retries.", ["deprecated alias", "DeprecationWarning"]),
                  ("asked", "Why was the plain rename dropped?",
                   "Downstream services still pass retry_count.",
                   ["downstream services still pass retry_count"]),
                  ("instruction", "How must tests be run?",
                   "With make test, never with bare pytest.", ["never with bare pytest"]),
                  ("commit", "What was committed?",
                   "0b7c3aa client: add max_retries, deprecate retry_count.", ["0b7c3aa"]),
                  ("files", "Which files were changed or created?",
                   "httpkit/client.py, httpkit/session.py, tests/test_deprecation.py.",
                   ["httpkit/client.py", "httpkit/session.py", "tests/test_deprecation.py"]),
                  ("files", "Which file was deleted?", "tests/test_retry_legacy.py.",
                   ["tests/test_retry_legacy.py"]),
                  ("failure", "Which lint error came up, and is it fixed?",
                   "B028 no explicit stacklevel; fixed with stacklevel=2.", ["B028"]),
                  ("test", "Do the tests pass now?", "Yes: 58 passed.", ["58 passed"]),
                  ("stopped", "What is left to do?", "The CHANGELOG entry.",
                   ["docs/CHANGELOG.md"]),
                  ("stopped", "Was the agent interrupted?",
                   "Yes: the user aborted the turn while it was updating test_retry_backoff.",
                   ["interrupted"]),
                  ("failure", "Which test failed after the rename, and why?",
                   "test_retry_backoff: unexpected keyword argument 'retry_count'.",
                   ["test_retry_backoff", "unexpected keyword argument"]),
                  ("instruction", "What was the original request?",
                   "Rename retry_count of Client.get() to max_retries.",
                   ["`retry_count` parameter of `Client.get()`"]),
              ], fmt="codex")


# -- 6. a session resumed into a second transcript file (claude --resume writes a new file
#       with a new session id that starts with a copy of the earlier conversation) ---------

def resumed_rails() -> None:
    first = Session("cc-resume-rails-day1", "/home/dev/bookshelf", "upgrade/rails-7.1",
                    "2026-04-09T17:00:00")
    first.user("Upgrade the app from Rails 7.0 to 7.1. Keep Ruby at 3.2; don't upgrade Ruby in "
               "this branch.")
    first.bash("bundle update rails", "Fetching gem metadata from https://rubygems.org/......."
               "\nResolving dependencies...\nInstalling rails 7.1.3\nBundle updated!",
               desc="Update Rails")
    first.bash("bin/rails test",
               "Running 42 tests in a single process\nRun options: --seed 4242\n\n"
               "F\n\nFailure:\nBookTest#test_slug_is_parameterized [test/models/book_test.rb:"
               "12]:\nExpected: \"my-book\"\n  Actual: \"my_book\"\n\nE\n\nError:\n"
               "ReviewsControllerTest#test_create:\nNoMethodError: undefined method "
               "`content_type' for an instance of ActionDispatch::Response\n"
               "    app/controllers/reviews_controller.rb:19:in `create'\n\nF\n\nFailure:\n"
               "AuthorTest#test_full_name [test/models/author_test.rb:8]:\nExpected: \"Ada "
               "Lovelace\"\n  Actual: \"Ada  Lovelace\"\n\nFinished in 1.204s\n42 runs, 97 "
               "assertions, 2 failures, 1 errors, 0 skips", exit_code=1, desc="Run the tests")
    first.edit("/home/dev/bookshelf/app/models/book.rb", "title.underscore",
               "title.parameterize")
    first.edit("/home/dev/bookshelf/app/controllers/reviews_controller.rb",
               "response.content_type", "response.media_type")
    first.bash("bin/rails test",
               "Running 42 tests in a single process\n\nF\n\nFailure:\nAuthorTest#"
               "test_full_name [test/models/author_test.rb:8]:\nExpected: \"Ada Lovelace\"\n"
               "  Actual: \"Ada  Lovelace\"\n\nFinished in 1.187s\n42 runs, 99 assertions, 1 "
               "failures, 0 errors, 0 skips", exit_code=1, desc="Run the tests")
    first.bash("git add -A && git commit -m \"Bump rails to 7.1 and fix slug and review "
               "tests\"", "[upgrade/rails-7.1 c0ffee1] Bump rails to 7.1 and fix slug and "
               "review tests\n 4 files changed, 38 insertions(+), 35 deletions(-)",
               desc="Commit")
    first.say("Rails 7.1 is in (c0ffee1). AuthorTest#test_full_name still fails: full_name "
              "puts two spaces between the names. I'll look at it next.")
    day1 = list(first.records)
    first.save()

    resumed = Session("cc-resume-rails", "/home/dev/bookshelf", "upgrade/rails-7.1",
                      "2026-04-10T09:12:00")
    for rec in day1:  # the copy --resume starts the new file with
        copy = dict(rec)
        if "sessionId" in copy:
            copy["sessionId"] = resumed.sid
        resumed.records.append(copy)
    resumed.parent = day1[-1]["uuid"]
    resumed.user("Continue. For AuthorTest, the test is right and the model is wrong: fix "
                 "Author#full_name, not the test.")
    resumed.read("/home/dev/bookshelf/app/models/author.rb",
                 "def full_name\n  \"#{first_name} #{middle_name} #{last_name}\"\nend\n")
    resumed.edit("/home/dev/bookshelf/app/models/author.rb",
                 "  \"#{first_name} #{middle_name} #{last_name}\"",
                 "  [first_name, middle_name, last_name].compact_blank.join(\" \")")
    resumed.bash("bin/rails test", "Running 42 tests in a single process\n\n"
                 "..........................................\n\nFinished in 1.166s\n42 runs, "
                 "100 assertions, 0 failures, 0 errors, 0 skips", desc="Run the tests")
    resumed.bash("bin/rails app:update",
                 "   identical  config/boot.rb\n    conflict  config/application.rb\n"
                 "       force  config/application.rb\n      create  config/initializers/"
                 "new_framework_defaults_7_1.rb\n       force  config/environments/"
                 "production.rb", desc="Run the Rails update task")
    resumed.user("Don't run app:update, revert what it generated; we'll do the new framework "
                 "defaults in a separate PR.")
    resumed.bash("git checkout -- config/ && git clean -fd config/initializers",
                 "Removing config/initializers/new_framework_defaults_7_1.rb",
                 desc="Revert app:update")
    resumed.bash("git add -A && git commit -m \"Author#full_name: join with a single space\"",
                 "[upgrade/rails-7.1 d15ea5e] Author#full_name: join with a single space\n"
                 " 1 file changed, 1 insertion(+), 1 deletion(-)", desc="Commit")
    resumed.bash("git push -u origin upgrade/rails-7.1",
                 "To github.com:dev/bookshelf.git\n * [new branch]      upgrade/rails-7.1 -> "
                 "upgrade/rails-7.1\nbranch 'upgrade/rails-7.1' set up to track "
                 "'origin/upgrade/rails-7.1'.", desc="Push")
    resumed.say("All 42 tests pass. Pushed upgrade/rails-7.1 with c0ffee1 and d15ea5e. The new "
                "framework defaults are left for a separate PR, as you asked.")
    resumed.save()
    questions("cc-resume-rails", "a Rails upgrade over two days: the second transcript file is "
              "the one `claude --resume` writes, with a new session id, starting with a copy "
              "of the first day's records; both files are imported (the first one first). "
              "Test failures fixed across the two files, a generator run the user asked to "
              "revert (git checkout + git clean), two commits and a push.", [
                  ("goal", "What is the task?", "Upgrade from Rails 7.0 to 7.1.",
                   ["Rails 7.0 to 7.1"]),
                  ("instruction", "What must stay as it is?", "Ruby at 3.2.",
                   ["Ruby at 3.2"]),
                  ("asked", "What did the user ask last?",
                   "Don't run app:update; revert what it generated; defaults in a separate PR.",
                   ["Don't run app:update"]),
                  ("test", "Do the tests pass now?", "Yes: 42 runs, 0 failures, 0 errors.",
                   ["0 failures, 0 errors"]),
                  ("decision", "How was AuthorTest#test_full_name to be fixed?",
                   "Fix Author#full_name, not the test.",
                   ["fix Author#full_name, not the test"]),
                  ("commit", "Which commits were made?", "c0ffee1 and d15ea5e.",
                   ["c0ffee1", "d15ea5e"]),
                  ("commit", "Was the branch pushed?",
                   "Yes: git push -u origin upgrade/rails-7.1.",
                   ["push -u origin upgrade/rails-7.1"]),
                  ("revert", "Which generated file was removed?",
                   "config/initializers/new_framework_defaults_7_1.rb.",
                   ["new_framework_defaults_7_1.rb"]),
                  ("files", "Which application files were changed?",
                   "app/models/author.rb, app/models/book.rb, "
                   "app/controllers/reviews_controller.rb.",
                   ["app/models/author.rb", "app/models/book.rb",
                    "app/controllers/reviews_controller.rb"]),
                  ("stopped", "What was left for later?",
                   "The new framework defaults, in a separate PR.", ["separate PR"]),
                  ("failure", "Which test raised an error after the upgrade?",
                   "ReviewsControllerTest#test_create (NoMethodError content_type).",
                   ["ReviewsControllerTest#test_create"]),
                  ("files", "How were the gems updated?", "bundle update rails.",
                   ["bundle update rails"]),
              ], earlier=["cc-resume-rails-day1"])


# -- 7. Codex, older format: `shell` calls with JSON outputs in two directories, a
#       local_shell_call, a long e2e output with the cause in its middle, green then red ---

def codex_e2e() -> None:
    r = Rollout("codex-shell-e2e", "/home/dev/monorepo", "fix/e2e-nightly", "2026-04-11T07:40:00")
    r.message("user", "The nightly job says `npm run test:e2e` in web/ fails against the api. "
                      "Find out why. Do not change anything under api/migrations/.")
    passed = "".join(f"  ✓  {n:2d} [chromium] › catalog.spec.ts:{n * 3}:5 › lists page {n} "
                     f"(0.{n % 9}s)\n" for n in range(1, 41))
    later = "".join(f"  ✓  {n:2d} [chromium] › account.spec.ts:{n}:5 › account step {n} "
                    f"(0.{n % 7}s)\n" for n in range(41, 61))
    r.shell("npm run test:e2e",
            "> web@2.3.0 test:e2e\n> playwright test\n\nRunning 60 tests using 2 workers\n" +
            passed + "[api] ERROR:  column \"card_token\" of relation \"payments\" does not "
            "exist at character 41\n[api] POST /payments 500 12ms\n  ✘  41 [chromium] › "
            "checkout.spec.ts:42:5 › pays with a saved card (5.1s)\n" + later +
            "\n  1 failed\n    [chromium] › checkout.spec.ts:42:5 › pays with a saved card\n"
            "  59 passed (1.6m)\n", code=1, workdir="/home/dev/monorepo/web")
    r.shell("grep -rn card_token api/ | head",
            "api/migrations/0042_add_card_token.sql:1:ALTER TABLE payments ADD COLUMN "
            "card_token text;\napi/src/payments.ts:88:  card_token: body.cardToken,\n",
            workdir="/home/dev/monorepo")
    r.shell("head -3 test/seed.sql && ls migrations | tail -2",
            "-- seed for e2e, generated 2026-02-01 (migration 0041)\nCREATE TABLE payments ("
            "id serial, amount int);\n\n0041_add_refunds.sql\n0042_add_card_token.sql\n",
            workdir="/home/dev/monorepo/api")
    r.message("assistant", "Found it: the e2e database is built from api/test/seed.sql, which "
                           "predates migration 0042, so payments has no card_token column. "
                           "Rather than touching api/migrations/, I'll make the e2e global "
                           "setup run the migrations after seeding.")
    r.patch("*** Begin Patch\n*** Update File: web/e2e/global-setup.ts\n@@\n   await "
            "exec('psql -f ../api/test/seed.sql');\n+  await exec('npm --prefix ../api run "
            "migrate');\n*** End Patch\n",
            "Success. Updated the following files:\nM web/e2e/global-setup.ts\n")
    r.shell("npm run test:e2e", "> web@2.3.0 test:e2e\n> playwright test\n\nRunning 60 tests "
            "using 2 workers\n" + passed + later + "\n  60 passed (1.4m)\n",
            workdir="/home/dev/monorepo/web")
    r.message("user", "Good. Also make the e2e job fail fast: set maxFailures to 1 in "
                      "playwright.config.ts.")
    r.patch("*** Begin Patch\n*** Update File: web/playwright.config.ts\n@@\n   retries: 0,\n"
            "+  maxFailures: 1,\n*** End Patch\n",
            "Success. Updated the following files:\nM web/playwright.config.ts\n")
    r.shell("npm run test:e2e", "> web@2.3.0 test:e2e\n> playwright test\n\nRunning 60 tests "
            "using 2 workers\n" + passed[:400] + "  ✘  12 [chromium] › profile.spec.ts:18:3 › "
            "uploads an avatar (0.3s)\n\n  1) [chromium] › profile.spec.ts:18:3 › uploads an "
            "avatar\n\n    Error: ENOENT: no such file or directory, open "
            "'e2e/fixtures/avatar.png'\n\n  1 failed\n    [chromium] › profile.spec.ts:18:3 › "
            "uploads an avatar\n  48 did not run\n  11 passed (21.0s)\n", code=1,
            workdir="/home/dev/monorepo/web")
    r.local_shell(["git", "status", "--short"],
                  " M web/e2e/global-setup.ts\n M web/playwright.config.ts\n")
    r.message("assistant", "With maxFailures 1 the run now stops at profile.spec.ts: "
                           "e2e/fixtures/avatar.png is missing (web/.gitignore ignores "
                           "e2e/fixtures/*.png). Nothing committed yet.")
    r.save()
    questions("codex-shell-e2e", "a Codex session file in the older format: `shell` calls with "
              "JSON outputs run in three working directories of a monorepo, a local_shell_call, "
              "apply_patch updates; a long Playwright output whose cause (an api log line) sits "
              "in its middle; green after a fix, red again after a later request; nothing "
              "committed.", [
                  ("goal", "What is the task?",
                   "Find why npm run test:e2e in web/ fails against the api.",
                   ["test:e2e"]),
                  ("instruction", "What must not be changed?",
                   "Anything under api/migrations/.", ["api/migrations/"]),
                  ("failure", "What made the first e2e run fail?",
                   "column card_token of relation payments does not exist (api 500).",
                   ["card_token"]),
                  ("finding", "Why was the column missing?",
                   "api/test/seed.sql predates migration 0042.", ["seed.sql"]),
                  ("files", "Which file holds the fix?", "web/e2e/global-setup.ts.",
                   ["web/e2e/global-setup.ts"]),
                  ("asked", "What did the user ask later?",
                   "Set maxFailures to 1 in playwright.config.ts.", ["maxFailures"]),
                  ("test", "Which test fails now?",
                   "profile.spec.ts:18:3 › uploads an avatar.", ["uploads an avatar"]),
                  ("failure", "Why does it fail?",
                   "ENOENT: e2e/fixtures/avatar.png is missing.",
                   ["e2e/fixtures/avatar.png"]),
                  ("files", "Which other file was changed?", "web/playwright.config.ts.",
                   ["web/playwright.config.ts"]),
                  ("commit", "Was anything committed?", "No.", ["Nothing committed"]),
                  ("test", "Which test failed first?",
                   "checkout.spec.ts:42:5 › pays with a saved card.",
                   ["pays with a saved card"]),
                  ("files", "Which directories did the commands run in?",
                   "/home/dev/monorepo/web, /home/dev/monorepo and /home/dev/monorepo/api.",
                   ["/home/dev/monorepo/api"]),
                  ("test", "How many e2e tests passed after the fix?", "60 passed.",
                   ["60 passed"]),
              ], fmt="codex")


if __name__ == "__main__":
    cache_override()
    bisect_subagent()
    ci_two_repos()
    notebook_french()
    codex_deprecate()
    resumed_rails()
    codex_e2e()
    for name, spec in QUESTIONS.items():
        with open(HERE / f"{name}.json", "w", encoding="utf-8") as out:
            out.write(json.dumps(spec, indent=2, ensure_ascii=False) + "\n")
