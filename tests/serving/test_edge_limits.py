"""Ray-free checks of the limits at the HTTP edge (kb_ray/serving/edge_limits.py): body read deadlines
and the in-flight limit per client, on a FastAPI app driven over raw ASGI (a stalled client is a
``receive()`` that never returns, which Starlette's TestClient cannot be)."""

from __future__ import annotations

import asyncio
import time

import httpx
from fastapi import FastAPI, Request

from kb_ray.auth.keys import Caller
from kb_ray.config import ServeSettings
from kb_ray.serving.edge_limits import BodyGuard, BodyRules, ClientConcurrencyLimit, EdgePolicy, client_key
from kb_ray.serving.http_guards import add_error_handlers

BODY = b'{"query": "pump seal"}'


def _app(policy: EdgePolicy, gate: asyncio.Event | None = None) -> FastAPI:
    app = FastAPI()
    app.add_middleware(BodyGuard, policy=policy)
    app.add_middleware(ClientConcurrencyLimit, policy=policy)
    add_error_handlers(app)

    @app.post("/echo")
    async def echo(request: Request) -> dict:
        return {"bytes": len(await request.body())}

    @app.get("/wait")
    async def wait() -> dict:
        await gate.wait()
        return {"ok": True}

    return app


async def _post(app: FastAPI, pieces: list[tuple[float, bytes]], *, declared: int, stall: bool = False
                ) -> tuple[int, dict[str, str], float, bytes]:
    """POST ``pieces`` (pause before each, bytes) to /echo over raw ASGI, then stall or finish;
    ``(status, headers, seconds until the response started, response body)``."""
    started, sent, body = time.perf_counter(), [], []
    queue = list(pieces)

    async def receive() -> dict:
        if not queue:
            await asyncio.Event().wait()  # a client that sends nothing more
        pause, body = queue.pop(0)
        await asyncio.sleep(pause)
        return {"type": "http.request", "body": body, "more_body": bool(queue) or stall}

    async def send(message: dict) -> None:
        if message["type"] == "http.response.start":
            sent.append((message, time.perf_counter() - started))
        else:
            body.append(message.get("body", b""))

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": "/echo", "raw_path": b"/echo", "root_path": "", "query_string": b"",
             "client": ("127.0.0.1", 40000), "server": ("127.0.0.1", 8000),
             "headers": [(b"content-type", b"application/json"), (b"content-length", str(declared).encode())]}
    await asyncio.wait_for(app(scope, receive, send), timeout=10)
    message, seconds = sent[0]
    return message["status"], {k.decode(): v.decode() for k, v in message["headers"]}, seconds, b"".join(body)


def test_a_body_that_stalls_or_trickles_is_408_at_its_deadline_and_the_connection_closes():
    policy = EdgePolicy(BodyRules(max_bytes=10_000, read_timeout_s=0.6, idle_timeout_s=0.3))
    app = _app(policy)
    status, headers, seconds, body = asyncio.run(_post(app, [(0, BODY[:5])], declared=1000, stall=True))
    assert status == 408 and headers["connection"] == "close" and 0.25 <= seconds < 1.0  # the idle timeout
    assert b"5 bytes of the 1000 declared came" in body and b"within 0.6 s with no pause over 0.3 s" in body
    trickle = [(0.2, BODY[i:i + 2]) for i in range(0, len(BODY), 2)]  # no pause over 0.3 s, 2.2 s in all
    status, _, seconds, _ = asyncio.run(_post(app, trickle, declared=len(BODY)))
    assert status == 408 and 0.55 <= seconds < 1.2  # the whole-body deadline
    status, _, _, body = asyncio.run(_post(app, [(0.1, BODY[:9]), (0.1, BODY[9:])], declared=len(BODY)))
    assert status == 200 and body == b'{"bytes":22}'


def test_the_upload_route_keeps_its_own_size_and_deadline():
    settings = ServeSettings(body_read_timeout_s=0.2, body_idle_timeout_s=0.5, upload_read_timeout_s=30,
                             upload_max_bytes=5000, max_requests_per_client=3)
    policy = EdgePolicy(BodyRules(max_bytes=100))
    policy.configure(settings, upload_route=("POST", "/v1/documents"))
    assert policy.max_in_flight == 3 and policy.body == BodyRules(max_bytes=100, read_timeout_s=0.2,
                                                                  idle_timeout_s=0.5)
    upload = policy.body_rules({"method": "POST", "path": "/v1/documents/"})
    assert upload == BodyRules(max_bytes=5000, read_timeout_s=30, idle_timeout_s=0.5)
    assert policy.body_rules({"method": "GET", "path": "/v1/documents"}) is policy.body


def test_a_client_over_its_in_flight_limit_is_429_and_others_are_not():
    async def run() -> list[int]:
        gate = asyncio.Event()
        app = _app(EdgePolicy(BodyRules(max_bytes=1000), max_in_flight=2), gate)

        def client(host: str) -> httpx.AsyncClient:
            return httpx.AsyncClient(transport=httpx.ASGITransport(app=app, client=(host, 5000)), base_url="http://t")

        async with client("10.0.0.1") as greedy, client("10.0.0.2") as other:
            held = [asyncio.create_task(greedy.get("/wait")) for _ in range(2)]
            await asyncio.sleep(0.1)
            refused = await greedy.get("/wait")
            assert refused.headers["retry-after"] == "1" and refused.headers["connection"] == "close"
            assert "2 requests in flight" in refused.json()["detail"]
            answered = asyncio.create_task(other.get("/wait"))
            await asyncio.sleep(0.1)
            gate.set()
            statuses = [refused.status_code, (await answered).status_code] + [(await t).status_code for t in held]
            statuses.append((await greedy.get("/wait")).status_code)  # its requests done: it may again
        return statuses

    assert asyncio.run(run()) == [429, 200, 200, 200, 200]


def test_clients_are_told_apart_by_api_key_when_auth_resolved_one_else_by_address():
    caller = Caller(key_id="kb_abc", tenant="acme", role="reader", principals=())
    assert client_key({"state": {"caller": caller}, "client": ("10.0.0.1", 1)}) == "key:kb_abc"
    assert client_key({"client": ("10.0.0.1", 1)}) == "addr:10.0.0.1"
    assert client_key({"client": None}) == "addr:?"


def test_no_limit_when_it_is_zero():
    async def run() -> list[int]:
        gate = asyncio.Event()
        app = _app(EdgePolicy(BodyRules(max_bytes=1000), max_in_flight=0), gate)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
            held = [asyncio.create_task(http.get("/wait")) for _ in range(20)]
            await asyncio.sleep(0.1)
            gate.set()
            return [(await t).status_code for t in held]

    assert asyncio.run(run()) == [200] * 20
