"""The page index of a generation: pooled first stage + exact MaxSim over full multivectors.

Built from the same catalog versions as the text shards, for one page-embedder
fingerprint. Files under ``{generation}/pages/``:

* ``pages.parquet`` — one row per page of an active version that has a page embedding:
  ids, filter columns (as in the hydration files), the page's text chunks (the chunks of
  that version whose pages include it: ids, joined text, spans, heading path) and the
  body elements on the page with their boxes (to point at the best-matching regions);
* ``pooled.faiss`` — a flat inner-product index over one vector per page (the normalized
  mean of its multivector), for the shortlist;
* ``multivectors.npy`` (float16, all pages' token vectors concatenated) and
  ``offsets.npy`` (int64, page i owns rows ``offsets[i]:offsets[i+1]``), for exact MaxSim.

Multivectors are streamed into a memory-mapped ``.npy``, so building never holds every
page's vectors in memory at once.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import duckdb
import faiss
import numpy as np
import pyarrow.parquet as pq

from kb_ray.config import PagesSettings
from kb_ray.errors import CatalogError
from kb_ray.index.dense import build_faiss_index
from kb_ray.pages import multivectors

logger = logging.getLogger(__name__)

PAGE_TABLES = ("pages", "page_embeddings", "elements")
PAGES_DIR = "pages"
PAGES_FILE, POOLED_FILE, VECTORS_FILE, OFFSETS_FILE = "pages.parquet", "pooled.faiss", "multivectors.npy", "offsets.npy"
PAGE_INDEX_FORMAT = 1

_ACTIVE_PAGES = """
    SELECT p.version_id, p.page_no, p.image_sha, d.document_id, coalesce(d.title, v.title) AS title, d.uri,
           d.collection, d.tags, coalesce(d.mime, v.mime) AS mime, d.created_at, d.metadata_json,
           coalesce(d.acl, []::VARCHAR[]) AS acl, pe.n_vectors, pe.dim
    FROM documents d
    JOIN versions v ON v.version_id = d.active_version_id
    JOIN pages p ON p.version_id = d.active_version_id
    JOIN page_embeddings pe ON pe.image_sha = p.image_sha AND pe.embedder_fp = $fp
    WHERE d.active_version_id IS NOT NULL
"""
_PAGE_CHUNKS = """
    SELECT vc.version_id, pg.page_no, list(c.chunk_id ORDER BY vc.ordinal) AS chunk_ids,
           string_agg(c.text, chr(10) || chr(10) ORDER BY vc.ordinal) AS text,
           flatten(list(vc.spans ORDER BY vc.ordinal)) AS spans,
           first(c.heading_path ORDER BY vc.ordinal) AS heading_path
    FROM version_chunks vc JOIN chunks c ON c.chunk_id = vc.chunk_id,
         LATERAL (SELECT unnest(vc.pages) AS page_no) pg
    GROUP BY vc.version_id, pg.page_no
"""
_PAGE_ELEMENTS = """
    SELECT version_id, r.page AS page_no,
           list({'text': text, 'x0': r.x0, 'y0': r.y0, 'x1': r.x1, 'y1': r.y1} ORDER BY ordinal) AS elements
    FROM (SELECT version_id, ordinal, text, unnest(regions) AS r FROM elements
          WHERE layer = 'body' AND text IS NOT NULL AND text <> '')
    GROUP BY version_id, r.page
