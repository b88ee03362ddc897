"""An HTTP proxy on loopback in front of the REST catalog server that answers table commits
(``POST /v1/namespaces/{ns}/tables/{table}``) with the failures a REST deployment sees:

- ``lost-500``, ``lost-502``, ``lost-503``, ``lost-504``: the commit is forwarded and carried
  out, and its answer replaced by that status (the server failing after its change, a gateway
  timing out or restarting): pyiceberg raises ``CommitStateUnknownException`` for 500, 502 and
  504 and ``ServiceUnavailableError`` for 503. The change is in the table;
- ``refused-503``, ``refused-429``: a 503 or a 429 (too many requests) answered without
  forwarding (an overloaded gateway, a rate limit): nothing landed, and the client cannot tell;
- ``late-504``: a 504 answered at once, and the commit forwarded ``late_s`` seconds later (a
  gateway that timed out while the request was still on its way): it may land after the
  client gave up on it. Not in the seeded plan; tests ask for it.
- ``conflict-409``: a 409 ``CommitFailedException`` answered without forwarding (the server's
  check of the commit's requirements failing): nothing landed.

The faults come in a seeded order: every kind ``repeat`` times and ``passes`` commits left
alone, shuffled by ``seed``; once the plan is spent, commits pass. Everything else is
forwarded as it is. The proxy counts the commits it saw and what it did to them.
"""

from __future__ import annotations

import http.client
import json
import random
import threading
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from tests.s3proxy import serve

KINDS = ("lost-500", "lost-502", "lost-503", "lost-504", "refused-503", "refused-429", "conflict-409")
#: the kinds whose commit reached the server and was carried out
FORWARDED = frozenset({"lost-500", "lost-502", "lost-503", "lost-504"})

_GATEWAY = b"<html><body><h1>%d Gateway error</h1>The upstream server did not answer in time.</body></html>"


def is_commit(method: str, target: str) -> bool:
    """A table commit: ``POST /v1/[prefix/]namespaces/{ns}/tables/{table}``."""
    parts = urlsplit(target).path.strip("/").split("/")
    return method == "POST" and len(parts) >= 5 and parts[-4] == "namespaces" and parts[-2] == "tables"


@dataclass
class RestFaultProxy:
    """Forwards ``http://127.0.0.1:port`` to ``target`` (a base URL); see the module."""

    target: str
    seed: int = 0
    repeat: int = 1
    passes: int = 0
    kinds: tuple[str, ...] = KINDS
    port: int = 0
    late_s: float = 2.0
    late: list[threading.Thread] = field(default_factory=list)  # the late commits, to wait for
    done: Counter[str] = field(default_factory=Counter)  # per kind (and "passed"), what the commits got
    plan: list[str | None] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    def start(self) -> RestFaultProxy:
        planned: list[str | None] = [*(k for k in self.kinds for _ in range(self.repeat)), *([None] * self.passes)]
        random.Random(self.seed).shuffle(planned)
        self.plan = planned
        self._server = serve(self._handle, "rest-fault-proxy")
        self.port = self._server.server_address[1]
        return self

    def stop(self) -> None:
        for later in self.late:
            later.join(30)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def calm(self) -> None:
        """No more faults."""
        with self._lock:
            self.plan.clear()

    def _next(self, handler: BaseHTTPRequestHandler) -> str | None:
        if not is_commit(handler.command, handler.path):
            return None
        with self._lock:
            kind = self.plan.pop(0) if self.plan else None
            self.done[kind or "passed"] += 1
            return kind

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        kind = self._next(handler)
        if kind == "conflict-409":
            _answer_error(handler, 409, "CommitFailedException", "Requirement failed: branch main has changed")
            return
        if kind in ("refused-503", "refused-429"):
            code = int(kind.split("-")[1])
            _answer_error(handler, code, "ServiceUnavailableException", "Slow down: the service is overloaded")
            return
        if kind == "late-504":
            request = (handler.command, handler.path, dict(handler.headers.items()))  # the handler is reused
            later = threading.Timer(self.late_s, self._forward_request, (*request, body))
            later.start()
            self.late.append(later)
            _answer(handler, 504, "text/html", _GATEWAY % 504)
            return
        status, reason, headers, payload = self._forward(handler, body)
        if kind is not None:  # lost-NNN: carried out, the answer lost on the way back
            code = int(kind.split("-")[1])
            if code in (502, 504):
                _answer(handler, code, "text/html", _GATEWAY % code)
            else:
                _answer_error(handler, code, "ServerError", "the server failed after its change")
            return
        handler.send_response(status, reason)
        for key, value in headers:
            if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(payload)

    def _forward(self, handler: BaseHTTPRequestHandler, body: bytes) -> tuple[int, str, list[tuple[str, str]], bytes]:
        return self._forward_request(handler.command, handler.path, dict(handler.headers.items()), body)

    def _forward_request(
        self, method: str, path: str, given: dict[str, str], body: bytes
    ) -> tuple[int, str, list[tuple[str, str]], bytes]:
        parts = urlsplit(self.target)
        upstream = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=120)
        try:
            headers = {k: v for k, v in given.items() if k.lower() not in ("transfer-encoding", "connection")}
            headers["Content-Length"] = str(len(body))
            upstream.request(method, path, body=body, headers=headers)
            response = upstream.getresponse()
            return response.status, response.reason, response.getheaders(), response.read()
        finally:
            upstream.close()


def _answer(handler: BaseHTTPRequestHandler, status: int, content_type: str, payload: bytes) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(payload)))
    handler.end_headers()
    handler.wfile.write(payload)


def _answer_error(handler: BaseHTTPRequestHandler, status: int, kind: str, message: str) -> None:
    """An error as the REST specification shapes it (``{"error": {...}}``)."""
    payload = json.dumps({"error": {"message": message, "type": kind, "code": status}}).encode()
    _answer(handler, status, "application/json", payload)
