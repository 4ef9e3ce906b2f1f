"""The upload queue: files ``POST /v1/documents`` stored, waiting in the ``uploads`` table, and
the worker step that ingests them with :func:`~kb_ray.ingest.run.run_ingest` (docs/upload.md).

A client's file name is never a path: :func:`display_name` keeps its last component without
control characters (``../../x.md`` becomes ``x.md``), the bytes live in the raw blob store
under their sha256, and the document is ``upload://<collection>/<name>``.

:func:`ingest_pending` takes the queued files (at most one per document URI, oldest first:
a second upload of the same name waits for the next round, so it becomes the newer
version), marks them running, ingests them as one run (micro-batched like any ingest) and
writes each file's outcome from that run's ``ingest_log`` rows. It runs in one worker at a
time (kb_ray/serving/uploads.py), so rows still ``running`` when it starts were left by a
worker that died and are taken again.
"""

from __future__ import annotations

import json
import logging
import re
import unicodedata
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, BinaryIO

import pyarrow.compute as pc

from kb_ray import ids
from kb_ray.catalog.blobs import BlobStore
from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.config import KbConfig
from kb_ray.errors import UploadError
from kb_ray.ingest.rows import to_table
from kb_ray.ingest.upload_plan import UploadedFile, upload_uri

logger = logging.getLogger(__name__)
TABLE = "uploads"
MAX_NAME_CHARS = 255
COLLECTION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
WINDOWS_DRIVE = re.compile(r"[A-Za-z]:/")  # C:\x after backslashes became slashes
FINISHED = ("done", "failed")


def display_name(raw: str | None) -> str:
    """The file name a client sent, made safe to show and to put in a URI: its last path
    component (``/`` or ``\\``, so a folder upload's ``docs/report.pdf`` is ``report.pdf``),
    NFC, without control or format characters. A path that climbs (a ``..`` part) or is
    absolute (``/etc/x``, ``C:\\x``, ``\\\\host\\x``), a name with nothing left (``""``,
    ``.``, ``dir/``) or one longer than 255 characters raises :class:`UploadError` (400)."""
    path = unicodedata.normalize("NFC", raw or "").replace("\\", "/")
    if ".." in path.split("/") or path.startswith("/") or WINDOWS_DRIVE.match(path):
        raise UploadError(f"the file name {raw!r} is a path that climbs or starts at a root: send a plain file "
                          "name such as report.pdf (names are never used as paths on the server)")
    text = path.rsplit("/", 1)[-1]
    name = "".join(ch for ch in text if unicodedata.category(ch)[0] != "C").strip()
    if name in ("", ".", ".."):
        raise UploadError(f"the file name {raw!r} has no usable name: send a plain file name such as report.pdf")
    if len(name) > MAX_NAME_CHARS:
        raise UploadError(f"the file name is {len(name)} characters long; at most {MAX_NAME_CHARS} are kept")
    return name


def checked_collection(name: str) -> str:
    """``name`` when it can be a collection (letters, digits, ``.``, ``_``, ``-``), else 400."""
    if not COLLECTION_NAME.fullmatch(name or ""):
        raise UploadError(f"collection {name!r} is not a valid name: use letters, digits, '.', '_' and '-'")
    return name


@dataclass(frozen=True)
class UploadFields:
    """The form's fields besides the files: applied to every file of the upload."""

    collection: str | None = None
    tags: tuple[str, ...] = ()
    acl: tuple[str, ...] = ()
    metadata: dict[str, Any] | None = None


def parse_fields(*, collection: str | None, tags: str | None, acl: str | None, metadata: str | None) -> UploadFields:
    """The form's text fields: ``tags`` and ``acl`` comma-separated, ``metadata`` a JSON object."""
    try:
        meta = json.loads(metadata) if metadata else None
    except ValueError as exc:
        raise UploadError(f"metadata is not valid JSON: {exc}") from None
    if meta is not None and not isinstance(meta, dict):
        raise UploadError(f"metadata must be a JSON object, got {type(meta).__name__}")
    return UploadFields(collection=checked_collection(collection.strip()) if collection and collection.strip() else None,
                        tags=_comma_list(tags), acl=_comma_list(acl), metadata=meta)


def _comma_list(value: str | None) -> tuple[str, ...]:
    return tuple(dict.fromkeys(item.strip() for item in (value or "").split(",") if item.strip()))


