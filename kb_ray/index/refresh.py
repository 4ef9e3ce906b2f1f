"""``refresh_index``: publish a delta segment over the live generation; ``compact_index``:
fold base + segments into a new base generation (docs/indexes.md).

A refresh compares what the live generation's shard sets hold per document (version and
document-level fields, :data:`~kb_ray.index.rows.DOCUMENT_STATE`) with the catalog at its
latest versions, and writes the active chunks of the documents that differ into segment
``n+1`` with BM25 statistics over the rows a full build at those versions would index.
Nothing changed in the indexed tables: nothing is written. It compacts instead when a
segment cannot be exact (the live generation is contextual, its spec cannot be built again by
this code, or it predates index format 4), and after publishing when segment rows exceed
``index.compact_ratio`` × base rows. Segments and compactions are built with the live
generation's build options (kb_ray/index/build_options.py), never with the caller's
``index`` settings: a generation's tree, graph, contexts and embedder belong to it.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kb_ray.catalog.contract import table_spec
from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.catalog.storage import join_uri
from kb_ray.config import KbConfig
from kb_ray.index import generations
from kb_ray.index.build import _analyzer, _write_shard, build_index, index_dense_vectors, index_spec
from kb_ray.index.build_options import generation_config
from kb_ray.index.channels import ChannelBm25Index, channel_statistics, lexical_channels, live_statistics, tie_keys
from kb_ray.index.manifest import MANIFEST_NAME, GenerationManifest
from kb_ray.index.pages import PAGE_TABLES
from kb_ray.index.passages import Passages
from kb_ray.index.rows import (
    DOCUMENT_STATE,
    INDEXED_TABLES,
    active_document_states,
    active_versions,
    open_session,
    read_index_rows,
)
from kb_ray.index.segments import (
    STATISTICS_DIR,
    SegmentManifest,
    latest_segment,
    load_segments,
    local_segment_dir,
    save_statistics,
    segment_name,
    segments_uri,
    set_latest_segment,
    visible_masks,
)
from kb_ray.index.vector_layout import VectorLayout

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RefreshResult:
    action: str  # none | segment | compacted
    generation: str | None
    segment: int = 0
    rows: int = 0
    documents: int = 0
    detail: str = ""

    def to_dict(self) -> dict:
        return {"action": self.action, "generation": self.generation, "segment": self.segment, "rows": self.rows,
                "documents": self.documents, "detail": self.detail}


@dataclass
class _ShardSet:
    """One loaded shard set (the base or a segment) of the live generation."""

    hydrations: list[pa.Table]
    lexical: list[ChannelBm25Index | None]


def refresh_index(config: KbConfig, *, compact: bool = True) -> RefreshResult:
    """Bring the live generation up to the catalog's latest versions with a delta segment."""
    root, options = config.kb_root, config.storage_options
    live = generations.read_current(root, storage_options=options)
    if live is None:
        return RefreshResult("none", None, detail="no live generation: run build-index first")
    base = generations.load_manifest(root, live, storage_options=options)
    config = generation_config(config, base)
    segments = load_segments(root, live, storage_options=options)
    catalog = DeltaCatalog.open(root, storage_options=options, create=False)
    latest = {name: catalog.table_versions()[name] for name in INDEXED_TABLES}
    covered = segments[-1].catalog_versions if segments else {n: base.catalog_versions[n] for n in INDEXED_TABLES}
    if latest == covered:
        return RefreshResult("none", live, segment=len(segments), detail="the indexed tables did not change")
    why_not = _not_segmentable(config, base)
    if why_not:
        logger.info("refresh compacts instead of writing a segment: %s", why_not)
        return compact_index(config, catalog_versions=latest, detail=why_not)
    result = _publish_segment(config, catalog, base, segments, latest)
    if compact and _over_ratio(config, base, result.rows + sum(s.rows for s in segments)):
        return compact_index(config, catalog_versions=latest, detail=f"segment rows over "
                             f"{config.index.compact_ratio} x base rows after segment {result.segment}")
    return result


