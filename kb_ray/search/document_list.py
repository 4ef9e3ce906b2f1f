"""``GET /v1/documents`` (a page of documents) and ``GET /v1/documents/{id}/versions`` (Ray-free).

The list is ordered by ``document_id`` and paged with an opaque cursor (the last id of the
page, base64url-encoded JSON): a page never repeats or skips a document that existed when the
first page was read. Only active documents are listed (a tombstoned one has no active version
and no hits). The filter is the already scoped one (kb_ray/auth/scope.py ``scoped_filter``):
``collection`` (a name or a list), ``tags_any``, ``mime`` and ``acl_any`` (documents with an
empty acl, or sharing a principal), the same rules search applies. docs/documents_api.md.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.catalog.sql import open_sql_session
from kb_ray.errors import KbRayError

MAX_LIST_LIMIT = 1000
LIST_FILTER_KEYS = ("collection", "tags_any", "mime", "acl_any")
_LIST_COLUMNS = ("d.document_id, d.collection, d.uri, d.title, d.mime, d.tags, d.acl, d.active_version_id, "
                 "d.created_at, d.updated_at")
_VERSIONS_SQL = """
SELECT v.version_id, v.created_at, v.raw_sha, v.text_sha, v.n_chunks, v.pipeline_fp, v.status,
       coalesce(v.version_id = d.active_version_id, false) AS active
FROM versions v JOIN documents d ON d.document_id = v.document_id
WHERE v.document_id = $document_id ORDER BY v.created_at NULLS FIRST, v.version_id
"""
_DOCUMENT_SQL = "SELECT document_id, collection, acl, active_version_id FROM documents WHERE document_id = $document_id"


class DocumentQueryError(KbRayError):
    """A document list request is malformed (bad cursor, limit out of range, unknown filter key); HTTP 400."""


def encode_cursor(document_id: str) -> str:
    return base64.urlsafe_b64encode(json.dumps({"after": document_id}).encode("utf-8")).decode("ascii").rstrip("=")


def decode_cursor(cursor: str | None) -> str | None:
    """The document id a cursor continues after; None for the first page."""
    if not cursor:
        return None
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        after = data["after"]
    except (binascii.Error, ValueError, TypeError, KeyError) as exc:
        raise DocumentQueryError("the cursor is not one this service gave out: pass next_cursor as returned") from exc
    if not isinstance(after, str):
        raise DocumentQueryError("the cursor is not one this service gave out: pass next_cursor as returned")
    return after


def list_documents(catalog: DeltaCatalog, *, filter: dict[str, Any] | None, limit: int = 100,
                   cursor: str | None = None) -> dict[str, Any]:
    """One page: ``{"documents": [...], "next_cursor": str | None, "limit": limit}``."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIST_LIMIT:
        raise DocumentQueryError(f"limit must be an integer between 1 and {MAX_LIST_LIMIT}, got {limit!r}")
    conditions, params = list_conditions(filter or {})
    after = decode_cursor(cursor)
    if after is not None:
        conditions.append("d.document_id > $after")
        params["after"] = after
    sql = (f"SELECT {_LIST_COLUMNS} FROM documents d WHERE {' AND '.join(conditions)} "
           f"ORDER BY d.document_id LIMIT {limit + 1}")
    rows = _query(catalog, sql, params)
    page = rows[:limit]
    next_cursor = encode_cursor(page[-1]["document_id"]) if len(rows) > limit else None
    return {"documents": page, "next_cursor": next_cursor, "limit": limit}


def list_conditions(filter: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """SQL conditions (over ``documents d``) and their parameters for a list filter."""
    unknown = sorted(set(filter) - set(LIST_FILTER_KEYS))
    if unknown:
        raise DocumentQueryError(f"unknown document filter keys {unknown}; use {', '.join(LIST_FILTER_KEYS)}")
    conditions, params = ["d.active_version_id IS NOT NULL"], {}
    for key, column in (("collection", "d.collection"), ("mime", "d.mime")):
        values = _names(filter.get(key), key)
        if values is not None:
            conditions.append(f"list_contains(${key}, {column})" if values else "false")
            params[key] = values
    tags = _names(filter.get("tags_any"), "tags_any")
    if tags is not None:
        conditions.append("list_has_any(coalesce(d.tags, []::VARCHAR[]), $tags_any)" if tags else "false")
        params["tags_any"] = tags
    principals = _names(filter.get("acl_any"), "acl_any")
    if principals is not None:
        shared = " OR list_has_any(d.acl, $acl_any)" if principals else ""
        conditions.append(f"(d.acl IS NULL OR len(d.acl) = 0{shared})")
        if principals:
            params["acl_any"] = principals
    return conditions, {k: v for k, v in params.items() if v}


def document_versions(catalog: DeltaCatalog, document_id: str) -> dict[str, Any] | None:
    """The document's ``collection``/``acl`` (for the visibility check) and every version of
    it, oldest first, each with an ``active`` flag; None when the document does not exist."""
    documents = _query(catalog, _DOCUMENT_SQL, {"document_id": document_id})
    if not documents:
        return None
    return {**documents[0], "versions": _query(catalog, _VERSIONS_SQL, {"document_id": document_id})}


def active_document_count(catalog: DeltaCatalog) -> int:
    """How many documents have an active version (the ``kb_ray_documents`` gauge of /metrics)."""
    import pyarrow.compute as pc

    return catalog.read("documents", columns=["active_version_id"], filter=pc.field("active_version_id").is_valid()
                        ).num_rows


def _names(value: Any, key: str) -> list[str] | None:
    if value is None:
        return None
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise DocumentQueryError(f"{key} must be a string or a list of strings, got {value!r}")
    return values


def _query(catalog: DeltaCatalog, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    connection = open_sql_session(catalog)
    try:
        result = connection.execute(sql, params)
        names = [column[0] for column in result.description]
        return [{name: _plain(value) for name, value in zip(names, row)} for row in result.fetchall()]
    finally:
        connection.close()


def _plain(value: Any) -> Any:
    return value.isoformat() if hasattr(value, "isoformat") else value
