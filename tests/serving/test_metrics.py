"""The metrics module (Ray-free): series, route templates and the Prometheus text it renders."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from kb_ray.serving.api import SearchRequest
from kb_ray.serving.http_guards import add_error_handlers
from kb_ray.serving.metrics import MetricsMiddleware, ServiceMetrics


def _samples(metrics: ServiceMetrics) -> dict[tuple[str, tuple], float]:
    text = metrics.render().decode("utf-8")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


async def _item(request):
    return JSONResponse({"id": request.path_params["item_id"]})


async def _boom(request):
    raise RuntimeError("boom")


@pytest.fixture()
def client_and_metrics():
    metrics = ServiceMetrics()
    app = Starlette(routes=[Route("/items/{item_id}", _item), Route("/boom", _boom),
                            Route("/missing", lambda r: PlainTextResponse("no", status_code=404))])
    app.add_middleware(MetricsMiddleware, metrics=metrics, routes=lambda: app.router.routes)
    return TestClient(app, raise_server_exceptions=False), metrics


def test_requests_are_counted_by_route_template_and_status(client_and_metrics):
    client, metrics = client_and_metrics
    for item in ("a", "b", "c"):
        assert client.get(f"/items/{item}").status_code == 200
    assert client.get("/nowhere/at/all").status_code == 404
    assert client.get("/boom").status_code == 500
    samples = _samples(metrics)
    ok = ("kb_ray_http_requests_total", (("method", "GET"), ("route", "/items/{item_id}"), ("status", "200")))
    assert samples[ok] == 3
    assert samples[("kb_ray_http_requests_total", (("method", "GET"), ("route", "unmatched"), ("status", "404")))] == 1
    assert samples[("kb_ray_http_errors_total", (("route", "/boom"),))] == 1
    assert ("kb_ray_http_errors_total", (("route", "/items/{item_id}"),)) not in samples
    assert samples[("kb_ray_http_request_duration_seconds_count", (("route", "/items/{item_id}"),))] == 3
    routes = {dict(labels)["route"] for _, labels in samples if "route" in dict(labels)}
    assert routes == {"/items/{item_id}", "/boom", "unmatched"}, "raw paths must not become labels"


def test_generation_gauge_keeps_only_the_served_one_and_documents_count():
    metrics = ServiceMetrics()
    metrics.set_generation("gen_old")
    metrics.set_generation("gen_new")
    metrics.set_documents(42)
    samples = _samples(metrics)
    assert samples[("kb_ray_index_generation", (("generation", "gen_new"),))] == 1
    assert ("kb_ray_index_generation", (("generation", "gen_old"),)) not in samples
    assert samples[("kb_ray_documents", ())] == 42


def test_each_instance_has_its_own_registry():
    first, second = ServiceMetrics(), ServiceMetrics()
    first.observe(route="/x", method="GET", status=200, seconds=0.01)
    assert ("kb_ray_http_requests_total", (("method", "GET"), ("route", "/x"), ("status", "200"))) \
        not in _samples(second)
    assert REGISTRY.get_sample_value("kb_ray_http_requests_total", {"route": "/x", "method": "GET",
                                                                    "status": "200"}) is None


def test_routes_of_an_included_router_and_requests_refused_before_routing():
    from fastapi import APIRouter, FastAPI

    metrics, router, app = ServiceMetrics(), APIRouter(), FastAPI()

    @router.get("/v1/things/{thing_id}")
    async def thing(thing_id: str) -> dict:
        return {"id": thing_id}

    app.include_router(router)

    @app.middleware("http")
    async def refuse_without_key(request, call_next):  # stands in for BearerAuth: refuses before routing
        if "x-key" not in request.headers:
            return JSONResponse({"detail": "no key"}, status_code=401)
        return await call_next(request)

    app.add_middleware(MetricsMiddleware, metrics=metrics, routes=lambda: app.router.routes)
    client = TestClient(app)
    assert client.get("/v1/things/1", headers={"x-key": "k"}).status_code == 200
    assert client.get("/v1/things/2").status_code == 401
    samples = _samples(metrics)
    for status in ("200", "401"):
        key = (("method", "GET"), ("route", "/v1/things/{thing_id}"), ("status", status))
        assert samples[("kb_ray_http_requests_total", key)] == 1, status


def _disconnecting_app() -> tuple[Any, ServiceMetrics]:
    from fastapi import FastAPI

    metrics, app = ServiceMetrics(), FastAPI()
    add_error_handlers(app)

    @app.post("/v1/search")
    async def search(request: SearchRequest) -> dict:
        return {"query": request.query}

    @app.post("/v1/documents")
    async def upload(request: Request) -> dict:
        return {"parts": len(await request.form())}

    app.add_middleware(MetricsMiddleware, metrics=metrics, routes=lambda: app.router.routes)
    return app, metrics


JSON_START = (b"application/json", b'{"query": "pu')
FORM_START = (b"multipart/form-data; boundary=zz",
              b'--zz\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n\r\nhel')


async def _leave_mid_body(app: Any, path: str, start: tuple[bytes, bytes], *, cancel: bool = False) -> list[dict]:
    """A client that sends the ``(content type, first bytes)`` of its body and then closes the connection
    (``http.disconnect``), or whose request Ray Serve cancels (what its proxy does when the client leaves)."""
    content_type, first = start
    messages = [{"type": "http.request", "body": first, "more_body": True}]
    sent: list[dict] = []

    async def receive() -> dict:
        if messages:
            return messages.pop(0)
        if cancel:
            await asyncio.Event().wait()
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": path, "raw_path": path.encode(), "root_path": "", "query_string": b"",
             "client": ("127.0.0.1", 40000), "server": ("127.0.0.1", 8000),
             "headers": [(b"content-type", content_type), (b"content-length", b"1000")]}
    task = asyncio.create_task(app(scope, receive, send))
    if cancel:
        await asyncio.sleep(0.1)
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return sent


def test_a_client_that_leaves_mid_body_is_counted_as_499_not_as_an_error():
    """Ray Serve's proxy logs 499 for it; /metrics said 500 (issue #37, point 8)."""
    app, metrics = _disconnecting_app()
    asyncio.run(_leave_mid_body(app, "/v1/search", JSON_START))
    asyncio.run(_leave_mid_body(app, "/v1/documents", FORM_START))
    asyncio.run(_leave_mid_body(app, "/v1/search", JSON_START, cancel=True))
    samples = _samples(metrics)
    for route, count in (("/v1/search", 2), ("/v1/documents", 1)):
        key = (("method", "POST"), ("route", route), ("status", "499"))
        assert samples[("kb_ray_http_requests_total", key)] == count, samples
        assert ("kb_ray_http_errors_total", (("route", route),)) not in samples