"""


def resolve_page_embedder_fp(connection: duckdb.DuckDBPyConnection, settings: PagesSettings) -> str | None:
    """The page embedder whose vectors cover the active pages; None when there are none."""
    rows = connection.execute("""
        SELECT DISTINCT pe.embedder_fp FROM documents d JOIN pages p ON p.version_id = d.active_version_id
        JOIN page_embeddings pe ON pe.image_sha = p.image_sha ORDER BY 1""").fetchall()
    present = [row[0] for row in rows]
    if len(present) <= 1:
        return next(iter(present), None)
    if settings.model_path:
        from kb_ray.pages.embedder import page_embedder_fingerprint

        configured = page_embedder_fingerprint(settings)
        if configured in present:
            return configured
    raise CatalogError(f"the active pages have embeddings of several page embedders {present}: set "
                       "pages.model_path (and its settings) to the one to index")


def page_index_rows(connection: duckdb.DuckDBPyConnection, fp: str):
    """Page rows (no vectors) ordered by version and page, with their chunks and elements."""
    return connection.sql(f"""
        SELECT a.*, pc.chunk_ids, coalesce(pc.text, '') AS text, pc.spans, pc.heading_path, pe.elements
        FROM ({_ACTIVE_PAGES}) a
        LEFT JOIN ({_PAGE_CHUNKS}) pc ON pc.version_id = a.version_id AND pc.page_no = a.page_no
        LEFT JOIN ({_PAGE_ELEMENTS}) pe ON pe.version_id = a.version_id AND pe.page_no = a.page_no
        ORDER BY a.version_id, a.page_no""", params={"fp": fp}).to_arrow_table()


def build_page_index(folder: Path, connection: duckdb.DuckDBPyConnection, fp: str) -> dict[str, Any] | None:
    """Write the page index files into ``folder``; its manifest entry, or None without pages."""
    rows = page_index_rows(connection, fp)
    if rows.num_rows == 0:
        return None
    folder.mkdir(parents=True)
    counts = np.asarray(rows.column("n_vectors").to_numpy(zero_copy_only=False), dtype=np.int64)
    dims = set(rows.column("dim").to_pylist())
    if len(dims) != 1:
        raise CatalogError(f"page embeddings of several dimensions {sorted(dims)} under one fingerprint {fp}")
    dim = dims.pop()
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    pooled = _write_multivectors(folder, connection, fp, rows.column("image_sha").to_pylist(), offsets, dim)
    index = build_faiss_index(pooled, "flat")
    faiss.write_index(index, str(folder / POOLED_FILE))
    np.save(folder / OFFSETS_FILE, offsets)
    pq.write_table(rows.drop_columns(["n_vectors", "dim"]), folder / PAGES_FILE, compression="zstd")
    logger.info("page index: %d pages, %d token vectors of dim %d", rows.num_rows, int(offsets[-1]), dim)
    return {"format": PAGE_INDEX_FORMAT, "dir": folder.name, "rows": rows.num_rows, "vectors": int(offsets[-1]),
            "dim": dim, "embedder_fp": fp, "first_stage": "flat-ip over mean-pooled page vectors",
            "pages": PAGES_FILE, "pooled": POOLED_FILE, "multivectors": VECTORS_FILE, "offsets": OFFSETS_FILE}


def _write_multivectors(folder: Path, connection, fp: str, shas: list[str], offsets: np.ndarray,
                        dim: int) -> np.ndarray:
    """Stream each page's float16 blob into a memory-mapped .npy; return the pooled vectors."""
    store = np.lib.format.open_memmap(folder / VECTORS_FILE, mode="w+", dtype=np.float16,
                                      shape=(int(offsets[-1]), dim))
    position = {sha: i for i, sha in enumerate(shas)}  # one sha may sit on several pages
    rows_of: dict[str, list[int]] = {}
    for i, sha in enumerate(shas):
        rows_of.setdefault(sha, []).append(i)
    pooled = np.zeros((len(shas), dim), np.float32)
    reader = connection.sql("""SELECT image_sha, n_vectors, dim, vectors FROM page_embeddings
        WHERE embedder_fp = $fp AND image_sha IN (SELECT unnest($shas))""",
                            params={"fp": fp, "shas": list(position)}).to_arrow_reader(256)
    for batch in reader:
        for sha, n, d, blob in zip(*(batch.column(c).to_pylist() for c in range(4))):
            vectors = multivectors.decode(blob, n, d)
            for i in rows_of[sha]:
                store[offsets[i]:offsets[i + 1]] = vectors
                pooled[i] = multivectors.pooled_summary(vectors)
    store.flush()
    del store
    return pooled
