"""CaptionStage: describe figures with a captioning model (``enrich.captions.enabled``).

DOCUMENT_RECORD → DOCUMENT_RECORD. Runs between
:class:`~kb_ray.ingest.stages.parse.ParseStage` (which wrote every figure crop to the
blob store and named it in the figure element's ``attrs.crop_sha``) and
:class:`~kb_ray.ingest.stages.embed_write.EmbedWriteStage`.

For one batch of freshly parsed documents it captions each distinct crop that the
``enrichments`` table does not hold yet under this enricher fingerprint, hands the new
``enrichments`` rows on (the driver commits them with the micro-batch, before the
documents flip) and adds a ``figure_description`` chunk per captioned figure to the
document's chunk rows, so the embedding stage embeds it like any chunk.

Fail-soft: a caption that fails or times out is an ``enrichments`` row with its error,
the document commits without that description, and its ``notes`` say so. Counts
(computed, cached, failed, too small) come back in the stage's statistics.
"""

from __future__ import annotations

import io
import logging
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from kb_ray.catalog.blobs import BlobStore
from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.config import CaptionSettings
from kb_ray.enrich.figure_chunks import description_rows, figure_crops
from kb_ray.ingest.record import DOCUMENT_RECORD, conform_record, with_columns
from kb_ray.ingest.rows import first_owners, from_ipc, to_ipc, to_table
from kb_ray.ingest.stages.base import Stage

logger = logging.getLogger(__name__)


class CaptionStage(Stage):
    name = "caption"

    def __init__(self, *, kb_root: str, storage_options: dict[str, str], captions: CaptionSettings,
                 run_id: str) -> None:
        from kb_ray.enrich.captioners import build_captioner

        self.catalog = DeltaCatalog.open(kb_root, storage_options=storage_options, create=False)
        self.blobs = BlobStore(kb_root, kind="figures", storage_options=storage_options)
        self.settings = captions
        self.captioner = build_captioner(captions)
        self.enricher_fp = self.captioner.fingerprint
        self.run_id = run_id

    def process(self, batch: pa.Table) -> tuple[pa.Table, dict[str, int]]:
        batch = conform_record(batch, DOCUMENT_RECORD)
        docs = batch.select(["versions_ipc", "elements_ipc", "chunks_ipc", "version_chunks_ipc",
                             "n_chunks", "notes"]).to_pylist()
        owners = first_owners([_crop_shas(doc) for doc in docs])
        captions, new_rows, counts = self._caption(list(owners))
        per_doc: list[list[dict[str, Any]]] = [[] for _ in docs]
        for row in new_rows:
            per_doc[owners[row["input_sha"]]].append(row)
        updated = [self._describe(doc, captions) for doc in docs]
        columns = {f"{name}_ipc": [u[name] for u in updated] for name in ("elements", "chunks", "version_chunks",
                                                                           "versions")}
        columns["n_chunks"] = [u["n_chunks"] for u in updated]
        columns["notes"] = [(doc["notes"] or []) + _notes(per_doc[i]) for i, doc in enumerate(docs)]
        columns["enrichments_ipc"] = [to_ipc(to_table("enrichments", rows)) if rows else None for rows in per_doc]
        return with_columns(batch, columns, DOCUMENT_RECORD), counts

    def _caption(self, shas: list[str]) -> tuple[dict[str, str], list[dict[str, Any]], dict[str, int]]:
        """Captions of ``shas`` (cached or new), the new enrichment rows, and counts."""
        cached = self._cached(shas)
        missing = [sha for sha in shas if sha not in cached]
        images, skipped = self._load_images(missing)
        results = self.captioner.caption(images=[images[sha] for sha in images]) if images else []
        now = datetime.now(timezone.utc)
        rows = [self._enrichment_row(sha, result, now) for sha, result in zip(images, results)]
        captions = dict(cached)
        captions.update({row["input_sha"]: row["text"] for row in rows if row["status"] == "ok"})
        failed = [row for row in rows if row["status"] == "failed"]
        for row in failed:
            logger.warning("caption of figure crop %s failed: %s", row["input_sha"][:12], row["error"])
        counts = {"captions_computed": len(rows) - len(failed), "captions_cached": len(cached),
                  "captions_failed": len(failed), "captions_skipped": skipped}
        return captions, rows, counts

    def _cached(self, shas: list[str]) -> dict[str, str]:
        if not shas:
            return {}
        found = self.catalog.read("enrichments", columns=["input_sha", "text"], filter=(
            (pc.field("enricher_fp") == self.enricher_fp) & pc.field("input_sha").isin(shas)
            & (pc.field("status") == "ok")))
        return dict(zip(found.column("input_sha").to_pylist(), found.column("text").to_pylist()))

    def _load_images(self, shas: list[str]) -> tuple[dict[str, bytes], int]:
        """Crop bytes by sha, leaving out crops too small to say anything (icons, rules)."""
        from PIL import Image

        images, skipped = {}, 0
        for sha in shas:
            data = self.blobs.get(sha)
            with Image.open(io.BytesIO(data)) as image:
                if min(image.size) < self.settings.min_image_side:
                    skipped += 1
                    continue
            images[sha] = data
        return images, skipped

    def _enrichment_row(self, sha: str, result: Any, now: datetime) -> dict[str, Any]:
        return {"enricher_fp": self.enricher_fp, "input_sha": sha, "kind": "caption", "model": self.captioner.model,
                "status": "ok" if result.text is not None else "failed", "text": result.text, "error": result.error,
                "prompt_tokens": result.prompt_tokens, "completion_tokens": result.completion_tokens,
                "seconds": result.seconds, "cost_usd": result.cost_usd, "run_id": self.run_id, "created_at": now}

    def _describe(self, doc: dict[str, Any], captions: dict[str, str]) -> dict[str, Any]:
        """The document's table blobs with a description chunk added per captioned figure."""
        out = {name: doc[f"{name}_ipc"] for name in ("elements", "chunks", "version_chunks", "versions")}
        out["n_chunks"] = doc["n_chunks"]
        if not doc["versions_ipc"] or not doc["elements_ipc"]:
            return out
        tables = {name: from_ipc(blob).to_pylist() for name, blob in list(out.items()) if name != "n_chunks"}
        version = tables["versions"][0]
        chunks, version_chunks = description_rows(
            version=version, elements=tables["elements"], chunks=tables["chunks"],
            version_chunks=tables["version_chunks"], captions=captions, enricher_fp=self.enricher_fp)
        if chunks:
            tables["chunks"] += chunks
            tables["version_chunks"] += version_chunks
            version["n_chunks"] = len(tables["version_chunks"])
            out = {name: to_ipc(to_table(name, rows)) for name, rows in tables.items()}
            out["n_chunks"] = version["n_chunks"]
        return out


def _crop_shas(doc: dict[str, Any]) -> list[str]:
    """The figure crops of a freshly parsed document (none for one the catalog already has)."""
    if not doc["elements_ipc"] or not doc["versions_ipc"]:
        return []
    return [sha for _, sha in figure_crops(from_ipc(doc["elements_ipc"]).to_pylist())]


def _notes(new_rows: list[dict[str, Any]]) -> list[str]:
    failed = [r for r in new_rows if r["status"] == "failed"]
    return [f"{len(failed)} figure caption(s) failed ({failed[0]['error']})"] if failed else []
