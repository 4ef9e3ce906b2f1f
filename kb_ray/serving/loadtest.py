"""A load driver for the HTTP query service: N concurrent clients × D seconds of ``/v1/search``.

Used by ``tests/serving/test_service_load.py``, ``tests/serving/test_slow_clients.py`` and
``benchmarks/serve_load.py``. Each client is a thread with its own keep-alive ``httpx.Client``,
cycling through a list of request bodies (:func:`search_mix`) from its own offset. Every request is
recorded (start, latency, status or the kind of connection error), so a caller can look at any
window of the run, e.g. the seconds after a fault (:meth:`LoadResult.stats`).

:func:`open_stalled` is a slow client: a raw socket that sends its headers and the first bytes of
a body it declares longer, then nothing; :func:`stalled_replies` waits for what the service answers them.
"""

from __future__ import annotations

import json
import selectors
import socket
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

DEFAULT_FILTERS: tuple[dict[str, Any] | None, ...] = (None, None, None, {"mime": "application/pdf"},
                                                      {"mime": ["text/plain", "text/markdown"]})


@dataclass(frozen=True)
class RequestRecord:
    started_s: float  # since the load began
    latency_ms: float
    status: int | None  # None: no HTTP response (connection error, timeout)
    error: str | None  # None when 2xx; else "http_<status>" or the exception class (ReadTimeout, ConnectError)
    mode: str
    client: int


@dataclass(frozen=True)
class LoadStats:
    requests: int
    errors: int
    errors_by_kind: dict[str, int]
    seconds: float
    qps: float  # successful requests per second of the window
    p50_ms: float | None  # latency percentiles of the successful requests
    p95_ms: float | None
    p99_ms: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        ms = "/".join("–" if v is None else f"{v:.0f}" for v in (self.p50_ms, self.p95_ms, self.p99_ms))
        return (f"{self.requests} requests in {self.seconds:.1f} s, {self.qps:.1f} QPS, p50/p95/p99 {ms} ms, "
                f"{self.errors} errors {self.errors_by_kind or ''}")


@dataclass
class LoadResult:
    clients: int
    seconds: float  # wall time of the whole run
    began: float  # time.perf_counter() when it began: an event's ``started_s`` is ``perf_counter() - began``
    records: list[RequestRecord] = field(default_factory=list)

    def stats(self, *, start_s: float = 0.0, end_s: float | None = None) -> LoadStats:
        """Figures over the requests that started in ``[start_s, end_s)`` (default: the whole run)."""
        end_s = self.seconds if end_s is None else end_s
        window = [r for r in self.records if start_s <= r.started_s < end_s]
        ok = np.array([r.latency_ms for r in window if r.error is None])
        kinds = Counter(r.error for r in window if r.error is not None)
        span = max(end_s - start_s, 1e-9)
        p50, p95, p99 = (float(v) for v in np.percentile(ok, [50, 95, 99])) if len(ok) else (None, None, None)
        return LoadStats(requests=len(window), errors=sum(kinds.values()), errors_by_kind=dict(kinds),
                         seconds=round(span, 3), qps=round(len(ok) / span, 2), p50_ms=p50, p95_ms=p95, p99_ms=p99)

    def failures(self) -> list[RequestRecord]:
        return [r for r in self.records if r.error is not None]


