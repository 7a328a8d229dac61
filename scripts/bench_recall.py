"""Recall of the digest against a question set (tests/data/recall by default).

Each question file names a transcript under tests/data (a Claude Code one, or a
Codex session file when its "format" is "codex"; "earlier" may list transcripts
of the same work imported before it, such as the file a resumed session
continued from) and holds questions an agent resuming that session must be
able to answer, each with must_contain: literal strings that any correct digest answering it
contains. For every file this imports the transcript (and its session's
subagent transcripts) into a fresh journal root, runs `agent-journal digest`,
and counts a question as answered when every must_contain string occurs in the
digest, case-insensitively. A question file's "journal" lists agent-journal
commands (record, invalidate) the session ran, replayed after the import.

    .venv/bin/python scripts/bench_recall.py               # table + overall
    .venv/bin/python scripts/bench_recall.py --json        # the figures as JSON
    .venv/bin/python scripts/bench_recall.py --show ef958aa1   # what one misses
    .venv/bin/python scripts/bench_recall.py --max-chars 4000  # passed to digest
    .venv/bin/python scripts/bench_recall.py --min-recall 30   # exit 1 below 30%
    .venv/bin/python scripts/bench_recall.py --set recall-heldout  # another question set

It is a measure, not a test: it exits 0 whatever the recall, unless
--min-recall is given and overall recall is below it. Standard library only;
the agent-journal it runs is the repo's own .venv/bin/agent-journal.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
AGENT_JOURNAL = REPO / ".venv" / "bin" / "agent-journal"
WORKSPACE = "recall"
TIMEOUT = 600


@dataclass
class Result:
    name: str
    transcript: str
    questions: list[dict]
    digest: str = ""
    answered: list[str] = field(default_factory=list)
    missed: list[dict] = field(default_factory=list)
    subagents: list[dict] = field(default_factory=list)
    error: str | None = None
    summary: str | None = None  # the client's own compaction summary at a cut
    with_summary: list[str] = field(default_factory=list)  # answered by digest + summary
    false_open: list[str] = field(default_factory=list)  # fixed failures listed as open

    @property
    def recall(self) -> float:
        return 100.0 * len(self.answered) / len(self.questions) if self.questions else 0.0

    def figures(self) -> dict:
        return {
            "name": self.name,
            "transcript": self.transcript,
            "questions": len(self.questions),
            "answered": len(self.answered),
            "recall": round(self.recall, 1),
            "digestChars": len(self.digest),
            "missed": [m["id"] for m in self.missed],
            "subagents": self.subagents,
            "error": self.error,
            "withSummary": None if self.summary is None else len(self.with_summary),
            "falseOpen": self.false_open,
        }


def clean_env(home: Path) -> dict[str, str]:
    """The caller's environment without any journal settings that could reach
    a real journal; XDG_DATA_HOME points into the private temporary folder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_JOURNAL_")}
    env["XDG_DATA_HOME"] = str(home / "xdg-data")
    return env


def run_cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, env=env, cwd=REPO, capture_output=True, text=True, timeout=TIMEOUT)


def first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:200]
    return ""


def subagent_files(spec: dict, transcript: Path) -> list[Path]:
    """Subagent transcripts of the session: those the question file lists,
    and any in the `<session>/subagents/` folder next to the transcript."""
    found = [DATA / p for p in spec.get("subagents", [])]
    folder = transcript.with_suffix("") / "subagents"
    if folder.is_dir():
        found += sorted(folder.glob("*.jsonl"))
    unique: list[Path] = []
    for path in found:
        if path.resolve() not in {p.resolve() for p in unique}:
            unique.append(path)
    return unique


def score(result: Result, spec: dict | None = None) -> None:
    text = result.digest.lower()
    both = text + "\n" + (result.summary or "").lower()
    for q in result.questions:
        missing = [s for s in q["must_contain"] if s.lower() not in text]
        if missing:
            result.missed.append({**q, "missing": missing})
        else:
            result.answered.append(q["id"])
        if result.summary is not None and all(s.lower() in both for s in q["must_contain"]):
            result.with_summary.append(q["id"])
    open_lines = open_problem_lines(result.digest)
    for fixed in (spec or {}).get("fixed_failures", []):
        needle = plain_command(fixed["failed"]).lower()[:60]
        if needle and any(needle in line for line in open_lines):
            result.false_open.append(fixed["failed"])


def plain_command(command: str) -> str:
    """A command as a digest line shows it: output plumbing removed, blanks collapsed."""
    command = command.replace(" 2>&1", "")
    for pager in ("| tail", "| head"):
        command = command.split(pager)[0]
    return " ".join(command.split())


