"""A tiny Chrome DevTools Protocol client: headless Chromium driven over one
websocket, with no dependency beyond the standard library.

Enough of RFC 6455 for CDP: the client handshake, masked text frames out,
unmasked text (and continuation) frames in.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import tempfile
import time
from typing import Any


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


class Browser:
    def __init__(self, binary: str) -> None:
        self.profile = tempfile.mkdtemp(prefix="cdp-profile-")
        self.proc = subprocess.Popen(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-extensions", "--remote-debugging-port=0",
             f"--user-data-dir={self.profile}", "--window-size=1280,900", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        url = self._devtools_url()
        port = int(re.match(r"ws://[^:]+:(\d+)/", url).group(1))  # type: ignore[union-attr]
        # The browser endpoint cannot navigate; find the page target.
        page = self._http_json(port, "/json/list")
        target = next(t for t in page if t.get("type") == "page")
        self.ws = WebSocket(f"ws://127.0.0.1:{port}/devtools/page/{target['id']}")
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def _devtools_url(self) -> str:
        assert self.proc.stderr is not None
        deadline = time.time() + 30
        buffer = b""
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            buffer += line
            found = re.search(rb"DevTools listening on (ws://\S+)", line)
            if found:
                # Keep draining its log, so a full pipe never stalls the browser.
                import threading

                threading.Thread(target=_drain, args=(self.proc.stderr,), daemon=True).start()
                return found.group(1).decode()
        raise RuntimeError(f"chromium did not start: {buffer.decode(errors='replace')}")

    @staticmethod
    def _http_json(port: int, path: str) -> Any:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
                      .encode())
            data = b""
            while b"\r\n\r\n" not in data:
                data += s.recv(65536)
            head, body = data.split(b"\r\n\r\n", 1)
            length = int(re.search(rb"(?i)content-length:\s*(\d+)", head).group(1))  # type: ignore[union-attr]
            while len(body) < length:
                body += s.recv(65536)
        return json.loads(body[:length])

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        mine = self.next_id
        self.ws.send(json.dumps({"id": mine, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == mine:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                           awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for_load(self, timeout: float = 20) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.evaluate("document.readyState") == "complete":
                return
            time.sleep(0.05)
        raise RuntimeError("page did not finish loading")

    def close(self) -> None:
        try:
            self.ws.close()
        finally:
            self.proc.kill()
            self.proc.wait(timeout=10)
            shutil.rmtree(self.profile, ignore_errors=True)


def _drain(stream: Any) -> None:
    for _ in stream:
        pass


class WebSocket:
    def __init__(self, url: str) -> None:
        found = re.match(r"ws://([^:/]+):(\d+)(/.*)", url)
        assert found, url
        host, port, path = found.group(1), int(found.group(2)), found.group(3)
        self.sock = socket.create_connection((host, port), timeout=30)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        response = b""
        while b"\r\n\r\n" not in response:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise RuntimeError("websocket handshake failed")
            response += chunk
        head, self.buffer = response.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n")[0]:
            raise RuntimeError(f"websocket handshake refused: {head!r}")

    def send(self, text: str) -> None:
        payload = text.encode()
        header = bytearray([0x81])
        n = len(payload)
        if n < 126:
            header.append(0x80 | n)
        elif n < 65536:
            header += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        header += mask
        self.sock.sendall(bytes(header) + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def _read(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise RuntimeError("websocket closed")
            self.buffer += chunk
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def recv(self) -> str:
        parts = []
        while True:
            first, second = self._read(2)
            n = second & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            mask = self._read(4) if second & 0x80 else None
            payload = self._read(n)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            opcode = first & 0x0F
            if opcode == 0x9:  # ping: answer nothing, CDP does not ping
                continue
            if opcode == 0x8:
                raise RuntimeError("websocket closed by the browser")
            parts.append(payload)
            if first & 0x80:
                return b"".join(parts).decode()

    def close(self) -> None:
        self.sock.close()