def compact_index(config: KbConfig, *, catalog_versions: dict[str, int] | None = None,
                  detail: str = "") -> RefreshResult:
    """A normal ``build_index`` at the versions the live generation's newest segment covers
    (or ``catalog_versions``), with the live generation's build options and embedder, switched
    live. The old generation stays until dropped."""
    root, options = config.kb_root, config.storage_options
    live = generations.read_current(root, storage_options=options)
    versions, embedder_fp = dict(catalog_versions or {}), None
    if live is not None:
        base = generations.load_manifest(root, live, storage_options=options)
        config, embedder_fp = generation_config(config, base), base.embedder_fp or None
        segments = load_segments(root, live, storage_options=options)
        versions = versions or dict(segments[-1].catalog_versions if segments else base.catalog_versions)
    catalog = DeltaCatalog.open(root, storage_options=options, create=False)
    latest = catalog.table_versions()
    if versions and set(PAGE_TABLES) <= set(latest):  # segments index text chunks only: pages as of now
        versions.update({name: latest[name] for name in PAGE_TABLES})
    manifest = build_index(config.model_copy(update={"index": config.index.model_copy(
        update={"switch_after_build": True})}), catalog_versions=versions or None, embedder_fp=embedder_fp)
    return RefreshResult("compacted", manifest.generation_id, rows=manifest.rows, detail=detail)


def _not_segmentable(config: KbConfig, base: GenerationManifest) -> str:
    """Why a segment over ``base`` could not be exact; ``config`` carries ``base``'s build options."""
    if "contextual" in base.spec:  # a segment would index plain chunks (kb_ray/index/contextual.py)
        return "the live generation is contextual: segments index chunks without their contexts"
    pages = {"pages": base.spec["pages"]} if "pages" in base.spec else {}
    if base.spec != {**index_spec(config.index, config.answer), **pages}:
        return ("the live generation's spec is not what this code builds with its options "
                "(another index format, library version or generator)")
    if base.rows == 0 or base.dim == 0:
        return "the live generation is empty"
    if base.spec.get("format", 0) < 4:
        return "the live generation predates index format 4 (no term frequencies)"
    return ""


def _over_ratio(config: KbConfig, base: GenerationManifest, segment_rows: int) -> bool:
    return segment_rows > config.index.compact_ratio * max(base.rows, 1)


def _publish_segment(config: KbConfig, catalog: DeltaCatalog, base: GenerationManifest,
                     segments: list[SegmentManifest], versions: dict[str, int]) -> RefreshResult:
    started = time.perf_counter()
    sets = _load_shard_sets(config, base, segments)
    visible = visible_masks([[h.column("document_id") for h in s.hydrations] for s in sets])
    connection = open_session(catalog, versions)
    try:
        changed = _changed_documents(connection, sets, visible)
        hydration, vector_column = read_index_rows(connection, base.embedder_fp, documents=changed,
                                                   require_vectors=False)
        dense = index_dense_vectors(connection, hydration, vector_column, base.embedder_fp,
                                    VectorLayout.from_spec(base.spec))  # as the base generation has them
        active = active_versions(connection)
    finally:
        connection.close()
    live = _live_masks(sets, visible, active, set(changed))
    number = latest_segment(config.kb_root, base.generation_id, storage_options=config.storage_options) + 1
    manifest = _write_segment(config, base, number, hydration, dense.own, sets, live, versions,
                              documents=len(changed), started=started, passages=dense.passages)
    _record_segment(catalog, config, manifest)
    logger.info("segment %d of %s: %d chunks of %d documents (%.2fs)", number, base.generation_id,
                manifest.rows, len(changed), time.perf_counter() - started)
    return RefreshResult("segment", base.generation_id, segment=number, rows=manifest.rows, documents=len(changed))


def _record_segment(catalog: DeltaCatalog, config: KbConfig, segment: SegmentManifest) -> None:
    """An ``index_generations`` row (kind ``segment``, id ``gen_…/seg_NNNN``), so ``kb-ray maintain``
    keeps the catalog versions it covers (compaction rebuilds at them) and ``index list`` shows it."""
    name = f"{segment.base_generation}/{segment.name}"
    row = {"generation_id": name, "kind": "segment", "spec_fp": None,
           "catalog_versions_json": json.dumps(segment.catalog_versions, sort_keys=True),
           "manifest_uri": join_uri(segments_uri(config.kb_root, segment.base_generation), segment.name, MANIFEST_NAME),
           "status": "ready", "created_at": datetime.fromisoformat(segment.created_at),
           "stats_json": json.dumps({**(segment.stats or {}), "documents": segment.documents}, sort_keys=True)}
    table = pa.Table.from_pylist([row], schema=table_spec("index_generations").schema)
    catalog.merge_upsert("index_generations", table, keys=["generation_id"])


