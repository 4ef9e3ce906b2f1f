"""How the CLI talks to a running ``kb-ray serve``: one POST, and every failure as one line.

An unreachable service, an HTTP error (its ``detail``) or a body that is not JSON becomes a
:class:`ServiceError` whose message the CLI prints as-is (``kb-ray: error: ...``, exit 2), never
a traceback. The API key comes from ``--api-key`` or the environment variable ``KB_RAY_API_KEY``.
"""

from __future__ import annotations

import os
from typing import Any

from kb_ray.errors import KbRayError

API_KEY_ENV = "KB_RAY_API_KEY"


class ServiceError(KbRayError):
    """The service could not be reached or refused the request."""


def api_key_headers(api_key: str | None) -> dict[str, str]:
    key = api_key or os.environ.get(API_KEY_ENV)
    return {"Authorization": f"Bearer {key}"} if key else {}


def post_to_service(url: str, path: str, body: dict[str, Any], *, api_key: str | None, timeout_s: float,
                    local_hint: str) -> dict[str, Any]:
    """The service's JSON answer to ``POST {url}{path}``; raises :class:`ServiceError` otherwise."""
    import httpx

    target = f"{url.rstrip('/')}{path}"
    try:
        reply = httpx.post(target, json=body, headers=api_key_headers(api_key), timeout=timeout_s)
    except httpx.TimeoutException as exc:
        raise ServiceError(f"the kb-ray service at {url} did not answer within {timeout_s:g}s") from exc
    except httpx.TransportError as exc:
        raise ServiceError(f"no kb-ray service is reachable at {url}: start one with `kb-ray serve`, "
                           f"or {local_hint}") from exc
    if reply.status_code != 200:
        raise ServiceError(f"the service refused the request (HTTP {reply.status_code}): {_detail(reply)}")
    try:
        return reply.json()
    except ValueError as exc:
        raise ServiceError(f"the service at {url} answered with something that is not JSON: "
                           f"{reply.text[:200]}") from exc


def _detail(reply: Any) -> str:
    """The ``detail`` of an error body in words: a string, or each field error of a 422."""
    try:
        detail = reply.json().get("detail")
    except (ValueError, AttributeError):
        return reply.text[:200] or reply.reason_phrase
    if isinstance(detail, list):
        return "; ".join(f"{'.'.join(str(p) for p in e.get('loc', [])[1:]) or 'body'}: {e.get('msg')}"
                         for e in detail if isinstance(e, dict))
    return str(detail)
