"""``ServedRows``: the rows a searcher of one generation would return, read from its files.

A generation's base shards and its delta segments up to a number (docs/indexes.md) are read
as a searcher loads them: each shard's hydration Parquet plus its FAISS vectors (row ``i`` of
the hydration file is FAISS id ``i``; the vectors come back as FAISS holds them, normalized).
A generation with passage vectors publishes each chunk's own vector: the passages are not
published, so a published table's dense channel is the chunk vectors alone.
Rows of documents that a newer segment rewrote are dropped (``visible_masks``) and so are
rows whose version is no longer its document's active version in the catalog at read time
(the hydration gate, kb_ray/search/gate.py): base minus tombstones plus segments.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import faiss
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.config import KbConfig
from kb_ray.index.generations import load_manifest, local_generation_dir, read_current
from kb_ray.index.manifest import GenerationManifest, ShardInfo
from kb_ray.index.segments import latest_segment, load_segments, local_segment_dir, visible_masks
from kb_ray.search.gate import ActivePointers


@dataclass(frozen=True)
class ServedRows:
    """Hydration rows (kb_ray.index.rows.HYDRATION_SCHEMA) and their vectors, one per served chunk."""

    manifest: GenerationManifest
    segment: int  # the newest delta segment included (0: the base alone)
    catalog_versions: dict[str, int]  # what base ∪ segments equal (the newest segment's, else the base's)
    rows: pa.Table
    vectors: np.ndarray  # float32 (rows, dim), as the FAISS shards hold them
    gated_rows: int  # indexed rows left out because their version is no longer active

    @property
    def active_versions(self) -> set[str]:
        return set(pc.unique(self.rows.column("version_id")).to_pylist())


def resolve_generation(config: KbConfig, generation_id: str | None) -> str:
    """``generation_id``, or the live one (``CURRENT``)."""
    if generation_id:
        return generation_id
    from kb_ray.index.generations import GenerationError

    current = read_current(config.kb_root, storage_options=config.storage_options)
    if current is None:
        raise GenerationError(f"no live index generation under {config.kb_root}: run build-index first "
                              "or pass --generation")
    return current


def read_served_rows(config: KbConfig, generation_id: str, *, segment: int | None = None) -> ServedRows:
    """The generation's base ∪ segments ``1..segment`` (default: its latest), gated by the catalog now."""
    root, options = config.kb_root, config.storage_options
    manifest = load_manifest(root, generation_id, storage_options=options)
    upto = latest_segment(root, generation_id, storage_options=options) if segment is None else segment
    segments = load_segments(root, generation_id, upto=upto, storage_options=options)
    groups = [_read_group(local_generation_dir(root, generation_id, storage_options=options), manifest.shards)]
    for seg in segments:
        groups.append(_read_group(local_segment_dir(root, generation_id, seg, storage_options=options), seg.shards))
    masks = visible_masks([[rows.column("document_id") for rows, _ in group] for group in groups])
    tables, vectors = [], []
    for group, group_masks in zip(groups, masks):
        for (rows, shard_vectors), mask in zip(group, group_masks):
            tables.append(rows.filter(pa.array(mask)))
            vectors.append(shard_vectors[mask])
    rows, vectors = _concat(tables, vectors, manifest.dim)
    active = _active_mask(config, rows)
    versions = {**manifest.catalog_versions, **(segments[-1].catalog_versions if segments else {})}
    return ServedRows(manifest=manifest, segment=segments[-1].segment if segments else 0, catalog_versions=versions,
                      rows=rows.filter(pa.array(active)), vectors=vectors[active],
                      gated_rows=int((~active).sum()))


def _read_group(folder: Path, shards: list[ShardInfo]) -> list[tuple[pa.Table, np.ndarray]]:
    return [_read_shard(folder / info.dir, info) for info in shards]


def _read_shard(folder: Path, info: ShardInfo) -> tuple[pa.Table, np.ndarray]:
    rows = pq.read_table(folder / info.hydration)
    if info.rows == 0 or info.dense is None:
        return rows, np.zeros((rows.num_rows, 0), np.float32)
    index = faiss.read_index(str(folder / info.dense))
    # with passage vectors (info.dense_owners, kb_ray/index/passages.py) ids 0..rows-1 are still the
    # chunks' own vectors and the passages follow; one row per chunk publishes the chunk vector
    expected = rows.num_rows if info.dense_owners is None else len(np.load(folder / info.dense_owners))
    if index.ntotal != expected:
        raise ValueError(f"{folder}: {index.ntotal} vectors for {rows.num_rows} hydration rows")
    ids = np.arange(rows.num_rows, dtype=np.int64)
    return rows, np.asarray(index.reconstruct_batch(ids), dtype=np.float32)


def _concat(tables: list[pa.Table], vectors: list[np.ndarray], dim: int) -> tuple[pa.Table, np.ndarray]:
    vectors = [v for v in vectors if v.shape[1]] or [np.zeros((0, dim), np.float32)]
    return pa.concat_tables(tables, promote_options="permissive"), np.concatenate(vectors)


def _active_mask(config: KbConfig, rows: pa.Table) -> np.ndarray:
    catalog = DeltaCatalog.open(config.kb_root, storage_options=config.storage_options, create=False)
    _, active = ActivePointers(catalog, max_age_s=0.0).snapshot()
    found = pc.is_in(rows.column("version_id"), value_set=active)
    return pc.fill_null(found, False).to_numpy(zero_copy_only=False).astype(bool)
