"""ModelParseStage: run the GPU model parser (Docling's ``docling_pdf``) ahead of parsing.

FETCHED_RECORD → FETCHED_RECORD with ``parsed_first`` set. Only when a model parser
heads a file's parser chain (``parse.docling.enabled``), in its own actor pool with
GPUs. For each fetched file the catalog does not hold yet it runs only that first
parser and hands the pickled :class:`~kb_ray.parsing.blocks.ParseResult` on; the CPU
:class:`~kb_ray.ingest.stages.parse.ParseStage` then structures and chunks it, or,
when the model parser failed (timeout, crash, missing weights), falls back to the next
parser of the chain (``pdf_text``). GPUs only run models; the bytes were read once, by
:class:`~kb_ray.ingest.stages.fetch.FetchStage`.
"""

from __future__ import annotations

import pickle
from typing import Any

import pyarrow as pa

from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.catalog.key_set import TableKeys
from kb_ray.config import CaptionSettings, ChunkingSettings, ParseSettings
from kb_ray.ingest.record import FETCHED_RECORD, with_columns
from kb_ray.ingest.stages.base import Stage
from kb_ray.ingest.stages.parse import known_versions, needs_parse
from kb_ray.processing import DocumentProcessor


class ModelParseStage(Stage):
    name = "model_parse"

    def __init__(self, *, kb_root: str, storage_options: dict[str, str], parse: ParseSettings,
                 chunking: ChunkingSettings, captions: CaptionSettings | None = None) -> None:
        self.catalog = DeltaCatalog.open(kb_root, storage_options=storage_options, create=False)
        self.router = DocumentProcessor(parse=parse, chunking=chunking, captions=captions).router
        self.keys = TableKeys(self.catalog)  # an actor lives one run: model stages never run inline

    def process(self, table: pa.Table) -> tuple[pa.Table, dict[str, int]]:
        rows = table.to_pylist()
        known = known_versions(self.catalog, [row["version_id"] for row in rows if row.get("version_id")],
                               keys=self.keys.of("versions", ["version_id"]))
        results = [self._parse_first(row) if needs_parse(row, known) else None for row in rows]
        ran = [result for result in results if result is not None]
        return with_columns(table, {"parsed_first": [pickle.dumps(r) if r else None for r in results]},
                            FETCHED_RECORD), {
            "model_parsed": len(ran), "model_failed": sum(1 for result in ran if result.status == "failed")}

    def _parse_first(self, row: dict[str, Any]) -> Any:
        filename = row["uri"].rsplit("/", 1)[-1]
        if self.router.model_parser_for(filename=filename) is None:
            return None
        return self.router.parse_first(row["data"], filename=filename)
