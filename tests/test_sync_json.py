"""Every sync command speaks text by default and JSON with --json (spec/cli-json.md, "Sync"):
the JSON's shape (keys and value types, a list by its first item) is pinned by a golden
file, every key is camelCase and named in spec/cli-json.md (Sync, merge), and the text
is a few plain lines, never JSON. Real processes, through a shared folder."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from test_replicas import make_root
from test_sync import ctx, note

from agent_journal.ops import remotes, sync

GOLDEN = Path(__file__).parent / "golden" / "sync_json_shapes.json"
SPEC = Path(__file__).parent.parent / "spec" / "cli-json.md"
CAMEL = re.compile(r"^[a-z][a-zA-Z0-9]*$")
# Objects keyed by data (replica ids, file names), not by field names.
DATA_KEYED = {"deltas", "objects", "artifactsByFile"}


def shape(value: Any, key: str = "") -> Any:
    if isinstance(value, dict):
        if key in DATA_KEYED:
            return "map"
        return {k: shape(v, k) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [shape(value[0], key)] if value else []
    return type(value).__name__


def keys_of(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in keys_of(v)}
    if isinstance(value, list):
        return {k for v in value for k in keys_of(v)}
    return set()


def test_every_sync_command_speaks_text_and_pinned_json(cli, tmp_path) -> None:
    share = tmp_path / "share"
    share.mkdir(mode=0o700)
    url = f"file://{share}"
    runs = {
        "remote add": ("remote", "add", "origin", url),
        "remote list": ("remote", "list"),
        "push": ("push",),
        "pull": ("pull",),
        "sync": ("sync",),
        "remote status": ("remote", "status"),
        "push --within": ("push", "--within", "30"),
        "remote remove": ("remote", "remove", "origin"),
    }
    # Another replica has pushed, with an artifact, so that pull has merges to report.
    other = make_root(tmp_path, "other")
    remotes.add(ctx(other), "origin", url, endpoint_url=None)
    note(other, "o1")
    sync.push(ctx(other), None)
    assert cli("record", "--kind", "note", "--id", "n1", "--text", "one").code == 0
    shapes: dict[str, Any] = {}
    for name, args in runs.items():
        got = cli(*args, "--json")  # first: the text run after it finds nothing new
        assert got.code == 0, (name, got.err)
        report = got.json()
        shapes[name] = shape(report)
        keys = keys_of({k: v for k, v in report.items() if k not in DATA_KEYED})
        assert all(CAMEL.match(k) for k in keys - _data_keys(report)), (name, keys)
        if name == "remote add":
            assert cli("remote", "remove", "origin").code == 0
        elif name == "remote remove":
            assert cli("remote", "add", "origin", url).code == 0
        text = cli(*args)
        assert text.code == 0, (name, text.err)
        assert text.out.strip() and not text.out.lstrip().startswith(("{", "[")), name
    spec = SPEC.read_text()
    # The Sync section, and `merge`'s, whose report each of a pull's merges is.
    section = spec[spec.index("## `merge`"):spec.index("## `timeline`")]
    undocumented = sorted(k for s in shapes.values() for k in keys_of(s)
                          if f"`{k}`" not in section and f"{k}," not in section
                          and f"{k}}}" not in section and f"{k}?" not in section
                          and f"{k}:" not in section)
    assert undocumented == []
    text = json.dumps(shapes, indent=2, sort_keys=True) + "\n"
    if os.environ.get("AGENT_JOURNAL_UPDATE_GOLDEN"):
        GOLDEN.write_text(text)
    assert json.loads(GOLDEN.read_text()) == shapes, \
        "sync JSON shapes differ from golden (AGENT_JOURNAL_UPDATE_GOLDEN=1 rewrites)"


def _data_keys(report: Any) -> set[str]:
    """Keys that are data (a merge report's per-replica maps), found under DATA_KEYED."""
    found: set[str] = set()
    if isinstance(report, dict):
        for k, v in report.items():
            if k in DATA_KEYED and isinstance(v, dict):
                found |= keys_of(v)
            else:
                found |= _data_keys(v)
    elif isinstance(report, list):
        for v in report:
            found |= _data_keys(v)
    return found
