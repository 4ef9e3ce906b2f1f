"""``GET /v1/documents/{id}/tree``: the section tree of a document's active version, nested.

The nodes come from kb_ray/index/sections.py over that version's chunks read from the
catalog, the same function the index build runs (kb_ray/index/tree.py), so with the same
analyzer settings (``index.lexical_stem``, ``index.lexical_identifiers``) they equal the
nodes of a generation that indexed this version. Reading the catalog, not the index, the
route works without ``index.tree`` and always shows the active version.
"""

from __future__ import annotations

from typing import Any

from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.catalog.sql import open_sql_session
from kb_ray.index.analyzer import TextAnalyzer
from kb_ray.index.sections import Section, SectionChunk, document_sections

_DOCUMENT_SQL = """
SELECT d.document_id, d.collection, d.acl, coalesce(d.title, v.title) AS title, d.uri, v.version_id
FROM documents d JOIN versions v ON v.version_id = d.active_version_id
WHERE d.document_id = $document_id
"""
_CHUNKS_SQL = """
SELECT vc.chunk_id, vc.ordinal, c.text, c.heading_path, vc.spans, vc.pages
FROM version_chunks vc JOIN chunks c ON c.chunk_id = vc.chunk_id
WHERE vc.version_id = $version_id ORDER BY vc.ordinal
"""


def document_tree(catalog: DeltaCatalog, document_id: str, *, analyzer: TextAnalyzer) -> dict[str, Any] | None:
    """The document (``collection`` and ``acl`` for the visibility check) with ``tree``, its root
    node; None when the document does not exist or has no active version."""
    connection = open_sql_session(catalog)
    try:
        result = connection.execute(_DOCUMENT_SQL, {"document_id": document_id})
        rows = result.fetchall()
        if not rows:
            return None
        document = dict(zip([column[0] for column in result.description], rows[0]))
        chunks = connection.execute(_CHUNKS_SQL, {"version_id": document["version_id"]}).fetchall()
    finally:
        connection.close()
    sections = document_sections(document_id, document["version_id"], document["title"], [
        SectionChunk(chunk_id=cid, ordinal=int(ordinal), text=text or "", heading_path=tuple(path or ()),
                     spans=tuple((s["start"], s["end"]) for s in spans or ()), pages=tuple(pages or ()))
        for cid, ordinal, text, path, spans, pages in chunks], analyzer=analyzer)
    return {**document, "acl": list(document["acl"] or []), "tree": nested(sections)}


def nested(sections: list[Section]) -> dict[str, Any] | None:
    """The root node with ``children`` (document order) under every node."""
    views = {s.node_id: _view(s) for s in sections}
    root = None
    for section in sections:
        if section.parent_id is None:
            root = views[section.node_id]
        else:
            views[section.parent_id]["children"].append(views[section.node_id])
    return root


def _view(section: Section) -> dict[str, Any]:
    span = None if section.span_start is None else [section.span_start, section.span_end]
    return {"node_id": section.node_id, "title": section.title, "heading_path": section.heading_path,
            "depth": section.depth, "span": span, "pages": section.pages, "chunk_ids": section.chunk_ids,
            "subtree_chunks": section.subtree_chunks, "summary": section.summary, "key_terms": section.key_terms,
            "children": []}
