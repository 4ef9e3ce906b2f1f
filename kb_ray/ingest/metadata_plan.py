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
import pyarrow.compute as pc

from kb_ray.config import SourceSettings
from kb_ray.ingest.metadata import (
    SIDECAR_SUFFIXES,
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


@dataclass
class _Resolver:
    sources: list[SourceSettings]
    sidecars: set[str]
    default_collection: str
    storage_options: dict[str, str]
    result: MetadataPlan

    def resolve(self, row: dict) -> DocumentMetadata | None:
        """One file's metadata, or None after recording it as a ``bad_metadata`` failure."""
        source = source_of(row["uri"], row["collection"], self.sources, default_collection=self.default_collection)
        try:
            return read_document_metadata(row["uri"], source=source, sidecar_uri=sidecar_for(row["uri"], self.sidecars),
                                          read_file=True, storage_options=self.storage_options)
        except MetadataError as exc:
            self.result.failed.append({**{k: row.get(k) for k in _PLAN_COLUMNS}, "action": "failed",
                                       "status": "failed", "reason": Reason.BAD_METADATA.value, "detail": str(exc),
                                       "notes": None})
            return None

    def source_fingerprints(self, table: pa.Table) -> pa.Array:
        """Per row, the fingerprint of its source's settings without a sidecar (what
        :func:`source_of` picks: the longest holding URI, the first listed among equals)."""
        uri, collection = table.column("uri"), table.column("collection")
        shas = pa.repeat(pa.scalar(outside_fingerprint(SourceSettings(uri=""), None)), table.num_rows)
        ranked = sorted(enumerate(self.sources), key=lambda item: (len(item[1].uri), -item[0]))
        for _, source in ranked:  # a more specific source is applied later and wins
            inside = pc.and_(pc.equal(collection, source.collection or self.default_collection),
                             pc.or_(pc.equal(uri, source.uri), pc.starts_with(uri, source.uri.rstrip("/") + "/")))
            shas = pc.if_else(inside, outside_fingerprint(source, None), shas)
        return shas

    def has_sidecar(self, uri: pa.ChunkedArray) -> pa.ChunkedArray:
        listed = pa.array(sorted(self.sidecars), pa.string())
        found = [pc.is_in(pc.binary_join_element_wise(uri, suffix, ""), value_set=listed) for suffix in SIDECAR_SUFFIXES]
        return pc.or_(*found)


def resolve_plan_metadata(plan: IngestPlan, *, sources: list[SourceSettings], sidecars: set[str],
                          default_collection: str, storage_options: dict[str, str]) -> tuple[IngestPlan, MetadataPlan]:
    """The plan without its bad-metadata files, and what to write for the rest."""
    result = MetadataPlan()
    resolver = _Resolver(sources, sidecars, default_collection, storage_options, result)
    rows = plan.todo.select(list(_PLAN_COLUMNS)).to_pylist()
    resolved = [resolver.resolve(row) for row in rows]
    result.documents = {row["document_id"]: meta for row, meta in zip(rows, resolved) if meta is not None}
    todo = plan.todo.filter(pa.array([meta is not None for meta in resolved], pa.bool_())) if rows else plan.todo
    unchanged = _unchanged_with_meta_sha(plan.unchanged, resolver=resolver)
    return IngestPlan(todo=todo, unchanged=unchanged, vanished=plan.vanished), result


def _unchanged_with_meta_sha(unchanged: pa.Table, *, resolver: _Resolver) -> pa.Table:
    """Unchanged files with their ``meta_sha``. Files without a sidecar whose source fingerprint
    equals the stored one are settled with Arrow compute; only the rest (a sidecar, or new
    source settings) are read, and those whose fingerprint changed become updates."""
    if not unchanged.num_rows:
        return unchanged.append_column("meta_sha", pa.array([], pa.string()))
    source_shas = resolver.source_fingerprints(unchanged)
    settled = pc.and_(pc.invert(resolver.has_sidecar(unchanged.column("uri"))),
                      pc.fill_null(pc.equal(source_shas, unchanged.column("prior_meta_sha")), False))
    kept = unchanged.filter(settled).append_column("meta_sha", source_shas.filter(settled))
    rest = unchanged.filter(pc.invert(settled))
    shas, keep = [], []
    for row in rest.select(["collection", "uri", "key", "size", "mtime", "document_id", "raw_sha", "version_id",
                            "prior_meta_sha"]).to_pylist():
        resolved = resolver.resolve({**row, "prior_raw_sha": row["raw_sha"], "prior_version_id": row["version_id"]})
        shas.append(resolved.meta_sha if resolved is not None else None)
        keep.append(resolved is not None)
        if resolved is not None and resolved.meta_sha != row["prior_meta_sha"]:
            resolver.result.updates[row["document_id"]] = resolved
    rest = rest.append_column("meta_sha", pa.array(shas, pa.string())).filter(pa.array(keep, pa.bool_()))
    return pa.concat_tables([kept, rest])


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
