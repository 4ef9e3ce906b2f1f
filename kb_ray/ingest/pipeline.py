"""The one place that wires the ingest pipeline onto Ray Data.

Concurrency, CPUs, GPUs and batch sizes of every stage come from config here and nowhere
else. On a 2-core laptop the default gives each actor pool half a CPU, so the pools never
take every CPU and starve the tasks that feed them (a deadlock seen with 2 actors × 1 CPU).
"""

from __future__ import annotations

import logging

import pyarrow as pa

from kb_ray.config import KbConfig, StageSettings

logger = logging.getLogger(__name__)


def build_ingest_dataset(todo: pa.Table, *, config: KbConfig, run_id: str):
    """todo rows → [model parse: Docling, when ``parse.docling.enabled`` (GPU actor pool)] →
    parse, structure, chunk (CPU actor pool) → [caption figures, when
    ``enrich.captions.enabled`` (actor pool, GPU for in-process models)] → [render pages →
    page-embed (actor pools), when ``pages.enabled``] → embed + write data files (embedding
    actor pool).

    The output has one row per micro-batch for the driver to commit."""
    import ray

    from kb_ray.ingest.stages import EmbedWriteStage, ParseStage

    blocks = max(1, min(todo.num_rows // max(1, config.ray.parse.batch_size), 256))
    dataset = ray.data.from_arrow([todo.slice(offset, length) for offset, length in _slices(todo.num_rows, blocks)])
    storage = {"kb_root": config.kb_root, "storage_options": config.storage_options}
    processing = {"parse": config.parse, "chunking": config.chunking, "captions": config.enrich.captions}
    if config.parse.docling.enabled:
        from kb_ray.ingest.model_parse_stage import ModelParseStage

        dataset = _actor_stage(dataset, ModelParseStage, config.ray.model_parse, {**storage, **processing})
    dataset = _actor_stage(dataset, ParseStage, config.ray.parse, {
        **storage, **processing, "run_id": run_id, "keep_raw_for_pages": config.pages.enabled})
    if config.enrich.captions.enabled:
        from kb_ray.ingest.caption_stage import CaptionStage

        dataset = _actor_stage(dataset, CaptionStage, config.ray.caption, {
            **storage, "captions": config.enrich.captions, "run_id": run_id})
    if config.pages.enabled:
        from kb_ray.ingest.page_stages import PageEmbedStage, RenderStage

        for stage, resources in ((RenderStage, config.ray.render), (PageEmbedStage, config.ray.page_embed)):
            dataset = _actor_stage(dataset, stage, resources, {**storage, "pages": config.pages})
    return _actor_stage(dataset, EmbedWriteStage, config.ray.embed, {**storage, "embedding": config.embedding},
                        batch_size=config.ingest.micro_batch_docs)  # one output row = one committed micro-batch


def _actor_stage(dataset, stage: type, resources: StageSettings, kwargs: dict, *, batch_size: int | None = None):
    """``map_batches`` with a stage class as an actor pool sized by its ``StageSettings``."""
    from ray.data import ActorPoolStrategy

    return dataset.map_batches(
        stage, batch_format="pyarrow", batch_size=batch_size or resources.batch_size,
        compute=ActorPoolStrategy(size=resources.concurrency), num_cpus=resources.num_cpus,
        num_gpus=resources.num_gpus, fn_constructor_kwargs=kwargs)


def _slices(total: int, parts: int) -> list[tuple[int, int]]:
    size = -(-total // parts) if total else 0
    return [(offset, min(size, total - offset)) for offset in range(0, total, size)] if size else [(0, 0)]
