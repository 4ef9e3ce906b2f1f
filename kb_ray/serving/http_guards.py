"""What the ingress does with a request before any route sees it (Ray-free, Starlette only).

* :class:`BodySizeLimit` refuses a body over the limit with 413: at once when its
  ``content-length`` says so, and while it is read when it arrives chunked (no length).
  :func:`allow_larger_body` raises the limit of one route (the ingress: uploads).
* :func:`validation_error_response` answers a malformed body with 422 without echoing the
  input back: the echo of a ``NaN``/``Infinity`` number or of a lone-surrogate string cannot be
  encoded as JSON and turned a bad request into a 500.
* :func:`lone_surrogate_path` finds a string that is not valid Unicode (a ``\\ud800`` escape
  with no partner) anywhere in a parsed body, so the request models can refuse it.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class AsciiJSONResponse(JSONResponse):
    """JSON with every non-ASCII character escaped: always encodable, whatever the strings hold."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")


def too_large(size: int | str, limit: int) -> str:
    return f"request body of {size} bytes is over the {limit}-byte limit; send a smaller request"


_ROUTE_LIMITS: dict[tuple[str, str], int] = {}


def allow_larger_body(method: str, path: str, max_bytes: int) -> None:
    """Let bodies of ``method path`` (exactly that path) reach ``max_bytes`` in this process."""
    _ROUTE_LIMITS[(method.upper(), path.rstrip("/"))] = max_bytes


class BodySizeLimit:
    """ASGI middleware: 413 for a request body over ``max_bytes`` (or its route's own limit,
    :func:`allow_larger_body`), declared or streamed."""

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = _ROUTE_LIMITS.get((scope["method"], scope["path"].rstrip("/")), self.max_bytes)
        length = dict(scope.get("headers") or []).get(b"content-length", b"").decode("latin-1")
        if length.isdigit() and int(length) > limit:
            await AsciiJSONResponse({"detail": too_large(length, limit)}, status_code=413)(scope, receive, send)
            return
        await self.app(scope, _counting(receive, limit), send)


def _counting(receive: Receive, limit: int) -> Receive:
    received = 0

    async def counted() -> Message:
        nonlocal received
        message = await receive()
        received += len(message.get("body", b""))
        if received > limit:  # FastAPI re-raises an HTTPException from reading the body
            raise HTTPException(413, too_large(f"more than {limit}", limit))
        return message

    return counted


async def validation_error_response(_request: Request, exc: Any) -> JSONResponse:
    """422 naming each wrong field (location, message, kind) and never the input itself."""
    errors = [{"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))}
              for e in exc.errors()]
    return AsciiJSONResponse({"detail": errors}, status_code=422)


def lone_surrogate_path(value: Any) -> str | None:
    """The location (``filter.mime[0]``) of the first key or string that holds a lone surrogate."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:  # iterative: a parsed body may be nested as deep as the JSON parser allows
        where, item = stack.pop()
        if isinstance(item, str) and not _encodable(item):
            return where or "body"
        if isinstance(item, dict):
            for key, child in item.items():
                label = f"{where}.{key}" if where else str(key)
                if isinstance(key, str) and not _encodable(key):
                    return where or "body"
                stack.append((label, child))
        elif isinstance(item, list):
            stack.extend((f"{where}[{i}]", child) for i, child in enumerate(item))
    return None


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
