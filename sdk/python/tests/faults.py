"""Faults between the client and the server, written for the tests:

* ``DroppingProxy`` forwards HTTP/1.1 requests to a real server and, for
  the requests it is told to drop, reads the server's whole answer (so the
  server has committed) and then closes the client's connection without
  sending a byte of it: the "answer lost after commit" case.
* ``StubServer`` answers every request the same way (e.g. 503 with
  ``Retry-After: 0``), or never answers; it counts the requests.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple


def _read_until(sock: socket.socket, buffer: bytearray, marker: bytes) -> Optional[int]:
    """Reads into ``buffer`` until it holds ``marker``; its end, or ``None`` at EOF."""
    while True:
        at = buffer.find(marker)
        if at >= 0:
            return at + len(marker)
        chunk = sock.recv(65536)
        if not chunk:
            return None
        buffer.extend(chunk)


def _read_exact(sock: socket.socket, buffer: bytearray, size: int) -> bool:
    while len(buffer) < size:
        chunk = sock.recv(65536)
        if not chunk:
            return False
        buffer.extend(chunk)
    return True


def _headers(head: bytes) -> Dict[str, str]:
    lines = head.decode("latin-1").split("\r\n")[1:]
    out: Dict[str, str] = {}
    for line in lines:
        if ":" in line:
            name, value = line.split(":", 1)
            out[name.strip().lower()] = value.strip()
    return out


def read_message(sock: socket.socket, buffer: bytearray) -> Optional[Tuple[bytes, bytes]]:
    """One HTTP/1.1 message (head, body) with a Content-Length body (or
    none), or ``None`` when the peer closed first. What is read beyond it
    stays in ``buffer``."""
    end = _read_until(sock, buffer, b"\r\n\r\n")
    if end is None:
        return None
    head = bytes(buffer[:end])
    headers = _headers(head)
    if "chunked" in headers.get("transfer-encoding", ""):
        raise RuntimeError("the test proxy reads Content-Length bodies only")
    length = int(headers.get("content-length", "0"))
    if not _read_exact(sock, buffer, end + length):
        return None
    body = bytes(buffer[end : end + length])
    del buffer[: end + length]
    return head, body


@dataclass
class Exchange:
    method: str
    path: str
    status: int
    body: bytes
    dropped: bool
    at: float = 0.0
    """``time.monotonic()`` when the request reached the proxy."""


class DroppingProxy:
    """A TCP proxy for HTTP/1.1 that drops chosen answers after the server
    sent them. ``drop(method, path, n)`` decides for the n-th request (1-based);
    ``exchanges`` records every request and its answer, dropped or not."""

    def __init__(self, upstream_port: int, drop: Callable[[str, str, int], bool]) -> None:
        self.upstream_port = upstream_port
        self.drop = drop
        self.exchanges: List[Exchange] = []
        self._lock = threading.Lock()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self.port = int(self._listener.getsockname()[1])
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def dropped(self) -> List[Exchange]:
        return [e for e in self.exchanges if e.dropped]

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
        from_client = bytearray()
        from_upstream = bytearray()
        try:
            while True:
                request = read_message(client, from_client)
                if request is None:
                    return
                head, body = request
                at = time.monotonic()
                method, path = head.decode("latin-1").split(" ", 2)[:2]
                upstream.sendall(head + body)
                response = read_message(upstream, from_upstream)
                if response is None:
                    return
                status = int(response[0].split(b" ", 2)[1])
                with self._lock:
                    n = len(self.exchanges) + 1
                    drop = self.drop(method, path, n)
                    self.exchanges.append(
                        Exchange(method, path, status, response[1], drop, at)
                    )
                if drop:
                    client.shutdown(socket.SHUT_RDWR)
                    return
                client.sendall(response[0] + response[1])
        except OSError:
            return
        finally:
            client.close()
            upstream.close()

    def close(self) -> None:
        self._closed = True
        self._listener.close()


@dataclass
class StubServer:
    """Answers every request with ``status``, ``headers`` and a problem body,
    or (``hang=True``) reads the request and never answers."""

    status: int = 503
    headers: Dict[str, str] = field(default_factory=lambda: {"Retry-After": "0"})
    code: str = "unavailable"
    hang: bool = False
    requests: List[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self.port = int(self._listener.getsockname()[1])
        self._closed = False
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _answer(self) -> bytes:
        body = json.dumps(
            {
                "type": f"/problems/{self.code}",
                "title": "Stub",
                "status": self.status,
                "detail": "the stub always answers this",
                "code": self.code,
            }
        ).encode()
        head = [f"HTTP/1.1 {self.status} Stub", "Content-Type: application/problem+json"]
        head += [f"{k}: {v}" for k, v in self.headers.items()]
        head.append(f"Content-Length: {len(body)}")
        return ("\r\n".join(head) + "\r\n\r\n").encode() + body

    def _serve(self, conn: socket.socket) -> None:
        buffer = bytearray()
        try:
            while True:
                if read_message(conn, buffer) is None:
                    return
                with self._lock:
                    self.requests.append(time.monotonic())
                if self.hang:
                    while not self._closed:
                        time.sleep(0.05)
                    return
                conn.sendall(self._answer())
        except OSError:
            return
        finally:
            conn.close()

    def close(self) -> None:
        self._closed = True
        self._listener.close()
