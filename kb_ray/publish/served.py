"""``ServedRows``: the rows a searcher of one generation would return, read from its files.

A generation's base shards and its delta segments up to a number (docs/indexes.md) are read
as a searcher loads them: each shard's hydration Parquet plus its FAISS vectors (row ``i`` of
the hydration file is FAISS id ``i``; the vectors come back as FAISS holds them, normalized).
With passage vectors (``index.passage_chars``, kb_ray/index/passages.py) the FAISS ids from
``rows`` on are the passages, ``dense_owners`` naming the row each belongs to: they come back
beside the rows (``passage_rows``, ``passage_vectors``) and follow their row through every
filter below, so a row left out takes its passages with it.
Rows of documents that a newer segment rewrote are dropped (``visible_masks``) and so are
rows whose version is no longer its document's active version in the catalog at read time
(the hydration gate, kb_ray/search/gate.py): base minus tombstones plus segments.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Self

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
class RowVectors:
    """Hydration rows (kb_ray.index.rows.HYDRATION_SCHEMA), their chunk vectors, and their
    passage vectors with the row each belongs to."""

    rows: pa.Table
    vectors: np.ndarray  # float32 (rows, dim), the chunk vectors as the FAISS shards hold them
    passage_rows: np.ndarray  # int64 (passages,): the row of ``rows`` each passage vector belongs to
    passage_vectors: np.ndarray  # float32 (passages, dim)

    def where(self, mask: np.ndarray) -> Self:
        """The rows where ``mask`` is true, with their passages (renumbered)."""
        keep = mask[self.passage_rows]
        renumbered = np.cumsum(mask, dtype=np.int64) - 1
        return replace(self, rows=self.rows.filter(pa.array(mask)), vectors=self.vectors[mask],
                       passage_rows=renumbered[self.passage_rows[keep]],
                       passage_vectors=self.passage_vectors[keep])

    @staticmethod
    def concat(parts: list[RowVectors], dim: int) -> RowVectors:
        offsets = np.cumsum([0] + [part.rows.num_rows for part in parts[:-1]])
        return RowVectors(rows=pa.concat_tables([part.rows for part in parts], promote_options="permissive"),
                          vectors=_stack([part.vectors for part in parts], dim),
                          passage_rows=np.concatenate([_NO_ROWS] + [part.passage_rows + offset
                                                                    for part, offset in zip(parts, offsets)]),
                          passage_vectors=_stack([part.passage_vectors for part in parts], dim))


@dataclass(frozen=True)
class ServedRows(RowVectors):
    """What a searcher of the generation serves: one row per served chunk, and its passages."""

    manifest: GenerationManifest
    segment: int  # the newest delta segment included (0: the base alone)
    catalog_versions: dict[str, int]  # what base ∪ segments equal (the newest segment's, else the base's)
    gated_rows: int  # indexed rows left out because their version is no longer active

    @property
    def active_versions(self) -> set[str]:
        return set(pc.unique(self.rows.column("version_id")).to_pylist())


_NO_ROWS = np.zeros(0, np.int64)


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
    masks = visible_masks([[part.rows.column("document_id") for part in group] for group in groups])
    visible = RowVectors.concat([part.where(mask) for group, group_masks in zip(groups, masks)
                                 for part, mask in zip(group, group_masks)], manifest.dim)
    active = _active_mask(config, visible.rows)
    served = visible.where(active)
    versions = {**manifest.catalog_versions, **(segments[-1].catalog_versions if segments else {})}
    return ServedRows(**{f.name: getattr(served, f.name) for f in fields(RowVectors)}, manifest=manifest,
                      segment=segments[-1].segment if segments else 0, catalog_versions=versions,
                      gated_rows=int((~active).sum()))


def _read_group(folder: Path, shards: list[ShardInfo]) -> list[RowVectors]:
    return [_read_shard(folder / info.dir, info) for info in shards]


def _read_shard(folder: Path, info: ShardInfo) -> RowVectors:
    rows = pq.read_table(folder / info.hydration)
    if info.rows == 0 or info.dense is None:
        return RowVectors(rows, np.zeros((rows.num_rows, 0), np.float32), _NO_ROWS, np.zeros((0, 0), np.float32))
    index = faiss.read_index(str(folder / info.dense))
    owners = _passage_owners(folder, info, rows=rows.num_rows, vectors=index.ntotal)
    vectors = np.asarray(index.reconstruct_batch(np.arange(index.ntotal, dtype=np.int64)), dtype=np.float32)
    return RowVectors(rows, vectors[:rows.num_rows], owners, vectors[rows.num_rows:])


def _passage_owners(folder: Path, info: ShardInfo, *, rows: int, vectors: int) -> np.ndarray:
    """The row of each passage vector (FAISS ids ``rows..``), checked against the index's size."""
    if info.dense_owners is None:
        if vectors != rows:
            raise ValueError(f"{folder}: {info.dense} holds {vectors} vectors for {rows} hydration rows "
                             "and no passage vectors")
        return _NO_ROWS
    owners = np.load(folder / info.dense_owners, mmap_mode="r")
    if vectors != len(owners):
        raise ValueError(f"{folder}: {info.dense} holds {vectors} vectors but {info.dense_owners} names "
                         f"{len(owners)} ({rows} hydration rows + {len(owners) - rows} passage vectors)")
    passages = np.array(owners[rows:], dtype=np.int64)
    foreign = len(passages) > 0 and (passages.min() < 0 or passages.max() >= rows)
    if foreign or not np.array_equal(owners[:rows], np.arange(rows)):
        raise ValueError(f"{folder / info.dense_owners}: the first {rows} owners must be the rows 0..{rows - 1} "
                         f"and every passage's owner one of them")
    return passages


def _stack(vectors: list[np.ndarray], dim: int) -> np.ndarray:
    return np.concatenate([v for v in vectors if v.shape[1]] or [np.zeros((0, dim), np.float32)])


def _active_mask(config: KbConfig, rows: pa.Table) -> np.ndarray:
    catalog = DeltaCatalog.open(config.kb_root, storage_options=config.storage_options, create=False)
    _, active = ActivePointers(catalog, max_age_s=0.0).snapshot()
    found = pc.is_in(rows.column("version_id"), value_set=active)
    return pc.fill_null(found, False).to_numpy(zero_copy_only=False).astype(bool)
