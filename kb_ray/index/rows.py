"""Reading what an index generation indexes: active chunks with their vectors.

One DuckDB query over the catalog tables at named Delta versions joins active documents
→ their active version's ``version_chunks`` → ``chunks`` → ``embeddings`` (for one
embedder fingerprint). Rows come back sorted by ``chunk_id`` so a build is deterministic.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import duckdb
import pyarrow as pa

from kb_ray.catalog import contract
from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.errors import CatalogError

_SCHEMAS = contract.schemas()
REGION, SPAN, TIMESTAMP = _SCHEMAS.REGION, _SCHEMAS.SPAN, _SCHEMAS.TIMESTAMP
ELEMENT_REGION = pa.struct([("start", pa.int64()), ("end", pa.int64()), ("page", pa.int32()), ("x0", pa.float64()),
                            ("y0", pa.float64()), ("x1", pa.float64()), ("y1", pa.float64())])
"""One region of one element of a chunk with the canonical characters it holds: the element's
span, or a line's sub-span when the parser recorded line boxes (``attrs["lines"]``). Evidence
passages (kb_ray/search/evidence.py) point at the regions their characters overlap."""
INDEXED_TABLES = ("documents", "versions", "chunks", "version_chunks", "embeddings")

HYDRATION_SCHEMA = pa.schema([
    ("chunk_id", pa.string()), ("document_id", pa.string()), ("version_id", pa.string()),
    ("title", pa.string()), ("uri", pa.string()), ("collection", pa.string()),
    ("tags", pa.list_(pa.string())), ("mime", pa.string()), ("created_at", TIMESTAMP),
    ("metadata_json", pa.string()), ("text", pa.string()), ("heading_path", pa.list_(pa.string())),
    ("spans", pa.list_(SPAN)), ("pages", pa.list_(pa.int32())), ("regions", pa.list_(REGION)),
    ("ordinal", pa.int32()), ("chunk_kind", pa.string()),
    ("element_regions", pa.list_(ELEMENT_REGION)), ("acl", pa.list_(pa.string())),
    # lineage (#16 item 7): the facts of the indexed version, copied from ``versions``
    ("run_id", pa.string()), ("parser", pa.string()), ("parser_fp", pa.string()),
    ("chunker_fp", pa.string()), ("pipeline_fp", pa.string()),
])

ACTIVE_CHUNKS = """
    SELECT c.chunk_id, d.document_id, vc.version_id, coalesce(d.title, v.title) AS title, d.uri,
           d.collection, d.tags, coalesce(d.mime, v.mime) AS mime, d.created_at, d.metadata_json,
           c.text, c.heading_path, vc.spans, vc.pages, vc.regions, vc.ordinal, c.kind AS chunk_kind,
           c.embed_text_sha, vc.element_ids, coalesce(d.acl, []::VARCHAR[]) AS acl,
           v.run_id, v.parser, v.parser_fp, v.chunker_fp, v.pipeline_fp
    FROM documents d
    JOIN versions v ON v.version_id = d.active_version_id
    JOIN version_chunks vc ON vc.version_id = d.active_version_id
    JOIN chunks c ON c.chunk_id = vc.chunk_id
    WHERE d.active_version_id IS NOT NULL
"""


def open_session(catalog: DeltaCatalog, versions: dict[str, int]) -> duckdb.DuckDBPyConnection:
    connection = duckdb.connect(":memory:")
    # As in kb_ray.catalog.sql: a string filter pushed into a Delta Arrow dataset with
    # string_view columns silently matched nothing (seen on elements.layer); keep filters in DuckDB.
    connection.execute("SET disabled_optimizers = 'filter_pushdown'")
    for name, version in versions.items():
        connection.register(name, catalog.dataset(name, version=version))
    if "elements" not in versions:  # immutable per version: read at the latest table version
        connection.register("elements", catalog.dataset("elements"))
    return connection


def resolve_embedder_fp(connection: duckdb.DuckDBPyConnection, embedder_fp: str | None, *,
                        configured: Callable[[], str] | None = None) -> str:
    """The embedder whose vectors cover the active chunks (or check the one asked for). When
    several embedders have vectors (a model switch), ``configured()`` names the one to use."""
    rows = connection.execute(f"""
        SELECT e.embedder_fp, count(*) AS n FROM ({ACTIVE_CHUNKS}) a
        JOIN embeddings e ON e.embed_text_sha = a.embed_text_sha
        GROUP BY e.embedder_fp ORDER BY e.embedder_fp""").fetchall()
    present = {fp: n for fp, n in rows}
    if not present:  # no chunk-text vectors (index.vector_layout passages or late, every chunk with passages)
        present = dict(connection.execute("SELECT embedder_fp, count(*) FROM embeddings GROUP BY embedder_fp "
                                          "ORDER BY embedder_fp").fetchall())
    if embedder_fp is not None:
        if embedder_fp not in present and present:
            raise CatalogError(f"no embeddings of embedder {embedder_fp} for the active chunks; "
                               f"present: {sorted(present)}")
        return embedder_fp
    if len(present) > 1 and configured is not None and configured() in present:
        return configured()
    if len(present) > 1:
        raise CatalogError(f"the catalog holds vectors of several embedders {sorted(present)}: pass "
                           "embedder_fp= to build_index to say which one to index")
    return next(iter(present), "")


DOCUMENT_STATE = ("document_id", "version_id", "title", "uri", "collection", "tags", "mime", "created_at",
                  "metadata_json", "acl")
"""The hydration columns that are the same on every row of a document: a document whose
values differ from an index's rows needs its rows written again (kb_ray/index/refresh.py)."""


