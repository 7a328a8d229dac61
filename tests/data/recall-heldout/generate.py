"""Writes the SYNTHETIC held-out transcripts in transcripts/ (see README.md).

These sessions never happened: they were written by hand for the recall check, in the
record format of the real Claude Code transcripts under tests/data/claude-code (and, for
codex-ledger-since, of the Codex session file under tests/data/codex/sessions). Run
`python tests/data/recall-heldout/generate.py` to rewrite them; the output is fixed.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent / "transcripts"


class Session:
    def __init__(self, name: str, cwd: str, branch: str, start: str) -> None:
        self.name = name
        self.cwd = cwd
        self.branch = branch
        self.sid = str(uuid.uuid5(uuid.NAMESPACE_URL, "heldout/" + name))
        self.t = datetime.fromisoformat(start)
        self.parent: str | None = None
        self.records: list[dict] = []
        self.n = 0

    def _id(self, tag: str) -> str:
        self.n += 1
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{self.name}/{tag}/{self.n}"))

    def _ts(self, seconds: int) -> str:
        self.t += timedelta(seconds=seconds)
        return self.t.strftime("%Y-%m-%dT%H:%M:%S.000Z")

    def _base(self, kind: str, seconds: int) -> dict:
        rec = {"parentUuid": self.parent, "isSidechain": False, "userType": "external",
               "cwd": self.cwd, "sessionId": self.sid, "version": "2.1.30",
               "gitBranch": self.branch, "type": kind, "uuid": self._id(kind),
               "timestamp": self._ts(seconds)}
        self.parent = rec["uuid"]
        return rec

    def title(self, text: str) -> None:
        self.records.append({"type": "summary", "summary": text, "leafUuid": self._id("leaf")})

    def user(self, text: str, seconds: int = 20, **extra: object) -> None:
        rec = self._base("user", seconds)
        rec["message"] = {"role": "user", "content": text}
        rec.update(extra)
        self.records.append(rec)

    def say(self, text: str, seconds: int = 5) -> None:
        rec = self._base("assistant", seconds)
        rec["message"] = {"model": "claude-opus-4-5", "id": "msg_" + self._id("m")[:18],
                          "type": "message", "role": "assistant",
                          "content": [{"type": "text", "text": text}],
                          "stop_reason": None, "stop_sequence": None}
        self.records.append(rec)

    def call(self, tool: str, inp: dict, seconds: int = 4) -> str:
        rec = self._base("assistant", seconds)
        tid = "toolu_" + self._id("t").replace("-", "")[:24]
        rec["message"] = {"model": "claude-opus-4-5", "id": "msg_" + self._id("m")[:18],
                          "type": "message", "role": "assistant",
                          "content": [{"type": "tool_use", "id": tid, "name": tool,
                                       "input": inp}],
                          "stop_reason": None, "stop_sequence": None}
        self.records.append(rec)
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

    def write(self, path: str, content: str) -> None:
        tid = self.call("Write", {"file_path": path, "content": content})
        self.result(tid, f"File created successfully at: {path}",
                    tool_result={"type": "create", "filePath": path, "content": content,
                                 "structuredPatch": []})

    def read(self, path: str, content: str) -> None:
        tid = self.call("Read", {"file_path": path})
        self.result(tid, content, tool_result={"type": "text", "file": {
            "filePath": path, "content": content, "numLines": content.count("\n") + 1}})

    def system(self, subtype: str, content: str, **extra: object) -> None:
        logical = self.parent
        rec = self._base("system", 1)
        if subtype == "compact_boundary":
            rec["logicalParentUuid"] = logical
        rec.update({"subtype": subtype, "content": content, "isMeta": False, "level": "info"})
        rec.update(extra)
        self.records.append(rec)

    def save(self) -> None:
        HERE.mkdir(exist_ok=True)
        with open(HERE / f"{self.name}.jsonl", "w", encoding="utf-8") as out:
            for rec in self.records:
                out.write(json.dumps(rec, ensure_ascii=False) + "\n")


REJECT = ("The user doesn't want to proceed with this tool use. The tool use was rejected "
          "(eg. if it was a file edit, the new_string was NOT written to the file). To tell "
          "you how to proceed, the user said:\n")


def typescript_jest() -> None:
    s = Session("ts-invoice-jest", "/home/dev/invoice-api", "fix/rounding",
                "2026-03-02T09:00:00")
    s.title("Invoice rounding fix with jest and eslint")
    s.user("Invoices are off by one cent: fix the rounding in src/money.ts so that "
           "formatAmount rounds half up. Don't touch the migrations folder.")
    s.say("I'll look at src/money.ts and run the test suite first.")
    s.read("/home/dev/invoice-api/src/money.ts",
           "export function formatAmount(cents: number): string {\n"
           "  return (Math.floor(cents) / 100).toFixed(2);\n}\n")
    s.bash("npm test", "\n> invoice-api@1.4.0 test\n> jest\n\n"
           "FAIL src/money.test.ts\n"
           "  ● money › formatAmount › rounds half up\n\n"
           "    expect(received).toBe(expected) // Object.is equality\n\n"
           "    Expected: \"10.05\"\n    Received: \"10.04\"\n\n"
           "PASS src/invoice.test.ts\n\n"
           "Test Suites: 1 failed, 1 passed, 2 total\n"
           "Tests:       2 failed, 14 passed, 16 total\n"
           "Snapshots:   0 total\nTime:        2.113 s\nRan all test suites.",
           exit_code=1, desc="Run the jest suite")
    s.user("use pnpm, not npm. This repo has a pnpm-lock.yaml.")
    s.say("Understood, I'll use pnpm from now on.")
    s.edit("/home/dev/invoice-api/src/money.ts", "Math.floor(cents)",
           "roundHalfUp(cents)")
    s.bash("pnpm tsc --noEmit",
           "src/money.ts(2,11): error TS2304: Cannot find name 'roundHalfUp'.\n"
           "src/invoice.ts(31,7): error TS2322: Type 'string' is not assignable to type "
           "'number'.\n\nFound 2 errors in 2 files.\n\nErrors  Files\n     1  src/money.ts:2\n"
           "     1  src/invoice.ts:31", exit_code=2, desc="Type-check")
    s.write("/home/dev/invoice-api/src/rounding.ts",
            "export function roundHalfUp(cents: number): number {\n"
            "  return Math.round(cents + Number.EPSILON);\n}\n")
    s.edit("/home/dev/invoice-api/src/invoice.ts", "const total: number = label;",
           "const total: number = Number(label);")
    s.edit("/home/dev/invoice-api/src/money.ts", "export function",
           "import { roundHalfUp } from './rounding';\n\nexport function")
    s.bash("pnpm tsc --noEmit", "", desc="Type-check again")
    s.bash("pnpm test", "\n> invoice-api@1.4.0 test /home/dev/invoice-api\n> jest\n\n"
           "PASS src/money.test.ts\nPASS src/invoice.test.ts\n\n"
           "Test Suites: 2 passed, 2 total\nTests:       16 passed, 16 total\n"
           "Snapshots:   0 total\nTime:        1.987 s\nRan all test suites.",
           desc="Run jest with pnpm")
    tid = s.call("Edit", {"file_path": "/home/dev/invoice-api/migrations/0007_amounts.sql",
                          "old_string": "amount INTEGER", "new_string": "amount BIGINT"})
    s.result(tid, REJECT + "I said leave the migrations alone. Widen the column in a new "
             "ticket, not here.", error=True)
    s.say("Sorry, I won't touch migrations/. Running the linter now.")
    s.bash("pnpm eslint src",
           "\n/home/dev/invoice-api/src/rounding.ts\n"
           "  4:7  error    'EPS' is assigned a value but never used  no-unused-vars\n"
           "  9:1  warning  Unexpected console statement              no-console\n\n"
           "✖ 2 problems (1 error, 1 warning)\n", exit_code=1, desc="Lint")
    s.bash("git add src/money.ts src/rounding.ts src/invoice.ts && git commit -m "
           "\"Round invoice amounts half up\"",
           "[fix/rounding 4f9e2d1] Round invoice amounts half up\n 3 files changed, 9 "
           "insertions(+), 2 deletions(-)\n create mode 100644 src/rounding.ts",
           desc="Commit the fix")
    s.bash("git commit -am \"wip\"", "On branch fix/rounding\nnothing to commit, working "
           "tree clean", exit_code=1)
    s.say("The rounding fix is committed as 4f9e2d1 and all 16 jest tests pass. One eslint "
          "error remains in src/rounding.ts ('EPS' is assigned a value but never used); I "
          "have not fixed it yet.")
    s.save()


def go_push() -> None:
    s = Session("go-kvstore-push", "/home/dev/kvstore", "main", "2026-03-03T14:10:00")
    s.user("TestExpiry in store/ is failing. Fix it, then push to origin main.")
    s.bash("go test ./...",
           "--- FAIL: TestExpiry (0.01s)\n"
           "    store_test.go:48: expected key \"a\" to be expired, still present\n"
           "FAIL\nFAIL\tgithub.com/acme/kvstore/store\t0.014s\n"
           "ok  \tgithub.com/acme/kvstore/wire\t0.003s\nFAIL", exit_code=1,
           desc="Run all Go tests")
    s.read("/home/dev/kvstore/store/store.go",
           "func (s *Store) Get(k string) (string, bool) {\n\tv, ok := s.m[k]\n"
           "\treturn v.val, ok\n}\n")
    s.edit("/home/dev/kvstore/store/store.go", "\tv, ok := s.m[k]\n",
           "\tv, ok := s.m[k]\n\tif ok && v.expired(s.now()) {\n\t\tdelete(s.m, k)\n"
           "\t\treturn \"\", false\n\t}\n")
    s.bash("go test ./...", "ok  \tgithub.com/acme/kvstore/store\t0.012s\n"
           "ok  \tgithub.com/acme/kvstore/wire\t(cached)", desc="Run all Go tests")
    s.user("While you're there, rename store/ttl_old.go to store/expiry.go and delete "
           "store/legacy.go, it's dead code.")
    s.bash("git mv store/ttl_old.go store/expiry.go", "", desc="Rename the TTL file")
    s.bash("git rm store/legacy.go", "rm 'store/legacy.go'", desc="Delete dead code")
    s.bash("go vet ./... && go test ./...", "ok  \tgithub.com/acme/kvstore/store\t0.011s\n"
           "ok  \tgithub.com/acme/kvstore/wire\t(cached)")
    s.bash("git commit -am \"Expire keys on read\"",
           "[main 7c1d9e0] Expire keys on read\n 3 files changed, 14 insertions(+), 61 "
           "deletions(-)\n rename store/{ttl_old.go => expiry.go} (100%)\n"
           " delete mode 100644 store/legacy.go")
    s.bash("git push origin main",
           "To github.com:acme/kvstore.git\n"
           " ! [rejected]        main -> main (non-fast-forward)\n"
           "error: failed to push some refs to 'github.com:acme/kvstore.git'\n"
           "hint: Updates were rejected because the tip of your current branch is behind\n"
           "hint: its remote counterpart. If you want to integrate the remote changes,\n"
           "hint: use 'git pull' before pushing again.", exit_code=1, desc="Push")
    tid = s.call("Bash", {"command": "git push --force origin main",
                          "description": "Force push"})
    s.result(tid, "Claude requested permissions to use Bash, but you haven't granted it "
             "yet.", error=True)
    s.user("No force pushes on main, ever. Rebase on origin/main instead.")
    s.bash("git pull --rebase origin main",
           "From github.com:acme/kvstore\n * branch            main       -> FETCH_HEAD\n"
           "CONFLICT (content): Merge conflict in store/store.go\n"
           "error: could not apply 7c1d9e0... Expire keys on read\n"
           "hint: Resolve all conflicts manually, mark them as resolved with\n"
           "hint: \"git add/rm <conflicted_files>\", then run \"git rebase --continue\".",
           exit_code=1, desc="Rebase on the remote")
    s.say("The rebase stopped on a conflict in store/store.go: origin/main also changed "
          "Get. I need to resolve the conflict, run `git rebase --continue`, re-run the "
          "tests and push again (no force).")
    s.save()


def rust_crash() -> None:
    s = Session("rust-tomlfmt-crash", "/home/dev/tomlfmt", "feature/x", "2026-03-04T10:00:00")
    s.title("Empty table panic in tomlfmt parser")
    s.user("`tomlfmt` panics on a file with an empty table `[a]`. Fix the parser. Keep the "
           "public API of Parser unchanged.")
    s.bash("cargo test",
           "   Compiling tomlfmt v0.3.1 (/home/dev/tomlfmt)\n"
           "    Finished `test` profile [unoptimized + debuginfo] target(s) in 3.02s\n"
           "     Running unittests src/lib.rs (target/debug/deps/tomlfmt-1c2d)\n\n"
           "running 12 tests\ntest parser::tests::nested ... ok\n"
           "test parser::tests::empty_table ... FAILED\n\nfailures:\n\n"
           "---- parser::tests::empty_table stdout ----\n\n"
           "thread 'parser::tests::empty_table' panicked at src/parser.rs:88:14:\n"
           "called `Option::unwrap()` on a `None` value\n"
           "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n\n"
           "failures:\n    parser::tests::empty_table\n\n"
           "test result: FAILED. 11 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; "
           "finished in 0.02s\n\nerror: test failed, to rerun pass `--lib`", exit_code=101,
           desc="Run the Rust tests")
    s.read("/home/dev/tomlfmt/src/parser.rs", "let first = table.entries.first().unwrap();\n")
    s.system("compact_boundary", "Conversation compacted", parentUuid=None,
             compactMetadata={"trigger": "auto", "preTokens": 160112})
    s.user("This session is being continued from a previous conversation that ran out of "
           "context. The conversation is summarized below:\nSummary:\n1. The user asked to "
           "fix a panic in the tomlfmt parser on empty tables like `[a]`, keeping the "
           "public API of Parser unchanged.\n2. `cargo test` fails: parser::tests::"
           "empty_table panics at src/parser.rs:88:14 (unwrap on None in "
           "Parser::table_body).\n3. Next step: replace the unwrap with an early return of "
           "an empty Table.", isCompactSummary=True, isVisibleInTranscriptOnly=True)
    s.edit("/home/dev/tomlfmt/src/parser.rs",
           "let first = table.entries.first().unwrap();",
           "let Some(first) = table.entries.first() else { return Ok(Table::default()) };")
    s.bash("cargo test",
           "    Finished `test` profile [unoptimized + debuginfo] target(s) in 1.41s\n"
           "     Running unittests src/lib.rs (target/debug/deps/tomlfmt-1c2d)\n\n"
           "running 12 tests\ntest parser::tests::nested ... ok\n"
           "test parser::tests::empty_table ... ok\n\n"
           "test result: ok. 12 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; "
           "finished in 0.02s", desc="Run the Rust tests")
    s.write("/home/dev/tomlfmt/tests/empty_tables.rs",
            "#[test]\nfn empty_table_formats() {\n    assert_eq!(tomlfmt::format(\"[a]\\n\")"
            ".unwrap(), \"[a]\\n\");\n}\n")
    s.bash("git add -A && git commit -m \"Fix parser\"",
           "[feature/x 1a2b3c4] Fix parser\n 2 files changed, 7 insertions(+), 1 "
           "deletion(-)\n create mode 100644 tests/empty_tables.rs", desc="Commit")
    s.user("Stop hook feedback:\n[~/.claude/hooks/stop.sh]: Run the benchmarks before "
           "stopping.", isMeta=True, seconds=2)
    s.user("Good. Now run the benchmarks with cargo bench and tell me if parse_large "
           "regressed.")
    s.call("Bash", {"command": "cargo bench --bench parse -- parse_large",
                    "description": "Run the parse_large benchmark"})
    s.save()


def python_vitest() -> None:
    s = Session("py-web-mixed", "/home/dev/shopfront", "main", "2026-03-05T16:00:00")
    s.user("Add a `discount_code` field to the Order model and show it on the checkout page. "
           "Never run the integration tests, they hit the real payment sandbox.")
    s.bash("git checkout -b feature/discount-code", "Switched to a new branch "
           "'feature/discount-code'", desc="New branch")
    tid = s.call("TodoWrite", {"todos": [
        {"content": "Add discount_code to Order", "status": "completed",
         "activeForm": "Adding"},
        {"content": "Show discount on checkout page", "status": "in_progress",
         "activeForm": "Showing"},
        {"content": "Run mypy and unit tests", "status": "pending", "activeForm": "Running"}]})
    s.result(tid, "Todos have been modified successfully.")
    s.edit("/home/dev/shopfront/shop/models.py", "class Order(Base):",
           "class Order(Base):\n    discount_code: str | None = None")
    s.bash("uv run mypy shop",
           "shop/checkout.py:57: error: Argument 1 to \"apply\" has incompatible type "
           "\"str | None\"; expected \"str\"  [arg-type]\nFound 1 error in 1 file (checked "
           "23 source files)", exit_code=1, desc="Type-check")
    s.edit("/home/dev/shopfront/shop/checkout.py", "apply(order.discount_code)",
           "apply(order.discount_code or \"\")")
    s.bash("uv run mypy shop", "Success: no issues found in 23 source files")
    s.bash("uv run pytest tests/unit -q",
           "........F...\n=================================== FAILURES "
           "===================================\n____ test_checkout_total ____\n"
           "E       assert 90 == 95\n=========================== short test summary info "
           "============================\nFAILED tests/unit/test_checkout.py::"
           "test_checkout_total - assert 90 == 95\n1 failed, 11 passed in 0.84s",
           exit_code=1, desc="Unit tests")
    s.bash("cd web && pnpm vitest run",
           " ✓ src/Checkout.test.tsx (3 tests) 41ms\n × src/Discount.test.tsx > shows the "
           "code 12ms\n\nAssertionError: expected 'SAVE5' to be 'SAVE10'\n\n Test Files  1 "
           "failed | 1 passed (2)\n      Tests  1 failed | 3 passed (4)\n", exit_code=1,
           desc="Frontend tests")
    s.bash("rm web/src/legacy/OldDiscount.tsx", "", desc="Remove the old component")
    s.bash("git stash", "No local changes to save", exit_code=1)
    tid = s.call("Task", {"description": "Find discount rules",
                          "prompt": "Where are discount percentages defined?",
                          "subagent_type": "Explore"})
    s.result(tid, "Discount percentages live in shop/pricing/rules.yaml; SAVE10 is 10% and "
             "SAVE5 is 5%.", tool_result={"status": "completed", "content": []})
    s.say("mypy is clean. One unit test (test_checkout_total: assert 90 == 95) and one "
          "vitest test (shows the code) still fail; both expect SAVE10 where the fixture "
          "says SAVE5. Next I will fix the fixture in tests/unit/conftest.py.")
    s.save()


def compact(s: Session, summary: str) -> None:
    """A compaction: the boundary record, then the summary Claude Code continues from."""
    s.system("compact_boundary", "Conversation compacted", parentUuid=None,
             compactMetadata={"trigger": "auto", "preTokens": 155000})
    s.user("This session is being continued from a previous conversation that ran out of "
           "context. The conversation is summarized below:\nSummary:\n" + summary,
           isCompactSummary=True, isVisibleInTranscriptOnly=True)


def python_long_compactions() -> None:
    """A long session: two compactions, many prompts, a plan, todo lists, a subagent, files
    only read, an error fixed and one still open; long enough that --max-chars must cut."""
    s = Session("py-cfgload-long", "/srv/cfgload", "port/tomllib", "2026-03-05T08:00:00")
    s.title("Port cfgload to tomllib")
    s.user("Port the config loader in src/cfgload/loader.py from the third-party toml "
           "package to the standard library's tomllib, and drop the toml dependency.")
    s.user("From now on, run everything through uv run; never call plain pip or python.")
    s.user("Never touch src/cfgload/legacy.py, it is vendored from upstream.")
    s.user("Always run make lint before committing.")
    for path, body in [("/srv/cfgload/src/cfgload/loader.py",
                        "import toml\n\ndef load(path):\n    return toml.load(path)\n"),
                       ("/srv/cfgload/pyproject.toml",
                        "[project]\ndependencies = [\"toml>=0.10\", \"click\"]\n"),
                       ("/srv/cfgload/src/cfgload/schema.py",
                        "SCHEMA = {\"name\": str, \"retries\": int}\n"),
                       ("/srv/cfgload/docs/config.md", "# Configuration\n")]:
        s.read(path, body)
    tid = s.call("ExitPlanMode", {"plan": (
        "# Plan: tomllib port\n\n1. Open files in binary mode and call tomllib.load in "
        "loader.py\n2. Remove toml from the pyproject dependencies\n3. Catch "
        "tomllib.TOMLDecodeError in cfgload check and exit 2\n4. Convert the other call "
        "sites of toml.loads")})
    s.result(tid, "User has approved your plan. You can now start coding.",
             tool_result={"plan": "approved"})
    tid = s.call("TodoWrite", {"todos": [
        {"content": "Switch loader.py to tomllib", "status": "in_progress",
         "activeForm": "Switching"},
        {"content": "Drop the toml dependency", "status": "pending", "activeForm": "Dropping"},
        {"content": "Convert the other toml.loads call sites", "status": "pending",
         "activeForm": "Converting"}]})
    s.result(tid, "Todos have been modified successfully.")
    s.edit("/srv/cfgload/src/cfgload/loader.py",
           "import toml\n\ndef load(path):\n    return toml.load(path)",
           "import tomllib\n\ndef load(path):\n    with open(path, \"rb\") as fh:\n"
           "        return tomllib.load(fh)")
    s.bash("uv run pytest -q tests/test_loader.py",
           "..F.\n" + "=" * 35 + " FAILURES " + "=" * 35 + "\n"
           "________________________________ test_bad_file _________________________________\n"
           "E       AttributeError: module 'tomllib' has no attribute 'TomlDecodeError'\n"
           "=========================== short test summary info ============================\n"
           "FAILED tests/test_loader.py::test_bad_file - AttributeError: module 'tomllib' "
           "has no attribute 'TomlDecodeError'\n1 failed, 3 passed in 0.21s", exit_code=1,
           desc="Run the loader tests")
    s.edit("/srv/cfgload/src/cfgload/loader.py", "except toml.TomlDecodeError",
           "except tomllib.TOMLDecodeError")
    s.bash("uv run pytest -q tests/test_loader.py", "....\n4 passed in 0.19s",
           desc="Run the loader tests")
    s.edit("/srv/cfgload/pyproject.toml", "dependencies = [\"toml>=0.10\", \"click\"]",
           "dependencies = [\"click\"]")
    compact(s, "1. The user asked to port src/cfgload/loader.py from toml to tomllib and "
               "drop the toml dependency; run everything through uv run; never touch "
               "legacy.py; run make lint before committing.\n2. loader.py now uses "
               "tomllib.load in binary mode; test_bad_file was fixed by catching "
               "tomllib.TOMLDecodeError.\n3. Next: find the remaining toml.loads call "
               "sites.")
    tid = s.call("Task", {"description": "Find toml.loads call sites",
                          "prompt": "List every call of toml.loads in the repository.",
                          "subagent_type": "Explore"})
    s.result(tid, "Three call sites of toml.loads remain: src/cfgload/cli.py:40, "
             "src/cfgload/plugins.py:12 and tests/conftest.py:8.",
             tool_result={"status": "completed", "content": []})
    for n in range(1, 31):
        s.result(s.call("Grep", {"pattern": f"option_{n}"}),
                 f"src/cfgload/options/o{n}.py")
        s.result(s.call("Read", {"file_path": f"/srv/cfgload/src/cfgload/options/o{n}.py"}),
                 f"OPTION_{n} = {n}\n")
    s.edit("/srv/cfgload/src/cfgload/plugins.py", "toml.loads(text)",
           "tomllib.loads(text)")
    s.bash("make lint", "ruff check src tests\nAll checks passed!", desc="Lint")
    s.bash("git add -A && git commit -m \"loader: switch to tomllib\"",
           "[port/tomllib 3f2a9c1] loader: switch to tomllib\n 3 files changed, 9 "
           "insertions(+), 5 deletions(-)", desc="Commit the port")
    for n, text in enumerate([
            "Show me the diff of plugins.py.", "What does retries default to?",
            "Keep the error message wording as it was.", "Is click still needed?",
            "OK, leave click.", "How many tests are there now?", "Good.",
            "What about Windows line endings?", "Fine, skip that for now.",
            "Check the CHANGELOG mentions the port.", "Add a line to the CHANGELOG then.",
            "Thanks."]):
        s.user(text)
        s.say(f"Answer {n + 1}: done as asked.")
    s.edit("/srv/cfgload/CHANGELOG.md", "## Unreleased", "## Unreleased\n- cfgload now "
           "reads TOML with tomllib; the toml dependency is gone.")
    compact(s, "1. The port to tomllib is committed as 3f2a9c1 (loader.py, plugins.py, "
               "pyproject.toml); the CHANGELOG mentions it.\n2. The cli.py call site is "
               "still on toml.loads; the user now wants a --strict flag for cfgload check.\n"
               "3. Standing rules: uv run only, never touch legacy.py, make lint before "
               "each commit.")
    s.user("Now add a --strict flag to `cfgload check` that rejects unknown keys.")
    tid = s.call("TodoWrite", {"todos": [
        {"content": "Switch loader.py to tomllib", "status": "completed",
         "activeForm": "Switching"},
        {"content": "Drop the toml dependency", "status": "completed", "activeForm": "Dropping"},
        {"content": "Add the --strict flag to cfgload check", "status": "in_progress",
         "activeForm": "Adding"},
        {"content": "Document --strict in docs/config.md", "status": "pending",
         "activeForm": "Documenting"}]})
    s.result(tid, "Todos have been modified successfully.")
    s.edit("/srv/cfgload/src/cfgload/cli.py", "@click.command()\ndef check(path):",
           "@click.command()\n@click.option(\"--strict\", is_flag=True)\ndef check(path, "
           "strict):")
    s.bash("uv run mypy src",
           "src/cfgload/cli.py:44: error: Argument 1 to \"load\" has incompatible type "
           "\"str\"; expected \"IO[bytes]\"  [arg-type]\nsrc/cfgload/cli.py:51: error: "
           "Missing return statement  [return]\nFound 2 errors in 1 file (checked 9 source "
           "files)", exit_code=1, desc="Type-check")
    s.say("The --strict flag is in; mypy still reports 2 errors in src/cfgload/cli.py "
          "(an IO[bytes] argument at line 44 and a missing return at line 51). Next I will "
          "open the file in binary mode there and add the return.")
    s.save()


def codex_rollout() -> None:
    """A Codex session file (rollout) in the format of tests/data/codex/sessions: messages,
    shell calls (old JSON-string outputs and the newer `Exit code:` text), apply_patch."""
    sid = str(uuid.uuid5(uuid.NAMESPACE_URL, "heldout/codex-ledger-since"))
    t = datetime.fromisoformat("2026-03-06T14:00:00")
    lines: list[dict] = []
    n = 0

    def put(kind: str, payload: dict, seconds: int = 5) -> None:
        nonlocal t
        t += timedelta(seconds=seconds)
        lines.append({"timestamp": t.strftime("%Y-%m-%dT%H:%M:%S.000Z"), "type": kind,
                      "payload": payload})

    def message(role: str, text: str) -> None:
        block = "input_text" if role == "user" else "output_text"
        put("response_item", {"type": "message", "role": role,
                              "content": [{"type": block, "text": text}]})
        if role == "user":
            put("event_msg", {"type": "user_message", "message": text, "images": []}, 0)
        else:
            put("event_msg", {"type": "agent_message", "message": text}, 0)

    def shell(command: str, output: str, code: int = 0, *, new_format: bool = False) -> None:
        nonlocal n
        n += 1
        call_id = f"call_{n:03d}"
        put("response_item", {"type": "function_call", "name": "shell", "call_id": call_id,
                              "arguments": json.dumps({"command": ["bash", "-lc", command],
                                                       "workdir": "/home/dev/ledger"})})
        if new_format:
            out = f"Exit code: {code}\nWall time: 2.4 seconds\nOutput:\n{output}"
        else:
            out = json.dumps({"output": output, "metadata": {"exit_code": code,
                                                             "duration_seconds": 1.2}})
        put("response_item", {"type": "function_call_output", "call_id": call_id,
                              "output": out}, 2)

    def patch(text: str, result: str) -> None:
        nonlocal n
        n += 1
        call_id = f"call_{n:03d}"
        put("response_item", {"type": "custom_tool_call", "status": "completed",
                              "call_id": call_id, "name": "apply_patch", "input": text})
        put("response_item", {"type": "custom_tool_call_output", "call_id": call_id,
                              "output": result}, 1)

    put("session_meta", {"id": sid, "timestamp": "2026-03-06T14:00:00.000Z",
                         "cwd": "/home/dev/ledger", "originator": "codex_cli_rs",
                         "cli_version": "0.46.0", "instructions": None, "source": "cli",
                         "git": {"commit_hash": "1a2b3c4d5e6f", "branch": "feat/since-filter",
                                 "repository_url": "git@github.com:dev/ledger.git"}}, 0)
    put("response_item", {"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "<environment_context>\n  <cwd>/home/dev/ledger</cwd>\n"
                                       "</environment_context>"}]})
    message("user", "Add a --since date filter to `ledger report` so it only lists entries "
                    "on or after a date. Use pnpm, not npm. Don't edit the generated files "
                    "under src/gen/.")
    put("turn_context", {"cwd": "/home/dev/ledger", "approval_policy": "on-request",
                         "model": "gpt-5-codex"})
    message("assistant", "I'll read the report command and run the tests first.")
    shell("sed -n 1,80p src/report.ts", "export function report(entries: Entry[]) {\n")
    shell("cat src/gen/schema.ts", "// generated, do not edit\nexport type Entry = {}\n")
    patch("*** Begin Patch\n*** Add File: src/filters/since.ts\n+export function since(d: Date)"
          " {\n+  return (e: Entry) => e.date > d;\n+}\n*** Update File: src/report.ts\n@@\n"
          "-export function report(entries: Entry[]) {\n+export function report(entries: "
          "Entry[], opts: { since?: string }) {\n*** End Patch\n",
          "Success. Updated the following files:\nA src/filters/since.ts\nM src/report.ts\n")
    shell("pnpm tsc --noEmit",
          "src/report.ts(42,7): error TS2322: Type 'string' is not assignable to type "
          "'Date'.\n\nFound 1 error in src/report.ts:42\n", 2, new_format=True)
    patch("*** Begin Patch\n*** Update File: src/report.ts\n@@\n-  since(opts.since)\n+  "
          "since(new Date(opts.since))\n*** End Patch\n",
          "Success. Updated the following files:\nM src/report.ts\n")
    shell("pnpm tsc --noEmit", "", 0, new_format=True)
    shell("pnpm test",
          " RUN  v1.6.0 /home/dev/ledger\n\n ❯ test/report.test.ts (12 tests | 1 failed)\n"
          "   × report > filters by since 4ms\n     → expected 3 entries, got 2\n\n"
          " Test Files  1 failed (1)\n      Tests  1 failed | 11 passed (12)\n", 1)
    message("user", "The filter must be inclusive of the start date.")
    patch("*** Begin Patch\n*** Update File: src/filters/since.ts\n@@\n-  return (e: Entry) => "
          "e.date > d;\n+  return (e: Entry) => e.date >= d;\n*** End Patch\n",
          "Success. Updated the following files:\nM src/filters/since.ts\n")
    shell("pnpm test",
          " RUN  v1.6.0 /home/dev/ledger\n\n ✓ test/report.test.ts (12 tests) 9ms\n\n"
          " Test Files  1 passed (1)\n      Tests  12 passed (12)\n", 0)
    put("compacted", {"message": "The user wants a --since filter on ledger report "
                                 "(inclusive), pnpm only, no edits under src/gen/. The "
                                 "filter lives in src/filters/since.ts; the vitest config "
                                 "lives in vitest.config.ts; all 12 tests pass."})
    shell("git add -A && git commit -m \"report: add --since filter\"",
          "[feat/since-filter 9c1d2e3] report: add --since filter\n 2 files changed, 14 "
          "insertions(+), 2 deletions(-)\n create mode 100644 src/filters/since.ts\n", 0)
    shell("git push origin feat/since-filter",
          "To github.com:dev/ledger.git\n * [new branch]      feat/since-filter -> "
          "feat/since-filter\n", 0)
    message("assistant", "Done: `ledger report --since` is inclusive of the start date, "
                         "tsc is clean and all 12 tests pass. Committed as 9c1d2e3 and "
                         "pushed feat/since-filter to origin; a pull request is the next "
                         "step.")
    with open(HERE / "codex-ledger-since.jsonl", "w", encoding="utf-8") as out:
        for line in lines:
            out.write(json.dumps(line, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    python_vitest()
    typescript_jest()
    go_push()
    rust_crash()
    python_long_compactions()
    codex_rollout()
