"""The team's remote in the committed project file, credentials never in it (spec/SYNC.md,
"The project's remote"). Real processes, run from inside a project folder, as a team
member's shell would; one test against moto."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import CLI
from s3_support import MotoServer, aws_env
from test_replicas import make_root
from test_sync import new_bucket

SECRET = "wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY"


def project(tmp_path: Path, name: str, lines: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / ".agent-journal.toml").write_text('workspace = "team"\n' + lines)
    return folder


def run(folder: Path, root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI as a team member runs it: in the project folder, the root its own."""
    return subprocess.run([CLI, *args], cwd=folder, capture_output=True, text=True,
                          env=aws_env(AGENT_JOURNAL_ROOT=str(root)), timeout=120)


def note(folder: Path, root: Path, entry_id: str) -> None:
    done = run(folder, root, "record", "--kind", "note", "--id", entry_id, "--text",
               f"note {entry_id}")
    assert done.returncode == 0, done.stderr


def ids(folder: Path, root: Path) -> set[str]:
    shown = run(folder, root, "show", "--json")
    assert shown.returncode == 0, shown.stderr
    return {e["id"] for e in json.loads(shown.stdout)["entries"]}


def two_machines(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    """Two projects whose project files name one shared file remote, and a root each:
    (alice, bob, alice's root, bob's root)."""
    share = tmp_path / "share"
    share.mkdir(mode=0o700)
    line = f'remote = "file://{share}"\n'
    alice, bob = project(tmp_path, "alice", line), project(tmp_path, "bob", line)
    return alice, bob, make_root(tmp_path, "a-root"), make_root(tmp_path, "b-root")


def test_two_machines_sync_through_the_project_files_remote(tmp_path) -> None:
    alice, bob, a_root, b_root = two_machines(tmp_path)
    share = tmp_path / "share"  # (the remote both project files name)
    note(alice, a_root, "from-alice")
    listed = run(alice, a_root, "remote", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["remotes"] == [
        {"name": "project", "url": f"file://{share}",
         "projectFile": str(alice / ".agent-journal.toml")}]
    assert run(alice, a_root, "push").returncode == 0
    assert run(bob, b_root, "sync").returncode == 0, "no `remote add` on either machine"
    assert ids(bob, b_root) == {"from-alice"}
    # Nothing about the remote is written to either root's config.
    for root in (a_root, b_root):
        config = root / "config.json"
        assert not config.exists() or "remotes" not in json.loads(config.read_text())
    # A remote named `project` in config.json overrides the file's on that machine.
    other = tmp_path / "other"
    other.mkdir(mode=0o700)
    assert run(bob, b_root, "remote", "add", "project", f"file://{other}").returncode == 0
    listed = json.loads(run(bob, b_root, "remote", "list", "--json").stdout)["remotes"]
    assert listed == [{"name": "project", "url": f"file://{other}"}]
    assert run(bob, b_root, "remote", "remove", "project").returncode == 0
    removed = run(bob, b_root, "remote", "remove", "project")
    assert removed.returncode == 1 and "comes from the project file" in removed.stderr


def test_the_project_remote_on_s3_with_credentials_from_the_environment(
        tmp_path, s3: MotoServer) -> None:
    bucket = new_bucket(s3)
    lines = f'remote = "s3://{bucket}/team"\nremote-endpoint-url = "{s3.url}"\n'
    alice, bob = project(tmp_path, "alice", lines), project(tmp_path, "bob", lines)
    a_root, b_root = make_root(tmp_path, "a-root"), make_root(tmp_path, "b-root")
    note(alice, a_root, "from-alice")
    pushed = run(alice, a_root, "push", "--json")
    assert pushed.returncode == 0, pushed.stderr
    assert json.loads(pushed.stdout)["remote"] == "project"
    assert run(bob, b_root, "pull").returncode == 0
    assert ids(bob, b_root) == {"from-alice"}


@pytest.mark.parametrize("lines", [
    f'remote = "s3://AKIAIOSFODNN7EXAMPLE:{SECRET}@bucket/team"\n',
    f'remote = "s3://bucket/team?aws_secret_access_key={SECRET}"\n',
    f'remote = "s3://bucket/team"\nremote-endpoint-url = "https://key:{SECRET}@s3.example"\n',
])
def test_a_project_remote_carrying_credentials_is_refused_unechoed(tmp_path, lines) -> None:
    folder = project(tmp_path, "p", lines)
    root = make_root(tmp_path, "root")
    for args in (("push",), ("remote", "list"), ("remote", "status")):
        done = run(folder, root, *args)
        assert done.returncode == 1, done
        line = done.stderr.strip()
        assert len(line.splitlines()) == 1 and "Traceback" not in line
        assert "carries credentials" in line and "AWS chain" in line
        assert SECRET not in line and ".agent-journal.toml" in line


def test_remote_add_refuses_credentials_in_a_url_unechoed(tmp_path) -> None:
    folder = tmp_path / "p"
    folder.mkdir()
    root = make_root(tmp_path, "root")
    for args in (("s3://AKIAIOSFODNN7EXAMPLE:" + SECRET + "@bucket",),
                 ("s3://bucket", "--endpoint-url", f"http://k:{SECRET}@127.0.0.1:9000")):
        done = subprocess.run([CLI, "remote", "add", "origin", *args], cwd=folder,
                              capture_output=True, text=True, timeout=60,
                              env=aws_env(AGENT_JOURNAL_ROOT=str(root),
                                          AGENT_JOURNAL_WORKSPACE="ws"))
        assert done.returncode == 2, done
        assert "carries credentials" in done.stderr and SECRET not in done.stderr
    assert not (root / "config.json").exists()


def test_a_project_file_holds_no_credential_keys(tmp_path) -> None:
    folder = project(tmp_path, "p", f'aws_secret_access_key = "{SECRET}"\n')
    done = run(folder, make_root(tmp_path, "root"), "remote", "list")
    assert done.returncode == 1 and "unknown key(s) aws_secret_access_key" in done.stderr
