"""Bearer-key authentication of the ingress (docs/auth.md): an ASGI middleware over
:mod:`kb_ray.auth` (Starlette only, no Ray).

With ``serve.auth.enabled`` every request but the :data:`~kb_ray.auth.scope.OPEN_PATHS`
(``/healthz``, the OpenAPI pages and the viewer's static files under ``/ui``, which hold no data) needs ``Authorization: Bearer <key>``:
401 when it is missing, unknown or revoked, 403 when the key's role is below the route's (or
the route is not in ``ROUTE_ROLES``). The resolved :class:`~kb_ray.auth.keys.Caller` is left in
``request.state.caller`` for the routes, which force its scope into their queries.
"""

from __future__ import annotations

from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from kb_ray.auth.keys import ApiKeyStore, Caller
from kb_ray.auth.scope import ReadScope, is_open_path, required_role, role_allows
from kb_ray.config import KbConfig
from kb_ray.serving.http_guards import AsciiJSONResponse


class AuthGate:
    """The service's key store and tenant map; ``None`` callers mean auth is off."""

    def __init__(self, config: KbConfig) -> None:
        from kb_ray.catalog.delta import DeltaCatalog

        self.settings = config.serve.auth
        self.keys = None
        if self.settings.enabled:
            catalog = DeltaCatalog.open(config.kb_root, storage_options=config.storage_options, create=False)
            self.keys = ApiKeyStore(catalog, cache_ttl_s=self.settings.cache_ttl_s)

    def collections(self, caller: Caller | None) -> list[str] | None:
        return None if caller is None else self.settings.collections_of(caller.tenant)

    def scope(self, caller: Caller | None) -> ReadScope:
        """The one scope every read of this caller goes through (unrestricted with auth off)."""
        return ReadScope.of(caller, collections=self.collections(caller))

    def refusal(self, method: str, path: str, authorization: str | None) -> tuple[int, str] | Caller:
        """The caller of an allowed request, or ``(status, detail)`` of its refusal."""
        if not authorization or not authorization.lower().startswith("bearer "):
            return 401, "this service needs an API key: send `Authorization: Bearer <key>` (kb-ray keys create)"
        caller = self.keys.resolve(authorization[7:].strip())
        if caller is None:
            return 401, "the API key is unknown or revoked: ask an admin for a key (kb-ray keys create)"
        required = required_role(method, path)
        if required is None:
            return 403, f"{method} {path} is not open to API keys"
        if not role_allows(caller.role, required):
            return 403, f"{method} {path} needs the {required} role; this key is a {caller.role}"
        return caller


_GATE: dict[str, AuthGate] = {}


def install_gate(gate: AuthGate) -> None:
    """Make ``gate`` the one :class:`BearerAuth` consults in this process (the ingress replica)."""
    _GATE["current"] = gate


class BearerAuth:
    """ASGI middleware: refuses unauthenticated requests when the installed gate has auth on."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        gate = _GATE.get("current")
        if scope["type"] != "http" or gate is None or gate.keys is None or is_open_path(scope["path"]):
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        authorization = headers.get(b"authorization", b"").decode("latin-1") or None
        outcome = gate.refusal(scope["method"], scope["path"], authorization)
        if not isinstance(outcome, Caller):
            status, detail = outcome
            extra = {"WWW-Authenticate": "Bearer"} if status == 401 else None
            await AsciiJSONResponse({"detail": detail}, status_code=status, headers=extra)(scope, receive, send)
            return
        scope.setdefault("state", {})["caller"] = outcome
        await self.app(scope, receive, send)


def caller_of(request: Any) -> Caller | None:
    """The caller the middleware resolved (None when auth is off)."""
    return getattr(request.state, "caller", None)

