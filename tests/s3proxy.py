"""An HTTP proxy on loopback in front of an S3-compatible server (moto's) that counts the
requests by S3 operation and injects seeded faults: a ``503 SlowDown`` answered without
forwarding, a connection reset without forwarding, and a request carried out whose
response is dropped. Faults come at a rate, or as a burst of consecutive requests (long
enough to get past a client's own retries); an operation filter aims them (multipart parts
and completes included)."""

from __future__ import annotations

import contextlib
import http.client
import random
import socket
import struct
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Literal
from urllib.parse import parse_qs, urlsplit

Fault = Literal["slowdown", "reset", "drop-response"]
FAULTS: tuple[Fault, ...] = ("slowdown", "reset", "drop-response")

_SLOWDOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)


def operation(method: str, target: str) -> str:
    """The S3 operation of a request (as the proxy counts it)."""
    parts = urlsplit(target)
    query = parse_qs(parts.query, keep_blank_values=True)
    path = parts.path.strip("/")
    if method == "GET" and ("list-type" in query or "/" not in path):
        return "ListObjects"
    if method == "POST" and "uploads" in query:
        return "CreateMultipartUpload"
    if method == "POST" and "uploadId" in query:
        return "CompleteMultipartUpload"
    if method == "PUT" and "partNumber" in query:
        return "UploadPart"
    if method == "POST" and "delete" in query:
        return "DeleteObjects"
    return {"GET": "GetObject", "HEAD": "HeadObject", "PUT": "PutObject", "DELETE": "DeleteObject"}.get(method, method)


@dataclass
class S3FaultProxy:
    """Forwards ``http://127.0.0.1:port`` to ``target`` (host, port); see the module."""

    target: tuple[str, int]
    seed: int = 0
    port: int = 0
    counts: Counter[str] = field(default_factory=Counter)
    log: list[tuple[str, str]] = field(default_factory=list)  # (operation, path) in order
    faults: Counter[str] = field(default_factory=Counter)
    faulted: Counter[str] = field(default_factory=Counter)  # the operations faults hit
    rate: float = 0.0
    burst: int = 0
    burst_fault: Fault = "slowdown"
    only: frozenset[str] | None = None  # operations faults are aimed at (None: all)
    aim: str | None = None  # a part of the paths faults are aimed at (None: all)
    kinds: tuple[Fault, ...] = FAULTS
    _random: random.Random = field(default_factory=random.Random)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    def start(self) -> S3FaultProxy:
        self._random.seed(self.seed)
        self._server = serve(self._handle, "s3-fault-proxy")
        self.port = self._server.server_address[1]
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def calm(self) -> None:
        """No more faults."""
        with self._lock:
            self.rate, self.burst = 0.0, 0

    def reset_counts(self) -> None:
        with self._lock:
            self.counts.clear()
            self.faults.clear()
            self.faulted.clear()
            self.log.clear()

    def _fault_for(self, op: str, path: str) -> Fault | None:
        with self._lock:
            self.counts[op] += 1
            self.log.append((op, path))
            if (self.only is not None and op not in self.only) or (self.aim is not None and self.aim not in path):
                return None
            if self.burst > 0:
                self.burst -= 1
                chosen: Fault | None = self.burst_fault
            elif self.rate and self._random.random() < self.rate:
                chosen = self._random.choice(self.kinds)
            else:
                chosen = None
            if chosen is not None:
                self.faults[chosen] += 1
                self.faulted[op] += 1
            return chosen

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        body = _read_body(handler)
        op = operation(handler.command, handler.path)
        fault = self._fault_for(op, urlsplit(handler.path).path)
        if fault == "reset":
            _reset(handler)
            return
        if fault == "slowdown":
            handler.send_response(503)
            handler.send_header("Content-Type", "application/xml")
            handler.send_header("Content-Length", str(len(_SLOWDOWN)))
            handler.end_headers()
            if handler.command != "HEAD":
                handler.wfile.write(_SLOWDOWN)
            return
        upstream = http.client.HTTPConnection(*self.target, timeout=60)
        try:
            headers = {k: v for k, v in handler.headers.items() if k.lower() not in ("transfer-encoding", "connection")}
            headers["Content-Length"] = str(len(body))
            upstream.request(handler.command, handler.path, body=body, headers=headers)
            response = upstream.getresponse()
            payload = response.read()
        finally:
            upstream.close()
        if fault == "drop-response":  # carried out; the client never hears
            _reset(handler)
            return
        handler.send_response(response.status, response.reason)
        for key, value in response.getheaders():
            if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                handler.send_header(key, value)
        # a HEAD answers with the object's length, and no body
        length = response.getheader("Content-Length", "0") if handler.command == "HEAD" else str(len(payload))
        handler.send_header("Content-Length", length)
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(payload)


def serve(handle: Callable[[BaseHTTPRequestHandler], None], name: str) -> ThreadingHTTPServer:
    """An HTTP/1.1 server on a free loopback port, in a thread of its own, whose every
    request (any method) goes to ``handle``; stop it with ``shutdown`` and ``server_close``."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            return None

        def _any(self) -> None:
            handle(self)

        do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _any

    server = _QuietServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True, name=name).start()
    return server


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        return None  # a connection the proxy reset on purpose


def _read_body(handler: BaseHTTPRequestHandler) -> bytes:
    if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
        chunks = []
        while True:
            size = int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while handler.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return b"".join(chunks)
            chunks.append(handler.rfile.read(size))
            handler.rfile.readline()
    length = int(handler.headers.get("Content-Length") or 0)
    return handler.rfile.read(length) if length else b""


def _reset(handler: BaseHTTPRequestHandler) -> None:
    handler.close_connection = True
    sock = handler.connection
    with contextlib.suppress(OSError):  # RST, not FIN: a connection reset by peer
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()
