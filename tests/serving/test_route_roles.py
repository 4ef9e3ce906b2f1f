"""Every route of the ingress has a role in ROUTE_ROLES (deny by default must not hide a route), Ray-free."""

from __future__ import annotations

import re

from fastapi.routing import APIRoute

from kb_ray.auth.scope import is_open_path, required_role
from kb_ray.serving.deployments import api

READ_ROUTES = {("GET", "/v1/documents"): "reader", ("GET", "/v1/documents/{document_id}/versions"): "reader",
               ("GET", "/v1/chunks/{chunk_id}"): "reader", ("GET", "/metrics"): "admin",
               ("GET", "/v1/documents/{document_id}/pages/{page_no}.png"): "reader",
               ("GET", "/v1/documents/{document_id}/text"): "reader",
               ("GET", "/v1/documents/{document_id}/tree"): "reader"}


def _api_routes(routes) -> list[APIRoute]:
    """The app's routes, those of included routers too (Ray Serve's ingress includes the class's)."""
    found = []
    for route in routes:
        nested = getattr(getattr(route, "original_router", None), "routes", None)
        found += _api_routes(nested) if nested is not None else [route] if isinstance(route, APIRoute) else []
    return found


def _routes() -> dict[tuple[str, str], str | None]:
    found = {}
    for route in _api_routes(api.routes):
        if not is_open_path(route.path):
            concrete = re.sub(r"\{[^}]+\}", "some_id", route.path)
            for method in route.methods:
                found[(method, route.path)] = required_role(method, concrete)
    return found


def test_every_route_has_a_role_and_the_read_routes_have_theirs():
    routes = _routes()
    assert set(READ_ROUTES) <= set(routes)
    assert {key: role for key, role in routes.items() if role is None} == {}
    assert {key: routes[key] for key in READ_ROUTES} == READ_ROUTES
