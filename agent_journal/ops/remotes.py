"""remote add | list | remove: the sync remotes a workspace knows, kept in the root's config.

Invariants:
- Remotes live in <root>/config.json under "remotes" -> workspace -> name,
  each {"url"} plus "endpointUrl" when one was given. Nothing else is stored:
  credentials come from the standard AWS chain at use, never from here.
- Every other key of config.json (redaction patterns, other features) is kept
  byte for byte in meaning: the file is read, one entry changed, written back
  whole and atomically under a lock, so two `remote add` runs cannot lose
  each other's entry.
- A bad name, URL or endpoint is refused (UsageError) before the root is
  created or anything written; a config that cannot be understood refuses
  the command rather than being overwritten. A URL that carries credentials
  is refused without being echoed (storage/remote.py).
- The project file (`.agent-journal.toml`, committed with the project) may name
  the team's remote: it is listed as the remote `project` (a remote of that name
  in config.json overrides it on this machine), never written to config.json;
  a bad URL there refuses the command (exit 1) naming the file.
"""

from __future__ import annotations

import json
import os
from typing import Any

from agent_journal.core.errors import JournalError, NotFoundError, UsageError
from agent_journal.ops.context import Context
from agent_journal.storage.config import read_root_config, write_root_config
from agent_journal.storage.locks import FileLock
from agent_journal.storage.remote import Remote, check_endpoint, check_remote_name, parse_url
from agent_journal.storage.root import Root, refuse_inside_root

SECTION = "remotes"
CONFIG_LOCK = ".config.lock"


# The name of the remote a project file names.
PROJECT_REMOTE = "project"


class RemoteSpec:
    """One configured remote (`project_file`: the project file it comes from)."""

    def __init__(self, name: str, url: str, endpoint_url: str | None,
                 project_file: str | None = None) -> None:
        self.name = name
        self.url = url
        self.endpoint_url = endpoint_url
        self.project_file = project_file

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "url": self.url}
        if self.endpoint_url is not None:
            out["endpointUrl"] = self.endpoint_url
        if self.project_file is not None:
            out["projectFile"] = self.project_file
        return out


def _load(root_path: str) -> dict[str, Any]:
    from agent_journal.capture.strictjson import StrictJSONError, loads

    found = read_root_config(root_path)
    if found is None:
        return {}
    path, raw = found
    try:
        config = loads(raw)
    except StrictJSONError as exc:
        raise JournalError(f"bad config {path}: {exc}") from None
    if not isinstance(config, dict):
        raise JournalError(f"bad config {path}: expected a JSON object")
    section = config.get(SECTION, {})
    if not isinstance(section, dict) or not all(
            isinstance(v, dict) and all(isinstance(e, dict) and isinstance(e.get("url"), str)
                                        for e in v.values())
            for v in section.values()):
        raise JournalError(f'bad config {path}: "{SECTION}" must map workspace -> name -> '
                           '{"url": ...}')
    return config


def _entries(config: dict[str, Any], workspace: str) -> dict[str, Any]:
    return dict(config.get(SECTION, {}).get(workspace, {}))


