"""A :class:`DocumentVersion` as rows of the catalog tables (plain dicts, then Arrow).

Arrow IPC bytes carry these tables between Ray Data stages, so a stage's output column
is a ``binary`` blob per table rather than a deeply nested type (the payload fields of
:mod:`kb_ray.ingest.record`).
"""

from __future__ import annotations

import io
import json
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from kb_ray.catalog.contract import table_spec
from kb_ray.model import DocumentVersion, Region


def _regions(regions: Any) -> list[dict[str, Any]]:
    return [{"page": r.page, "x0": r.bbox[0], "y0": r.bbox[1], "x1": r.bbox[2], "y1": r.bbox[3]} for r in regions]


def regions_from_rows(rows: list[dict[str, Any]] | None) -> list[Region]:
    return [Region(page=r["page"], bbox=(r["x0"], r["y0"], r["x1"], r["y1"])) for r in rows or []]


def version_row(version: DocumentVersion, *, fingerprints: dict[str, str], run_id: str, now: datetime) -> dict[str, Any]:
    return {
        "version_id": version.version_id, "document_id": version.document_id, "raw_sha": version.raw_sha,
        "text_sha": version.text_sha or None, "pipeline_fp": version.pipeline_fp, "parser": version.parser,
        "parser_fp": fingerprints["parser"], "structurer_fp": fingerprints["structurer"],
        "chunker_fp": fingerprints["chunker"], "mime": version.mime,
        "status": "failed" if version.status == "failed" else "committed",
        "canonical_text": version.canonical_text, "title": version.title, "n_pages": len(version.pages),
        "n_elements": len(version.elements), "n_chunks": len(version.chunks), "error": version.error, "reason": version.reason,
        "run_id": run_id, "created_at": now,
    }


def element_rows(version: DocumentVersion) -> list[dict[str, Any]]:
    return [
        {
            "version_id": version.version_id, "element_id": e.element_id, "ordinal": e.ordinal, "kind": e.kind,
            "layer": e.layer, "level": e.level, "parent_id": e.parent_id,
            "span_start": e.span[0] if e.span else None, "span_end": e.span[1] if e.span else None,
            "text": e.text, "regions": _regions(e.regions), "attrs_json": json.dumps(e.attrs, sort_keys=True, default=str),
        }
        for e in version.elements
    ]


def page_rows(version: DocumentVersion) -> list[dict[str, Any]]:
    return [
        {"version_id": version.version_id, "page_no": p.page_no, "width": p.width, "height": p.height,
         "has_text_layer": p.has_text_layer, "image_sha": None}
        for p in version.pages
    ]


def chunk_rows(version: DocumentVersion) -> list[dict[str, Any]]:
    """Chunk content rows; ``embed_text_sha`` is filled in by the embedding stage."""
    return [
        {"chunk_id": c.chunk_id, "document_id": c.chunk.document_id, "chunker_fp": c.chunk.chunker_fp,
         "text": c.text, "content_sha": c.chunk.content_sha, "heading_path": list(c.chunk.heading_path),
         "token_count": c.chunk.token_count, "kind": c.chunk.kind, "embed_text_sha": None}
        for c in version.chunks
    ]


def version_chunk_rows(version: DocumentVersion) -> list[dict[str, Any]]:
    return [
        {"version_id": version.version_id, "chunk_id": c.chunk_id, "ordinal": c.ordinal,
         "spans": [{"start": s, "end": e} for s, e in c.spans], "element_ids": list(c.element_ids),
         "pages": list(c.pages), "regions": _regions(c.regions)}
        for c in version.chunks
    ]


def version_tables(version: DocumentVersion, *, fingerprints: dict[str, str], run_id: str,
                   now: datetime) -> dict[str, pa.Table]:
    rows = {
        "versions": [version_row(version, fingerprints=fingerprints, run_id=run_id, now=now)],
        "elements": element_rows(version),
        "pages": page_rows(version),
        "chunks": chunk_rows(version),
        "version_chunks": version_chunk_rows(version),
    }
    return {name: to_table(name, table_rows) for name, table_rows in rows.items()}


def first_owners(shas_per_row: list[list[str | None]]) -> dict[str, int]:
    """Each distinct sha → the first row that has it: content-addressed work (a page
    embedding, a caption) is done once per batch and its new catalog rows (data, not
    counts) travel in that row's payload column."""
    owners: dict[str, int] = {}
    for index, shas in enumerate(shas_per_row):
        for sha in shas:
            if sha is not None:
                owners.setdefault(sha, index)
    return owners


def to_table(table_name: str, rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=table_spec(table_name).schema)


def to_ipc(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def from_ipc(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(io.BytesIO(data)).read_all()


def concat_ipc(blobs: list[bytes | None], table_name: str) -> pa.Table:
    tables = [from_ipc(blob) for blob in blobs if blob]
    if not tables:
        return table_spec(table_name).schema.empty_table()
    return pa.concat_tables(tables)


def first_of_each(values: pa.Array | pa.ChunkedArray) -> pa.BooleanArray:
    """True at the first occurrence of each value (a filter that drops repeats, keeping order)."""
    values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    return pc.equal(pc.index_in(values, value_set=values), pa.array(range(len(values)), pa.int32()))
