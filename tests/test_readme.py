"""Every example in README.md is run (issue 33).

The README's fenced shell blocks (```sh, ```bash, ```console, ```shell) are read in order
and each command in them (a line, with its backslash continuations) is run as a real
process, as a reader following the README in one terminal would: a private HOME, the
default journal root inside it (under XDG_DATA_HOME), a scratch git project `myproject` as
the working folder, and this checkout's .venv/bin first on PATH. What a command exports or where it
`cd`s carries on to the next one (the environment also into later blocks; each block starts
in the project folder, or in HOME when its first command is a `cd`, like a new terminal).

A command fails the test when it exits non-zero, unless the README says what it exits
with: a trailing comment holding `(exit N)`; and when its trailing comment says it
`finds ID` and ID is not in what it prints.

Nothing is left out silently. What cannot run here is named, with its reason:
- a whole block, by the HTML comment `<!-- not run by tests/test_readme.py: REASON -->`
  on the line right before its fence in README.md;
- a single command, in SKIPPED below (the exact start of the command, and why).
Placeholders and places outside the scratch folder are replaced as SUBSTITUTIONS says;
an entry in SKIPPED or SUBSTITUTIONS that no longer matches the README fails the test, so
these lists cannot go stale. A new example is run by default.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
BIN = Path(sys.executable).parent
SHELL_LANGS = {"sh", "bash", "console", "shell"}
SKIP_MARK = re.compile(r"<!--\s*not run by tests/test_readme\.py:\s*(?P<reason>.+?)\s*-->")
EXPECTED_EXIT = re.compile(r"#.*\(exit (?P<code>\d+)\b")
FINDS = re.compile(r"#.*\bfinds (?P<id>[A-Za-z0-9][\w-]*[A-Za-z0-9])")
TIMEOUT_S = 120  # a bound for a hung command, never a pace: nothing here waits on a clock

# Commands that cannot run on this machine or in a test: the start of the command as the
# README writes it -> why.
SKIPPED: dict[str, str] = {
    "pipx install ./agent-journal": "installs from the network into the user's pipx",
    "codex exec --json": "needs the Codex client and a model behind it",
    "pip install 'agent-journal[s3]'": "installs from the network",
    "agent-journal sync team": "the `team` remote is a real AWS bucket",
    "agent-journal remote status team": "the `team` remote is a real AWS bucket",
}

# README text -> what runs instead, and why. {home} and {project} are filled in.
SUBSTITUTIONS: list[tuple[str, str, str]] = [
    ("~/.claude/projects/<dir>/<session>.jsonl",
     "~/.claude/projects/-myproject/session-1.jsonl",
     "placeholders: a Claude Code transcript of the scratch project, written by the test"),
    ("rollout-<...>.jsonl",
     "rollout-2025-10-29T00-59-38-019a2d7a-41c4-78b1-b7cc-a45d62a89cd5.jsonl",
     "placeholder: a real Codex session (tests/data/codex) moved to the scratch project"),
    ("/media/usb/", "{home}/media/usb/", "a USB stick: a folder in the scratch HOME"),
    ("file:///mnt/share/", "file://{home}/mnt/share/",
     "a shared folder: a folder in the scratch HOME"),
]

CODEX_SESSION = (REPO / "tests" / "data" / "codex" / "sessions"
                 / "rollout-2025-10-29T00-59-38-019a2d7a-41c4-78b1-b7cc-a45d62a89cd5.jsonl")


@dataclass
class Command:
    text: str  # as the README writes it, continuations joined
    line: int  # README line it starts on
    expect: int = 0
    finds: str | None = None  # a trailing comment `finds ID`: ID is in what it prints


@dataclass
class Block:
    line: int  # README line of the opening fence
    lang: str
    commands: list[Command] = field(default_factory=list)
    skip_reason: str | None = None


def readme_blocks(text: str) -> list[Block]:
    """The README's fenced shell blocks, in order, each with its commands."""
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        fence = re.match(r"^(`{3,})\s*(\S*)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        ticks, lang = fence.group(1), fence.group(2).lower()
        start = i
        i += 1
        body: list[tuple[int, str]] = []
        while i < len(lines) and lines[i].rstrip() != ticks:
            body.append((i + 1, lines[i]))
            i += 1
        i += 1
        if lang not in SHELL_LANGS:
            continue
        block = Block(line=start + 1, lang=lang)
        prev = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        mark = SKIP_MARK.search(prev)
        if mark:
            block.skip_reason = mark.group("reason")
        pending: Command | None = None
        for number, raw in body:
            line = raw.rstrip()
            if lang == "console":
                if not line.startswith("$ ") and pending is None:
                    continue  # output shown in a console block
                line = line[2:] if pending is None else line
            if pending is None:
                if not line.strip() or line.lstrip().startswith("#"):
                    continue
                pending = Command(text=line, line=number)
            else:
                pending.text += "\n" + line
            if not line.endswith("\\"):
                code = EXPECTED_EXIT.search(line)
                pending.expect = int(code.group("code")) if code else 0
                finds = FINDS.search(line)
                pending.finds = finds.group("id") if finds else None
                block.commands.append(pending)
                pending = None
        if pending is not None:
            block.commands.append(pending)
        blocks.append(block)
    return blocks


def claude_transcript(path: Path, project: Path) -> None:
    """A short Claude Code session of the scratch project: a prompt and one Bash call."""
    common = {"sessionId": "session-1", "cwd": str(project), "gitBranch": "main",
              "version": "2.1.0"}
    records = [
        {"type": "user", "uuid": "u1", "timestamp": "2026-01-05T10:00:00.000Z",
         "message": {"role": "user", "content": "run the tests"}},
        {"type": "assistant", "uuid": "a1", "parentUuid": "u1",
         "timestamp": "2026-01-05T10:00:01.000Z",
         "message": {"role": "assistant", "content": [
             {"type": "tool_use", "id": "toolu_readme1", "name": "Bash",
              "input": {"command": "pytest -q"}}]}},
        {"type": "user", "uuid": "u2", "parentUuid": "a1",
         "timestamp": "2026-01-05T10:00:02.000Z",
         "message": {"role": "user", "content": [
             {"type": "tool_result", "tool_use_id": "toolu_readme1",
              "content": "2 passed in 0.01s"}]}},
    ]
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps({**common, **r}) + "\n" for r in records))


