"""Resolve the metadata of a plan's documents on the driver (see :mod:`kb_ray.ingest.metadata`).

Files to process get their metadata resolved (front matter read from Markdown files, the
sidecar when one is listed). Unchanged files are read only when their ``meta_sha`` (source
settings + sidecar bytes) differs from the one stored in ``sources``: those become
metadata-only updates. A file whose sidecar or front matter is invalid leaves the plan and
becomes a failed row with reason ``bad_metadata``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from kb_ray.config import SourceSettings
from kb_ray.ingest.metadata import (
    DocumentMetadata,
    MetadataError,
    outside_fingerprint,
    read_document_metadata,
    sidecar_for,
)
from kb_ray.ingest.planning import IngestPlan
from kb_ray.outcomes import Reason

_PLAN_COLUMNS = ("collection", "uri", "key", "size", "mtime", "document_id", "prior_raw_sha", "prior_version_id")


@dataclass
class MetadataPlan:
    documents: dict[str, DocumentMetadata] = field(default_factory=dict)  # document_id -> metadata (todo)
    updates: dict[str, DocumentMetadata] = field(default_factory=dict)  # unchanged files, new metadata only
    failed: list[dict] = field(default_factory=list)  # plan rows failed with bad_metadata


def source_of(uri: str, collection: str, sources: list[SourceSettings], *, default_collection: str) -> SourceSettings:
    """The most specific source holding ``uri`` in ``collection``."""
    holding = [s for s in sources if (s.collection or default_collection) == collection
               and (uri == s.uri or uri.startswith(s.uri.rstrip("/") + "/"))]
    return max(holding, key=lambda s: len(s.uri), default=SourceSettings(uri=uri))


def resolve_plan_metadata(plan: IngestPlan, *, sources: list[SourceSettings], sidecars: set[str],
                          default_collection: str, storage_options: dict[str, str]) -> tuple[IngestPlan, MetadataPlan]:
    """The plan without its bad-metadata files, and what to write for the rest."""
    result = MetadataPlan()

    def resolve(row: dict, *, failed_keep: list[bool]) -> DocumentMetadata | None:
        source = source_of(row["uri"], row["collection"], sources, default_collection=default_collection)
        try:
            resolved = read_document_metadata(row["uri"], source=source, sidecar_uri=sidecar_for(row["uri"], sidecars),
                                              read_file=True, storage_options=storage_options)
        except MetadataError as exc:
            result.failed.append({**{k: row.get(k) for k in _PLAN_COLUMNS}, "action": "failed", "status": "failed",
                                  "reason": Reason.BAD_METADATA.value, "detail": str(exc), "notes": None})
            failed_keep.append(False)
            return None
        failed_keep.append(True)
        return resolved

    keep: list[bool] = []
    for row in plan.todo.select(list(_PLAN_COLUMNS)).to_pylist():
        resolved = resolve(row, failed_keep=keep)
        if resolved is not None:
            result.documents[row["document_id"]] = resolved
    todo = plan.todo.filter(pa.array(keep, pa.bool_())) if plan.todo.num_rows else plan.todo
    unchanged = _unchanged_with_meta_sha(plan.unchanged, sources=sources, sidecars=sidecars,
                                         default_collection=default_collection, resolve=resolve, result=result)
    return IngestPlan(todo=todo, unchanged=unchanged, vanished=plan.vanished), result


def _unchanged_with_meta_sha(unchanged: pa.Table, *, sources, sidecars, default_collection, resolve,
                             result: MetadataPlan) -> pa.Table:
    if not unchanged.num_rows:
        return unchanged.append_column("meta_sha", pa.array([], pa.string()))
    rows = unchanged.select(["collection", "uri", "key", "size", "mtime", "document_id", "raw_sha", "version_id",
                             "prior_meta_sha"]).to_pylist()
    shas, keep = [], []
    for row in rows:
        sidecar = sidecar_for(row["uri"], sidecars)
        source = source_of(row["uri"], row["collection"], sources, default_collection=default_collection)
        cheap = outside_fingerprint(source, None) if sidecar is None else None  # no sidecar: nothing to read
        if cheap is not None and cheap == row["prior_meta_sha"]:
            shas.append(cheap)
            keep.append(True)
            continue
        plan_row = {**row, "prior_raw_sha": row["raw_sha"], "prior_version_id": row["version_id"]}
        resolved = resolve(plan_row, failed_keep=keep)
        shas.append(resolved.meta_sha if resolved is not None else None)
        if resolved is not None and resolved.meta_sha != row["prior_meta_sha"]:
            result.updates[row["document_id"]] = resolved
    table = unchanged.append_column("meta_sha", pa.array(shas, pa.string()))
    return table.filter(pa.array(keep, pa.bool_()))


FAILED_SCHEMA = pa.schema([
    *[(name, pa.string()) for name in ("collection", "uri", "key")], ("size", pa.int64()),
    ("mtime", pa.timestamp("us", tz="UTC")),
    *[(name, pa.string()) for name in ("document_id", "prior_raw_sha", "prior_version_id", "action", "status",
                                       "reason", "detail")],
    ("notes", pa.list_(pa.string())),
])


def failed_rows_table(rows: list[dict]) -> pa.Table:
    """Bad-metadata rows as a table the committer's ``record_sources`` and ``log`` take."""
    return pa.Table.from_pylist(rows, schema=FAILED_SCHEMA)
