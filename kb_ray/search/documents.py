"""``GET /v1/documents/{id}``: a document, its active version and that version's chunks;
``GET /v1/documents/{id}/text``: that version's canonical text (what every span points into)."""

from __future__ import annotations

from typing import Any

from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.catalog.sql import open_sql_session

_DOCUMENT_SQL = """
SELECT d.document_id, d.collection, d.uri, d.title, d.mime, d.tags, d.acl, d.metadata_json, d.active_version_id,
       d.created_at, d.updated_at, d.deleted_at, v.raw_sha, v.text_sha, v.n_pages, v.n_chunks, v.pipeline_fp
FROM documents d LEFT JOIN versions v ON v.version_id = d.active_version_id
WHERE d.document_id = $document_id
"""
_TEXT_SQL = """
SELECT d.document_id, d.collection, d.acl, d.title, d.mime, v.version_id, v.canonical_text AS text
FROM documents d JOIN versions v ON v.version_id = d.active_version_id
WHERE d.document_id = $document_id
"""
_CHUNKS_SQL = """
SELECT vc.ordinal, vc.chunk_id, c.text, c.heading_path, c.token_count, vc.spans, vc.pages, vc.regions
FROM version_chunks vc JOIN chunks c ON c.chunk_id = vc.chunk_id
WHERE vc.version_id = $version_id ORDER BY vc.ordinal
"""


def document_view(catalog: DeltaCatalog, document_id: str) -> dict[str, Any] | None:
    """The document row with its active version's chunks, or None when it does not exist."""
    connection = open_sql_session(catalog)
    try:
        rows = connection.execute(_DOCUMENT_SQL, {"document_id": document_id}).fetchall()
        if not rows:
            return None
        names = [column[0] for column in connection.description]
        document = dict(zip(names, rows[0]))
        chunks = []
        if document["active_version_id"]:
            result = connection.execute(_CHUNKS_SQL, {"version_id": document["active_version_id"]})
            chunk_names = [column[0] for column in result.description]
            chunks = [_chunk(dict(zip(chunk_names, row))) for row in result.fetchall()]
        return {**{k: _plain(v) for k, v in document.items()}, "chunks": chunks}
    finally:
        connection.close()


def document_text(catalog: DeltaCatalog, document_id: str) -> dict[str, Any] | None:
    """The active version's canonical text (``text[start:end]`` is what a span cites), with the
    document's ``collection`` and ``acl`` for the caller's visibility check; None when the document
    does not exist or has no active version."""
    connection = open_sql_session(catalog)
    try:
        result = connection.execute(_TEXT_SQL, {"document_id": document_id})
        rows = result.fetchall()
        return dict(zip([column[0] for column in result.description], rows[0])) if rows else None
    finally:
        connection.close()


def _chunk(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "chunk_id": row["chunk_id"], "ordinal": row["ordinal"], "text": row["text"],
        "heading_path": list(row["heading_path"] or []), "token_count": row["token_count"],
        "spans": [[s["start"], s["end"]] for s in row["spans"] or []], "pages": list(row["pages"] or []),
        "regions": [{"page": r["page"], "bbox": [r["x0"], r["y0"], r["x1"], r["y1"]]} for r in row["regions"] or []],
    }


def _plain(value: Any) -> Any:
    return value.isoformat() if hasattr(value, "isoformat") else value
