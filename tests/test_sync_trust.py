"""Sync's trust in the server (spec/SYNC.md, "The server's conditional writes" and
"Failures"): a server that ignores conditional writes is refused before a first push,
and one that refuses the credentials stops push, pull and sync with one line.

Against moto's S3 server on 127.0.0.1: as it is (it enforces If-None-Match and
If-Match), behind a small proxy on 127.0.0.1 that strips those headers (a server
that ignores them and answers 200) or answers them 501, and a second moto that
checks credentials (INITIAL_NO_AUTH_ACTION_COUNT=0: every access key it does not
know is refused, InvalidAccessKeyId).
"""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import s3_support
from s3_support import LOOPBACK, ON_BOTH_SERVERS, MotoServer
from test_replicas import make_root
from test_sync import add_remote, bucket_bytes, ctx, new_bucket, note, run_cli

from agent_journal.core.errors import RemoteError
from agent_journal.ops import sync
from agent_journal.ops.sync_common import ENV_ALLOW_UNCONDITIONAL, PROBE_NAME

WS = "ws"
CONDITIONS = ("if-none-match", "if-match")


class CarelessProxy:
    """Forwards to moto, but as a server that does not enforce conditional writes:
    mode "ignore" strips If-None-Match and If-Match from every PUT (moto then answers
    200, as such a server does); mode "501" answers such a PUT NotImplemented.
    `conditional_puts` counts the PUTs that carried a condition."""

    def __init__(self, target_port: int, mode: str) -> None:
        self.mode = mode
        self.conditional_puts = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("connection", "transfer-encoding")}
                if self.command == "PUT" and any(k.lower() in CONDITIONS for k in headers):
                    proxy.conditional_puts += 1
                    if proxy.mode == "501":
                        self._answer(501, b"<?xml version='1.0' encoding='UTF-8'?><Error>"
                                     b"<Code>NotImplemented</Code><Message>no conditions"
                                     b"</Message></Error>", [])
                        return
                    headers = {k: v for k, v in headers.items()
                               if k.lower() not in CONDITIONS}
                conn = http.client.HTTPConnection(LOOPBACK, target_port, timeout=60)
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                kept = [(k, v) for k, v in resp.getheaders()
                        if k.lower() not in ("connection", "transfer-encoding",
                                             "content-length", "server", "date")]
                if self.command == "HEAD":
                    kept.append(("Content-Length", resp.getheader("Content-Length") or "0"))
                self._answer(resp.status, data, kept)
                conn.close()

            def _answer(self, status: int, data: bytes, headers: list[tuple[str, str]]) -> None:
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                if not any(k == "Content-Length" for k, _ in headers):
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any

        self.server = ThreadingHTTPServer((LOOPBACK, 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://{LOOPBACK}:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


@pytest.fixture
def careless(s3: MotoServer, request: pytest.FixtureRequest) -> Iterator[CarelessProxy]:
    proxy = CarelessProxy(s3.port, getattr(request, "param", "ignore"))
    try:
        yield proxy
    finally:
        proxy.stop()


def tree(root: Path) -> dict[str, bytes]:
    """Every file under a root with its bytes (the local state a refused command must
    leave as it was)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def probe_memory(root: Path) -> Path:
    return root / "workspaces" / WS / "remotes" / "origin" / PROBE_NAME


# -- the conditional-write probe ---------------------------------------------------------

@ON_BOTH_SERVERS
def test_a_real_server_passes_the_probe_once_and_it_leaves_nothing_behind(
        tmp_path: Path, s3: MotoServer, aws: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_journal.storage.remote_s3 import S3Remote

    bucket = new_bucket(s3)
    a = make_root(tmp_path, "a")
    add_remote(a, f"s3://{bucket}/team", s3.url)
    note(a, "n1")
    probes: list[str] = []
    real = S3Remote.probe_conditional_writes

    def counted(self: S3Remote, key: str) -> str | None:
        probes.append(key)
        return real(self, key)

    monkeypatch.setattr(S3Remote, "probe_conditional_writes", counted)
    first = sync.push(ctx(a), None)
    assert first["manifestWritten"] and len(probes) == 1
    assert probes[0].startswith(f"{WS}/{first['replica']}/probe/")
    assert json.loads(probe_memory(a).read_text()) == {
        "url": f"s3://{bucket}/team", "endpointUrl": s3.url, "conditionalWrites": "enforced"}
    keys = set(bucket_bytes(s3, bucket))
    assert not any("/probe/" in k for k in keys), keys  # cleaned up
    assert f"team/{WS}/{first['replica']}/manifest.json" in keys
    note(a, "n2")
    sync.push(ctx(a), None)
    sync.sync(ctx(a), None)
    assert len(probes) == 1  # remembered: not repeated every push


@pytest.mark.parametrize("careless", ["ignore", "501"], indirect=True)
def test_a_server_that_does_not_enforce_conditions_is_refused_with_nothing_written(
        tmp_path: Path, s3: MotoServer, careless: CarelessProxy, aws: None) -> None:
    bucket = new_bucket(s3)
    a, b = make_root(tmp_path, "a"), make_root(tmp_path, "b")
    add_remote(a, f"s3://{bucket}/team", careless.url)
    add_remote(b, f"s3://{bucket}/team", s3.url)
    note(a, "mine")
    note(b, "theirs")
    assert run_cli(b, "push").returncode == 0  # something a's sync would pull
    before_bucket = bucket_bytes(s3, bucket)
    before = tree(a)
    for command in ("push", "sync"):
        proc = run_cli(a, command)
        assert proc.returncode == 1, (command, proc.stdout, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert careless.url in lines[0] and ENV_ALLOW_UNCONDITIONAL in lines[0], lines[0]
        assert ("ignores conditional writes" if careless.mode == "ignore"
                else "does not implement conditional writes") in lines[0], lines[0]
        assert tree(a) == before  # no pull, no memory, no state folder
        assert bucket_bytes(s3, bucket) == before_bucket  # the probe object is gone too
    assert careless.conditional_puts >= 2
    with pytest.raises(RemoteError, match="conditional writes"):
        sync.push(ctx(a), None)


def test_opting_in_pushes_to_a_server_that_ignores_conditions(
        tmp_path: Path, s3: MotoServer, careless: CarelessProxy, aws: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    bucket = new_bucket(s3)
    a, b = make_root(tmp_path, "a"), make_root(tmp_path, "b")
    add_remote(a, f"s3://{bucket}/team", careless.url)
    add_remote(b, f"s3://{bucket}/team", s3.url)
    note(a, "n1")
    proc = run_cli(a, "push", env={ENV_ALLOW_UNCONDITIONAL: "1"})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(probe_memory(a).read_text())["conditionalWrites"] == "ignored"
    assert sync.pull(ctx(b), None)["imported"] == 1
    # The opt-in is not remembered as consent: without it the next push is refused.
    note(a, "n2")
    assert run_cli(a, "push").returncode == 1
    # With it, the manifest is still compared before it is replaced: a manifest
    # changed under the push (another root) is refused, by its etag read just before.
    monkeypatch.setenv(ENV_ALLOW_UNCONDITIONAL, "1")
    from agent_journal.storage.remote_s3 import S3Remote

    real = S3Remote.put_bytes
    client = s3.client()

    def raced(self: S3Remote, key: str, data: bytes, *, if_match: str | None) -> str:
        full = self.prefix + key
        client.put_object(Bucket=bucket, Key=full,
                          Body=client.get_object(Bucket=bucket, Key=full)["Body"].read()
                          + b" ")
        return real(self, key, data, if_match=if_match)

    monkeypatch.setattr(S3Remote, "put_bytes", raced)
    with pytest.raises(Exception, match="changed while this push ran"):
        sync.push(ctx(a), None)


# -- refused credentials -----------------------------------------------------------------

@pytest.fixture(scope="module")
def strict_s3() -> Iterator[MotoServer]:
    """A moto that checks credentials: it knows no access key, so every request is
    refused (403 InvalidAccessKeyId)."""
    server = MotoServer()
    plain = s3_support.aws_env
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(s3_support, "aws_env",
                   lambda **extra: plain(INITIAL_NO_AUTH_ACTION_COUNT="0", **extra))
        server.start()
    try:
        yield server
    finally:
        server.stop()


def test_refused_credentials_stop_push_pull_and_sync_with_one_line(
        tmp_path: Path, strict_s3: MotoServer) -> None:
    a = make_root(tmp_path, "a")
    add_remote(a, "s3://team-bucket/team", strict_s3.url)
    note(a, "n1")
    before = tree(a)
    for command in ("push", "pull", "sync", "remote status"):
        proc = run_cli(a, *command.split())
        assert proc.returncode == 1, (command, proc.stdout, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in proc.stderr, (command, proc.stderr)
        assert "access refused" in lines[0] and "credentials" in lines[0], lines[0]
        assert "s3://team-bucket/team" in lines[0]
        assert tree(a) == before, command


def test_credentials_refused_for_objects_but_not_the_bucket_stop_a_push(
        tmp_path: Path, s3: MotoServer) -> None:
    """A server that lets the bucket's check through and refuses every object request
    (a policy on the keys): the push stops at its first request with one line."""
    refusing = CarelessProxy(s3.port, "ignore")
    real_any = refusing.server.RequestHandlerClass._any  # type: ignore[attr-defined]
    body = (b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>InvalidAccessKeyId</Code>"
            b"<Message>The AWS Access Key Id you provided does not exist in our records."
            b"</Message></Error>")

    def refuse_objects(self: BaseHTTPRequestHandler) -> None:
        if self.command == "HEAD" and self.path.strip("/").count("/") == 0:
            real_any(self)
            return
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._answer(403, body, [])  # type: ignore[attr-defined]

    handler = refusing.server.RequestHandlerClass
    for verb in ("GET", "PUT", "POST", "DELETE", "HEAD"):
        setattr(handler, f"do_{verb}", refuse_objects)
    try:
        bucket = new_bucket(s3)
        a = make_root(tmp_path, "a")
        add_remote(a, f"s3://{bucket}/team", refusing.url)
        note(a, "n1")
        before = tree(a)
        for command in ("push", "pull", "sync"):
            proc = run_cli(a, command)
            assert proc.returncode == 1, (command, proc.stdout, proc.stderr)
            lines = proc.stderr.strip().splitlines()
            assert len(lines) == 1 and "Traceback" not in proc.stderr, (command, proc.stderr)
            assert "access refused" in lines[0] and "InvalidAccessKeyId" in lines[0], lines[0]
            assert tree(a) == before, command
        assert bucket_bytes(s3, bucket) == {}
    finally:
        refusing.stop()
