"""A TCP proxy on loopback that cuts database connections where a test says: before a
request reaches the server, after it reached it (its answer lost), or every connection from
a step on. A step is one chunk a client sends (a query, a commit, a connection's startup):
counting them lets a test cut a flow at each of its steps in turn."""

from __future__ import annotations

import contextlib
import socket
import threading
from dataclasses import dataclass, field
from typing import Literal

#: ``request``: the step's chunk is dropped and its connection cut (the server never saw
#: it); ``response``: the chunk reaches the server and the connection is cut before its
#: answer comes back (the server did it; the client cannot know).
CutMode = Literal["request", "response"]


@dataclass
class _Pair:
    client: socket.socket
    server: socket.socket
    doomed: bool = False  # cut when the server answers
    closed: bool = False

    def cut(self) -> None:
        if self.closed:
            return
        self.closed = True
        for s in (self.client, self.server):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()


@dataclass
class FaultProxy:
    """Forwards ``127.0.0.1:port`` to ``target``; see the module."""

    target: tuple[str, int]
    port: int = 0
    steps: int = 0
    cuts: int = 0
    _cut_at: int | None = None
    _mode: CutMode = "request"
    _down_from: int | None = None
    _pairs: list[_Pair] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _listener: socket.socket | None = None
    _running: bool = False

    def start(self) -> FaultProxy:
        listener = socket.create_server(("127.0.0.1", 0))
        self._listener = listener
        self.port = listener.getsockname()[1]
        self._running = True
        threading.Thread(target=self._accept, daemon=True, name="fault-proxy").start()
        return self

    def stop(self) -> None:
        self._running = False
        if self._listener is not None:
            self._listener.close()
        with self._lock:
            for pair in self._pairs:
                pair.cut()
            self._pairs.clear()

    # -- what the test asks for --------------------------------------------------------

    def cut_at(self, step: int, mode: CutMode) -> None:
        """Cut once, at the step numbered ``step`` (counted from the proxy's start)."""
        with self._lock:
            self._cut_at, self._mode, self._down_from = step, mode, None

    def down_from(self, step: int) -> None:
        """From ``step`` on, cut every connection and refuse new ones, until :meth:`heal`."""
        with self._lock:
            self._cut_at, self._down_from = None, step

    def heal(self) -> None:
        """Forward everything again (connections cut before stay cut)."""
        with self._lock:
            self._cut_at = self._down_from = None

    @property
    def is_down(self) -> bool:
        with self._lock:
            return self._down_from is not None and self.steps >= self._down_from

    # -- the proxy ---------------------------------------------------------------------

    def _accept(self) -> None:
        assert self._listener is not None
        while self._running:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.is_down:
                client.close()
                continue
            try:
                server = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            for s in (client, server):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            pair = _Pair(client, server)
            with self._lock:
                self._pairs.append(pair)
            threading.Thread(target=self._upstream, args=(pair,), daemon=True).start()
            threading.Thread(target=self._downstream, args=(pair,), daemon=True).start()

    def _upstream(self, pair: _Pair) -> None:
        while True:
            try:
                chunk = pair.client.recv(65536)
            except OSError:
                chunk = b""
            if not chunk:
                pair.cut()
                return
            with self._lock:
                self.steps += 1
                step = self.steps
                down = self._down_from is not None and step >= self._down_from
                hit = self._cut_at is not None and step == self._cut_at
                if hit:
                    self.cuts += 1
                    self._cut_at = None
                if down:
                    for other in self._pairs:
                        other.cut()
                    self._pairs.clear()
                mode = self._mode
            if down or (hit and mode == "request"):
                pair.cut()
                return
            if hit:
                pair.doomed = True
            try:
                pair.server.sendall(chunk)
            except OSError:
                pair.cut()
                return

    def _downstream(self, pair: _Pair) -> None:
        while True:
            try:
                chunk = pair.server.recv(65536)
            except OSError:
                chunk = b""
            if not chunk or pair.doomed:
                pair.cut()
                return
            try:
                pair.client.sendall(chunk)
            except OSError:
                pair.cut()
                return