def _save(root_path: str, config: dict[str, Any]) -> None:
    body = json.dumps(config, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    write_root_config(root_path, body.encode("utf-8"))


def add(ctx: Context, name: str, url: str, *, endpoint_url: str | None) -> dict[str, Any]:
    name = check_remote_name(name)
    scheme, folder, _ = parse_url(url)
    if scheme == "file":
        refuse_inside_root(folder, ctx.root_arg, "remote folder")
    endpoint = check_endpoint(endpoint_url)
    if endpoint is not None and not url.startswith("s3://"):
        raise UsageError("--endpoint-url applies to s3:// remotes only")
    root = Root.open(ctx.root_arg, create=True)
    with FileLock(os.path.join(root.path, CONFIG_LOCK)):
        config = _load(root.path)
        entries = _entries(config, ctx.workspace_name)
        if name in entries:
            raise UsageError(f"remote {name} already exists for workspace "
                             f"{ctx.workspace_name} ({entries[name]['url']}); remove it first")
        spec = RemoteSpec(name, url.rstrip("/") if url.startswith("s3://") else url, endpoint)
        entry = spec.as_json()
        del entry["name"]
        entries[name] = entry
        config.setdefault(SECTION, {})[ctx.workspace_name] = entries
        _save(root.path, config)
    return {"workspace": ctx.workspace_name, "added": spec.as_json()}


def remove(ctx: Context, name: str) -> dict[str, Any]:
    name = check_remote_name(name)
    root = Root.open(ctx.root_arg, create=False)
    if not root.exists:
        raise NotFoundError(f"no remote {name} for workspace {ctx.workspace_name}"
                            + _in_project_file(ctx, name))
    with FileLock(os.path.join(root.path, CONFIG_LOCK)):
        config = _load(root.path)
        entries = _entries(config, ctx.workspace_name)
        if name not in entries:
            raise NotFoundError(f"no remote {name} for workspace {ctx.workspace_name}"
                                + _in_project_file(ctx, name))
        gone = RemoteSpec(name, entries.pop(name)["url"], None)
        if entries:
            config[SECTION][ctx.workspace_name] = entries
        else:
            del config[SECTION][ctx.workspace_name]
            if not config[SECTION]:
                del config[SECTION]
        _save(root.path, config)
    return {"workspace": ctx.workspace_name, "removed": gone.as_json()}


def _in_project_file(ctx: Context, name: str) -> str:
    if name == PROJECT_REMOTE and ctx.project_remote is not None:
        return (f" in config.json: it comes from the project file {ctx.project_remote[2]}; "
                "change it there")
    return ""


def configured(ctx: Context) -> list[RemoteSpec]:
    root = Root.open(ctx.root_arg, create=False)
    entries = _entries(_load(root.path), ctx.workspace_name) if root.exists else {}
    known = [RemoteSpec(n, e["url"], e.get("endpointUrl")) for n, e in entries.items()]
    if ctx.project_remote is not None and PROJECT_REMOTE not in entries:
        known.append(_project_spec(*ctx.project_remote))
    return sorted(known, key=lambda spec: spec.name)


def _project_spec(url: str, endpoint: str | None, path: str) -> RemoteSpec:
    """The project file's remote, checked as `remote add` checks one (exit 1, naming the
    file: the file is wrong, not the command line)."""
    try:
        parse_url(url)
        endpoint = check_endpoint(endpoint)
        if endpoint is not None and not url.startswith("s3://"):
            raise UsageError("remote-endpoint-url applies to s3:// remotes only")
    except UsageError as exc:
        raise JournalError(f"project file {path}: {exc.message}") from None
    return RemoteSpec(PROJECT_REMOTE, url.rstrip("/") if url.startswith("s3://") else url,
                      endpoint, path)


def list_remotes(ctx: Context) -> dict[str, Any]:
    return {"workspace": ctx.workspace_name,
            "remotes": [r.as_json() for r in configured(ctx)]}


def resolve(ctx: Context, name: str | None) -> RemoteSpec:
    """The remote NAME, or the only one when NAME is omitted. UsageError otherwise,
    with nothing opened for writing."""
    if name is not None:
        check_remote_name(name)
    known = configured(ctx)
    if name is None:
        if len(known) == 1:
            return known[0]
        if not known:
            raise UsageError(f"workspace {ctx.workspace_name} has no remote; add one with "
                             "`agent-journal remote add NAME URL`")
        raise UsageError(f"workspace {ctx.workspace_name} has {len(known)} remotes ("
                         + ", ".join(r.name for r in known) + "); name one")
    for spec in known:
        if spec.name == name:
            parse_url(spec.url)  # a hand-edited config must not reach a backend unchecked
            return spec
    raise UsageError(f"no remote {name} for workspace {ctx.workspace_name}; see "
                     "`agent-journal remote list`")


def open_remote(spec: RemoteSpec) -> Remote:
    """The backend for a configured remote; s3:// loads boto3 only now, and without it
    fails with the one line that names the extra to install."""
    scheme, where, prefix = parse_url(spec.url)
    if scheme == "file":
        from agent_journal.storage.remote_file import FolderRemote

        return FolderRemote(spec.url, where)
    from agent_journal.storage.remote_s3 import S3Remote

    return S3Remote(spec.url, where, prefix, endpoint_url=spec.endpoint_url)
