"""Delta segments: the chunks committed after a base generation, as small extra shard sets.

Layout under a generation (docs/indexes.md)::

    gen_…/segments/LATEST                 # the newest published segment number (one line)
    gen_…/segments/seg_0001/manifest.json # written last; catalog versions it covers, rows
    gen_…/segments/seg_0001/shard-000/    # hydration, FAISS, BM25 of the segment's chunks
    gen_…/segments/seg_0001/statistics/   # BM25 statistics of base ∪ segments 1..n (live rows)

Segment ``n`` holds every active chunk of the documents whose active version (or
document-level fields: title, tags, acl, metadata…) differ from what base ∪ segments
``1..n-1`` hold for them. For each document the newest shard set that holds it wins
(:func:`visible_masks`); tombstones need no rows: the hydration gate hides them. Its
statistics are those of a full build at its catalog versions, and a searcher scores every
shard of base ∪ segments with the newest segment's statistics.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kb_ray.catalog.storage import join_uri
from kb_ray.index.bm25 import CorpusStatistics
from kb_ray.index.generations import generation_uri, local_copy, read_text_file, write_pointer
from kb_ray.index.manifest import MANIFEST_NAME, GenerationManifest, ShardInfo

logger = logging.getLogger(__name__)

SEGMENTS_DIR, LATEST_NAME, STATISTICS_DIR = "segments", "LATEST", "statistics"


@dataclass(frozen=True)
class SegmentManifest:
    """One delta segment of a base generation."""

    segment: int
    base_generation: str
    catalog_versions: dict[str, int]  # the catalog state base ∪ segments 1..segment equals
    shards: list[ShardInfo]
    documents: int  # documents whose rows this segment (re)writes
    created_at: str
    statistics: dict[str, dict[str, int]] | None = None  # channel -> documents, total_length (bm25 only)
    stats: dict[str, Any] | None = None

    @property
    def rows(self) -> int:
        return sum(shard.rows for shard in self.shards)

    @property
    def name(self) -> str:
        return segment_name(self.segment)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> SegmentManifest:
        data = json.loads(text)
        data["shards"] = [ShardInfo(**shard) for shard in data["shards"]]
        return cls(**data)


def segment_name(number: int) -> str:
    return f"seg_{number:04d}"


def segments_uri(kb_root: str, generation_id: str) -> str:
    return join_uri(generation_uri(kb_root, generation_id), SEGMENTS_DIR)


def latest_segment(kb_root: str, generation_id: str, *, storage_options: dict[str, str] | None = None) -> int:
    """The newest published segment number of a generation; 0 when it has none."""
    text = read_text_file(join_uri(segments_uri(kb_root, generation_id), LATEST_NAME), storage_options)
    return int(text.strip()) if text and text.strip() else 0


def set_latest_segment(kb_root: str, generation_id: str, number: int, *,
                       storage_options: dict[str, str] | None = None) -> None:
    write_pointer(join_uri(segments_uri(kb_root, generation_id), LATEST_NAME), str(number), storage_options)


def load_segments(kb_root: str, generation_id: str, *, upto: int | None = None,
                  storage_options: dict[str, str] | None = None) -> list[SegmentManifest]:
    """Manifests of segments ``1..upto`` (default: the latest), oldest first."""
    upto = latest_segment(kb_root, generation_id, storage_options=storage_options) if upto is None else upto
    return [load_segment(kb_root, generation_id, number, storage_options=storage_options)
            for number in range(1, upto + 1)]


def load_segment(kb_root: str, generation_id: str, number: int, *,
                 storage_options: dict[str, str] | None = None) -> SegmentManifest:
    """The manifest of segment ``number``; FileNotFoundError when it was never published."""
    uri = join_uri(segments_uri(kb_root, generation_id), segment_name(number), MANIFEST_NAME)
    text = read_text_file(uri, storage_options)
    if text is None:
        raise FileNotFoundError(f"segment {number} of {generation_id} has no manifest at {uri}")
    return SegmentManifest.from_json(text)


def lineage_manifest(manifest: GenerationManifest, newest: SegmentManifest | None) -> GenerationManifest:
    """The manifest a hit's ``lineage`` names: the base's, with the catalog versions of the newest
    loaded segment when there is one (base + segments 1..n equal a build at those versions)."""
    if newest is None:
        return manifest
    return replace(manifest, catalog_versions={**manifest.catalog_versions, **newest.catalog_versions})


def local_segment_dir(kb_root: str, generation_id: str, segment: SegmentManifest, *,
                      storage_options: dict[str, str] | None = None) -> Path:
    uri = join_uri(segments_uri(kb_root, generation_id), segment.name)
    return local_copy(uri, f"{generation_id}-{segment.name}", storage_options=storage_options)


# -- statistics files --------------------------------------------------------------------


def save_statistics(folder: Path, statistics: dict[str, CorpusStatistics]) -> dict[str, dict[str, int]]:
    """Document frequencies as ``<channel>.terms.txt`` + ``<channel>.df.npy``; the counts for the manifest."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, stats in statistics.items():
        terms = sorted(stats.document_frequency)
        (folder / f"{name}.terms.txt").write_text("\n".join(terms), encoding="utf-8")
        np.save(folder / f"{name}.df.npy", np.array([stats.document_frequency[t] for t in terms], np.int64),
                allow_pickle=False)
    return {name: {"documents": stats.documents, "total_length": stats.total_length} for name, stats in statistics.items()}


def load_statistics(folder: Path, counts: dict[str, dict[str, int]]) -> dict[str, CorpusStatistics]:
    statistics = {}
    for name, count in counts.items():
        text = (folder / f"{name}.terms.txt").read_text(encoding="utf-8")
        terms = text.split("\n") if text else []
        df = np.load(folder / f"{name}.df.npy", allow_pickle=False).tolist()
        statistics[name] = CorpusStatistics.from_counts(dict(zip(terms, df)), count["documents"],
                                                        count["total_length"])
    return statistics


# -- which rows of base ∪ segments are current --------------------------------------------


def visible_masks(document_columns: list[list[pa.ChunkedArray]]) -> list[list[np.ndarray]]:
    """Per shard set (base first, then segments in order) and per shard: rows whose document
    no newer shard set holds. A newer set that holds a document holds all its current rows."""
    seen = pa.array([], pa.string())
    masks: list[list[np.ndarray]] = []
    for shard_set in reversed(document_columns):
        masks.append([~pc.is_in(column, value_set=seen).to_numpy(zero_copy_only=False).astype(bool)
                      if len(seen) else np.ones(len(column), bool) for column in shard_set])
        held = [pc.unique(column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column)
                for column in shard_set if len(column)]
        if held:
            seen = pc.unique(pa.concat_arrays([seen, *[a.cast(pa.string()) for a in held]]))
    return list(reversed(masks))