def scratch(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A private HOME with a git project `myproject`, the transcripts the import examples
    name, a second journal root for `merge ~/other-root`, and the environment to run in."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    project = home / "myproject"
    project.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AGENT_JOURNAL_", "XDG_", "GIT_", "CLAUDE", "CODEX"))}
    # The default root (no $AGENT_JOURNAL_ROOT), as a newcomer has it.
    env.update(HOME=str(home), XDG_DATA_HOME=str(home / ".local" / "share"),
               PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
               GIT_AUTHOR_NAME="readme", GIT_AUTHOR_EMAIL="readme@example.invalid",
               GIT_COMMITTER_NAME="readme", GIT_COMMITTER_EMAIL="readme@example.invalid")
    for git in (["git", "init", "-q", "-b", "main"],
                ["git", "commit", "-q", "--allow-empty", "-m", "start"]):
        subprocess.run(git, cwd=project, env=env, check=True, timeout=TIMEOUT_S)
    claude_transcript(home / ".claude" / "projects" / "-myproject" / "session-1.jsonl",
                      project)
    codex = home / ".codex" / "sessions" / "2025" / "10" / "29" / CODEX_SESSION.name
    codex.parent.mkdir(parents=True)
    codex.write_text(CODEX_SESSION.read_text().replace("/home/user/project", str(project)))
    (home / "media" / "usb").mkdir(parents=True)
    (home / "mnt" / "share" / "journals").mkdir(parents=True)
    other = subprocess.run(
        [str(BIN / "agent-journal"), "record", "--kind", "note", "--id", "n-other",
         "--text", "written on another machine"],
        env={**env, "AGENT_JOURNAL_ROOT": str(home / "other-root"),
             "AGENT_JOURNAL_WORKSPACE": "myproject"},
        cwd=home, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert other.returncode == 0, other.stderr
    return home, project, env


def run(command: str, cwd: Path, env: dict[str, str], state: Path) -> tuple[
        subprocess.CompletedProcess[str], Path, dict[str, str]]:
    """`command` in bash, then where it left the working folder and the environment."""
    script = (f"{command}\n__aj_rc=$?\n"
              f"pwd > {shlex.quote(str(state / 'cwd'))}\n"
              f"env -0 > {shlex.quote(str(state / 'env'))}\n"
              "exit $__aj_rc\n")
    done = subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
    cwd = Path((state / "cwd").read_text().strip())
    env = dict(item.split("=", 1) for item in (state / "env").read_text().split("\0")
               if "=" in item)
    for shell_own in ("_", "SHLVL", "PWD", "OLDPWD", "__aj_rc"):
        env.pop(shell_own, None)
    return done, cwd, env


def test_readme_blocks_are_found() -> None:
    blocks = readme_blocks(README.read_text())
    assert len(blocks) >= 10
    commands = [c.text for b in blocks for c in b.commands]
    assert any(c.startswith("agent-journal hooks install claude-code") for c in commands)
    assert all(not c.lstrip().startswith("#") for c in commands)


def test_every_readme_example_runs(tmp_path: Path) -> None:
    home, project, env = scratch(tmp_path)
    state = tmp_path / "state"
    state.mkdir()
    blocks = readme_blocks(README.read_text())
    used_skips: set[str] = set()
    used_subs: set[str] = set()
    failures: list[str] = []
    ran = 0
    started = time.monotonic()
    for block in blocks:
        if block.skip_reason is not None:
            print(f"README.md:{block.line} block not run: {block.skip_reason}")
            continue
        if not block.commands:
            continue
        first = block.commands[0].text
        cwd = home if first.startswith("cd ") else project
        for command in block.commands:
            skip = next((s for s in SKIPPED if command.text.startswith(s)), None)
            if skip is not None:
                used_skips.add(skip)
                print(f"README.md:{command.line} not run: {SKIPPED[skip]}")
                continue
            text = command.text
            for old, new, _why in SUBSTITUTIONS:
                if old in text:
                    used_subs.add(old)
                    text = text.replace(old, new.format(home=home, project=project))
            done, cwd, env = run(text, cwd, env, state)
            ran += 1
            first_line = (done.stdout.strip().splitlines() or [""])[0][:100]
            print(f"README.md:{command.line} exit {done.returncode}: {text.splitlines()[0]}"
                  f"\n    -> {first_line}")
            if done.returncode != command.expect:
                failures.append(
                    f"README.md:{command.line}: {command.text!r} exited {done.returncode}"
                    f" (expected {command.expect})\n  stderr: {done.stderr.strip()[-800:]}"
                    f"\n  stdout: {done.stdout.strip()[-400:]}")
            elif command.finds and command.finds not in done.stdout:
                failures.append(f"README.md:{command.line}: {command.text!r} says it finds "
                                f"{command.finds}, but printed:\n{done.stdout[-800:]}")
    print(f"ran {ran} README commands in {time.monotonic() - started:.1f}s")
    assert not failures, "\n".join(failures)
    assert ran >= 40
    unused = set(SKIPPED) - used_skips
    assert not unused, f"SKIPPED entries matching nothing: {unused}"
    stale = {old for old, _, _ in SUBSTITUTIONS} - used_subs
    assert not stale, f"SUBSTITUTIONS matching nothing: {stale}"


@pytest.mark.parametrize("text, expect, finds", [
    ("agent-journal show --id nosuch   # no such id (exit 1)", 1, None),
    ("agent-journal show", 0, None),
    ('agent-journal search "force push"   # finds c-main; ranked', 0, "c-main"),
])
def test_expectations_are_read_from_the_trailing_comment(
        text: str, expect: int, finds: str | None) -> None:
    block = readme_blocks(f"```sh\n{text}\n```\n")[0]
    assert (block.commands[0].expect, block.commands[0].finds) == (expect, finds)


def test_a_block_marked_not_run_is_skipped_with_its_reason() -> None:
    text = ("<!-- not run by tests/test_readme.py: needs make -->\n"
            "```sh\nmake demo\n```\n\n```bash\nagent-journal show \\\n  --json\n```\n")
    marked, plain = readme_blocks(text)
    assert marked.skip_reason == "needs make"
    assert plain.skip_reason is None
    assert [c.text for c in plain.commands] == ["agent-journal show \\\n  --json"]


def test_the_config_example_is_json_the_journal_accepts(tmp_path: Path) -> None:
    """The README's ```json block is a root's config.json: its redaction pattern applies."""
    text = README.read_text()
    blocks = re.findall(r"^```json\n(.*?)^```$", text, flags=re.S | re.M)
    assert blocks, "the README shows a config.json"
    config = json.loads(blocks[0])
    root = tmp_path / "private" / "journal"
    root.mkdir(parents=True)
    (tmp_path / "private").chmod(0o700)
    (root / "config.json").write_text(json.dumps(config))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_JOURNAL_")}
    env.update(AGENT_JOURNAL_ROOT=str(root), AGENT_JOURNAL_WORKSPACE="myproject")
    cli = str(BIN / "agent-journal")
    for args in (["record", "--kind", "note", "--id", "n-1", "--text", "ORDER-4471-ZULU"],
                 ["show", "--id", "n-1"]):
        done = subprocess.run([cli, *args], env=env, capture_output=True, text=True,
                              timeout=TIMEOUT_S)
        assert done.returncode == 0, done.stderr
    assert "[REDACTED:order-code]" in done.stdout and "ORDER-4471" not in done.stdout
