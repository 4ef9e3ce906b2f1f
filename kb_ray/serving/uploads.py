"""Uploads and deletes over HTTP inside the ingress (docs/upload.md); the queue and the ingest
step are kb_ray/ingest/uploads.py.

* ``POST /v1/documents`` — :meth:`UploadService.upload` reads the multipart form, refuses a
  bad name or field (400), a collection outside the caller's tenant (403), a type no parser
  takes (415), stores the bytes as raw blobs, queues the files and wakes the worker. The form
  parser spools each file to a temporary file past 1 MiB and the blob store copies it from
  there in pieces, so an upload is never whole in memory; its body must arrive within
  ``serve.upload_read_timeout_s`` with no pause over ``serve.body_idle_timeout_s`` (408 otherwise,
  kb_ray/serving/edge_limits.py).
* ``GET /v1/ingests/{id}`` — :meth:`UploadService.ingest` (another tenant's: None → 404).
* ``DELETE /v1/documents/{id}`` — :meth:`UploadService.delete` tombstones the document.

:class:`UploadWorker` is one named Ray actor per catalog (``get_if_exists``: every ingress
replica shares it), so queued files are ingested by one run at a time; each call of
``drain`` ingests rounds until the queue is empty. A worker started by a fresh ingress
replica drains what a dead one left.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from starlette.datastructures import UploadFile

from kb_ray.auth.keys import Caller
from kb_ray.auth.scope import ReadScope
from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.config import KbConfig
from kb_ray.errors import UploadError
from kb_ray.ingest.uploads import (
    UploadFields,
    UploadQueue,
    active_document,
    delete_document,
    display_name,
    ingest_pending,
    parse_fields,
)
from kb_ray.parsing.mime import EXTENSION_MIMES, content_mismatch, mime_from_name
from kb_ray.processing import parse_routes

logger = logging.getLogger(__name__)
MAX_FILES = 100  # file parts per request
SNIFF_BYTES = 4096  # of each file, to check its type (kb_ray/parsing/mime.py reads the first 1 KiB)
# The form is read by hand (upload_form: size, names and fields checked in order), so FastAPI
# cannot infer it: the OpenAPI request body of POST /v1/documents, declared here.
UPLOAD_OPENAPI = {"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": {
    "type": "object", "required": ["file"], "properties": {
        "file": {"type": "array", "items": {"type": "string", "format": "binary"}, "maxItems": MAX_FILES,
                 "description": "one or more files; the name is kept as a display name only"},
        "collection": {"type": "string", "description": "the tenant's collection (default: its first one)"},
        "tags": {"type": "string", "description": "comma-separated tags"},
        "acl": {"type": "string", "description": "comma-separated principals"},
        "metadata": {"type": "string", "description": "a JSON object"}}}}}}}


class UploadWorker:
    """Ray actor (one per catalog): ingests the upload queue, one call at a time."""

    def __init__(self, config: KbConfig) -> None:
        self.config = config  # small batches ingest in this actor, its parser and embedder kept loaded:
        config.ingest.inline_max_docs = config.ingest.inline_max_docs or config.ingest.resident_inline_max_docs

    def drain(self) -> int:
        total = 0
        while taken := ingest_pending(self.config):
            total += taken
        return total


def upload_worker(config: KbConfig) -> Any:
    """The catalog's :class:`UploadWorker` actor, started unless it runs already."""
    import ray

    name = "kb_ray_uploads:" + hashlib.sha256(config.kb_root.encode()).hexdigest()[:12]
    return ray.remote(num_cpus=0)(UploadWorker).options(name=name, get_if_exists=True,
                                                         max_concurrency=1).remote(config)


def check_supported(name: str, data: bytes, *, routes: dict[str, list[str]]) -> None:
    """415 unless a parser takes the file's type (by its name) and the bytes (its first ``SNIFF_BYTES``
    suffice) may be of that type."""
    mime = mime_from_name(name)
    if not routes.get(mime):
        known = ", ".join(sorted(ext for ext, known_mime in EXTENSION_MIMES.items() if routes.get(known_mime)))
        raise UploadError(f"{name}: no parser takes {mime}; supported file types: {known}", status=415)
    mismatch = content_mismatch(claimed=mime, data=data)
    if mismatch:
        raise UploadError(f"{name}: {mismatch}", status=415)


