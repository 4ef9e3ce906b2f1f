"""A vector layout's vectors in the catalog: found for a build, listed for ``kb-ray reembed``,
referenced for ``purge`` and ``verify`` (kb_ray/index/vector_layout.py says which they are).

A build (and a delta segment, with its base generation's layout) gives every row its
layout's vectors, its own first (the FAISS id of the row) and the others as passages with
the row they belong to (``dense_owners.npy``, kb_ray/index/dense.py ``MultiVectorShard``). A
row whose vectors are not all in the catalog (ingested under another layout or
``index.passage_chars``) counts in ``passages_missing_rows`` and is indexed with what earlier
ingests wrote: its chunk-text vector alone, else the separately embedded passages the
catalog holds. A row with none of those fails the build: the ingest did not finish.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kb_ray.errors import CatalogError
from kb_ray.index.passages import Passages
from kb_ray.index.rows import ACTIVE_CHUNKS
from kb_ray.index.vector_layout import ChunkVectors, VectorLayout

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class IndexVectors:
    own: np.ndarray  # [rows, dim]: each row's first vector (FAISS id = row)
    passages: Passages | None  # (owners, vectors): the rows' other vectors; None when the layout has none
    missing_rows: int  # rows indexed with earlier ingests' vectors instead of the layout's


def index_vectors(connection: duckdb.DuckDBPyConnection, hydration: pa.Table, chunk_vectors: pa.ChunkedArray,
                  embedder_fp: str, layout: VectorLayout) -> IndexVectors:
    """The dense vectors of ``hydration``'s rows under ``layout``; ``chunk_vectors``: each row's
    chunk-text vector from ``embeddings`` (null where the catalog has none)."""
    texts, paths = hydration.column("text").to_pylist(), hydration.column("heading_path").to_pylist()
    plain, held = _plain(chunk_vectors)
    plans = [layout.chunk(text, path) for text, path in zip(texts, paths)]
    found = vectors_by_key(connection, _other_keys(plans), embedder_fp)
    chosen = [list(plan.keys) if all(key in found or (key == plan.chunk_key and held[row]) for key in plan.keys)
              else None for row, plan in enumerate(plans)]
    incomplete = [row for row, keys in enumerate(chosen) if keys is None]
    if incomplete:
        fallback = {row: layout.plain().chunk(texts[row], paths[row]) for row in incomplete}
        found.update(vectors_by_key(connection, _other_keys(fallback.values()) - found.keys(), embedder_fp))
        for row, plan in fallback.items():
            chosen[row] = [plan.chunk_key] if held[row] else [key for key in plan.keys if key in found]
        _check_every_row_has_a_vector(chosen, incomplete, embedder_fp, layout)
        logger.warning("%d chunks lack their vectors under index.vector_layout %s, index.passage_chars %d (ingested "
                       "under another layout): they are scored by the vectors earlier ingests wrote until "
                       "`kb-ray reembed --embedder '{}'` embeds theirs", len(incomplete), layout.kind, layout.max_chars)

    def vector(row: int, key: str) -> np.ndarray:
        return plain[row] if key == plans[row].chunk_key and held[row] else found[key]

    dim = plain.shape[1] if held.any() else next((len(v) for v in found.values()), 0)
    own = np.stack([vector(row, keys[0]) for row, keys in enumerate(chosen)]) if chosen else np.zeros((0, dim))
    extra = [(row, key) for row, keys in enumerate(chosen) for key in keys[1:]]
    passages = None
    if layout.max_chars:
        passages = (np.array([row for row, _ in extra], np.int64),
                    np.stack([vector(row, key) for row, key in extra]).astype(np.float32) if extra
                    else np.zeros((0, dim), np.float32))
    return IndexVectors(own.astype(np.float32), passages, len(incomplete))


def _plain(column: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """``([rows, dim] vectors, zeros where null; [rows] held)`` of a list<float> column."""
    held = pc.is_valid(column).to_numpy(zero_copy_only=False).astype(bool)
    lengths = pc.unique(pc.list_value_length(column.filter(pc.is_valid(column)))).to_pylist()
    if len(lengths) > 1:
        raise CatalogError(f"embedding vectors of several dimensions {sorted(lengths)} in one generation")
    dim = lengths[0] if lengths else 0
    vectors = np.zeros((len(column), dim), np.float32)
    if held.any():
        flat = pc.list_flatten(column.filter(pc.is_valid(column))).to_numpy(zero_copy_only=False)
        vectors[held] = np.asarray(flat, np.float32).reshape(int(held.sum()), dim)
    return vectors, held


def _other_keys(plans) -> set[str]:
    return {key for plan in plans for key in plan.keys if key != plan.chunk_key}


def _check_every_row_has_a_vector(chosen: list[list[str] | None], incomplete: list[int], embedder_fp: str,
                                  layout: VectorLayout) -> None:
    empty = [row for row in incomplete if not chosen[row]]
    if empty:
        raise CatalogError(f"{len(empty)} active chunks have no embedding from {embedder_fp} under index.vector_layout "
                           f"{layout.kind}, index.passage_chars {layout.max_chars} (an ingest with other settings "
                           "wrote other vectors): finish or rerun the ingest (it embeds missing chunks), or run "
                           "`kb-ray reembed --embedder '{}'` with these settings, before building an index")


def chunks_missing_vectors(connection: duckdb.DuckDBPyConnection, embedder_fp: str,
                           layout: VectorLayout) -> tuple[list[ChunkVectors], set[str], int]:
    """The active chunks (one per distinct embedded text) with some vector of ``layout`` not
    held under ``embedder_fp``, the keys held, and how many keys the active chunks have in all."""
    rows = connection.sql(f"""SELECT DISTINCT a.embed_text_sha, a.text, a.heading_path FROM ({ACTIVE_CHUNKS}) a
                              ORDER BY a.embed_text_sha""").to_arrow_table()
    plans = {}
    for sha, text, path in zip(*(rows.column(name).to_pylist() for name in rows.column_names)):
        plan = layout.chunk(text, path)
        if plan.chunk_key in plan.texts and plan.chunk_key != sha:  # made by another text template
            raise CatalogError(f"chunk text {sha} does not give the same embedded text: its text template differs "
                               "from the one the catalog's chunks were made with")
        plans.setdefault(plan.chunk_key, plan)
    wanted = {key for plan in plans.values() for key in plan.keys}
    held = held_keys(connection, wanted, embedder_fp)
    missing = [plan for plan in plans.values() if any(key not in held for key in plan.keys)]
    return missing, held, len(wanted)


def register_passage_refs(connection: duckdb.DuckDBPyConnection, *, layout: VectorLayout | None = None) -> int:
    """Register ``passage_refs(embed_text_sha, chunk_sha)``: every vector of every row of the
    session's ``chunks`` table other than its text's, under the separately embedded layouts
    and under ``late`` (so a switch between them finds its vectors kept), with the chunk's
    ``embed_text_sha``: ``kb-ray purge`` keeps them and ``kb-ray verify`` counts them as
    referenced. ``layout`` None: the default ``index`` settings. Returns how many there are."""
    if layout is None:
        from kb_ray.config import IndexSettings

        layout = VectorLayout.from_settings(IndexSettings())
    rows = connection.sql("SELECT DISTINCT text, heading_path, embed_text_sha FROM chunks").to_arrow_table()
    refs: set[tuple[str, str]] = set()
    if layout.max_chars:
        layouts = (layout.plain(), replace(layout, kind="late"))
        for text, path, sha in zip(*(rows.column(name).to_pylist() for name in rows.column_names)):
            refs.update((key, sha) for each in layouts for key in _other_keys([each.chunk(text, path)]))
    ordered = sorted(refs)
    connection.register("passage_refs", pa.table({"embed_text_sha": pa.array([k for k, _ in ordered], pa.string()),
                                                  "chunk_sha": pa.array([s for _, s in ordered], pa.string())}))
    return len(ordered)


def vectors_by_key(connection: duckdb.DuckDBPyConnection, keys, embedder_fp: str) -> dict[str, np.ndarray]:
    if not keys:
        return {}
    table = _select(connection, "e.embed_text_sha, e.vector", keys, embedder_fp)
    return {key: np.asarray(vector, np.float32) for key, vector in zip(table.column("embed_text_sha").to_pylist(),
                                                                      table.column("vector").to_pylist())}


def held_keys(connection: duckdb.DuckDBPyConnection, keys, embedder_fp: str) -> set[str]:
    return set(_select(connection, "e.embed_text_sha", keys, embedder_fp).column(0).to_pylist()) if keys else set()


def _select(connection: duckdb.DuckDBPyConnection, columns: str, keys, embedder_fp: str) -> pa.Table:
    connection.register("wanted_keys", pa.table({"embed_text_sha": pa.array(sorted(keys), pa.string())}))
    try:
        return connection.sql(f"""SELECT {columns} FROM embeddings e WHERE e.embedder_fp = ?
                                  AND e.embed_text_sha IN (SELECT embed_text_sha FROM wanted_keys)""",
                              params=[embedder_fp]).to_arrow_table()
    finally:
        connection.unregister("wanted_keys")
