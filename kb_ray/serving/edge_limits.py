"""Limits at the HTTP edge of the ingress: request bodies and clients (Ray-free, Starlette only).

Ray Serve's proxy hands a request to the ingress replica as soon as its headers arrived; the body
follows through the ASGI ``receive()``, which waits as long as the client takes. A client that
declared more bytes than it sent held one of the replica's ``max_ongoing_requests`` until it
closed the connection (issue #37: five of them stopped all search). So:

* :class:`BodyGuard` refuses a body over its size limit with 413 (at once by its
  ``content-length``, else once that much arrived) and a body that does not arrive in time with
  408: the whole of it within ``read_timeout_s`` of the request reaching the replica, and each
  piece within ``idle_timeout_s`` of the one before.
* :class:`ClientConcurrencyLimit` answers 429 to a client that has ``max_in_flight`` requests in
  flight in this replica already: by API key when auth is on, else by address (``scope["client"]``,
  the TCP peer of Ray's proxy, or ``X-Forwarded-For`` when that peer is in ``FORWARDED_ALLOW_IPS``).

Each of these answers closes the connection (``Connection: close``).

:class:`EdgePolicy` holds both limits. The module that declares the app creates it with defaults
(middleware is added at import); the ingress replica sets it from ``serve.*`` when it starts.
docs/search.md "Limits at the HTTP edge".
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from dataclasses import dataclass, replace

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kb_ray.config import ServeSettings
from kb_ray.serving.http_guards import AsciiJSONResponse, too_large

# on a refusal before the body was read: the rest of it is never read, so the connection cannot serve
# another request (and a stalled client would otherwise keep its socket in Ray's proxy)
CLOSE = {"Connection": "close"}


@dataclass(frozen=True)
class BodyRules:
    """How large a request body may be and how long it may take to arrive (None: no deadline)."""

    max_bytes: int
    read_timeout_s: float | None = None
    idle_timeout_s: float | None = None


class EdgePolicy:
    """Body rules (one default, and per route) and the in-flight limit per client (0: none)."""

    def __init__(self, body: BodyRules, *, max_in_flight: int = 0) -> None:
        self.body, self.max_in_flight = body, max_in_flight
        self.routes: dict[tuple[str, str], BodyRules] = {}

    def configure(self, serve: ServeSettings, *, upload_route: tuple[str, str] | None = None) -> None:
        """The deadlines and the per-client limit of ``serve``; ``upload_route`` gets the upload size and time."""
        self.body = replace(self.body, read_timeout_s=serve.body_read_timeout_s,
                            idle_timeout_s=serve.body_idle_timeout_s)
        self.max_in_flight = serve.max_requests_per_client
        if upload_route is not None:
            self.allow_route(*upload_route, BodyRules(max_bytes=serve.upload_max_bytes,
                                                      read_timeout_s=serve.upload_read_timeout_s,
                                                      idle_timeout_s=serve.body_idle_timeout_s))

    def allow_route(self, method: str, path: str, rules: BodyRules) -> None:
        """Bodies of ``method path`` (exactly that path) follow ``rules`` instead of the default."""
        self.routes[(method.upper(), path.rstrip("/"))] = rules

    def body_rules(self, scope: Scope) -> BodyRules:
        return self.routes.get((scope["method"], scope["path"].rstrip("/")), self.body)


class BodyGuard:
    """ASGI middleware: 413 for a body over its route's size, 408 for one that does not arrive in time."""

    def __init__(self, app: ASGIApp, *, policy: EdgePolicy) -> None:
        self.app, self.policy = app, policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rules = self.policy.body_rules(scope)
        length = dict(scope.get("headers") or []).get(b"content-length", b"").decode("latin-1")
        if length.isdigit() and int(length) > rules.max_bytes:
            await AsciiJSONResponse({"detail": too_large(length, rules.max_bytes)}, status_code=413,
                                    headers=CLOSE)(scope, receive, send)
            return
        await self.app(scope, _guarded(receive, rules, declared=length), send)


def _guarded(receive: Receive, rules: BodyRules, *, declared: str) -> Receive:
    """``receive`` that counts the body's bytes and waits for each piece only until its deadline. Once
    the body is complete, ``receive`` waits for the disconnect: that wait has no deadline."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + (rules.read_timeout_s or math.inf)
    received, complete = 0, False

    async def guarded() -> Message:
        nonlocal received, complete
        if complete:
            return await receive()
        wait = min(rules.idle_timeout_s or math.inf, deadline - loop.time())
        try:
            message = await (receive() if wait == math.inf else asyncio.wait_for(receive(), timeout=max(wait, 0.0)))
        except TimeoutError:  # FastAPI re-raises an HTTPException from reading the body
            raise HTTPException(408, too_slow(received, declared, rules), headers=CLOSE) from None
        if message["type"] == "http.request":
            received += len(message.get("body", b""))
            complete = not message.get("more_body", False)
            if received > rules.max_bytes:
                raise HTTPException(413, too_large(f"more than {rules.max_bytes}", rules.max_bytes))
        return message

    return guarded


def too_slow(received: int, declared: str, rules: BodyRules) -> str:
    of = f" of the {declared} declared" if declared.isdigit() else ""
    limits = [f"within {rules.read_timeout_s:g} s" if rules.read_timeout_s else "",
              f"with no pause over {rules.idle_timeout_s:g} s" if rules.idle_timeout_s else ""]
    return (f"the request body did not arrive in time: {received} bytes{of} came, and a body must arrive "
            f"{' '.join(part for part in limits if part)}; send the whole body without pausing")


class ClientConcurrencyLimit:
    """ASGI middleware: 429 (``Retry-After: 1``) for a client over ``policy.max_in_flight`` requests in
    flight in this replica. It runs after authentication, which leaves the caller in the scope."""

    def __init__(self, app: ASGIApp, *, policy: EdgePolicy) -> None:
        self.app, self.policy = app, policy
        self.in_flight: Counter[str] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = self.policy.max_in_flight
        if scope["type"] != "http" or limit <= 0:
            await self.app(scope, receive, send)
            return
        client = client_key(scope)
        if self.in_flight[client] >= limit:
            detail = (f"this client has {limit} requests in flight already (serve.max_requests_per_client); "
                      "wait for one to finish")
            await AsciiJSONResponse({"detail": detail}, status_code=429, headers={"Retry-After": "1", **CLOSE})(
                scope, receive, send)
            return
        self.in_flight[client] += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight[client] -= 1
            if not self.in_flight[client]:
                del self.in_flight[client]


def client_key(scope: Scope) -> str:
    """``key:<key id>`` when authentication resolved a caller, else ``addr:<host>`` (``addr:?`` unknown)."""
    caller = (scope.get("state") or {}).get("caller")
    if caller is not None:
        return f"key:{caller.key_id}"
    client = scope.get("client")
    return f"addr:{client[0] if client else '?'}"
