"""The one place that wires the ingest stages onto Ray Data.

Concurrency, CPUs, GPUs and batch sizes of every stage come from config here and nowhere
else. On a 2-core laptop the default gives each actor pool half a CPU, so the pools never
take every CPU and starve the tasks that feed them (a deadlock seen with 2 actors × 1 CPU).

Each stage is a Ray-free class (:mod:`kb_ray.ingest.stages`); :class:`StageActor` is the
thin adapter Ray Data runs as an actor pool: it calls ``stage.run(batch)``, returns the
table to Ray Data and sends the :class:`~kb_ray.ingest.stages.base.StageStats` to the
run's :class:`StageStatsCollector` (a small named actor the driver reads at the end).
Fetch runs in the same actor as the stage after it (model parse or parse), so bytes are
read once and no extra pool takes a CPU.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from kb_ray.catalog.storage import is_local, normalize_root
from kb_ray.config import KbConfig, StageSettings
from kb_ray.ingest.record import SOURCE_RECORD, conform_record
from kb_ray.ingest.stages.base import StageStats

logger = logging.getLogger(__name__)
StageSpec = tuple[type, dict[str, Any]]  # a stage class and its constructor's keyword arguments


class StageStatsCollector:
    """Sums the statistics every stage call reports (one named actor per run)."""

    def __init__(self) -> None:
        self.totals: dict[str, StageStats] = {}

    def add(self, stats: StageStats) -> None:
        if stats.stage in self.totals:
            self.totals[stats.stage].add(stats)
        else:
            self.totals[stats.stage] = stats

    def result(self) -> dict[str, StageStats]:
        return self.totals


class StageActor:
    """Ray adapter: runs Ray-free stages in order on each batch, statistics to the collector."""

    def __init__(self, *, stages: list[StageSpec], collector: str) -> None:
        import ray

        self.stages = [stage(**kwargs) for stage, kwargs in stages]
        self.collector = ray.get_actor(collector)

    def __call__(self, batch: pa.Table) -> pa.Table:
        import ray

        for stage in self.stages:
            batch, stats = stage.run(batch)
            ray.get(self.collector.add.remote(stats))  # delivered before the batch moves on
        return batch


def start_stats_collector(run_id: str):
    """The run's :class:`StageStatsCollector` actor (its name is ``stage_stats:{run_id}``)."""
    import ray

    return ray.remote(num_cpus=0)(StageStatsCollector).options(name=f"stage_stats:{run_id}").remote()


@dataclass(frozen=True)
class Step:
    """One actor pool of the pipeline: the Ray-free stages it runs in order on each batch, its
    resources, and its batch size in rows (``None``: the resources' own)."""

    stages: list[StageSpec]
    resources: StageSettings
    batch_size: int | None = None


def ingest_steps(config: KbConfig, *, run_id: str, pipeline_fp: str) -> list[Step]:
    """todo rows → fetch → [model parse: Docling, when ``parse.docling.enabled`` (GPU actor
    pool)] → parse, structure, chunk (CPU actor pool) → [caption figures, when
    ``enrich.captions.enabled`` (actor pool, GPU for in-process models)] → [render pages →
    page-embed (actor pools), when ``pages.enabled``] → [concepts, when ``ingest.concepts``] →
    embed + write data files (embedding actor pool; one output row = one micro-batch,
    BATCH_RECORD, for the driver to commit)."""
    from kb_ray.index.vector_layout import VectorLayout
    from kb_ray.ingest.stages.embed_write import EmbedWriteStage
    from kb_ray.ingest.stages.fetch import FetchStage
    from kb_ray.ingest.stages.parse import ParseStage

    storage = {"kb_root": config.kb_root, "storage_options": config.storage_options}
    processing = {"parse": config.parse, "chunking": config.chunking, "captions": config.enrich.captions}
    fetch: list[StageSpec] = [(FetchStage, {"storage_options": config.storage_options, "pipeline_fp": pipeline_fp,
                                            "local_roots": local_source_roots(config.ingest.source_uris),
                                            "follow_symlinks": config.ingest.follow_symlinks,
                                            "raw_blobs": _raw_blobs(config)})]
    steps = []
    if config.parse.docling.enabled:
        from kb_ray.ingest.stages.model_parse import ModelParseStage

        steps.append(Step(fetch + [(ModelParseStage, {**storage, **processing})], config.ray.model_parse))
        fetch = []  # fetched in the model-parse pool
    steps.append(Step(fetch + [(ParseStage, {**storage, **processing, "run_id": run_id,
                                             "keep_raw_for_pages": config.pages.enabled})], config.ray.parse))
    if config.enrich.captions.enabled:
        from kb_ray.ingest.stages.caption import CaptionStage

        steps.append(Step([(CaptionStage, {**storage, "captions": config.enrich.captions, "run_id": run_id})],
                          config.ray.caption))
    if config.pages.enabled:
        from kb_ray.ingest.stages.page_embed import PageEmbedStage
        from kb_ray.ingest.stages.render import RenderStage

        for stage, resources in ((RenderStage, config.ray.render), (PageEmbedStage, config.ray.page_embed)):
            steps.append(Step([(stage, {**storage, "pages": config.pages})], resources))
    last: list[StageSpec] = [(EmbedWriteStage, {**storage, "embedding": config.embedding, "run_id": run_id,
                                                "vector_layout": VectorLayout.from_settings(config.index)})]
    if extracts_concepts(config):  # cheap and model-free: in the embedding pool, on the micro-batch
        from kb_ray.ingest.stages.concepts import ConceptStage

        last.insert(0, (ConceptStage, {}))
    steps.append(Step(last, config.ray.embed, batch_size=config.ingest.micro_batch_docs))
    return steps


