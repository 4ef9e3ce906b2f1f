"""Which role may call which route, and the tenant scope forced into every read (Ray-free).

``ROUTE_ROLES`` is the one table of access rules: ``(method, path pattern) -> least role``.
A route missing from it is refused with auth on (deny by default). ``OPEN_PATHS`` and the
viewer's static files under ``/ui`` need no key (:func:`is_open_path`).

:class:`ReadScope` is the one scope every read goes through (docs/security.md): the service
builds it once per request from the key (``AuthGate.scope``) and hands it to whatever reads
documents — searches (:meth:`ReadScope.filter`), document, chunk and page reads, answers of
every mode, named-document lookups and feedback (:meth:`ReadScope.sees`,
:meth:`ReadScope.owns_tenant_row`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from kb_ray.auth.keys import ROLES, Caller
from kb_ray.search.filters import FILTER_KEYS

OPEN_PATHS = frozenset({"/healthz", "/docs", "/openapi.json", "/docs/oauth2-redirect", "/redoc"})
OPEN_PREFIX = "/ui"  # the viewer's static files (HTML, CSS, JS: no data); every /v1 call they make needs the key
ROUTE_ROLES: tuple[tuple[str, str, str], ...] = (
    ("POST", r"/v1/search", "reader"),
    ("POST", r"/v1/answer", "reader"),
    ("POST", r"/v1/answers/[^/]+/feedback", "reader"),
    ("GET", r"/v1/documents", "reader"),
    ("GET", r"/v1/documents/[^/]+", "reader"),
    ("GET", r"/v1/documents/[^/]+/versions", "reader"),
    ("GET", r"/v1/documents/[^/]+/pages/[^/]+\.png", "reader"),
    ("GET", r"/v1/documents/[^/]+/text", "reader"),
    ("GET", r"/v1/documents/[^/]+/tree", "reader"),
    ("GET", r"/v1/chunks/[^/]+", "reader"),
    ("GET", r"/v1/ingests/[^/]+", "reader"),
    ("POST", r"/v1/documents", "writer"),
    ("DELETE", r"/v1/documents/[^/]+", "writer"),
    ("GET", r"/metrics", "admin"),
)
_COMPILED = tuple((method, re.compile(pattern + r"/?"), role) for method, pattern, role in ROUTE_ROLES)


def is_open_path(path: str) -> bool:
    """Whether ``path`` needs no key: the OpenAPI pages, ``/healthz`` and the viewer's files under ``/ui``."""
    return path in OPEN_PATHS or path == OPEN_PREFIX or path.startswith(OPEN_PREFIX + "/")


def required_role(method: str, path: str) -> str | None:
    """The least role for a route, or None when the route is not in the table (refused)."""
    for route_method, pattern, role in _COMPILED:
        if route_method == method.upper() and pattern.fullmatch(path):
            return role
    return None


def role_allows(role: str, required: str) -> bool:
    return role in ROLES and ROLES.index(role) >= ROLES.index(required)


def scoped_filter(raw: dict[str, Any] | None, *, collections: list[str], principals: tuple[str, ...]
                  ) -> dict[str, Any]:
    """The client's filter with the tenant's scope forced in: ``collection`` becomes the client's
    collections ∩ the tenant's (all of the tenant's when the client named none; possibly empty,
    which matches nothing), and ``acl_any`` the key's principals when it has any (the client's
    ``acl_any`` is dropped: a caller cannot claim principals its key lacks)."""
    scoped = dict(raw or {})
    asked = scoped.get("collection")
    asked_list = [asked] if isinstance(asked, str) else asked
    if isinstance(asked_list, list):
        scoped["collection"] = [name for name in asked_list if name in collections]
    else:  # absent or malformed: the tenant's own (a malformed value is the client's to fix, not to widen)
        scoped["collection"] = list(collections)
    scoped.pop("acl_any", None)
    if "acl_any" in FILTER_KEYS:  # with the acl column: documents with an empty acl, or sharing a principal
        scoped["acl_any"] = list(principals)
    return scoped


def may_see_document(caller: Caller | None, document: dict[str, Any], *, collections: list[str] | None) -> bool:
    """Whether ``document`` (a row with ``collection`` and ``acl``) is visible to ``caller``: its
    collection is the tenant's, and its acl is empty or shares a principal with the key
    (``caller`` None: auth is off, everything is visible)."""
    return ReadScope.of(caller, collections=collections).sees(document)


@dataclass(frozen=True)
class ReadScope:
    """What one request may read. ``collections`` None: everything (auth off, or the local CLI);
    else the tenant's collections, and documents whose acl is empty or shares one of
    ``principals``. ``tenant`` names the rows a tenant wrote (answers, ingests)."""

    collections: tuple[str, ...] | None = None
    principals: tuple[str, ...] = ()
    tenant: str | None = None

    @classmethod
    def unrestricted(cls) -> ReadScope:
        return cls()

    @classmethod
    def of(cls, caller: Caller | None, *, collections: list[str] | None) -> ReadScope:
        """The scope of a resolved key (``caller`` None: auth is off, unrestricted)."""
        if caller is None:
            return cls()
        return cls(collections=tuple(collections or ()), principals=tuple(caller.principals), tenant=caller.tenant)

    @property
    def restricted(self) -> bool:
        return self.collections is not None

    def filter(self, raw: dict[str, Any] | None) -> dict[str, Any] | None:
        """A search filter with the scope forced in (:func:`scoped_filter`); idempotent."""
        if self.collections is None:
            return raw
        return scoped_filter(raw, collections=list(self.collections), principals=self.principals)

    def sees(self, document: dict[str, Any] | None) -> bool:
        """Whether a document row (``collection``, ``acl``) is inside the scope; None never is."""
        if document is None:
            return False
        if self.collections is None:
            return True
        if document.get("collection") not in self.collections:
            return False
        acl = document.get("acl") or []
        return not acl or bool(set(acl) & set(self.principals))

    def owns_tenant_row(self, tenant: str | None) -> bool:
        """Whether a row a tenant wrote (an answer, an ingest) is the caller's: any row when
        unrestricted, else only rows of the caller's own tenant (a row without one: nobody's)."""
        return self.collections is None or (tenant is not None and tenant == self.tenant)