def golden_queries(path: str | Path) -> list[str]:
    """The ``query`` of each line of a queries JSONL file (golden/queries.jsonl)."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["query"] for line in lines if line.strip()]


def search_mix(*, queries: Sequence[str], modes: Sequence[str] = ("hybrid", "dense", "lexical"),
               filters: Sequence[dict[str, Any] | None] = DEFAULT_FILTERS, k: int = 5) -> list[dict[str, Any]]:
    """``/v1/search`` bodies: each query in turn with the next mode and the next filter (cycling)."""
    if not queries or not modes or not filters:
        raise ValueError("search_mix needs at least one query, one mode and one filter (None: no filter)")
    bodies = []
    for i, query in enumerate(queries):
        body = {"query": query, "k": k, "mode": modes[i % len(modes)]}
        if filters[i % len(filters)] is not None:
            body["filter"] = filters[i % len(filters)]
        bodies.append(body)
    return bodies


def run_load(*, url: str, bodies: Sequence[dict[str, Any]], clients: int = 8, seconds: float = 10.0,
             timeout_s: float = 30.0, path: str = "/v1/search") -> LoadResult:
    """``clients`` threads POST ``bodies`` to ``url + path`` back to back for ``seconds``; blocks
    until the last request in flight has finished (at most ``timeout_s`` after the end)."""
    if clients < 1 or seconds <= 0 or not bodies:
        raise ValueError("run_load needs clients >= 1, seconds > 0 and at least one body")
    records: list[RequestRecord] = []
    lock, began = threading.Lock(), time.perf_counter()

    def client(number: int) -> None:
        with httpx.Client(base_url=url, timeout=timeout_s) as http:
            i = number * max(len(bodies) // clients, 1)
            while time.perf_counter() - began < seconds:
                record = _one_request(http, path, bodies[i % len(bodies)], began=began, client=number)
                with lock:
                    records.append(record)
                i += 1

    threads = [threading.Thread(target=client, args=(n,), name=f"load-client-{n}") for n in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=seconds + timeout_s + 30)
    return LoadResult(clients=clients, seconds=time.perf_counter() - began, began=began,
                      records=sorted(records, key=lambda r: r.started_s))


def _one_request(http: httpx.Client, path: str, body: dict[str, Any], *, began: float, client: int) -> RequestRecord:
    started = time.perf_counter()
    status, error = None, None
    try:
        status = http.post(path, json=body).status_code
        error = None if 200 <= status < 300 else f"http_{status}"
    except httpx.HTTPError as exc:  # no response: refused, reset, timed out
        error = type(exc).__name__
    return RequestRecord(started_s=started - began, latency_ms=(time.perf_counter() - started) * 1000,
                         status=status, error=error, mode=str(body.get("mode", "hybrid")), client=client)


STALLED_STARTS = {  # content type and the first bytes of a body that never finishes
    "/v1/search": ("application/json", b'{"query": "pump'),
    "/v1/documents": ("multipart/form-data; boundary=zz",
                      b'--zz\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n\r\nsome te'),
}


@dataclass(frozen=True)
class StalledReply:
    status_line: str  # "" when nothing came
    first_bytes_s: float | None  # when the answer (or the close) came, seconds after the stalled clients opened
    closed: bool  # the service closed the connection


def open_stalled(host: str, port: int, path: str, *, source: str = "", missing_bytes: int = 10_000) -> socket.socket:
    """A client that POSTs the headers and the first bytes of a body ``missing_bytes`` longer than what
    it sends, then waits; ``source`` is the local address to send from (a 127.0.0.0/8 one per client)."""
    content_type, start = STALLED_STARTS[path]
    sock = socket.create_connection((host, port), timeout=30, source_address=(source, 0) if source else None)
    head = (f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(start) + missing_bytes}\r\n\r\n")
    sock.sendall(head.encode("ascii") + start)
    return sock


def stalled_replies(socks: Sequence[socket.socket], *, since: float, timeout_s: float) -> list[StalledReply]:
    """What each stalled client got until the service closed its connection, waiting ``timeout_s`` at
    most (``since``: ``time.monotonic()`` when they opened); the sockets are closed after."""
    received = {sock: b"" for sock in socks}
    first: dict[socket.socket, float] = {}
    closed: set[socket.socket] = set()
    with selectors.DefaultSelector() as selector:
        for sock in socks:
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ)
        end = time.monotonic() + timeout_s
        while len(closed) < len(socks) and time.monotonic() < end:
            for key, _ in selector.select(timeout=0.2):
                sock = key.fileobj
                try:
                    data = sock.recv(65536)
                except ConnectionError:
                    data = b""
                first.setdefault(sock, time.monotonic() - since)
                received[sock] += data
                if not data:
                    closed.add(sock)
                    selector.unregister(sock)
    for sock in socks:
        sock.close()
    return [StalledReply(status_line=received[s].split(b"\r\n", 1)[0].decode("latin-1"),
                         first_bytes_s=first.get(s), closed=s in closed) for s in socks]
