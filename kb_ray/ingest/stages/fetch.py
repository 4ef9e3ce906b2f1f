"""FetchStage: read each source's bytes once, hash them, name the version they make.

SOURCE_RECORD → FETCHED_RECORD. The only stage that opens a source; everything after it
works on the ``data`` column. A source that cannot be read is ``status = failed`` with
reason ``unreadable``; the batch goes on. The bytes are read from ``location`` when a row
has one (an upload's raw blob), else from ``uri``. With ``raw_blobs`` (``ingest.keep_raw``)
they are also stored content-addressed in ``blobs/raw`` (named by ``raw_sha``).
"""

from __future__ import annotations

import os
import time
from typing import Any

import fsspec
import pyarrow as pa

from kb_ray import ids
from kb_ray.catalog.blobs import BlobStore
from kb_ray.catalog.storage import fsspec_options, is_local, local_path
from kb_ray.ingest.record import FETCHED_RECORD, conform_record
from kb_ray.ingest.stages.base import Stage
from kb_ray.outcomes import Reason


class FetchStage(Stage):
    name = "fetch"

    def __init__(self, *, storage_options: dict[str, str], pipeline_fp: str, local_roots: list[str] | None = None,
                 follow_symlinks: bool = False, raw_blobs: BlobStore | None = None) -> None:
        """``local_roots``: the local source directories; a local file whose real path (symlinks
        resolved) lies outside all of them fails with reason ``outside_source`` unless
        ``follow_symlinks`` (``ingest.follow_symlinks``)."""
        self.storage_options = storage_options
        self.pipeline_fp = pipeline_fp
        self.local_roots = [os.path.realpath(root) for root in local_roots or []]
        self.follow_symlinks = follow_symlinks
        self.raw_blobs = raw_blobs

    def process(self, table: pa.Table) -> tuple[pa.Table, dict[str, int]]:
        rows = [self.fetch(row) for row in conform_record(table, FETCHED_RECORD).to_pylist()]
        reasons = [row["reason"] for row in rows if row["status"] == "failed"]
        counts = {"bytes_read": sum(len(row["data"] or b"") for row in rows),
                  "unreadable": reasons.count(Reason.UNREADABLE.value)}
        for reason in (Reason.OUTSIDE_SOURCE, Reason.INVALID_NAME):
            if reason.value in reasons:
                counts[reason.value] = reasons.count(reason.value)
        return pa.Table.from_pylist(rows, schema=FETCHED_RECORD), counts

    def fetch(self, row: dict[str, Any]) -> dict[str, Any]:
        started = time.perf_counter()
        escape = self._outside_sources(row["uri"])
        if escape is not None:
            return {**row, "data": None, "status": "failed", "reason": Reason.OUTSIDE_SOURCE.value,
                    "detail": escape, "fetch_seconds": time.perf_counter() - started}
        if _undecodable_local_name(row["uri"]):
            return {**row, "data": None, "status": "failed", "reason": Reason.INVALID_NAME.value,
                    "detail": f"the file name is not UTF-8 (its undecodable bytes are shown as U+FFFD): {row['uri']}; "
                              "rename it to ingest it", "fetch_seconds": time.perf_counter() - started}
        where = row.get("location") or row["uri"]
        try:
            with fsspec.open(where, "rb", **fsspec_options(where, self.storage_options)) as handle:
                data = handle.read()
        except (OSError, ValueError) as exc:
            return {**row, "data": None, "status": "failed", "reason": Reason.UNREADABLE.value,
                    "detail": f"{type(exc).__name__}: {exc}"[:500], "fetch_seconds": time.perf_counter() - started}
        raw_sha = ids.sha256_bytes(data)
        if self.raw_blobs is not None:
            self.raw_blobs.put(raw_sha, data)
        version_id = ids.version_id(document_id=row["document_id"], raw_sha=raw_sha, pipeline_fp=self.pipeline_fp)
        return {**row, "data": data, "raw_sha": raw_sha, "version_id": version_id, "size": len(data),
                "status": "ok", "fetch_seconds": time.perf_counter() - started}

    def _outside_sources(self, uri: str) -> str | None:
        """Why a local file may not be read (its real path is outside every source root), else None."""
        if self.follow_symlinks or not self.local_roots or not is_local(uri):
            return None
        real = os.path.realpath(local_path(uri))
        if any(real == root or real.startswith(root.rstrip(os.sep) + os.sep) for root in self.local_roots):
            return None
        return f"{uri} resolves to {real}, outside the source directories (ingest.follow_symlinks allows it)"


def _undecodable_local_name(uri: str) -> bool:
    """A listed local name that was not UTF-8 (see ``listing.printable_name``): its U+FFFD
    stands for bytes it does not have, so no file of that name exists."""
    return "\ufffd" in uri and is_local(uri) and not os.path.lexists(local_path(uri))
