"""``build_index``: catalog tables at named versions → one sharded index generation.

Per shard (chunk → shard by a stable hash of chunk_id) it writes a FAISS index, a BM25
index and a hydration Parquet file whose row numbers are the ids of both indexes. The
default BM25 (``index.lexical: bm25``, kb_ray.index.channels) indexes body, heading, file
name and exact-term channels with statistics computed over the whole generation, so
scores do not depend on the sharding; the baselines (bm25s, tantivy) index
"heading path + text" with per-shard statistics. ``manifest.json`` is written last; a row goes to
``index_generations``; ``CURRENT`` is switched when ``index.switch_after_build``.
A generation whose manifest already exists is not rebuilt (same id = same content).
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import faiss
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.config import AnswerSettings, IndexSettings, KbConfig
from kb_ray.embedding.fingerprint import embedder_fingerprint
from kb_ray.errors import CatalogError
from kb_ray.index import generations
from kb_ray.index.analyzer import TextAnalyzer
from kb_ray.index.build_options import build_options
from kb_ray.index.channels import (
    CHANNELS,
    ChannelBm25Index,
    channel_statistics,
    contextual_text,
    lexical_channels,
    tie_keys,
)
from kb_ray.index.concepts import ConceptExtractor
from kb_ray.index.contextual import ContextualInputs, context_writer, contextual_inputs, contextual_spec
from kb_ray.index.dense import build_faiss_index, choose_dense_type
from kb_ray.index.graph import GRAPH_DIR, GRAPH_TABLES, build_graph_index, graph_spec
from kb_ray.index.lexical import lexical_index_class, library_version
from kb_ray.index.manifest import (
    DENSE_FILE,
    DENSE_OWNERS_FILE,
    HYDRATION_FILE,
    INDEX_FORMAT_VERSION,
    LEXICAL_DIR,
    MANIFEST_NAME,
    GenerationManifest,
    ShardInfo,
    generation_id_for,
    spec_fingerprint,
)
from kb_ray.index.pages import PAGE_INDEX_FORMAT, PAGE_TABLES, PAGES_DIR, build_page_index, resolve_page_embedder_fp
from kb_ray.index.passages import Passages, shard_passages
from kb_ray.index.rows import INDEXED_TABLES, open_session, read_index_rows, resolve_embedder_fp
from kb_ray.index.tree import TREE_DIR, build_tree_index, tree_spec
from kb_ray.index.tree_summaries import LlmSummaryWriter, SectionSummarizer, summary_enricher_fingerprint
from kb_ray.index.vector_layout import VectorLayout
from kb_ray.index.vector_lookup import IndexVectors, index_vectors

logger = logging.getLogger(__name__)

LEXICAL_HEADING_SEPARATOR = " > "


def shard_of(chunk_id: str, shards: int) -> int:
    """Stable shard of a chunk: the first 32 bits of sha256(chunk_id) modulo ``shards``."""
    return int(hashlib.sha256(chunk_id.encode("utf-8")).hexdigest()[:8], 16) % shards


def lexical_text(heading_path: list[str] | None, text: str) -> str:
    return f"{LEXICAL_HEADING_SEPARATOR.join(heading_path or [])}\n{text}".strip()


def index_spec(settings: IndexSettings, answer: AnswerSettings | None = None) -> dict:
    """Everything that changes what a generation contains (not where or whether it goes live);
    ``answer`` names the generator of LLM-written chunk contexts (``index.contextual_writer``)."""
    spec = _base_spec(settings)
    if settings.lexical == "bm25":
        spec["lexical_text"] = {
            "channels": list(CHANNELS), "heading_in_body": settings.lexical_heading_in_body,
            "analyzer": _analyzer(settings).spec(), "statistics": "generation"}
    passages = VectorLayout.from_settings(settings).spec()
    if passages:
        spec["passages"] = passages
    if settings.tree:
        summary_fp = (summary_enricher_fingerprint(answer or AnswerSettings(), settings)
                      if settings.tree_summaries == "generator" else None)
        spec["tree"] = tree_spec(_analyzer(settings), summary_enricher_fp=summary_fp)
    if settings.graph:
        spec["graph"] = graph_spec(ConceptExtractor())
    if settings.contextual:
        spec["contextual"] = contextual_spec(settings, answer or AnswerSettings())
    return spec


def _analyzer(settings: IndexSettings) -> TextAnalyzer:
    return TextAnalyzer(stem=settings.lexical_stem, identifiers=settings.lexical_identifiers)


def _base_spec(settings: IndexSettings) -> dict:
    libraries = {"faiss": faiss.__version__}
    if settings.lexical != "bm25":
        libraries[settings.lexical] = library_version(settings.lexical)
    return {
        "format": INDEX_FORMAT_VERSION, "shards": settings.shards, "dense": settings.dense,
        "flat_max_vectors": settings.flat_max_vectors, "hnsw_m": settings.hnsw_m,
        "ivf_nlist": settings.ivf_nlist, "lexical": settings.lexical,
        "lexical_text": f"heading_path joined by {LEXICAL_HEADING_SEPARATOR!r}, newline, text",
        "libraries": libraries,
    }


def build_index(config: KbConfig, *, catalog_versions: dict[str, int] | None = None,
                embedder_fp: str | None = None, text_embedder: Any = None) -> GenerationManifest:
    """Build (or find) the generation for these catalog versions and return its manifest.

    With ``index.tree`` the section tree's nodes are embedded with ``text_embedder`` (default:
    the configured one), which must be the embedder of the generation's chunk vectors."""
    catalog = DeltaCatalog.open(config.kb_root, storage_options=config.storage_options, create=False)
    versions = _resolve_versions(catalog, catalog_versions)
    connection = open_session(catalog, versions)
    try:
        fp = resolve_embedder_fp(connection, embedder_fp, configured=lambda: embedder_fingerprint(config.embedding))
        spec = index_spec(config.index, config.answer)
        page_fp = resolve_page_embedder_fp(connection, config.pages) if set(PAGE_TABLES) <= set(versions) else None
        if page_fp:
            spec["pages"] = {"format": PAGE_INDEX_FORMAT, "embedder_fp": page_fp}
        else:  # no page index: the generation depends on (and records) the text tables only
            versions = {name: versions[name] for name in INDEXED_TABLES}
        if "graph" in spec:
            versions.update(_graph_versions(catalog, connection, catalog_versions))
        generation_id = generation_id_for(spec, versions, fp)
        manifest = _existing_manifest(config, generation_id)
        if manifest is None:
            manifest = _build(config, catalog, connection, spec=spec, versions=versions, embedder_fp=fp,
                              generation_id=generation_id, page_fp=page_fp, text_embedder=text_embedder)
    finally:
        connection.close()
    _record_generation(catalog, config, manifest)
    if config.index.switch_after_build:
        generations.switch_generation(config.kb_root, manifest.generation_id,
                                      storage_options=config.storage_options)
    return manifest


