"""The import memory (storage/import_memory.py): a re-import of an unchanged file is not
read again, yet the memory never makes an import skip content that is new, and its report
is the one a full re-run gives."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from conftest import DATA

MAIN = (DATA / "claude-code" / "transcripts" / "daaain-claude-code-log"
        / "9e953218-585f-4692-89df-9e0747a31c68.jsonl")
LINES = MAIN.read_text(encoding="utf-8").splitlines(keepends=True)


def settled(path: Path) -> Path:
    """Backdate the file, as a transcript of a finished session is: the memory ignores a
    file written within the last moments."""
    old = time.time() - 60
    os.utime(path, (old, old))
    return path


def transcript(tmp_path: Path, lines: list[str], name: str = "t.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(lines), encoding="utf-8")
    return settled(path)


def memory(root: Path) -> Path:
    return root / "cache" / "imports" / "ws.sqlite"


def import_(cli, path: Path) -> dict:
    result = cli("import", "claude-code", str(path), "--json")
    assert result.code == 0, result.err
    return result.json()


def full_rerun(cli, root: Path, path: Path) -> dict:
    """What a re-import reports with no memory to help it."""
    shutil.rmtree(root / "cache" / "imports", ignore_errors=True)
    return import_(cli, path)


def test_a_remembered_reimport_reports_what_a_full_one_does(cli, root, tmp_path):
    path = transcript(tmp_path, LINES)
    first = import_(cli, path)
    assert first["eventsWritten"] > 0 and memory(root).exists()
    remembered = import_(cli, path)
    assert remembered["eventsWritten"] == 0
    assert remembered == full_rerun(cli, root, path)


def test_a_file_that_grew_is_read_again(cli, root, tmp_path):
    last_result = max(i for i, line in enumerate(LINES) if '"tool_result"' in line)
    path = transcript(tmp_path, LINES[:last_result])
    assert import_(cli, path)["unfinished"] >= 1
    path.write_text("".join(LINES), encoding="utf-8")
    settled(path)
    assert import_(cli, path)["eventsWritten"] >= 1


def test_a_rewrite_of_the_same_size_and_mtime_is_read_again(cli, root, tmp_path):
    path = transcript(tmp_path, LINES)
    import_(cli, path)
    before = os.stat(path)
    # One letter of something the assistant said, in the middle of the file (outside the
    # blocks the fingerprint hashes), changed in place; the mtime put back as it was.
    middle = next(i for i in range(len(LINES) // 2, len(LINES))
                  if '"type":"assistant"' in LINES[i].replace(" ", "")
                  and '"text":"' in LINES[i].replace(" ", ""))
    changed = list(LINES)
    at = changed[middle].index(" the ", changed[middle].index('"text"'))
    changed[middle] = changed[middle][:at] + " tha " + changed[middle][at + 5:]
    path.write_text("".join(changed), encoding="utf-8")
    assert os.stat(path).st_size == before.st_size
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert import_(cli, path)["eventsWritten"] >= 1


def test_a_tombstone_after_the_import_is_reported_as_a_full_run_would(cli, root, tmp_path):
    path = transcript(tmp_path, LINES)
    import_(cli, path)
    shown = cli("show", "--json", "--observations").json()
    target = next(o["id"] for o in shown["entries"] if o["type"] == "observation")
    assert cli("tombstone", target, "--reason", "named a person").code == 0
    again = import_(cli, path)
    assert again["tombstoned"] == 1 and again["eventsWritten"] == 0
    assert again == full_rerun(cli, root, path)


def test_a_lost_segment_is_written_again(cli, root, tmp_path):
    path = transcript(tmp_path, LINES)
    first = import_(cli, path)
    for segment in (root / "workspaces" / "ws" / "segments").glob("*.sqlite"):
        segment.unlink()
    assert import_(cli, path)["eventsWritten"] == first["eventsWritten"]


def test_a_segment_replaced_by_an_older_copy_is_written_again(cli, root, tmp_path):
    first_half = transcript(tmp_path, LINES[: len(LINES) // 2], "half.jsonl")
    import_(cli, first_half)
    segments = sorted((root / "workspaces" / "ws" / "segments").glob("*.sqlite"))
    backup = {s: s.read_bytes() for s in segments}
    path = transcript(tmp_path, LINES)
    assert import_(cli, path)["eventsWritten"] > 0
    for segment, data in backup.items():  # restored from a copy taken before
        segment.unlink()
        segment.write_bytes(data)
    assert import_(cli, path)["eventsWritten"] > 0


def test_compaction_forgets_what_was_imported(cli, root, tmp_path):
    path = transcript(tmp_path, LINES)
    import_(cli, path)
    assert memory(root).exists()
    shown = cli("show", "--json", "--observations").json()
    target = next(o["id"] for o in shown["entries"] if o["type"] == "observation")
    assert cli("tombstone", target, "--reason", "named a person").code == 0
    assert cli("compact", "--apply").code == 0
    assert not memory(root).exists()
    again = import_(cli, path)
    assert again["tombstoned"] == 1 and again["eventsWritten"] == 0


def test_a_fresh_file_is_not_remembered(cli, root, tmp_path):
    path = tmp_path / "live.jsonl"
    path.write_text("".join(LINES), encoding="utf-8")
    import_(cli, path)
    assert not memory(root).exists()
