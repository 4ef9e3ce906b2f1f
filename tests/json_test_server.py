"""The scaffolding of the tests' small real JSON servers (stdlib ``http.server`` on 127.0.0.1,
a free port): recorded requests, behaviours switched between calls, a count of requests in
flight. :class:`tests.enrich.openai_server.OpenAIServer` (chat completions) and
:class:`tests.model_server.ModelServer` (embeddings, rerank) define only their answers."""

from __future__ import annotations

import abc
import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class RecordedRequest:
    path: str
    body: dict[str, Any] | None
    authorization: str | None
    status: int = 0


class ScriptedJsonServer(abc.ABC):
    """A running server. Subclasses implement :meth:`_answer`; ``behaviour`` is a dataclass
    instance whose fields :meth:`set` changes under the lock."""

    thread_name = "json-test-server"

    def __init__(self, *, model: str, behaviour: Any) -> None:
        self.model = model
        self.requests: list[RecordedRequest] = []
        self.max_in_flight = 0  # most requests handled at once, from arrival to answer
        self._in_flight = 0
        self._behaviour = behaviour
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_class(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name=self.thread_name, daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def set(self, **behaviour: Any) -> None:
        with self._lock:
            for key, value in behaviour.items():
                if not hasattr(self._behaviour, key):
                    raise TypeError(f"unknown behaviour {key!r}")
                setattr(self._behaviour, key, value)

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    @abc.abstractmethod
    def _answer(self, record: RecordedRequest, headers: Any) -> tuple[int, Any, float, dict[str, str]]:
        """Status, JSON answer, delay before answering and extra headers (records ``record``)."""

    def _enter(self, change: int) -> None:
        with self._lock:
            self._in_flight += change
            self.max_in_flight = max(self.max_in_flight, self._in_flight)


def _handler_class(server: ScriptedJsonServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            server._enter(+1)
            try:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                record = RecordedRequest(path=self.path, body=body, authorization=self.headers.get("Authorization"))
                status, answer, delay, headers = server._answer(record, self.headers)
                record.status = status
                time.sleep(delay)
                self._send(status, answer, headers)
            finally:
                server._enter(-1)

        def _send(self, status: int, answer: Any, headers: dict[str, str]) -> None:
            data = json.dumps(answer).encode("utf-8")
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout tests)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence per-request logging
            pass

    return Handler