def _resolve_versions(catalog: DeltaCatalog, requested: dict[str, int] | None) -> dict[str, int]:
    """Versions of the indexed tables; the page tables too (optional when versions are given:
    a generation recorded before page indexes existed names none and gets no page index)."""
    latest = catalog.table_versions()
    if requested is None:
        return {name: latest[name] for name in INDEXED_TABLES + PAGE_TABLES}
    if set(PAGE_TABLES) <= set(requested):
        return {**_resolve_versions(catalog, {n: v for n, v in requested.items() if n not in PAGE_TABLES}),
                **_check_versions(requested, latest, PAGE_TABLES)}
    missing = [name for name in INDEXED_TABLES if name not in requested]
    if missing:
        raise CatalogError(f"catalog_versions must name {list(INDEXED_TABLES)}; missing {missing}")
    return _check_versions(requested, latest, INDEXED_TABLES)


def _graph_versions(catalog: DeltaCatalog, connection, requested: dict[str, int] | None) -> dict[str, int]:
    """Versions of ``concepts`` and ``mentions`` (the latest where ``requested`` names none: a
    generation built before index.graph), registered in the build's session."""
    latest = catalog.table_versions()
    versions = _check_versions({name: (requested or {}).get(name, latest[name]) for name in GRAPH_TABLES},
                               latest, GRAPH_TABLES)
    for name, version in versions.items():
        connection.register(name, catalog.dataset(name, version=version))
    return versions


