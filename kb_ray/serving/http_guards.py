"""What the ingress answers for a request body it cannot take (Ray-free, Starlette only).
Size and time limits are kb_ray/serving/edge_limits.py.

:func:`add_error_handlers` installs these answers on an app.

* :func:`validation_error_response` answers a malformed body with 422 without echoing the
  input back: the echo of a ``NaN``/``Infinity`` number or of a lone-surrogate string cannot be
  encoded as JSON and turned a bad request into a 500.
* :func:`http_error_response` says why a body could not be parsed where FastAPI says only
  "There was an error parsing the body": not UTF-8, or nested deeper than :data:`MAX_JSON_DEPTH`
  (Python's parser gives up near 1,000 levels); both are 400. A client that closed the
  connection before its body arrived is 499 (:func:`client_closed_response`), never a 500.
* :func:`lone_surrogate_path` finds a string that is not valid Unicode (a ``\\ud800`` escape
  with no partner) anywhere in a parsed body, and :func:`deeper_than` a body nested past the
  limit, so the request models can refuse them.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from kb_ray.errors import RequestBodyError

MAX_JSON_DEPTH = 32  # arrays and objects inside each other in a JSON body; a request model needs 4
CLIENT_CLOSED = 499  # the status nginx and Ray Serve's proxy log for a client that left before the response


class AsciiJSONResponse(JSONResponse):
    """JSON with every non-ASCII character escaped: always encodable, whatever the strings hold."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")


def too_large(size: int | str, limit: int) -> str:
    return f"request body of {size} bytes is over the {limit}-byte limit; send a smaller request"


async def validation_error_response(_request: Request, exc: Any) -> JSONResponse:
    """422 naming each wrong field (location, message, kind) and never the input itself."""
    errors = [{"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))}
              for e in exc.errors()]
    return AsciiJSONResponse({"detail": errors}, status_code=422)


def add_error_handlers(app: Any) -> None:
    """The answers below, on a FastAPI ``app`` (the ingress; a test's small app)."""
    app.add_exception_handler(RequestValidationError, validation_error_response)  # 422 without the input
    app.add_exception_handler(HTTPException, http_error_response)  # a body not UTF-8 or too deep: why
    app.add_exception_handler(RequestBodyError, body_error_response)  # nested too deep, found after parsing
    app.add_exception_handler(ClientDisconnect, client_closed_response)  # left mid-body: 499, not a 500


async def body_error_response(_request: Request, exc: Exception) -> JSONResponse:
    return AsciiJSONResponse({"detail": str(exc)}, status_code=400)


def not_utf8(exc: UnicodeDecodeError) -> str:
    return (f"the request body is not valid UTF-8 (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
            "send JSON text encoded as UTF-8")


def too_deep(limit: int = MAX_JSON_DEPTH) -> str:
    return (f"the JSON body is nested more than {limit} levels deep (arrays and objects inside each other); "
            "send a flatter body")


async def http_error_response(request: Request, exc: HTTPException) -> Response:
    """FastAPI's answer to an ``HTTPException``, except for a body it could not parse: 400 saying why
    (not UTF-8, nested too deep), or 499 when the client closed the connection mid-body."""
    cause = exc.__cause__
    if isinstance(cause, ClientDisconnect):
        return await client_closed_response(request, cause)
    if isinstance(cause, UnicodeDecodeError):
        return AsciiJSONResponse({"detail": not_utf8(cause)}, status_code=400)
    if isinstance(cause, RecursionError):
        return AsciiJSONResponse({"detail": too_deep()}, status_code=400)
    return await http_exception_handler(request, exc)


async def client_closed_response(_request: Request, _exc: Exception) -> Response:
    """499 for a request whose client left before its body arrived: nobody reads it, metrics count it."""
    return Response(status_code=CLIENT_CLOSED)


def deeper_than(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether a parsed JSON value nests arrays and objects more than ``limit`` levels deep."""
    stack: list[tuple[int, Any]] = [(1, value)]
    while stack:  # iterative, like lone_surrogate_path
        depth, item = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((depth + 1, child) for child in children)
    return False


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