def upload_collection(asked: str | None, *, caller: Caller | None, collections: list[str] | None,
                      default: str) -> str:
    """The collection an upload goes to: the one asked for (403 outside the caller's tenant), else
    the tenant's first collection (``default``, ``ingest.collection``, when auth is off)."""
    if caller is None or collections is None:
        return asked or default
    if asked is None:
        if not collections:
            raise UploadError(f"tenant {caller.tenant} owns no collection to upload to", status=403)
        return collections[0]
    if asked not in collections:
        raise UploadError(f"collection {asked!r} is not one of tenant {caller.tenant}'s: "
                          f"{', '.join(collections) or 'none'}", status=403)
    return asked


@asynccontextmanager
async def upload_form(request: Any) -> AsyncIterator[tuple[list[tuple[str, UploadFile]], UploadFields]]:
    """The ``file`` parts (sanitized name, the spooled file) and the text fields of a multipart form;
    the files are deleted when the block ends."""
    form = await request.form(max_files=MAX_FILES)
    try:
        parts = form.getlist("file")
        if not parts or not all(isinstance(part, UploadFile) for part in parts):
            raise UploadError("send the documents as multipart/form-data with one or more `file` parts")
        files = [(display_name(part.filename), part) for part in parts]
        text = {key: _text_field(form.get(key), key) for key in ("collection", "tags", "acl", "metadata")}
        yield files, parse_fields(**text)
    finally:
        await form.close()


async def file_head(part: UploadFile) -> bytes:
    """The first :data:`SNIFF_BYTES` of an uploaded file (enough to tell its type), rewound after."""
    head = await part.read(SNIFF_BYTES)
    await part.seek(0)
    return head


def _text_field(value: Any, key: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise UploadError(f"the form field {key!r} must be text, not a file")


class UploadService:
    """The ingress's uploads, ingest status and deletes over one catalog."""

    def __init__(self, config: KbConfig) -> None:
        self.config = config
        self.catalog = DeltaCatalog.open(config.kb_root, storage_options=config.storage_options, create=False)
        self.queue = UploadQueue(self.catalog)
        self.routes = parse_routes(config.parse)
        self._wake_worker()  # what an earlier ingress left queued

    async def upload(self, request: Any, *, caller: Caller | None, collections: list[str] | None) -> dict[str, Any]:
        async with upload_form(request) as (files, fields):
            collection = upload_collection(fields.collection, caller=caller, collections=collections,
                                           default=self.config.ingest.collection)
            for name, part in files:
                check_supported(name, await file_head(part), routes=self.routes)
            ingest_id, stored = await asyncio.to_thread(
                self.queue.enqueue, [(name, part.file) for name, part in files], collection=collection,
                fields=fields, tenant=caller.tenant if caller else None)
        self._wake_worker()
        logger.info("queued upload %s: %d files for collection %s", ingest_id, len(stored), collection)
        return {"ingest_id": ingest_id, "collection": collection, "files": stored}

    def _wake_worker(self) -> None:
        """Looked up each time: the worker dies with the replica that started it, and the next
        upload starts another (which takes the files the dead one left ``running``)."""
        upload_worker(self.config).drain.remote()

    async def ingest(self, ingest_id: str, *, scope: ReadScope) -> dict[str, Any] | None:
        status = await asyncio.to_thread(self.queue.status, ingest_id)
        if status is None or not scope.owns_tenant_row(status["tenant"]):
            return None  # another tenant's ingest is as unknown as a missing one
        return status

    async def delete(self, document_id: str, *, scope: ReadScope) -> dict[str, Any] | None:
        document = await asyncio.to_thread(active_document, self.catalog, document_id)
        if not scope.sees(document):
            return None
        row = await asyncio.to_thread(delete_document, self.catalog, document)
        return {"document_id": document_id, "deleted_at": row["deleted_at"].isoformat()}

    def documents_version(self) -> int:
        """The latest version of ``documents`` (after a delete: one that holds its tombstone)."""
        return self.catalog.delta_table("documents").version()
