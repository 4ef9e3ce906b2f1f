"""Small ingests without Ray: the pipeline's own steps (:func:`kb_ray.ingest.pipeline.ingest_steps`)
called one after another in the driver process.

For a handful of files, starting actor pools (a parser child and a model load per pool, Ray
Data's scheduling) costs far more than the work. With ``ingest.inline_max_docs`` set, an
ingest with at most that many files to process runs the same Ray-free stage classes here, on
the same batch sizes, and yields the same micro-batch rows for the driver to commit; the
catalog ends up identical (tests/ingest/test_inline.py). The stage objects — the parser's child
process, the loaded embedder — are kept between ingests of one process, so the next small
ingest of a long-running driver (``kb-ray watch``) starts at once. Pipelines with model stages
(Docling, captions, page embeddings) always run on Ray.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from kb_ray.config import KbConfig
from kb_ray.ingest.pipeline import StageSpec, ingest_steps
from kb_ray.ingest.record import SOURCE_RECORD, conform_record
from kb_ray.ingest.stages.base import StageStats

_kept: dict[str, tuple[str, Any]] = {}  # stage class -> (its settings, the stage): one of each per process


def runs_inline(config: KbConfig, *, documents: int) -> bool:
    """Whether an ingest of ``documents`` files to process runs in the driver."""
    model_stages = config.parse.docling.enabled or config.enrich.captions.enabled or config.pages.enabled
    return 0 < documents <= config.ingest.inline_max_docs and not model_stages


def run_inline(todo: pa.Table, *, config: KbConfig, run_id: str, pipeline_fp: str,
               stats: dict[str, StageStats]) -> Iterator[dict[str, Any]]:
    """The micro-batch rows (BATCH_RECORD) of ``todo``, as the Ray pipeline yields them; each
    stage call's statistics are added to ``stats``."""
    steps = ingest_steps(config, run_id=run_id, pipeline_fp=pipeline_fp)
    table = conform_record(todo, SOURCE_RECORD)
    for step in steps[:-1]:
        stages = [_stage(spec, run_id) for spec in step.stages]
        size = step.batch_size or step.resources.batch_size or max(table.num_rows, 1)
        table = pa.concat_tables([_apply(table.slice(offset, size), stages, stats)
                                  for offset in range(0, table.num_rows, size)])
    last = steps[-1]
    stages = [_stage(spec, run_id) for spec in last.stages]
    for offset in range(0, table.num_rows, last.batch_size or table.num_rows):
        yield from _apply(table.slice(offset, last.batch_size), stages, stats).to_pylist()


def _apply(batch: pa.Table, stages: list, stats: dict[str, StageStats]) -> pa.Table:
    for stage in stages:
        batch, called = stage.run(batch)
        if called.stage in stats:
            stats[called.stage].add(called)
        else:
            stats[called.stage] = called
    return batch


def _stage(spec: StageSpec, run_id: str):
    """The stage ``spec`` describes, kept from an earlier ingest when its settings are the same
    (the run id aside, which is set anew)."""
    cls, kwargs = spec
    settings = json.dumps({key: value for key, value in kwargs.items() if key != "run_id"}, sort_keys=True,
                          default=lambda value: value.model_dump(mode="json") if hasattr(value, "model_dump")
                          else repr(value))
    name = f"{cls.__module__}.{cls.__qualname__}"
    kept = _kept.get(name)
    if kept is None or kept[0] != settings:
        kept = _kept[name] = (settings, cls(**kwargs))
    stage = kept[1]
    if "run_id" in kwargs:
        stage.run_id = run_id
    return stage