def open_problem_lines(digest: str) -> list[str]:
    """What each item of the digest's "Open problems" section says is failing (its line
    up to ` -> `; not what it says was done since, nor the agent's words), lowercased."""
    lines, inside = [], False
    for line in digest.splitlines():
        if line.startswith("## "):
            inside = line.strip() == "## Open problems"
            continue
        if inside and line.startswith("- "):
            lines.append(line.split(" -> ")[0].lower())
    return lines


def cut_transcript(source: Path, spec: dict, home: Path) -> tuple[Path, str]:
    """The transcript's lines before the cut, as a file, and the client's own summary
    (the text of the record at `summary_line`; empty when it holds none)."""
    lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
    cut = spec["cut"]
    part = home / source.name
    part.write_text("".join(lines[: cut["before_line"] - 1]), encoding="utf-8")
    return part, summary_text(lines[cut["summary_line"] - 1])


def summary_text(line: str) -> str:
    record = json.loads(line)
    payload = record.get("payload") if isinstance(record.get("payload"), dict) else {}
    if record.get("type") == "compacted":
        return str(payload.get("message") or "")
    content = (record.get("message") or {}).get("content")
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content or [] if isinstance(b, dict))


def measure(path: Path, base: Path, max_chars: int | None) -> Result:
    """Import one question file's transcript into a fresh root and score its digest."""
    spec = json.loads(path.read_text(encoding="utf-8"))
    result = Result(path.stem, spec["transcript"], spec["questions"])
    transcript = DATA / spec["transcript"]
    home = Path(tempfile.mkdtemp(prefix=path.stem[:20] + "-", dir=base))
    os.chmod(home, 0o700)
    root = home / "root"
    env = clean_env(home)
    common = ["--root", str(root), "--workspace", WORKSPACE]

    source = spec.get("format", "claude-code")  # `codex` for a Codex session file
    if "cut" in spec:
        # Cut where the client compacted: what the digest alone knows then, against the
        # client's own summary of the same moment.
        transcript, result.summary = cut_transcript(transcript, spec, home)
    for part in [*(DATA / p for p in spec.get("earlier", [])), transcript]:
        done = run_cli([str(AGENT_JOURNAL), "import", source, str(part), *common], env)
        if done.returncode != 0:
            result.error = (f"import of {part.name} exited {done.returncode}: "
                            f"{first_line(done.stderr or done.stdout)}")
            score(result)
            return result
    for sub in subagent_files(spec, transcript):
        done = run_cli([str(AGENT_JOURNAL), "import", "claude-code", str(sub), *common], env)
        record = {"transcript": str(sub.relative_to(DATA)), "imported": done.returncode == 0}
        if done.returncode != 0:
            record["refusal"] = first_line(done.stderr or done.stdout)
        result.subagents.append(record)
    # Entries the session wrote with `agent-journal record` / `invalidate` went straight to
    # the journal, not into the transcript's import: replay them, in order, after it.
    for args in spec.get("journal", []):
        done = run_cli([str(AGENT_JOURNAL), *args, *common], env)
        if done.returncode != 0:
            result.error = (f"agent-journal {args[0]} exited {done.returncode}: "
                            f"{first_line(done.stderr or done.stdout)}")
            score(result)
            return result

    digest = [str(AGENT_JOURNAL), "digest", *common]
    if max_chars is not None:
        digest += ["--max-chars", str(max_chars)]
    done = run_cli(digest, env)
    if done.returncode != 0:
        result.error = f"digest exited {done.returncode}: {first_line(done.stderr or done.stdout)}"
    else:
        result.digest = done.stdout
    score(result, spec)
    return result


def overall(results: list[Result]) -> dict:
    questions = sum(len(r.questions) for r in results)
    answered = sum(len(r.answered) for r in results)
    return {
        "questions": questions,
        "answered": answered,
        "recall": round(100.0 * answered / questions, 1) if questions else 0.0,
        "meanRecall": round(sum(r.recall for r in results) / len(results), 1) if results else 0.0,
        "digestChars": sum(len(r.digest) for r in results),
    }