def _check_versions(requested: dict[str, int], latest: dict[str, int], names: tuple[str, ...]) -> dict[str, int]:
    too_new = {n: requested[n] for n in names if not 0 <= requested[n] <= latest[n]}
    if too_new:
        raise CatalogError(f"catalog_versions {too_new} do not exist (latest: { {n: latest[n] for n in too_new} })")
    return {name: int(requested[name]) for name in names}


def _existing_manifest(config: KbConfig, generation_id: str) -> GenerationManifest | None:
    try:
        manifest = generations.load_manifest(config.kb_root, generation_id, storage_options=config.storage_options)
    except generations.GenerationError:
        return None
    logger.info("index generation %s already built; reusing it", generation_id)
    return manifest


def _build(config: KbConfig, catalog: DeltaCatalog, connection, *, spec: dict, versions: dict[str, int], embedder_fp: str,
           generation_id: str, page_fp: str | None = None, text_embedder: Any = None) -> GenerationManifest:
    started = time.perf_counter()
    hydration, vector_column = read_index_rows(connection, embedder_fp, require_vectors=False)
    dense = index_dense_vectors(connection, hydration, vector_column, embedder_fp, VectorLayout.from_spec(spec))
    vectors, passages, passages_missing = dense.own, dense.passages, dense.missing_rows
    contextual = _contextual(config, catalog, hydration, embedder_fp, text_embedder) if "contextual" in spec else None
    if contextual is not None and contextual.vectors is not None and hydration.num_rows:
        vectors = contextual.vectors
    lexical_contexts = contextual.contexts if contextual and config.index.contextual_in != "dense" else None
    staged = generations.staging_dir(config.kb_root, generation_id)
    try:
        shards = _write_shards(staged, hydration, vectors, config.index, contexts=lexical_contexts, passages=passages)
        pages = build_page_index(staged / PAGES_DIR, connection, page_fp) if page_fp else None
        tree_started = time.perf_counter()
        tree = _build_tree(staged, hydration, config, catalog, embedder_fp, text_embedder) if "tree" in spec else None
        tree_seconds = time.perf_counter() - tree_started
        graph_started = time.perf_counter()
        graph = build_graph_index(staged / GRAPH_DIR, hydration, connection, extractor=ConceptExtractor()) \
            if "graph" in spec else None
        graph_seconds = time.perf_counter() - graph_started
        manifest = GenerationManifest(
            generation_id=generation_id, kind="hybrid", spec=spec, catalog_versions=versions,
            embedder_fp=embedder_fp, dim=int(vectors.shape[1]), lexical_type=config.index.lexical,
            shards=shards, created_at=datetime.now(timezone.utc).isoformat(), pages=pages, tree=tree,
            graph=graph, build_options=build_options(config),
            stats={"rows": hydration.num_rows, "pages": pages["rows"] if pages else 0,
                   **({"passages": len(passages[0]), "passages_missing_rows": passages_missing} if passages else {}),
                   "build_seconds": round(time.perf_counter() - started, 3),
                   **({"tree_nodes": tree["rows"], "tree_seconds": round(tree_seconds, 3)} if tree else {}),
                   **({"graph_concepts": graph["concepts"], "graph_edges": graph["edges"],
                       "graph_seconds": round(graph_seconds, 3)} if graph else {}),
                   **({"contextual": contextual.stats} if contextual else {})},
        )
        (staged / MANIFEST_NAME).write_text(manifest.to_json(), encoding="utf-8")
        generations.publish(staged, config.kb_root, generation_id, storage_options=config.storage_options)
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    logger.info("built index generation %s: %d chunks in %d shards (%.1fs)", generation_id,
                hydration.num_rows, len(shards), time.perf_counter() - started)
    return manifest


