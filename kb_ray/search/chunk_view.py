"""``GET /v1/chunks/{id}``: one chunk as the catalog holds it (Ray-free).

Text, heading path and kind come from ``chunks``; spans, pages, regions and the elements it
was cut from from ``version_chunks`` of its *placement*: the document's active version when
the chunk is in it, else the newest version that holds it (``versions`` lists them all).
``embeddings`` lists the embedder fingerprints that hold its vectors under the generation's
vector layout (its text's, or its passages' where the layout embeds those instead;
kb_ray/index/vector_layout.py), with how many of them each holds, and
``lineage`` is the dict a search hit carries (kb_ray/search/hits.py ``lineage``), for the
generation passed in (the live one in the service). docs/documents_api.md.
"""

from __future__ import annotations

from typing import Any

from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.catalog.sql import open_sql_session
from kb_ray.index.generations import load_manifest, read_current
from kb_ray.index.manifest import GenerationManifest
from kb_ray.index.segments import latest_segment, lineage_manifest, load_segment
from kb_ray.search.hits import lineage

_CHUNK_SQL = """
SELECT c.chunk_id, c.document_id, c.text, c.heading_path, c.token_count, c.kind AS chunk_kind, c.embed_text_sha,
       d.collection, d.acl, d.title, d.uri, d.active_version_id
FROM chunks c JOIN documents d ON d.document_id = c.document_id WHERE c.chunk_id = $chunk_id
"""
_PLACEMENTS_SQL = """
SELECT vc.version_id, vc.ordinal, vc.spans, vc.element_ids, vc.pages, vc.regions,
       v.run_id, v.parser, v.parser_fp, v.chunker_fp, v.pipeline_fp
FROM version_chunks vc JOIN versions v ON v.version_id = vc.version_id
WHERE vc.chunk_id = $chunk_id
ORDER BY coalesce(vc.version_id = $active, false) DESC, v.created_at DESC NULLS LAST, vc.version_id
"""
_ELEMENTS_SQL = """
SELECT element_id, kind, layer, level, span_start, span_end, text, regions FROM elements
WHERE version_id = $version_id AND list_contains($element_ids, element_id) ORDER BY ordinal
"""
_EMBEDDINGS_SQL = """
SELECT embedder_fp, any_value(dim) AS dim, count(DISTINCT embed_text_sha) AS vectors FROM embeddings
WHERE list_contains($keys, embed_text_sha) GROUP BY embedder_fp ORDER BY embedder_fp
"""


def chunk_view(catalog: DeltaCatalog, chunk_id: str, *, manifest: GenerationManifest | None) -> dict[str, Any] | None:
    """The chunk with its placement, elements, embeddings and lineage; None when unknown.
    ``collection`` and ``acl`` are its document's, for the caller's visibility check."""
    connection = open_sql_session(catalog)
    try:
        rows = _rows(connection, _CHUNK_SQL, {"chunk_id": chunk_id})
        if not rows:
            return None
        chunk = rows[0]
        placements = _rows(connection, _PLACEMENTS_SQL, {"chunk_id": chunk_id, "active": chunk["active_version_id"]})
        placement = placements[0] if placements else {}
        element_ids = list(placement.get("element_ids") or [])
        elements = _rows(connection, _ELEMENTS_SQL, {"version_id": placement["version_id"],
                                                     "element_ids": element_ids}) if element_ids else []
        keys = _vector_keys(chunk, manifest)
        embeddings = _rows(connection, _EMBEDDINGS_SQL, {"keys": keys}) if keys else []
    finally:
        connection.close()
    return _view(chunk, placement, [p["version_id"] for p in placements], elements, embeddings, manifest)


def _vector_keys(chunk: dict[str, Any], manifest: GenerationManifest | None) -> list[str]:
    """The ``embeddings`` keys of the chunk's vectors: its text's and those of the vector layout of
    ``manifest``'s generation (the configured default before a build)."""
    from kb_ray.config import IndexSettings
    from kb_ray.index.vector_layout import VectorLayout

    layout = VectorLayout.from_spec(manifest.spec) if manifest else VectorLayout.from_settings(IndexSettings())
    keys = layout.chunk(chunk["text"], chunk["heading_path"]).keys
    return sorted({*keys, *([chunk["embed_text_sha"]] if chunk["embed_text_sha"] else [])})


def live_manifest(kb_root: str, *, storage_options: dict[str, str] | None = None) -> GenerationManifest | None:
    """What a chunk's ``lineage`` names, None before the first build: the live generation's manifest
    with its newest delta segment's catalog versions, as a search hit's lineage has them."""
    current = read_current(kb_root, storage_options=storage_options)
    if current is None:
        return None
    manifest = load_manifest(kb_root, current, storage_options=storage_options)
    newest = latest_segment(kb_root, current, storage_options=storage_options)
    return lineage_manifest(manifest, load_segment(kb_root, current, newest, storage_options=storage_options)
                            if newest else None)


def _view(chunk: dict[str, Any], placement: dict[str, Any], versions: list[str], elements: list[dict[str, Any]],
          embeddings: list[dict[str, Any]], manifest: GenerationManifest | None) -> dict[str, Any]:
    return {
        "chunk_id": chunk["chunk_id"], "document_id": chunk["document_id"], "collection": chunk["collection"],
        "acl": list(chunk["acl"] or []), "title": chunk["title"], "uri": chunk["uri"],
        "chunk_kind": chunk["chunk_kind"] or "text", "text": chunk["text"],
        "heading_path": list(chunk["heading_path"] or []), "token_count": chunk["token_count"],
        "version_id": placement.get("version_id"), "active": placement.get("version_id") == chunk["active_version_id"]
        and chunk["active_version_id"] is not None, "versions": versions, "ordinal": placement.get("ordinal"),
        "spans": [[s["start"], s["end"]] for s in placement.get("spans") or []],
        "pages": list(placement.get("pages") or []),
        "regions": [_region(r) for r in placement.get("regions") or []],
        "elements": [{**{k: v for k, v in e.items() if k != "regions"}, "regions": [_region(r) for r in e["regions"] or []]}
                     for e in elements],
        "embed_text_sha": chunk["embed_text_sha"], "embeddings": embeddings,
        "lineage": lineage(placement, manifest),
    }


def _region(region: dict[str, Any]) -> dict[str, Any]:
    return {"page": region["page"], "bbox": [round(region[c], 4) for c in ("x0", "y0", "x1", "y1")]}


def _rows(connection: Any, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    result = connection.execute(sql, params)
    names = [column[0] for column in result.description]
    return [dict(zip(names, row)) for row in result.fetchall()]