def print_table(results: list[Result]) -> None:
    width = max([len("transcript")] + [len(r.name) for r in results])

    def row(name: str, questions: object, answered: object, recall: object, chars: object) -> str:
        return f"{name:<{width}}  {questions:>9}  {answered:>8}  {recall:>8}  {chars:>12}"

    print(row("transcript", "questions", "answered", "recall %", "digest chars"))
    for r in results:
        line = row(r.name, len(r.questions), len(r.answered), f"{r.recall:.1f}", len(r.digest))
        if r.summary is not None:
            line += f"  with summary {len(r.with_summary)}/{len(r.questions)}"
        if r.false_open:
            line += f"  FIXED LISTED OPEN: {len(r.false_open)}"
        print(line + (f"  ERROR {r.error}" if r.error else ""))
    total = overall(results)
    print(
        row(
            "overall",
            total["questions"],
            total["answered"],
            f"{total['recall']:.1f}",
            total["digestChars"],
        )
    )
    print(
        f"overall recall: {total['recall']:.1f}% ({total['answered']}/{total['questions']}); "
        f"mean per transcript {total['meanRecall']:.1f}%"
    )
    cuts = [r for r in results if r.summary is not None]
    if cuts:
        q = sum(len(r.questions) for r in cuts)
        alone = sum(len(r.answered) for r in cuts)
        both = sum(len(r.with_summary) for r in cuts)
        print(f"at compaction points ({len(cuts)}): digest alone {100 * alone / q:.1f}% "
              f"({alone}/{q}); digest + the client's summary {100 * both / q:.1f}% ({both}/{q})")
    false_open = sum(len(r.false_open) for r in results)
    print(f"fixed failures listed as open problems: {false_open}")


def pick(results: list[Result], wanted: str) -> Result | None:
    exact = [r for r in results if wanted in (r.name, r.transcript, Path(r.transcript).stem)]
    if exact:
        return exact[0]
    partial = [r for r in results if wanted.lower() in (r.name + " " + r.transcript).lower()]
    return partial[0] if len(partial) == 1 else None


def print_missed(result: Result) -> None:
    print(
        f"{result.name}: {len(result.answered)}/{len(result.questions)} answered "
        f"({result.recall:.1f}%), digest {len(result.digest)} chars"
    )
    print(f"transcript: {result.transcript}")
    if result.error:
        print(f"ERROR {result.error}")
    for sub in result.subagents:
        state = "imported" if sub["imported"] else f"refused: {sub.get('refusal', '')}"
        print(f"subagent: {sub['transcript']} ({state})")
    for m in result.missed:
        print(f"\n{m['id']} [{m['category']}] {m['question']}")
        print(f"  answer:  {m['answer']}")
        print(f"  missing: {', '.join(json.dumps(s, ensure_ascii=False) for s in m['missing'])}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--show",
        metavar="ID",
        help="print the missed questions of one transcript "
        "(question-file name, transcript path or a unique part of either)",
    )
    parser.add_argument("--max-chars", type=int, metavar="N", help="passed to agent-journal digest")
    parser.add_argument(
        "--min-recall",
        type=float,
        metavar="X",
        help="exit 1 when overall recall is below X percent (e.g. 25)",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the temporary journal roots and say where they are",
    )
    parser.add_argument(
        "--set",
        default="recall",
        metavar="NAME",
        help="the question set: a folder under tests/data (default: recall; "
        "recall-heldout, recall-blind and recall-blind2 are synthetic sets)",
    )
    args = parser.parse_args(argv)

    if not AGENT_JOURNAL.is_file():
        print(f"error: {AGENT_JOURNAL} not found; any make target builds .venv", file=sys.stderr)
        return 2
    questions = DATA / args.set
    files = sorted(questions.glob("*.json"))
    if not files:
        print(f"error: no question files in {questions}", file=sys.stderr)
        return 2

    # mkdtemp makes the folder 0700; journal roots go inside it, never straight
    # under a world-writable folder such as /tmp, which the tool refuses.
    base = Path(tempfile.mkdtemp(prefix="bench_recall-"))
    os.chmod(base, 0o700)
    try:
        with ThreadPoolExecutor(max_workers=min(4, len(files))) as pool:
            results = list(pool.map(lambda f: measure(f, base, args.max_chars), files))
    finally:
        if args.keep:
            print(f"journal roots kept under {base}", file=sys.stderr)
        else:
            shutil.rmtree(base, ignore_errors=True)

    if args.show:
        chosen = pick(results, args.show)
        if chosen is None:
            print(
                f"error: no single transcript matches {args.show!r}; names: "
                + ", ".join(r.name for r in results),
                file=sys.stderr,
            )
            return 2
        if args.json:
            shown = {**chosen.figures(), "missedQuestions": chosen.missed}
            print(json.dumps(shown, indent=2, ensure_ascii=False))
        else:
            print_missed(chosen)
    elif args.json:
        figures = {"transcripts": [r.figures() for r in results], "overall": overall(results)}
        print(json.dumps(figures, indent=2, ensure_ascii=False))
    else:
        print_table(results)

    if args.min_recall is not None and overall(results)["recall"] < args.min_recall:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())


def run(ctx: object) -> None:
    """`make bench` entry: the recall table (a measure, with no goal to fail)."""
    main([])