def index_dense_vectors(connection, hydration: pa.Table, vector_column: pa.ChunkedArray, embedder_fp: str,
                        layout: VectorLayout) -> IndexVectors:
    """The dense vectors of ``hydration``'s rows under ``layout`` (kb_ray/index/vector_lookup.py):
    each row's own, its passages (None when ``index.passage_chars`` is 0) and how many rows
    lack theirs."""
    if not hydration.num_rows:
        return IndexVectors(np.zeros((0, 0), np.float32), None, 0)
    return index_vectors(connection, hydration, vector_column, embedder_fp, layout)


def _contextual(config: KbConfig, catalog: DeltaCatalog, hydration: pa.Table, embedder_fp: str,
                text_embedder: Any) -> ContextualInputs:
    def embedder() -> Any:
        if text_embedder is not None:
            return text_embedder
        from kb_ray.embedding.text import TextEmbedder

        return TextEmbedder.from_settings(config.embedding)

    return contextual_inputs(catalog, hydration, writer=context_writer(config.index, config.answer),
                             analyzer=_analyzer(config.index), embedder_fp=embedder_fp, embedder=embedder,
                             embed=config.index.contextual_in != "lexical")


def _build_tree(staged: Path, hydration: pa.Table, config: KbConfig, catalog: DeltaCatalog, embedder_fp: str,
                text_embedder: Any) -> dict | None:
    if text_embedder is None:
        from kb_ray.embedding.text import TextEmbedder

        text_embedder = TextEmbedder.from_settings(config.embedding)
    if hydration.num_rows and text_embedder.fingerprint != embedder_fp:
        raise CatalogError(f"index.tree embeds sections with the generation's embedder {embedder_fp}, but the "
                           f"configured one is {text_embedder.fingerprint}: restore the embedding settings "
                           "or build without index.tree")
    summarizer = None
    if config.index.tree_summaries == "generator":
        summarizer = SectionSummarizer(catalog, LlmSummaryWriter(config.answer, config.index))
    return build_tree_index(staged / TREE_DIR, hydration, embedder=text_embedder, analyzer=_analyzer(config.index),
                            summarizer=summarizer)


def _vectors(column: pa.ChunkedArray) -> np.ndarray:
    if len(column) == 0:
        return np.zeros((0, 0), np.float32)
    lengths = pc.unique(pc.list_value_length(column)).to_pylist()
    if len(lengths) != 1:
        raise CatalogError(f"embedding vectors of several dimensions {sorted(lengths)} in one generation")
    flat = pc.list_flatten(column).to_numpy(zero_copy_only=False)
    return np.asarray(flat, dtype=np.float32).reshape(len(column), lengths[0])


def _write_shards(staged: Path, hydration: pa.Table, vectors: np.ndarray, settings: IndexSettings, *,
                  contexts: list[str] | None = None, passages: Passages | None = None) -> list[ShardInfo]:
    """``contexts`` (the contextual generation): per row, the text indexed before the chunk's;
    ``passages``: ``(owners, vectors)``, more dense vectors of the rows ``owners`` name."""
    assignment = np.array([shard_of(cid, settings.shards) for cid in hydration.column("chunk_id").to_pylist()],
                          dtype=np.int64)
    lexical = _GenerationLexical(hydration, settings, contexts=contexts) if settings.lexical == "bm25" else None
    infos = []
    for shard in range(settings.shards):
        rows = np.flatnonzero(assignment == shard)
        infos.append(_write_shard(staged / f"shard-{shard:03d}", shard, hydration.take(rows), vectors[rows], settings,
                                  lexical=lexical.for_rows(rows) if lexical else None,
                                  contexts=[contexts[i] for i in rows] if contexts is not None else None,
                                  passages=shard_passages(passages, rows)))
        logger.info("shard %d/%d: %d chunks", shard + 1, settings.shards, len(rows))
    return infos