def _load_shard_sets(config: KbConfig, base: GenerationManifest, segments: list[SegmentManifest]) -> list[_ShardSet]:
    root, options = config.kb_root, config.storage_options
    folders = [(generations.local_generation_dir(root, base.generation_id, storage_options=options), base.shards)]
    folders += [(local_segment_dir(root, base.generation_id, s, storage_options=options), s.shards) for s in segments]
    bm25 = base.lexical_type == "bm25"
    return [_ShardSet([pq.read_table(folder / info.dir / info.hydration) for info in shards],
                      [ChannelBm25Index.load(folder / info.dir / info.lexical) if bm25 and info.rows else None
                       for info in shards]) for folder, shards in folders]


def _changed_documents(connection, sets: list[_ShardSet], visible: list[list[np.ndarray]]) -> list[str]:
    """Documents whose indexed rows (the newest shard set holding them) differ from the catalog."""
    held = {}
    for shard_set, masks in zip(sets, visible):
        for hydration, mask in zip(shard_set.hydrations, masks):
            rows = hydration.select(list(DOCUMENT_STATE)).filter(pa.array(mask))
            held.update(_states(rows))
    wanted = _states(active_document_states(connection))
    return sorted(doc for doc, state in wanted.items() if held.get(doc) != state)


def _states(rows: pa.Table) -> dict[str, tuple]:
    columns = [rows.column(name).to_pylist() for name in DOCUMENT_STATE]
    return {values[0]: tuple(repr(v) for v in values) for values in zip(*columns)}


def _live_masks(sets: list[_ShardSet], visible: list[list[np.ndarray]], active: pa.Array,
                changed: set[str]) -> list[list[np.ndarray]]:
    """Rows a full build at the new versions indexes: visible, active version, not rewritten."""
    rewritten = pa.array(sorted(changed), pa.string())
    live = []
    for shard_set, masks in zip(sets, visible):
        live.append([mask & _in(h.column("version_id"), active) & ~_in(h.column("document_id"), rewritten)
                     for h, mask in zip(shard_set.hydrations, masks)])
    return live


def _in(column: pa.ChunkedArray, values: pa.Array) -> np.ndarray:
    return pc.fill_null(pc.is_in(column, value_set=values), False).to_numpy(zero_copy_only=False).astype(bool)


def _write_segment(config: KbConfig, base: GenerationManifest, number: int, hydration: pa.Table, vectors: np.ndarray,
                   sets: list[_ShardSet], live: list[list[np.ndarray]], versions: dict[str, int], *,
                   documents: int, started: float, passages: Passages | None = None) -> SegmentManifest:
    root, options = config.kb_root, config.storage_options
    staged = generations.staging_dir(root, f"{base.generation_id}-{segment_name(number)}")
    try:
        lexical, counts = _segment_lexical(config, base, hydration, sets, live, staged)
        vectors = vectors if hydration.num_rows else np.zeros((0, base.dim), np.float32)
        shard = _write_shard(staged / "shard-000", 0, hydration, vectors, config.index, lexical=lexical,
                             passages=passages)
        manifest = SegmentManifest(
            segment=number, base_generation=base.generation_id, catalog_versions=versions, shards=[shard],
            documents=documents, created_at=datetime.now(timezone.utc).isoformat(), statistics=counts,
            stats={"rows": hydration.num_rows, "build_seconds": round(time.perf_counter() - started, 3)})
        (staged / MANIFEST_NAME).write_text(manifest.to_json(), encoding="utf-8")
        target = join_uri(segments_uri(root, base.generation_id), segment_name(number))
        generations.publish_folder(staged, target, storage_options=options)
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    set_latest_segment(root, base.generation_id, number, storage_options=options)
    return manifest


def _segment_lexical(config: KbConfig, base: GenerationManifest, hydration: pa.Table, sets: list[_ShardSet],
                     live: list[list[np.ndarray]], staged: Path) -> tuple[ChannelBm25Index | None, dict | None]:
    """The segment's BM25 index, weighted with the statistics of every live row (bm25 only)."""
    if base.lexical_type != "bm25":
        return None, None
    analyzer = _analyzer(config.index)
    channels = lexical_channels(hydration, analyzer, heading_in_body=config.index.lexical_heading_in_body)
    index = ChannelBm25Index.build(channels, channel_statistics(channels), tie_keys=tie_keys(hydration),
                                   analyzer=analyzer)
    parts = [(index, np.ones(hydration.num_rows, bool))]
    parts += [(lexical, mask) for s, masks in zip(sets, live) for lexical, mask in zip(s.lexical, masks) if lexical]
    statistics = live_statistics(parts)
    counts = save_statistics(staged / STATISTICS_DIR, statistics)
    return index.reweighted(statistics), counts