def active_document_states(connection: duckdb.DuckDBPyConnection) -> pa.Table:
    """One row of :data:`DOCUMENT_STATE` per document with indexed chunks."""
    table = connection.sql(f"SELECT DISTINCT {', '.join(DOCUMENT_STATE)} FROM ({ACTIVE_CHUNKS}) a").to_arrow_table()
    return table.cast(pa.schema([HYDRATION_SCHEMA.field(name) for name in DOCUMENT_STATE]))


def active_versions(connection: duckdb.DuckDBPyConnection) -> pa.Array:
    rows = connection.sql("SELECT DISTINCT active_version_id FROM documents WHERE active_version_id IS NOT NULL")
    return rows.to_arrow_table().column(0).combine_chunks().cast(pa.string())


def read_index_rows(connection: duckdb.DuckDBPyConnection, embedder_fp: str, *,
                    documents: list[str] | None = None, require_vectors: bool = True) -> tuple[pa.Table, list]:
    """Hydration rows (``HYDRATION_SCHEMA``) sorted by chunk_id, and their chunk-text vectors;
    only those of ``documents`` when given (a delta segment). ``require_vectors`` False: a row
    without one has a null (a vector layout without chunk-text vectors, kb_ray/index/vector_layout.py)."""
    where = ""
    if documents is not None:
        connection.register("only_documents", pa.table({"document_id": pa.array(documents, pa.string())}))
        where = "WHERE a.document_id IN (SELECT document_id FROM only_documents)"
    result = connection.sql(f"""
        SELECT a.* EXCLUDE (embed_text_sha), e.vector FROM ({ACTIVE_CHUNKS}) a
        LEFT JOIN (SELECT * FROM embeddings WHERE embedder_fp = ?) e
               ON e.embed_text_sha = a.embed_text_sha
        {where}
        ORDER BY a.chunk_id""", params=[embedder_fp]).to_arrow_table()
    vectors = result.column("vector")
    missing = vectors.null_count
    if missing and require_vectors:
        raise CatalogError(f"{missing} active chunks have no embedding from {embedder_fp}: finish or rerun "
                           "the ingest (it embeds missing chunks) before building an index")
    regions = element_regions(connection, result)
    hydration = result.drop_columns(["vector", "element_ids"]).append_column(
        "element_regions", pa.array(regions, pa.list_(ELEMENT_REGION))).select(HYDRATION_SCHEMA.names).cast(
        HYDRATION_SCHEMA)
    return hydration, vectors


def element_regions(connection: duckdb.DuckDBPyConnection, rows: pa.Table) -> list[list[dict]]:
    """Per row, the :data:`ELEMENT_REGION` list of its elements (in element order).

    Elements of a version never change once written, so they are read at the latest
    version of the ``elements`` table (registered by :func:`open_session`)."""
    connection.register("indexed_versions", rows.select(["version_id"]))
    found = connection.execute("""
        SELECT version_id, element_id, span_start, span_end, regions, attrs_json FROM elements
        WHERE version_id IN (SELECT DISTINCT version_id FROM indexed_versions) AND span_start IS NOT NULL
    """).fetchall()
    connection.unregister("indexed_versions")
    by_element = {(vid, eid): _element_parts(start, end, regions or [], attrs)
                  for vid, eid, start, end, regions, attrs in found}
    return [[part for eid in element_ids or [] for part in by_element.get((vid, eid), [])]
            for vid, element_ids in zip(rows.column("version_id").to_pylist(), rows.column("element_ids").to_pylist())]


def _element_parts(start: int, end: int, regions: list[dict], attrs_json: str | None) -> list[dict]:
    lines = json.loads(attrs_json).get("lines") if attrs_json else None
    if lines:  # [[start, end, page, x0, y0, x1, y1], ...], offsets into the element's text
        return [{"start": start + a, "end": start + b, "page": page, "x0": x0, "y0": y0, "x1": x1, "y1": y1}
                for a, b, page, x0, y0, x1, y1 in lines]
    return [{"start": start, "end": end, **region} for region in regions]