class UploadQueue:
    """The ``uploads`` table: enqueue, claim, record outcomes, report an ingest's status."""

    def __init__(self, catalog: DeltaCatalog) -> None:
        self.catalog = catalog
        self.blobs = BlobStore(catalog.kb_root, kind="raw", storage_options=catalog.storage_options)

    def enqueue(self, files: list[tuple[str, bytes | BinaryIO]], *, collection: str, fields: UploadFields,
                tenant: str | None) -> tuple[str, list[dict[str, Any]]]:
        """Store each ``(name, bytes or a binary file)`` as a raw blob (a file copied in pieces) and
        queue it; ``(ingest_id, [{name, sha256, bytes}])``."""
        ingest_id, now = f"ing_{uuid.uuid4().hex[:16]}", datetime.now(timezone.utc)
        rows = []
        for number, (name, data) in enumerate(files):
            uri = upload_uri(collection=collection, name=name)
            sha, size = (self.blobs.put_bytes(data), len(data)) if isinstance(data, bytes) else \
                self.blobs.put_stream(data)
            rows.append({"ingest_id": ingest_id, "file_no": number, "tenant": tenant, "collection": collection,
                         "name": name, "uri": uri, "document_id": ids.document_id(collection=collection, key=uri),
                         "raw_sha": sha, "bytes": size, "tags": list(fields.tags),
                         "acl": list(fields.acl), "metadata_json": json.dumps(fields.metadata or {}, sort_keys=True),
                         "status": "queued", "created_at": now, "updated_at": now})
        self.catalog.append(TABLE, to_table(TABLE, rows))
        return ingest_id, [{"name": r["name"], "sha256": r["raw_sha"], "bytes": r["bytes"]} for r in rows]

    def status(self, ingest_id: str) -> dict[str, Any] | None:
        """The ingest's status and its files' outcomes; None for an unknown id."""
        rows = sorted(self.catalog.read(TABLE, filter=pc.field("ingest_id") == ingest_id).to_pylist(),
                      key=lambda row: row["file_no"])
        if not rows:
            return None
        files = [{key: row[key] for key in ("name", "document_id", "status", "action", "reason", "detail",
                                            "version_id", "bytes")} | {"sha256": row["raw_sha"]} for row in rows]
        return {"ingest_id": ingest_id, "status": ingest_status([row["status"] for row in rows]),
                "collection": rows[0]["collection"], "tenant": rows[0]["tenant"], "run_id": rows[0]["run_id"],
                "files": files}

    def claim(self) -> list[dict[str, Any]]:
        """Mark the next files to ingest ``running`` (one per document URI, oldest first)."""
        pending = self.catalog.read(TABLE, filter=pc.field("status").isin(["queued", "running"])).to_pylist()
        first: dict[str, dict[str, Any]] = {}
        for row in sorted(pending, key=lambda r: (r["created_at"], r["ingest_id"], r["file_no"])):
            first.setdefault(row["uri"], row)
        claimed = list(first.values())
        self._update(claimed, status="running")
        return claimed

    def finish(self, rows: list[dict[str, Any]], *, run_id: str | None, outcomes: dict[str, dict[str, Any]],
               failure: str | None = None) -> None:
        """Record each file's outcome (by URI); a file without one failed with ``failure``."""
        for row in rows:
            outcome = outcomes.get(row["uri"])
            if outcome is None:
                row.update(status="failed", action="failed", detail=failure or "the ingest run did not reach this file")
            else:
                failed = outcome["action"] == "failed" or outcome["status"] == "failed"
                row.update(status="failed" if failed else "done", action=outcome["action"],
                           reason=outcome["reason"], detail=outcome["error"], version_id=outcome["version_id"])
            row["run_id"] = run_id
        self._update(rows, status=None)

    def _update(self, rows: list[dict[str, Any]], *, status: str | None) -> None:
        if not rows:
            return
        now = datetime.now(timezone.utc)
        for row in rows:
            row.update(updated_at=now, **({"status": status} if status else {}))
        self.catalog.merge_upsert(TABLE, to_table(TABLE, rows), keys=["ingest_id", "file_no"])


def ingest_status(statuses: list[str]) -> str:
    """queued (no file started) | running | done (every file has an outcome, some succeeded) |
    failed (every file failed)."""
    if all(status == "queued" for status in statuses):
        return "queued"
    if not all(status in FINISHED for status in statuses):
        return "running"
    return "failed" if all(status == "failed" for status in statuses) else "done"


def ingest_pending(config: KbConfig) -> int:
    """Ingest the files the queue hands out in one run; how many were taken (0: none queued)."""
    from kb_ray.ingest.run import run_ingest

    queue = UploadQueue(DeltaCatalog.open(config.kb_root, storage_options=config.storage_options))
    rows = queue.claim()
    if not rows:
        return 0
    files = [UploadedFile(collection=row["collection"], name=row["name"], location=queue.blobs.uri(row["raw_sha"]),
                          size=row["bytes"], uploaded_at=row["created_at"], tags=list(row["tags"] or []),
                          acl=list(row["acl"] or []), metadata=json.loads(row["metadata_json"] or "{}"))
             for row in rows]
    try:
        report = run_ingest(config, uploads=files)
    except Exception as exc:  # noqa: BLE001 - recorded on every file it took; the worker goes on
        logger.exception("the ingest of %d uploaded files failed", len(rows))
        queue.finish(rows, run_id=None, outcomes={}, failure=f"the ingest failed: {type(exc).__name__}: {exc}"[:500])
        return len(rows)
    queue.finish(rows, run_id=report.run_id, outcomes=_outcomes(queue.catalog, report.run_id))
    return len(rows)


def _outcomes(catalog: DeltaCatalog, run_id: str) -> dict[str, dict[str, Any]]:
    """URI → the run's last ``ingest_log`` row for it."""
    rows = catalog.read("ingest_log", columns=["uri", "action", "status", "reason", "error", "version_id", "batch"],
                        filter=pc.field("run_id") == run_id).to_pylist()
    return {row["uri"]: row for row in sorted(rows, key=lambda row: row["batch"])}


def active_document(catalog: DeltaCatalog, document_id: str) -> dict[str, Any] | None:
    """The ``documents`` row of an active (not tombstoned) document, or None."""
    found = catalog.read("documents", filter=(pc.field("document_id") == document_id)
                         & pc.field("active_version_id").is_valid()).to_pylist()
    return found[0] if found else None


def delete_document(catalog: DeltaCatalog, document: dict[str, Any]) -> dict[str, Any]:
    """Tombstone ``document`` (its ``documents`` row): ``active_version_id`` null, ``deleted_at``
    now; its versions and chunks stay until ``kb-ray purge``. Returns the new row."""
    now = datetime.now(timezone.utc)
    row = {**document, "active_version_id": None, "deleted_at": now, "updated_at": now}
    catalog.merge_upsert("documents", to_table("documents", [row]), keys=["document_id"])
    return row
