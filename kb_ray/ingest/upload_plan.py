"""Plan an ingest of uploaded files (``POST /v1/documents``, docs/upload.md) with the batch planner.

An upload is not listed from a source: each file arrives as an :class:`UploadedFile` (its
document ``uri``, ``upload://<collection>/<name>``, and the raw blob its bytes are in). The
files become a listing table (``key`` = ``uri``, ``mtime`` = when it was uploaded), which
:func:`~kb_ray.ingest.planning.plan_ingest` diffs against the catalog as it does a listed
source; the blob goes along as ``location``, where the fetch stage reads the bytes. Nothing
vanishes: an upload names the files it adds, never the ones it leaves out.

Metadata layers as in kb_ray/ingest/metadata.py: a Markdown file's front matter, then the
form's ``tags``, ``acl`` and ``metadata`` (a field the form leaves empty keeps the front
matter's). Invalid front matter fails the file with reason ``bad_metadata``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pyarrow as pa

from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.catalog.storage import fsspec_filesystem
from kb_ray.config import SourceSettings
from kb_ray.ingest.listing import LISTING_SCHEMA
from kb_ray.ingest.metadata import (
    FRONT_MATTER_MAX_BYTES,
    FRONT_MATTER_SUFFIXES,
    DocumentMetadata,
    MetadataError,
    outside_fingerprint,
    parse_front_matter,
    resolve,
)
from kb_ray.ingest.metadata_plan import MetadataPlan
from kb_ray.ingest.planning import IngestPlan, plan_ingest
from kb_ray.outcomes import Reason

UPLOAD_SCHEME = "upload://"


@dataclass(frozen=True)
class UploadedFile:
    """One uploaded file to ingest: where its document lives and where its bytes are."""

    collection: str
    name: str  # the sanitized display name (kb_ray/ingest/uploads.py)
    location: str  # the raw blob holding the bytes
    size: int
    uploaded_at: datetime
    tags: list[str] = field(default_factory=list)
    acl: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def uri(self) -> str:
        return upload_uri(collection=self.collection, name=self.name)

    def form_layer(self) -> dict[str, Any]:
        """The form's fields that were given (non-empty), as a metadata layer."""
        layer = {"tags": list(self.tags), "acl": list(self.acl), "metadata": dict(self.metadata)}
        return {key: value for key, value in layer.items() if value}

    def settings(self) -> SourceSettings:
        return SourceSettings(uri=self.uri, collection=self.collection, tags=list(self.tags), acl=list(self.acl),
                              metadata=dict(self.metadata))


def upload_uri(*, collection: str, name: str) -> str:
    """The stable document URI of an upload: the same name in the same collection is the same document."""
    return f"{UPLOAD_SCHEME}{collection}/{name}"


def plan_uploads(files: list[UploadedFile], *, catalog: DeltaCatalog, pipeline_fp: str,
                 storage_options: dict[str, str]) -> tuple[IngestPlan, MetadataPlan]:
    """The plan of ``files`` (one per document URI) and their documents' metadata."""
    by_uri = {upload.uri: upload for upload in files}
    listing = pa.Table.from_pylist([{
        "collection": f.collection, "uri": f.uri, "key": f.uri, "relative_path": f.name, "size": f.size,
        "mtime": f.uploaded_at} for f in by_uri.values()], schema=LISTING_SCHEMA)
    plan = plan_ingest(listing, catalog=catalog, collection=files[0].collection, pipeline_fp=pipeline_fp,
                       roots=())  # no listed root: nothing vanishes
    todo = plan.todo.append_column("location", pa.array([by_uri[uri].location for uri in
                                                         plan.todo.column("uri").to_pylist()], pa.string()))
    unchanged = plan.unchanged.append_column("meta_sha", plan.unchanged.column("prior_meta_sha"))
    metadata = MetadataPlan()
    keep = []
    for row in todo.select(["collection", "uri", "key", "size", "mtime", "document_id", "prior_raw_sha",
                            "prior_version_id"]).to_pylist():
        resolved = _resolve(by_uri[row["uri"]], storage_options=storage_options, row=row, result=metadata)
        keep.append(resolved is not None)
        if resolved is not None:
            metadata.documents[row["document_id"]] = resolved
    todo = todo.filter(pa.array(keep, pa.bool_())) if keep else todo
    return IngestPlan(todo=todo, unchanged=unchanged, vanished=plan.vanished.slice(0, 0)), metadata


def _resolve(upload: UploadedFile, *, storage_options: dict[str, str], row: dict,
             result: MetadataPlan) -> DocumentMetadata | None:
    """The file's metadata, or None after recording it as a ``bad_metadata`` failure."""
    layers = [upload.form_layer()]
    try:
        if upload.name.lower().endswith(FRONT_MATTER_SUFFIXES):
            layers.insert(0, parse_front_matter(_head(upload.location, storage_options), uri=upload.uri))
    except MetadataError as exc:
        result.failed.append({**row, "action": "failed", "status": "failed", "reason": Reason.BAD_METADATA.value,
                              "detail": str(exc), "notes": None})
        return None
    return resolve(SourceSettings(uri=upload.uri), layers,
                   meta_sha=outside_fingerprint(upload.settings(), None))


def _head(location: str, storage_options: dict[str, str]) -> bytes:
    fs, path = fsspec_filesystem(location, storage_options)
    with fs.open(path, "rb") as handle:
        return handle.read(FRONT_MATTER_MAX_BYTES)
