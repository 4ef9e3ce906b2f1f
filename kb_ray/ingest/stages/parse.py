"""ParseStage: parse, structure and chunk what the catalog does not hold yet.

FETCHED_RECORD → DOCUMENT_RECORD. Per row: a fetch failure stays failed; a version the
document already has is ``unchanged``; a version the catalog already holds (a rerun, or
another collection's identical file) is taken from the catalog; anything else is parsed
(continuing from ``parsed_first`` when the model-parse stage ran the chain's first
parser), its figure crops written to the blob store, and its catalog rows put in the
``*_ipc`` payload columns. A parse failure is ``status = failed`` with its reason code.
"""

from __future__ import annotations

import pickle
import time
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from kb_ray.catalog.blobs import BlobStore
from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.catalog.key_set import KeySet, RunKeys
from kb_ray.config import CaptionSettings, ChunkingSettings, ParseSettings
from kb_ray.ingest.record import DOCUMENT_RECORD
from kb_ray.ingest.rows import to_ipc, version_tables
from kb_ray.ingest.stages.base import Stage
from kb_ray.outcomes import Reason, render_error
from kb_ray.processing import DocumentProcessor

RENDERED_MIMES = frozenset({"application/pdf"})


def known_versions(catalog: DeltaCatalog, version_ids: list[str], *, keys: KeySet | None = None
                   ) -> dict[str, dict[str, Any]]:
    """Versions the catalog already holds (a rerun, or another collection's identical file).
    With ``keys`` (the ``versions`` key set) only the ids it holds are read from the table."""
    if keys is not None:
        version_ids = keys.held(version_ids)
    if not version_ids:
        return {}
    found = catalog.read("versions", columns=["version_id", "status", "reason", "error", "title", "mime", "n_chunks"],
                         filter=pc.field("version_id").isin(version_ids))
    return {row["version_id"]: row for row in found.to_pylist()}


def needs_parse(row: dict[str, Any], known: dict[str, dict[str, Any]]) -> bool:
    return row.get("data") is not None and row["version_id"] != row.get("prior_version_id") \
        and row["version_id"] not in known


class ParseStage(Stage):
    name = "parse"

    def __init__(self, *, kb_root: str, storage_options: dict[str, str], parse: ParseSettings,
                 chunking: ChunkingSettings, run_id: str, keep_raw_for_pages: bool = False,
                 captions: CaptionSettings | None = None) -> None:
        self.catalog = DeltaCatalog.open(kb_root, storage_options=storage_options, create=False)
        self.figures = BlobStore(kb_root, kind="figures", storage_options=storage_options)
        self.keep_raw_for_pages = keep_raw_for_pages
        self.processor = DocumentProcessor(parse=parse, chunking=chunking, captions=captions)
        self.run_id = run_id
        self._run_keys = RunKeys(self.catalog)  # the versions key set: a lookup never scans the table

    def process(self, table: pa.Table) -> tuple[pa.Table, dict[str, int]]:
        rows = table.to_pylist()
        keys = self._run_keys.of_run(self.run_id).of("versions", ["version_id"])
        known = known_versions(self.catalog, [row["version_id"] for row in rows if row.get("version_id")], keys=keys)
        out = [self._document(row, known) for row in rows]
        parsed = [row for row in out if row["parsed"]]
        # the schema, not the first row, names the columns: a first row that failed to fetch has no payload
        return pa.Table.from_pylist(out, schema=DOCUMENT_RECORD), {
            "parsed": len(parsed), "parse_failed": sum(1 for row in parsed if row["status"] == "failed"),
            "fallbacks": sum(1 for row in parsed if row["status"] == "ok" and row["fallback_from"]),
            "known_versions": sum(1 for row in out if row["action"] != "unchanged" and not row["parsed"]
                                  and row["version_id"] in known)}

    def _document(self, row: dict[str, Any], known: dict[str, dict[str, Any]]) -> dict[str, Any]:
        started = time.perf_counter()
        doc = {key: row.get(key) for key in DOCUMENT_RECORD.names if key in row}
        doc.update(parsed=False, parse_seconds=0.0, n_chunks=0, n_pages=0, notes=[])
        new_action = "changed" if row.get("prior_version_id") else "new"
        if row["status"] == "failed":
            doc.update(action="failed", version_id=None)
        elif row["version_id"] == row.get("prior_version_id"):
            doc.update(action="unchanged", status="ok")
        elif row["version_id"] in known:
            doc.update(_from_catalog(known[row["version_id"]], new_action))
        else:
            doc.update(self._parse(row, new_action))
        doc["total_seconds"] = (row.get("fetch_seconds") or 0.0) + time.perf_counter() - started
        return doc

    def _parse(self, row: dict[str, Any], new_action: str) -> dict[str, Any]:
        parsed_first = pickle.loads(row["parsed_first"]) if row.get("parsed_first") else None
        version = self.processor.process(row["data"], collection=row["collection"], key=row["key"],
                                         filename=row["uri"].rsplit("/", 1)[-1], parsed_first=parsed_first)
        for sha, png in version.images.items():
            self.figures.put(sha, png)
        tables = version_tables(version, fingerprints=self.processor.fingerprints, run_id=self.run_id,
                                now=datetime.now(timezone.utc))
        failed = version.status == "failed"
        out: dict[str, Any] = {f"{name}_ipc": to_ipc(table) for name, table in tables.items()}
        out.update(action="failed" if failed else new_action, status="failed" if failed else "ok",
                   reason=version.reason, detail=version.detail or None, notes=list(version.notes),
                   fallback_from=None if failed else version.fallback_from, title=version.title,
                   mime=version.mime, parsed=True, parse_seconds=version.stats.get("parse_seconds", 0.0),
                   n_chunks=len(version.chunks), n_pages=len(version.pages))
        if self.keep_raw_for_pages and not failed and version.mime in RENDERED_MIMES and version.pages:
            out["raw"] = row["data"]  # the page renderer needs the bytes; it drops them
        return out


def _from_catalog(prior: dict[str, Any], new_action: str) -> dict[str, Any]:
    """A version another run (or collection) already parsed: its recorded outcome."""
    common = {"title": prior["title"], "mime": prior["mime"], "n_chunks": prior["n_chunks"]}
    if prior["status"] != "failed":
        return {**common, "action": new_action, "status": "ok"}
    reason = prior.get("reason") or Reason.UNKNOWN.value
    return {**common, "action": "failed", "status": "failed", "reason": reason,
            "detail": f"parsed before, and failed: {prior['error'] or render_error(reason, None)}"}
