"""``GET /metrics``: Prometheus text of the ingress replica (Starlette and prometheus_client only, no Ray).

:class:`ServiceMetrics` owns its own ``CollectorRegistry`` (never the process-global one, so
two services or a test in one process never mix counts); :class:`MetricsMiddleware` records
every HTTP request by *route template* (``/v1/documents/{document_id}``, never the raw path, so
ids do not become label values; a path no route matches is ``unmatched``), its status and its
latency. A client that closed the connection before the response (Ray Serve then cancels the
request; its proxy logs 499) is status 499, not an error. The generation and document gauges are
set by the ``/metrics`` route just before it renders. Each ingress replica counts its own
requests. docs/documents_api.md lists the series.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kb_ray.serving.http_guards import CLIENT_CLOSED

UNMATCHED = "unmatched"
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
CONTENT_TYPE = CONTENT_TYPE_LATEST


class ServiceMetrics:
    """The series of one service process, in a registry of its own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter("kb_ray_http_requests", "HTTP requests by route template, method and status",
                                ("route", "method", "status"), registry=self.registry)
        self.latency = Histogram("kb_ray_http_request_duration_seconds", "HTTP request latency by route template",
                                 ("route",), buckets=LATENCY_BUCKETS, registry=self.registry)
        self.errors = Counter("kb_ray_http_errors", "HTTP requests that failed in the service (status 5xx or an "
                              "exception; not a client that left first: 499)", ("route",), registry=self.registry)
        self.generation = Gauge("kb_ray_index_generation", "1 for the index generation being served",
                                ("generation",), registry=self.registry)
        self.documents = Gauge("kb_ray_documents", "documents with an active version in the catalog",
                               registry=self.registry)

    def observe(self, *, route: str, method: str, status: int, seconds: float) -> None:
        self.requests.labels(route=route, method=method, status=str(status)).inc()
        self.latency.labels(route=route).observe(seconds)
        if status >= 500:
            self.errors.labels(route=route).inc()

    def set_generation(self, generation_id: str) -> None:
        """Only the served generation is present (a switch removes the old label)."""
        self.generation.clear()
        self.generation.labels(generation=generation_id).set(1)

    def set_documents(self, count: int) -> None:
        self.documents.set(count)

    def render(self) -> bytes:
        return generate_latest(self.registry)


def route_template(routes: Sequence[Any], scope: Scope) -> str:
    """The path template of the route ``scope`` matches fully, else :data:`UNMATCHED`. Routers
    included into the app (FastAPI ``include_router``, as Ray Serve's ingress does) are searched too."""
    for route in routes:
        nested = getattr(getattr(route, "original_router", None), "routes", None)
        if nested is not None:
            found = route_template(nested, scope)
            if found != UNMATCHED:
                return found
            continue
        match, _ = route.matches(scope)
        if match == Match.FULL and getattr(route, "path", None):
            return route.path
    return UNMATCHED


class MetricsMiddleware:
    """ASGI middleware: one :meth:`ServiceMetrics.observe` per HTTP request (an exception
    counts as a 500 and is re-raised; a client that left before the response started, or a
    request cancelled, as 499). ``routes`` is called per request (routes are added after the
    middleware)."""

    def __init__(self, app: ASGIApp, *, metrics: ServiceMetrics, routes: Callable[[], Sequence[Any]]) -> None:
        self.app, self.metrics, self.routes = app, metrics, routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started, status, answered = time.perf_counter(), [500], [False]

        async def receive_and_see() -> Message:
            message = await receive()
            if message["type"] == "http.disconnect" and not answered[0]:
                status[0] = CLIENT_CLOSED  # whatever the app answers next, nobody reads it
            return message

        async def send_and_see(message: Message) -> None:
            if message["type"] == "http.response.start":
                answered[0] = True
                if status[0] != CLIENT_CLOSED:
                    status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive_and_see, send_and_see)
        except asyncio.CancelledError:  # Ray Serve cancels a request whose client disconnected
            status[0] = CLIENT_CLOSED
            raise
        finally:
            # the route the router chose (it leaves it in the scope), else one matched here: a request
            # refused before routing (401, 403, 413) still counts under its route
            route = getattr(scope.get("route"), "path", None) or route_template(self.routes(), scope)
            self.metrics.observe(route=route, method=scope["method"], status=status[0],
                                 seconds=time.perf_counter() - started)