class _GenerationLexical:
    """Every row analyzed once and the corpus-wide BM25 statistics; sliced per shard."""

    def __init__(self, hydration: pa.Table, settings: IndexSettings, *, contexts: list[str] | None = None) -> None:
        self.analyzer = _analyzer(settings)
        self.channels = lexical_channels(hydration, self.analyzer, heading_in_body=settings.lexical_heading_in_body,
                                         contexts=contexts)
        self.statistics = channel_statistics(self.channels)
        self.tie_keys = tie_keys(hydration)

    def for_rows(self, rows: np.ndarray) -> ChannelBm25Index:
        picked = rows.tolist()
        channels = {name: [terms[i] for i in picked] for name, terms in self.channels.items()}
        return ChannelBm25Index.build(channels, self.statistics, tie_keys=[self.tie_keys[i] for i in picked],
                                      analyzer=self.analyzer)


def _write_shard(folder: Path, shard: int, rows: pa.Table, vectors: np.ndarray, settings: IndexSettings, *,
                 lexical: ChannelBm25Index | None = None, contexts: list[str] | None = None,
                 passages: Passages | None = None) -> ShardInfo:
    folder.mkdir(parents=True)
    pq.write_table(rows, folder / HYDRATION_FILE, compression="zstd")
    if rows.num_rows == 0:
        return ShardInfo(shard=shard, rows=0, dir=folder.name, dense_type=None, dense=None, lexical=None)
    owners_file = None
    if passages is not None and len(passages[0]):
        owners_file = DENSE_OWNERS_FILE
        np.save(folder / owners_file, np.concatenate([np.arange(rows.num_rows, dtype=np.int64), passages[0]]))
        vectors = np.concatenate([vectors, passages[1]])
    dense_type = choose_dense_type(settings.dense, len(vectors), flat_max_vectors=settings.flat_max_vectors)
    index = build_faiss_index(vectors, dense_type, hnsw_m=settings.hnsw_m, ivf_nlist=settings.ivf_nlist)
    faiss.write_index(index, str(folder / DENSE_FILE))
    if lexical is None:
        chunk_texts = rows.column("text").to_pylist()
        texts = ([contextual_text(c, t) for c, t in zip(contexts, chunk_texts)] if contexts is not None
                 else [lexical_text(h, t) for h, t in zip(rows.column("heading_path").to_pylist(), chunk_texts)])
        lexical = lexical_index_class(settings.lexical).build(texts)
    lexical.save(folder / LEXICAL_DIR)
    return ShardInfo(shard=shard, rows=rows.num_rows, dir=folder.name, dense_type=dense_type,
                     dense_owners=owners_file)


def _record_generation(catalog: DeltaCatalog, config: KbConfig, manifest: GenerationManifest) -> None:
    row = {
        "generation_id": manifest.generation_id, "kind": manifest.kind, "spec_fp": spec_fingerprint(manifest.spec),
        "catalog_versions_json": json.dumps(manifest.catalog_versions, sort_keys=True),
        "manifest_uri": f"{generations.generation_uri(config.kb_root, manifest.generation_id)}/{MANIFEST_NAME}",
        "status": "ready", "created_at": datetime.fromisoformat(manifest.created_at),
        "stats_json": json.dumps({**manifest.stats, "embedder_fp": manifest.embedder_fp,
                                  "shards": [s.rows for s in manifest.shards]}, sort_keys=True),
    }
    catalog.merge_upsert("index_generations", pa.Table.from_pylist([row]), keys=["generation_id"])
