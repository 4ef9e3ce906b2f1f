"""FetchStage: read each source's bytes once, hash them, name the version they make.

SOURCE_RECORD → FETCHED_RECORD. The only stage that opens a source; everything after it
works on the ``data`` column. A source that cannot be read is ``status = failed`` with
reason ``unreadable``; the batch goes on.
"""

from __future__ import annotations

import time
from typing import Any

import fsspec
import pyarrow as pa

from kb_ray import ids
from kb_ray.catalog.storage import fsspec_options
from kb_ray.ingest.record import FETCHED_RECORD, conform_record
from kb_ray.ingest.stages.base import Stage
from kb_ray.outcomes import Reason


class FetchStage(Stage):
    name = "fetch"

    def __init__(self, *, storage_options: dict[str, str], pipeline_fp: str) -> None:
        self.storage_options = storage_options
        self.pipeline_fp = pipeline_fp

    def process(self, table: pa.Table) -> tuple[pa.Table, dict[str, int]]:
        rows = [self.fetch(row) for row in conform_record(table, FETCHED_RECORD).to_pylist()]
        unreadable = sum(1 for row in rows if row["status"] == "failed")
        return pa.Table.from_pylist(rows, schema=FETCHED_RECORD), {
            "bytes_read": sum(len(row["data"] or b"") for row in rows), "unreadable": unreadable}

    def fetch(self, row: dict[str, Any]) -> dict[str, Any]:
        started = time.perf_counter()
        try:
            with fsspec.open(row["uri"], "rb", **fsspec_options(row["uri"], self.storage_options)) as handle:
                data = handle.read()
        except (OSError, ValueError) as exc:
            return {**row, "data": None, "status": "failed", "reason": Reason.UNREADABLE.value,
                    "detail": f"{type(exc).__name__}: {exc}"[:500], "fetch_seconds": time.perf_counter() - started}
        raw_sha = ids.sha256_bytes(data)
        version_id = ids.version_id(document_id=row["document_id"], raw_sha=raw_sha, pipeline_fp=self.pipeline_fp)
        return {**row, "data": data, "raw_sha": raw_sha, "version_id": version_id, "size": len(data),
                "status": "ok", "fetch_seconds": time.perf_counter() - started}