def extracts_concepts(config: KbConfig) -> bool:
    """``ingest.concepts``, which follows ``index.graph`` unless set."""
    return config.index.graph if config.ingest.concepts is None else config.ingest.concepts


def build_ingest_dataset(todo: pa.Table, *, config: KbConfig, run_id: str, pipeline_fp: str):
    """The :func:`ingest_steps` as Ray Data actor pools over ``todo``; one output row per
    micro-batch (BATCH_RECORD) for the driver to commit."""
    import ray

    todo = conform_record(todo, SOURCE_RECORD)
    blocks = max(1, min(todo.num_rows // max(1, config.ray.parse.batch_size), 256))
    dataset = ray.data.from_arrow([todo.slice(offset, length) for offset, length in _slices(todo.num_rows, blocks)])
    collector = f"stage_stats:{run_id}"
    for step in ingest_steps(config, run_id=run_id, pipeline_fp=pipeline_fp):
        dataset = _actor_stage(dataset, step.stages, step.resources, collector, batch_size=step.batch_size)
    return dataset


def _raw_blobs(config: KbConfig):
    """The raw blob store the fetch stage keeps source bytes in (``ingest.keep_raw``), else None."""
    from kb_ray.catalog.blobs import BlobStore

    if not config.ingest.keep_raw:
        return None
    return BlobStore(config.kb_root, kind="raw", storage_options=config.storage_options)


def local_source_roots(sources: list[str]) -> list[str]:
    """The local sources' directories (a file source: its directory), for the fetch stage's
    outside-the-sources check."""
    roots = []
    for source in sources:
        if is_local(source):
            path = normalize_root(source)
            roots.append(path if os.path.isdir(path) else os.path.dirname(path))
    return roots


def _actor_stage(dataset, stages: list[StageSpec], resources: StageSettings, collector: str, *,
                 batch_size: int | None = None):
    """``map_batches`` with a :class:`StageActor` pool sized by the stage's ``StageSettings``.
    The actor class is named after its last (main) stage, so Ray's dashboard and
    ``ray list actors`` say ``ParseStage`` rather than ``StageActor``."""
    from ray.data import ActorPoolStrategy

    name = stages[-1][0].__name__  # a qualname no module holds, so cloudpickle ships the class by value
    actor = type(name, (StageActor,), {"__qualname__": f"StageActor.{name}"})
    return dataset.map_batches(
        actor, batch_format="pyarrow", batch_size=batch_size or resources.batch_size,
        compute=ActorPoolStrategy(size=resources.concurrency), num_cpus=resources.num_cpus,
        num_gpus=resources.num_gpus, fn_constructor_kwargs={"stages": stages, "collector": collector})


def _slices(total: int, parts: int) -> list[tuple[int, int]]:
    size = -(-total // parts) if total else 0
    return [(offset, min(size, total - offset)) for offset in range(0, total, size)] if size else [(0, 0)]
