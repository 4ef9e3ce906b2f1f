"""A generation's base shards plus its delta segments as one list of searchable shards.

Every shard keeps its own hydration, FAISS and BM25 files; what changes when segments
are attached (kb_ray/index/segments.py): shards are renumbered by position (base first,
then each segment's), rows of documents that a newer segment holds are hidden (the
``visible`` mask, ANDed into the gate), and every BM25 index is re-weighted with the
newest segment's statistics, so scores equal those of a full build at the versions that
segment covers. Loaded segment shards are kept, so a refresh loads only new segments.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from kb_ray.config import KbConfig
from kb_ray.index.manifest import GenerationManifest
from kb_ray.index.segments import (
    STATISTICS_DIR,
    SegmentManifest,
    load_segments,
    load_statistics,
    local_segment_dir,
    visible_masks,
)
from kb_ray.search.shard import SearchShard

logger = logging.getLogger(__name__)


@dataclass
class SegmentSets:
    """The raw (as loaded) shards of the base and of each loaded segment."""

    base: list[SearchShard]
    segments: list[SegmentManifest] = field(default_factory=list)
    raw: list[list[SearchShard]] = field(default_factory=list)

    @property
    def number(self) -> int:
        return self.segments[-1].segment if self.segments else 0


def attach_segments(config: KbConfig, manifest: GenerationManifest, sets: SegmentSets,
                    *, upto: int) -> tuple[SegmentSets, list[SearchShard]]:
    """Load segments ``sets.number+1..upto`` and return the searchable shards of base ∪ segments."""
    root, options = config.kb_root, config.storage_options
    new = load_segments(root, manifest.generation_id, upto=upto, storage_options=options)[sets.number:]
    raw = list(sets.raw)
    for segment in new:
        folder = local_segment_dir(root, manifest.generation_id, segment, storage_options=options)
        raw.append([SearchShard.load(folder, info, manifest.lexical_type) for info in segment.shards])
    sets = SegmentSets(sets.base, sets.segments + new, raw)
    if not sets.segments:
        return sets, sets.base
    return sets, _placed(config, manifest, sets)


def _placed(config: KbConfig, manifest: GenerationManifest, sets: SegmentSets) -> list[SearchShard]:
    groups = [sets.base, *sets.raw]
    visible = visible_masks([[shard.hydration.column("document_id") for shard in group] for group in groups])
    statistics = _statistics(config, manifest, sets.segments[-1])
    shards, position = [], 0
    for group, masks in zip(groups, visible):
        for shard, mask in zip(group, masks):
            lexical = shard.lexical_index
            if statistics is not None and lexical is not None:
                lexical = lexical.reweighted(statistics)
            shards.append(shard.placed(position, lexical=lexical, visible=None if mask.all() else mask))
            position += 1
    logger.info("generation %s with %d segments: %d shards", manifest.generation_id, len(sets.segments), len(shards))
    return shards


def _statistics(config: KbConfig, manifest: GenerationManifest, segment: SegmentManifest):
    if manifest.lexical_type != "bm25" or not segment.statistics:
        return None
    folder = local_segment_dir(config.kb_root, manifest.generation_id, segment, storage_options=config.storage_options)
    return load_statistics(folder / STATISTICS_DIR, segment.statistics)
