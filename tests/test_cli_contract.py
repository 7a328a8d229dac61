"""The CLI contract, table-driven from cli/commands.py (a new command or option is covered
without editing this file): usage errors exit 2 and write nothing, refusals exit 1 and
write nothing, and either way stderr holds exactly one line, never a traceback or
"internal error". "Nothing" is checked byte for byte over the whole test folder, the
creation of a root, a workspace or any other folder included.

Most cases run in this process (fast); a sample runs through real processes, both
`python -m agent_journal` and the console script.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import CLI, DATA, Result, clean_env
from test_hostile import NO_DAC, SETPRIV

from agent_journal.cli.argv import BARE, MULTI, Command, Opt
from agent_journal.cli.commands import COMMANDS

WS = "ws"


# -- the journal every case runs against -------------------------------------------------

class Journal:
    """A private folder holding a root (workspace `ws`: an entry, an observation, a
    checkpoint, a file remote), an export of it, a transcript and a project folder."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.root = base / "journal"
        self.project = base / "project"
        self.remote = base / "remote"
        self.export = base / "an-export"
        self.transcript = base / "session.jsonl"
        self.rollout = base / "rollout.jsonl"

    def build(self) -> None:
        self.base.mkdir(mode=0o700)
        self.project.mkdir(mode=0o700)
        self.remote.mkdir(mode=0o700)
        self.transcript.write_text(json.dumps(
            {"type": "user", "sessionId": "s1", "uuid": "u1",
             "timestamp": "2026-01-01T00:00:00Z",
             "message": {"role": "user", "content": "hi"}}) + "\n")
        shutil.copyfile(next((DATA / "codex" / "sessions").glob("rollout-*.jsonl")),
                        self.rollout)
        # A folder others may write, to create a root under (as /tmp would be).
        (self.base / "shared").mkdir()
        os.chmod(self.base / "shared", 0o777)
        for argv in (["record", "--kind", "note", "--id", "n1", "--text", "hello"],
                     ["observe", "--kind", "tool_call", "--id", "o1", "--tool", "Bash",
                      "--input", "{}"],
                     ["checkpoint", "cp1"],
                     ["remote", "add", "r1", "file://" + str(self.remote)],
                     ["export", str(self.export)]):
            result = self.run(argv + ["--workspace", WS])
            assert result.code == 0, (argv, result.err)
        # The root's thesaurus (no workspace): `alias remove n1` has something to remove.
        assert self.run(["alias", "add", "n1", "n1"]).code == 0
        # The same journal, but others may write to its root folder.
        shutil.copytree(self.root, self.base / "shared-root", symlinks=True)
        os.chmod(self.base / "shared-root", 0o770)

    def restore(self, pristine: Path) -> None:
        """Put back the bytes of `pristine`, keeping the folder itself: it is the working
        folder, where a relative path a command was given lands."""
        for entry in os.scandir(self.base):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
        shutil.copytree(pristine, self.base, symlinks=True, dirs_exist_ok=True)

    def run(self, argv: list[str], env: dict[str, str | None] | None = None) -> Any:
        # Every default location is inside the test folder, so that a command that
        # wrongly falls back to one is seen writing there.
        full: dict[str, str | None] = {
            "AGENT_JOURNAL_ROOT": str(self.root), "AGENT_JOURNAL_NOW": "2026-06-01T12:00:00Z",
            "XDG_DATA_HOME": str(self.base / "xdg"), "HOME": str(self.base / "home"),
            "CODEX_HOME": str(self.base / "home" / ".codex"),
            # This installation's command on PATH, as after pipx install (a shared file
            # gets the PATH command, and is refused without it).
            "PATH": f"{Path(CLI).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
        full.update(env or {})
        try:
            return run_here(argv, full)
        finally:
            _reap_background_syncs()

    def valid(self, name: str) -> tuple[list[str], dict[str, str]]:
        """Arguments with which `name` does its real work here, so that one argument made
        bad is the only thing wrong. A command not named below gets `--workspace ws`
        (when it takes one) and `n1` for each required argument."""
        cmd = COMMANDS[name]
        flags = {opt.flag for opt in cmd.opts}
        options = {"--workspace": WS} if "--workspace" in flags else {}
        positional: list[str] = []
        special: dict[str, tuple[list[str], dict[str, str]]] = {
            "record": ([], {"--kind": "note", "--id": "n2", "--text": "t"}),
            "observe": ([], {"--kind": "tool_call", "--id": "o2", "--input": "{}"}),
            "invalidate": (["n1"], {"--reason": "r"}),
            "tombstone": (["n1"], {"--reason": "r"}),
            "search": (["hello"], {}),
            "get": (["n1"], {}),
            "trace": (["n1"], {}),
            "import claude-code": ([str(self.transcript)], {}),
            "import codex": ([str(self.rollout)], {}),
            "checkpoint": (["cp2"], {}),
            "export": ([str(self.base / "new-export")], {}),
            "merge": ([str(self.export)], {}),
            "remote add": (["r2", "file://" + str(self.remote)], {}),
            "remote remove": (["r1"], {}),
            "remote status": (["r1"], {}),
            "push": (["r1"], {}),
            "pull": (["r1"], {}),
            "sync": (["r1"], {}),
            "completion": (["bash"], {}),
            "mcp": ([], {"--session": "s1"}),
        }
        if name in special:
            positional, extra = special[name]
            options = options | extra
        if "--project" in flags:
            options["--project"] = str(self.project)
        positional = positional + ["n1"] * (
            sum(1 for arg in cmd.args if arg.required) - len(positional))
        return list(positional), options


def _reap_background_syncs() -> None:
    """Wait for the syncs a command left running (`hook sync-start|sync-end`, `--within`:
    this process's children running agent_journal), so what they write is theirs and
    lands before the next case's snapshot, never inside it."""
    me = str(os.getpid())
    for proc_stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = proc_stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (proc_stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if fields[1] == me and b"agent_journal" in cmdline:
            try:
                os.waitpid(int(proc_stat.parent.name), 0)
            except ChildProcessError:
                pass


def run_here(argv: list[str], env: dict[str, str | None]) -> Result:
    """cli.main.main in this process with its own streams, `env` over the environment
    (None: unset) and every other AGENT_JOURNAL_ variable unset; all put back after."""
    import io

    from agent_journal.cli.main import main

    names = set(env) | {k for k in os.environ if k.startswith("AGENT_JOURNAL_")}
    saved = {k: os.environ.get(k) for k in names}
    streams = sys.stdin, sys.stdout, sys.stderr
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace")
    try:
        for key in names:
            value = env.get(key)
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        sys.stdin = io.TextIOWrapper(io.BytesIO(b""), encoding="utf-8")
        sys.stdout, sys.stderr = out, err
        code = main(list(argv))
        out.flush()
        err.flush()
    finally:
        sys.stdin, sys.stdout, sys.stderr = streams
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return Result(code, out.buffer.getvalue().decode(),  # type: ignore[attr-defined]
                  err.buffer.getvalue().decode())  # type: ignore[attr-defined]


def argv_of(name: str, positional: list[str], options: dict[str, str],
            extra: tuple[str, ...] = ()) -> list[str]:
    argv = name.split() + positional
    for flag, value in options.items():
        argv += [flag, value]
    argv += list(extra)
    if "--dry-run" in {o.flag for o in COMMANDS[name].opts}:
        argv.append("--dry-run")  # never edit a real settings file, even on a bug
    return argv


def snapshot(base: Path) -> dict[str, tuple[Any, ...]]:
    """Every path under `base`: its type, permission bits and bytes (or link target)."""
    seen: dict[str, tuple[Any, ...]] = {}
    folders = [("", str(base))]
    while folders:
        rel, folder = folders.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                name = rel + entry.name
                st = entry.stat(follow_symlinks=False)
                if stat.S_ISLNK(st.st_mode):
                    seen[name] = ("link", os.readlink(entry.path))
                elif stat.S_ISREG(st.st_mode):
                    with open(entry.path, "rb") as fh:
                        seen[name] = ("file", stat.S_IMODE(st.st_mode),
                                      hashlib.blake2b(fh.read()).digest())
                else:
                    seen[name] = ("other", stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode))
                    if stat.S_ISDIR(st.st_mode):
                        folders.append((name + "/", entry.path))
    return seen


def changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    return sorted({p for p in before.keys() | after.keys() if before.get(p) != after.get(p)})


# -- the cases, made from the table ------------------------------------------------------

# What a flag that takes a whole number must refuse.
BAD_NUMBERS = {"text": "abc", "decimal": "1.5", "nan": "nan", "NaN": "NaN", "inf": "inf",
               "hex": "0x10", "exponent": "1e3", "padded": " 5", "underscore": "1_000",
               "fullwidth": "\uff15", "huge": "9" * 30, "enormous": "9" * 5000}
# What an id must refuse (INVARIANTS: ids name files and keys).
BAD_IDS = {"slash": "a/b", "backslash": "a\\b", "dotdot": "..", "dot": ".", "nul": "a\x00b",
           "control": "a\x01b", "newline": "a\nb", "escape": "a\x1b[31mb", "c1": "a\x85b",
           "long": "x" * 10_000, "not-utf8": "w\udce9", "dash": "-x", "padded": " x "}


class Case:
    """One bad invocation and what it must give: exit `code`, one line on stderr,
    nothing on stdout, nothing changed under the test folder."""

    def __init__(self, name: str, label: str, argv: list[str], code: int = 2,
                 env: dict[str, str | None] | None = None) -> None:
        self.name = name
        self.label = label
        self.argv = argv
        self.code = code
        self.env = env or {}

    def __repr__(self) -> str:
        return f"{self.name} [{self.label}]"


def is_id(slot: Any) -> bool:
    return getattr(slot, "type", None) == "id"


def _other_flag(cmd: Command, opt: Opt) -> str | None:
    """A flag of `cmd` other than `opt`, preferring one that takes no value."""
    others = [o for o in cmd.opts if o.flag != opt.flag]
    others.sort(key=lambda o: o.kind != BARE)
    return others[0].flag if others else None


def value_cases(journal: Journal, name: str) -> list[Case]:
    """Every option (and argument) given a value it must refuse."""
    cmd = COMMANDS[name]
    out: list[Case] = []

    def case(label: str, positional: list[str], options: dict[str, str],
             extra: tuple[str, ...] = ()) -> None:
        out.append(Case(name, label, argv_of(name, positional, options, extra)))

    for opt in cmd.opts:
        positional, options = journal.valid(name)
        good = options.pop(opt.flag, None)
        if opt.kind == BARE:
            case(f"{opt.flag}=true", positional, options, (opt.flag + "=true",))
            case(f"{opt.flag}=", positional, options, (opt.flag + "=",))
            case(f"{opt.flag} true", positional, options, (opt.flag, "true"))
            continue
        case(f"{opt.flag} at the end", positional, options, (opt.flag,))
        other = _other_flag(cmd, opt)
        if other is not None:
            case(f"{opt.flag} {other}", positional, options, (opt.flag, other))
        case(f"{opt.flag} ''", positional, options, (opt.flag, ""))
        case(f"{opt.flag}=", positional, options, (opt.flag + "=",))
        if opt.kind != MULTI:
            value = good or ("1" if opt.type == "int" else (opt.choices or ("x",))[0])
            case(f"{opt.flag} twice", positional, options, (opt.flag, value, opt.flag, value))
        if opt.type == "int":
            bad = dict(BAD_NUMBERS)
            if opt.minimum is not None:
                bad["below minimum"] = str(opt.minimum - 1)
            for label, value in bad.items():
                case(f"{opt.flag} {label}", positional, options | {opt.flag: value})
        if opt.choices is not None:
            case(f"{opt.flag} not a choice", positional, options | {opt.flag: "bogus"})
            case(f"{opt.flag} in capitals", positional,
                 options | {opt.flag: opt.choices[0].upper()})
        if is_id(opt):
            for label, value in BAD_IDS.items():
                case(f"{opt.flag} {label}", positional, options | {opt.flag: value})
    for index, arg in enumerate(cmd.args):
        if is_id(arg):
            for label, value in BAD_IDS.items():
                positional, options = journal.valid(name)
                positional = positional + ["n1"] * (index + 1 - len(positional))
                positional[index] = value
                case(f"{arg.metavar} {label}", positional, options)
    return out


def shape_cases(journal: Journal, name: str) -> list[Case]:
    """Unknown options, stray and missing arguments, missing required options."""
    cmd = COMMANDS[name]
    positional, options = journal.valid(name)
    # (A last argument taking every remaining word has no stray one.)
    full = len(positional) == len(cmd.args) and not any(arg.many for arg in cmd.args)
    out = [Case(name, "unknown option", argv_of(name, positional, options,
                                                ("--no-such-option",))),
           Case(name, "unknown option=value", argv_of(name, positional, options,
                                                      ("--no-such-option=1",)))]
    if full:
        out.append(Case(name, "single-dash option", argv_of(name, positional, options,
                                                            ("-x",))))
        out.append(Case(name, "stray argument", argv_of(name, positional + ["junk"],
                                                        options)))
    if any(arg.required for arg in cmd.args):
        required = sum(1 for arg in cmd.args if arg.required)
        out.append(Case(name, "missing argument",
                        argv_of(name, positional[:required - 1], options)))
    for opt in cmd.opts:
        if opt.required:
            rest = {k: v for k, v in options.items() if k != opt.flag}
            out.append(Case(name, f"no {opt.flag}", argv_of(name, positional, rest)))
    # The global options, which may stand before the command's name too.
    for flag in ("--root", "--workspace"):
        if flag in {opt.flag for opt in cmd.opts}:
            rest = {k: v for k, v in options.items() if k != flag}
            tail = argv_of(name, positional, rest)
            out += [Case(name, f"{flag} before it, no value", [flag] + tail),
                    Case(name, f"{flag}= before it", [flag + "="] + tail),
                    Case(name, f"{flag} '' before it", [flag, ""] + tail)]
    return out


def env_cases(journal: Journal, name: str) -> list[Case]:
    """The environment's defaults, empty or malformed."""
    cmd = COMMANDS[name]
    out: list[Case] = []
    for opt in cmd.opts:
        if opt.env is None or opt.kind == BARE:
            continue
        positional, options = journal.valid(name)
        options.pop(opt.flag, None)
        argv = argv_of(name, positional, options)
        out.append(Case(name, f"${opt.env} empty", argv, env={opt.env: ""}))
        if is_id(opt):
            for label in ("slash", "newline", "long"):
                out.append(Case(name, f"${opt.env} {label}", argv,
                                env={opt.env: BAD_IDS[label]}))
    if any(opt.flag == "--root" for opt in cmd.opts):
        positional, options = journal.valid(name)
        argv = argv_of(name, positional, options)
        for label, value in (("not a time", "yesterday-ish"), ("empty", ""),
                             ("out of range", "2026-13-45T99:00:00Z")):
            out.append(Case(name, f"$AGENT_JOURNAL_NOW {label}", argv,
                            env={"AGENT_JOURNAL_NOW": value}))
        out.append(Case(name, "$AGENT_JOURNAL_ROOT empty", argv,
                        env={"AGENT_JOURNAL_ROOT": ""}))
    return out


def _uses_workspace(cmd: Command) -> bool:
    return any(opt.flag == "--workspace" and opt.required for opt in cmd.opts)


# The reads (spec/cli-json.md): a root or a workspace that is not there is refused and
# nothing is created.
READS = {"show", "search", "get", "trace", "digest", "coverage", "decay", "timeline",
         "checkpoints", "export", "compact"}


def refusal_cases(journal: Journal, name: str) -> list[Case]:
    """A root that cannot be used, a workspace that is not there: exit 1, nothing made."""
    cmd = COMMANDS[name]
    out: list[Case] = []
    if (not any(opt.flag == "--root" for opt in cmd.opts) or cmd.fail_open
            or name.startswith("hooks") or name in ("doctor", "mcp")):
        # The installers and doctor report on the root, never open it; mcp opens it for
        # each request (here, with no client on stdin, there is none).
        return out
    positional, options = journal.valid(name)
    base = journal.base
    out.append(Case(name, "root is a file", argv_of(name, positional, options | {
        "--root": str(base / "session.jsonl")}), code=1))
    out.append(Case(name, "root is group-writable", argv_of(name, positional, options | {
        "--root": str(base / "shared-root")}), code=1))
    out.append(Case(name, "root under a world-writable folder", argv_of(
        name, positional, options | {"--root": str(base / "shared" / "new" / "journal")}),
        code=1))
    if name in READS:
        out.append(Case(name, "root that does not exist", argv_of(
            name, positional, options | {"--root": str(base / "no-root")}), code=1))
        out.append(Case(name, "workspace that does not exist", argv_of(
            name, positional, options | {"--workspace": "no-such-ws"}), code=1))
    return out


def all_cases(journal: Journal) -> list[Case]:
    out: list[Case] = []
    for name in COMMANDS:
        out += value_cases(journal, name) + shape_cases(journal, name)
        out += env_cases(journal, name) + refusal_cases(journal, name)
    return out


def check(journal: Journal, case: Case, pristine: Path, run: Any = None,
          before: dict[str, Any] | None = None) -> str | None:
    """Run `case` (in this process, or by `run`); what it got wrong, or None. A case that
    changed anything puts the journal back, so the next case starts from the same bytes
    (`before`, the snapshot of those bytes, when the caller has it)."""
    cmd = COMMANDS[case.name]
    before = before if before is not None else snapshot(journal.base)
    result = (run or journal.run)(case.argv, case.env)
    after = snapshot(journal.base)
    changed = changes(before, after)
    wrote = bool(changed)
    problems = []
    if cmd.fail_open:
        # It logs its failure under the root it would have used (the one its arguments
        # name, else the default), and exits 0: a log and the folders leading to it.
        logs = [p for p in changed if p.endswith("hook.log")]
        kept = {p for log in logs for p in [log, *(str(q) for q in Path(log).parents)]}
        # (Never under a folder named after a flag: a flag is not a value.)
        changed = [p for p in changed if p not in kept or p.startswith("-")]
        if result.code != 0 or result.out:
            problems.append(f"exit {result.code}, stdout {result.out[:80]!r}")
    else:
        if result.code != case.code:
            problems.append(f"exit {result.code}, not {case.code}")
        if result.err.count("\n") != 1 or not result.err.startswith("error: "):
            problems.append(f"stderr is not one error line: {result.err[:300]!r}")
        if result.out:
            problems.append(f"stdout {result.out[:80]!r}")
    if "Traceback" in result.err or "internal error" in result.err:
        problems.append(f"stderr {result.err[:300]!r}")
    if changed:
        problems.append(f"wrote {changed[:5]}")
    if wrote:
        journal.restore(pristine)
    if not problems:
        return None
    return f"{case!r}: {'; '.join(problems)} [{result.err.strip()[:200]!r}]"


# -- the tests ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def journal(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One journal per worker, and the pristine copy a case that wrote is put back from."""
    folder = tmp_path_factory.mktemp("contract")
    os.chmod(folder, 0o700)
    journal = Journal(folder / "base")
    journal.build()
    pristine = folder / "pristine"
    shutil.copytree(journal.base, pristine, symlinks=True)
    saved = os.getcwd()
    os.chdir(journal.base)  # relative paths land here; no project file above it
    try:
        yield journal, pristine
    finally:
        os.chdir(saved)


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_bad_invocation_is_one_line_and_writes_nothing(journal, name):
    journal, pristine = journal
    positional, options = journal.valid(name)
    works = journal.run(argv_of(name, positional, options))
    journal.restore(pristine)
    # The arguments every case starts from are good ones: the one made bad is why it fails.
    assert works.code == 0, (name, works.err)
    cases = (value_cases(journal, name) + shape_cases(journal, name)
             + env_cases(journal, name) + refusal_cases(journal, name))
    before = snapshot(journal.base)
    failures = [problem for case in cases
                if (problem := check(journal, case, pristine, before=before))]
    assert not failures, f"{len(failures)} of {len(cases)} cases:\n" + "\n".join(failures)


@pytest.mark.parametrize("name", list(COMMANDS))
def test_help_of_every_command_names_every_option(name, capsys):
    from agent_journal.cli.main import main

    for asked in ("--help", "-h"):
        capsys.readouterr()
        assert main(name.split() + [asked]) == 0
        out, err = capsys.readouterr()
        assert err == ""
        rows = {line.split()[1]: line for line in out.splitlines()
                if len(line.split()) > 1 and line.split()[1].startswith("--")}
        for opt in COMMANDS[name].opts:
            assert opt.flag in rows, (name, opt.flag, out)
            if opt.kind == BARE:  # shown with no value to pass
                assert "<bool>" not in rows[opt.flag], (name, opt.flag, rows[opt.flag])
            else:
                assert opt.metavar in rows[opt.flag], (name, opt.flag, rows[opt.flag])
        for arg in COMMANDS[name].args:
            assert arg.metavar in out, (name, arg.metavar)


# -- through real processes --------------------------------------------------------------

ENTRY_POINTS = {"console script": [CLI], "python -m": [sys.executable, "-m", "agent_journal"]}


def process_runner(journal: Journal, entry: list[str], prefix: list[str] | None = None
                   ) -> Any:
    def run(argv: list[Any], env: dict[str, str | None] | None = None) -> Result:
        full: dict[str, str | None] = {
            "AGENT_JOURNAL_ROOT": str(journal.root), "AGENT_JOURNAL_NOW": "2026-06-01T12:00:00Z",
            "XDG_DATA_HOME": str(journal.base / "xdg"), "HOME": str(journal.base / "home"),
            "CODEX_HOME": str(journal.base / "home" / ".codex"),
            # This installation's command on PATH, as after pipx install: a shared file
            # (a project's settings.json) gets the PATH command, and is refused without it.
            "PATH": f"{Path(CLI).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
        full.update(env or {})
        environ = clean_env(**{k: v for k, v in full.items() if v is not None})
        proc = subprocess.run([*(prefix or []), *entry, *argv], capture_output=True,
                              stdin=subprocess.DEVNULL, env=environ, cwd=journal.base,
                              timeout=120)
        return Result(proc.returncode, proc.stdout.decode(errors="replace"),
                      proc.stderr.decode(errors="replace"))

    return run


# Undecodable bytes in argv, as a shell passes them (Python sees lone surrogates).
BYTES_CASES = [
    ("record", ["record", "--workspace", b"w\xe9", "--kind", "note", "--id", "n9", "--text",
                "t"]),
    ("record", ["record", "--workspace", WS, "--kind", "note", "--id", "n9", "--text",
                b"caf\xe9"]),
    ("get", ["get", "--workspace", WS, b"\xff"]),
    ("show", ["show", "--workspace", WS, "--id", b"\xc3\x28"]),
    ("record", ["record", "--workspace", WS, "--root", b"journal-\xe9", "--kind", "note",
                "--id", "n9", "--text", "t"]),
    ("tombstone", ["tombstone", b"n1\x80", "--workspace", WS, "--reason", "r"]),
]


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_a_sample_through_real_processes(journal, entry):
    """Every 97th case of the matrix (one or two per command) and undecodable argv bytes,
    through the console script and `python -m agent_journal`: the same contract."""
    journal, pristine = journal
    run = process_runner(journal, ENTRY_POINTS[entry])
    # (A NUL cannot be passed to a process: no shell can send one.)
    cases = [case for case in all_cases(journal)[::97]
             if not any("\x00" in str(token) for token in case.argv)]
    cases += [Case(name, "bytes", argv) for name, argv in BYTES_CASES]
    failures = [problem for case in cases if (problem := check(journal, case, pristine, run))]
    assert len(cases) > 25
    assert not failures, "\n".join(failures)


@pytest.mark.skipif(SETPRIV is None or os.geteuid() != 0,
                    reason="needs setpriv and root to drop the DAC override")
def test_a_root_that_cannot_be_written_is_one_line_and_gains_nothing(journal):
    journal, pristine = journal
    run = process_runner(journal, [CLI], NO_DAC)
    def read_only(top: Path, folder_mode: int, file_mode: int) -> None:
        for folder, _, files in os.walk(top):
            os.chmod(folder, folder_mode)
            for name in files:
                os.chmod(os.path.join(folder, name), file_mode)

    read_only(journal.root, 0o500, 0o400)
    try:
        cases = [Case(name, "root not writable", argv_of(name, *journal.valid(name)), code=1)
                 for name in ("record", "observe", "invalidate", "tombstone", "checkpoint",
                              "import claude-code", "merge", "remote add", "remote remove",
                              "push", "sync")]
        failures = [problem for case in cases
                    if (problem := check(journal, case, pristine, run))]
    finally:
        read_only(journal.root, 0o700, 0o600)
    assert not failures, "\n".join(failures)


# -- the project file --------------------------------------------------------------------

BAD_PROJECT_FILES = {
    "not TOML": b'workspace = "shop\nroot',
    "unknown key": b'workspace = "shop"\nextra = 1\n',
    "workspace not a string": b"workspace = 5\n",
    "workspace empty": b'workspace = ""\n',
    "workspace not an id": b'workspace = "a/b"\n',
    "workspace with a newline": b'workspace = "a\\nb"\n',
    "root empty": b'workspace = "shop"\nroot = ""\n',
    "not UTF-8": b"\xff\xfe",
}


def test_the_project_file_finds_the_workspace_and_a_bad_one_is_refused(tmp_path):
    """Run from below a project folder (real processes: the lookup is made once per
    process): the file gives the workspace and the root; a flag or variable left empty
    is still exit 2; a file that is wrong is exit 1 naming it, nothing written."""
    base = tmp_path / "base"
    base.mkdir(mode=0o700)
    project = base / "project"
    (project / "src").mkdir(parents=True)
    project_file = project / ".agent-journal.toml"
    project_file.write_text('workspace = "shop"\nroot = "journal"\n')
    env = clean_env(AGENT_JOURNAL_NOW="2026-06-01T12:00:00Z", HOME=str(base / "home"),
                    XDG_DATA_HOME=str(base / "xdg"))

    def run(*argv: str, extra: dict[str, str] | None = None) -> Result:
        proc = subprocess.run([CLI, *argv], capture_output=True, env=env | (extra or {}),
                              cwd=project / "src", timeout=120)
        return Result(proc.returncode, proc.stdout.decode(), proc.stderr.decode())

    record = ("record", "--kind", "note", "--id", "n1", "--text", "hello")
    assert run(*record).out == "recorded n1\n"
    assert (project / "journal" / "workspaces" / "shop" / "segments").is_dir()
    assert run("show", "--json").json()["entries"][0]["id"] == "n1"
    before = snapshot(base)
    for argv, extra in ((["show", "--workspace"], None), (["show", "--root"], None),
                        (["show", "--workspace", ""], None),
                        (["show"], {"AGENT_JOURNAL_WORKSPACE": ""}),
                        (["show"], {"AGENT_JOURNAL_ROOT": ""})):
        result = run(*argv, extra=extra)
        assert (result.code, result.out) == (2, ""), (argv, extra, result.err)
        assert result.err.count("\n") == 1 and result.err.startswith("error: ")
    for label, content in BAD_PROJECT_FILES.items():
        project_file.write_bytes(content)
        before = snapshot(base)
        for argv in (record, ("show",)):
            result = run(*argv)
            assert (result.code, result.out) == (1, ""), (label, argv, result.err)
            assert result.err.count("\n") == 1, (label, result.err)
            assert result.err.startswith(f"error: project file {project_file}"), result.err
            assert changes(before, snapshot(base)) == [], label


def test_a_root_is_never_created_in_tmp_itself(journal):
    """/tmp is world-writable: a root made in it (or in a folder not yet made in it) is
    refused, for a write and for a read, and nothing appears in /tmp."""
    journal, _ = journal
    name = f"agent-journal-contract-{os.getpid()}-{os.urandom(4).hex()}"
    for root in (f"/tmp/{name}", f"/tmp/{name}/sub/journal"):
        for argv in (["record", "--kind", "note", "--id", "n1", "--text", "t"], ["show"]):
            result = journal.run(argv + ["--workspace", WS, "--root", root])
            assert (result.code, result.out) == (1, ""), (root, argv, result.err)
            assert result.err.count("\n") == 1, result.err
            assert "world-writable" in result.err, result.err
            assert not os.path.lexists(f"/tmp/{name}")
