"""Passage vectors: a chunk's dense score is its best passage's (``index.passage_chars``).

A chunk of up to 512 word pieces is one vector of its first 254 (MiniLM's input), and a
question about one of its sentences matches that mean weakly: the packaged MiniLM was trained on short
passages. So a chunk longer than ``passage_chars`` characters is also embedded as passages:
its sentences grouped, in order and without overlap, into windows of at most that many
characters (a longer sentence cut at whitespace), each with the chunk's heading path as the
embedder reads it. The dense index holds the chunk's vector and its passages' vectors, with
the row each belongs to, and a chunk scores the best cosine among them
(:class:`kb_ray.index.dense.MultiVectorShard`). Measured in benchmarks/results/eval.md
("Passage vectors").

The windows are a pure function of the chunk's text, so ingest embeds them beside the
chunk (the ``embeddings`` table is keyed by the embedded text's sha, nothing new is stored
per chunk) and an index build finds them again by sha. A chunk of one window is its own
passage and adds nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import duckdb
import numpy as np
import pyarrow as pa

from kb_ray import ids
from kb_ray.embedding.text import format_embed_text
from kb_ray.index.rows import ACTIVE_CHUNKS
from kb_ray.search.evidence import sentence_bounds

logger = logging.getLogger(__name__)

Span = tuple[int, int]
Passages = tuple[np.ndarray, np.ndarray]  # (owners: the row of each vector, vectors)


def passage_spans(text: str, *, max_chars: int) -> list[Span]:
    """The passage windows of ``text``: consecutive sentences up to ``max_chars`` characters,
    without overlap, a sentence longer than that (a table, a code block, a list without
    full stops) cut at whitespace into windows of at most ``max_chars``; ``[]`` when the whole
    text is one window (or ``max_chars`` is 0)."""
    if max_chars <= 0 or len(text.strip()) <= max_chars:
        return []
    sentences = [piece for sentence in sentence_bounds(text) for piece in _cut(text, sentence, max_chars)]
    windows: list[Span] = []
    start = 0
    while start < len(sentences):
        end = start + 1
        while end < len(sentences) and sentences[end][1] - sentences[start][0] <= max_chars:
            end += 1
        windows.append((sentences[start][0], sentences[end - 1][1]))
        start = end
    return windows if len(windows) > 1 else []


def _cut(text: str, span: Span, max_chars: int) -> list[Span]:
    """``span`` in pieces of at most ``max_chars`` characters, cut after the last whitespace
    that fits (mid-word only where a word is longer than ``max_chars``), without the
    whitespace between pieces."""
    start, end = span
    pieces: list[Span] = []
    while end - start > max_chars:
        limit = start + max_chars
        cut = max(text.rfind(" ", start + 1, limit + 1), text.rfind("\n", start + 1, limit + 1))
        cut = cut if cut > start else limit
        pieces.append((start, cut))
        start = cut
        while start < end and text[start].isspace():
            start += 1
    return [*pieces, (start, end)] if start < end else pieces


def passage_texts(text: str, heading_path: Sequence[str] | None, *, max_chars: int) -> list[str]:
    """The embedded texts of the passages of one chunk (see :func:`passage_spans`)."""
    return [format_embed_text(text=text[a:b], heading_path=heading_path or [])
            for a, b in passage_spans(text or "", max_chars=max_chars)]


def passage_texts_by_sha(texts: Sequence[str | None], heading_paths: Sequence[Sequence[str] | None], *,
                         max_chars: int) -> dict[str, str]:
    """``sha -> embedded text`` of the passages of every chunk (``texts[i]`` under
    ``heading_paths[i]``): the keys the ``embeddings`` cache holds them under."""
    if not max_chars:
        return {}
    return {ids.sha256_text(passage): passage for text, path in zip(texts, heading_paths, strict=True)
            for passage in passage_texts(text or "", path, max_chars=max_chars)}


def passage_vectors(connection: duckdb.DuckDBPyConnection, hydration: pa.Table, embedder_fp: str, *,
                    max_chars: int) -> tuple[np.ndarray, np.ndarray, int]:
    """``(owners, vectors, rows_missing)``: the passage vectors of ``hydration``'s rows from
    the ``embeddings`` table and the row each belongs to; a row whose passages are not all
    embedded (ingested before ``index.passage_chars``, or with another value) keeps its chunk
    vector alone and counts in ``rows_missing``."""
    owners, shas = [], []
    for row, (text, path) in enumerate(zip(hydration.column("text").to_pylist(),
                                           hydration.column("heading_path").to_pylist())):
        for embed_text in passage_texts(text or "", path, max_chars=max_chars):
            owners.append(row)
            shas.append(ids.sha256_text(embed_text))
    if not shas:
        return np.zeros(0, np.int64), np.zeros((0, 0), np.float32), 0
    found = _vectors_by_sha(connection, sorted(set(shas)), embedder_fp)
    owners_array = np.asarray(owners, np.int64)
    held = np.array([sha in found for sha in shas], dtype=bool)
    incomplete = np.unique(owners_array[~held])
    keep = held & ~np.isin(owners_array, incomplete)
    if len(incomplete):
        logger.warning("%d chunks lack passage vectors (ingested before index.passage_chars=%d or with another "
                       "value): they are scored by their chunk vector alone until `kb-ray reembed --embedder '{}'` "
                       "embeds them", len(incomplete), max_chars)
    vectors = np.stack([found[sha] for sha, k in zip(shas, keep) if k]) if keep.any() else np.zeros((0, 0), np.float32)
    return owners_array[keep], vectors.astype(np.float32), int(len(incomplete))


def passages_missing_vectors(connection: duckdb.DuckDBPyConnection, embedder_fp: str, *,
                             max_chars: int) -> dict[str, str]:
    """``sha -> embedded text`` of the active chunks' passages with no vector from
    ``embedder_fp`` (``kb-ray reembed`` embeds them)."""
    wanted = _passages_of(connection, f"SELECT DISTINCT a.text, a.heading_path FROM ({ACTIVE_CHUNKS}) a",
                          max_chars=max_chars)
    held = _vectors_by_sha(connection, sorted(wanted), embedder_fp) if wanted else {}
    return {sha: text for sha, text in sorted(wanted.items()) if sha not in held}


def register_passage_refs(connection: duckdb.DuckDBPyConnection, *, max_chars: int | None = None) -> int:
    """Register ``passage_refs(embed_text_sha)``: the passage texts of every row of the session's
    ``chunks`` table, so that ``kb-ray purge`` keeps their vectors and ``kb-ray verify`` does not
    count them as unreferenced (their shas are derived from the chunk texts, not stored);
    ``max_chars`` None: the default ``index.passage_chars``. Returns how many there are."""
    if max_chars is None:
        from kb_ray.config import IndexSettings

        max_chars = IndexSettings().passage_chars
    shas = sorted(_passages_of(connection, "SELECT DISTINCT text, heading_path FROM chunks", max_chars=max_chars))
    connection.register("passage_refs", pa.table({"embed_text_sha": pa.array(shas, pa.string())}))
    return len(shas)


def _passages_of(connection: duckdb.DuckDBPyConnection, chunks_sql: str, *, max_chars: int) -> dict[str, str]:
    """:func:`passage_texts_by_sha` of the ``(text, heading_path)`` rows ``chunks_sql`` selects."""
    if not max_chars:
        return {}
    rows = connection.sql(chunks_sql).to_arrow_table()
    return passage_texts_by_sha(rows.column("text").to_pylist(), rows.column("heading_path").to_pylist(),
                                max_chars=max_chars)


def _vectors_by_sha(connection: duckdb.DuckDBPyConnection, shas: list[str], embedder_fp: str) -> dict[str, np.ndarray]:
    connection.register("wanted_passages", pa.table({"embed_text_sha": pa.array(shas, pa.string())}))
    try:
        table = connection.sql("""
            SELECT e.embed_text_sha, e.vector FROM embeddings e
            WHERE e.embedder_fp = ? AND e.embed_text_sha IN (SELECT embed_text_sha FROM wanted_passages)""",
                               params=[embedder_fp]).to_arrow_table()
    finally:
        connection.unregister("wanted_passages")
    shas_found = table.column("embed_text_sha").to_pylist()
    vectors = table.column("vector").to_pylist()
    return {sha: np.asarray(vector, np.float32) for sha, vector in zip(shas_found, vectors)}


def shard_passages(passages: Passages | None, rows: np.ndarray) -> Passages | None:
    """The passages of the generation rows ``rows`` (one shard), owners renumbered to the
    shard's rows (``rows[i]`` is the shard's row ``i``)."""
    if passages is None or not len(passages[0]):
        return None
    local = np.full(int(max(passages[0].max(), rows.max(initial=-1))) + 1, -1, np.int64)
    local[rows] = np.arange(len(rows))
    mine = local[passages[0]] >= 0
    return local[passages[0][mine]], passages[1][mine]


def passages_spec(max_chars: int) -> dict:
    """The generation spec's ``passages`` entry (kb_ray/index/build.py ``index_spec``)."""
    return {"max_chars": max_chars, "windows": "sentences, no overlap; a longer sentence cut at whitespace",
            "score": "max(chunk, passages)", "embed_text": "heading path + passage (kb_ray.embedding.text.format_embed_text)"}
