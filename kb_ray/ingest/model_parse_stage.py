"""The GPU model-parse stage, as a plain class over Arrow batches (no Ray import).

When a model parser (Docling's layout + TableFormer pipeline, ``docling_pdf``) heads a
file's parser chain, it runs here, in its own actor pool with GPUs, ahead of the CPU
:class:`~kb_ray.ingest.stages.ParseStage`. This stage fetches every file of the batch
(it needs the bytes and the version id anyway), runs only the model parser on files
the catalog does not hold yet, and hands the bytes and the pickled
:class:`~kb_ray.parsing.blocks.ParseResult` on. ParseStage then structures and chunks
that result, or, when the model parser failed (timeout, crash, missing weights), falls
back to the next parser of the chain (``pdf_text``) on its CPUs. So GPUs only run
models, and CPU work never waits behind them.
"""

from __future__ import annotations

import pickle
from typing import Any

import pyarrow as pa

from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.config import CaptionSettings, ChunkingSettings, ParseSettings
from kb_ray.ingest.rows import replace_column
from kb_ray.ingest.stages import (
    FETCH_COLUMNS,
    fetch_source,
    known_versions,
    needs_parse,
)
from kb_ray.processing import DocumentProcessor


class ModelParseStage:
    def __init__(self, *, kb_root: str, storage_options: dict[str, str], parse: ParseSettings,
                 chunking: ChunkingSettings, captions: CaptionSettings | None = None) -> None:
        self.catalog = DeltaCatalog.open(kb_root, storage_options=storage_options, create=False)
        self.storage_options = storage_options
        self.processor = DocumentProcessor(parse=parse, chunking=chunking, captions=captions)

    def __call__(self, batch: pa.Table) -> pa.Table:
        fetched = [fetch_source(row, storage_options=self.storage_options, pipeline_fp=self.processor.pipeline_fp)
                   for row in batch.to_pylist()]
        known = known_versions(self.catalog, [row["version_id"] for row in fetched if row.get("version_id")])
        results = [self._parse_first(row) if needs_parse(row, known) else None for row in fetched]
        for name, typ in FETCH_COLUMNS.items():
            batch = replace_column(batch, name, [row.get(name) for row in fetched], typ)
        return replace_column(batch, "parsed_first", results, pa.binary())

    def _parse_first(self, row: dict[str, Any]) -> bytes | None:
        router, filename = self.processor.router, row["uri"].rsplit("/", 1)[-1]
        if router.model_parser_for(filename=filename) is None:
            return None
        return pickle.dumps(router.parse_first(row["data"], filename=filename))
