"""Inputs for the Ray-free stage tests: a SOURCE_RECORD table of real files and a config."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa

from kb_ray import ids
from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.config import KbConfig
from kb_ray.ingest.record import SOURCE_RECORD
from kb_ray.processing import DocumentProcessor
from tests.ingest.helpers import ingest_config

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


def source_table(paths: list[Path], *, collection: str = "c", prior: dict[str, str] | None = None) -> pa.Table:
    """One SOURCE_RECORD row per path (the file need not exist: a missing one is unreadable)."""
    rows = [{"collection": collection, "uri": str(path), "key": path.name, "size": None, "mtime": NOW,
             "document_id": ids.document_id(collection=collection, key=path.name),
             "prior_version_id": (prior or {}).get(path.name)} for path in paths]
    return pa.Table.from_pylist(rows, schema=SOURCE_RECORD)


def stage_config(tmp_path: Path, *extra: str) -> tuple[KbConfig, DeltaCatalog]:
    """A config rooted in ``tmp_path/kb`` and its freshly created catalog."""
    config = ingest_config(tmp_path / "kb", [tmp_path], *extra)
    return config, DeltaCatalog.open(config.kb_root)


def pipeline_fp(config: KbConfig) -> str:
    return DocumentProcessor(parse=config.parse, chunking=config.chunking, captions=config.enrich.captions).pipeline_fp


def storage(config: KbConfig) -> dict:
    return {"kb_root": config.kb_root, "storage_options": config.storage_options}
