"""The metrics module (Ray-free): series, route templates and the Prometheus text it renders."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families
from starlette.applications import Starlette
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

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
