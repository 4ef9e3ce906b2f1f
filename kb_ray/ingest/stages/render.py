"""RenderStage: draw the pages of freshly parsed PDFs (``pages.enabled``).

DOCUMENT_RECORD → DOCUMENT_RECORD. ParseStage hands the raw bytes on in ``raw`` only for
PDFs it parsed in this run; this stage renders their pages, writes the PNGs
content-addressed to the blob store, fills ``image_sha`` in the document's ``pages``
rows and drops the bytes (``raw`` is null on the way out). A document over the page
limits keeps its text path; the limit is a note, and counted (``documents_limited``).

A version the catalog already holds is not re-parsed, so its pages are not re-rendered;
a new version whose pages look the same renders to the same shas and embeds nothing.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from kb_ray.catalog.blobs import BlobStore
from kb_ray.config import PagesSettings
from kb_ray.ingest.record import DOCUMENT_RECORD, conform_record, with_columns
from kb_ray.ingest.rows import from_ipc, to_ipc, to_table
from kb_ray.ingest.stages.base import Stage
from kb_ray.pages.render import PageRenderer


class RenderStage(Stage):
    name = "render"

    def __init__(self, *, kb_root: str, storage_options: dict[str, str], pages: PagesSettings) -> None:
        self.renderer = PageRenderer(dpi=pages.dpi, max_pages=pages.max_pages, max_pixels=pages.max_pixels)
        self.blobs = BlobStore(kb_root, storage_options=storage_options, kind="pages")

    def process(self, batch: pa.Table) -> tuple[pa.Table, dict[str, int]]:
        batch = conform_record(batch, DOCUMENT_RECORD)
        results = [self._render(row) for row in batch.select(["raw", "pages_ipc", "notes"]).to_pylist()]
        out = with_columns(batch, {"pages_ipc": [r["pages_ipc"] for r in results],
                                   "notes": [r["notes"] for r in results], "raw": [None] * batch.num_rows},
                           DOCUMENT_RECORD)
        return out, {"pages_rendered": sum(r["rendered"] for r in results),
                     "documents_limited": sum(r["limited"] for r in results)}

    def _render(self, row: dict[str, Any]) -> dict[str, Any]:
        notes = list(row["notes"] or [])
        if row["raw"] is None or row["pages_ipc"] is None:
            return {"pages_ipc": row["pages_ipc"], "notes": notes, "rendered": 0, "limited": False}
        result = self.renderer.render(row["raw"])
        for page in result.pages:
            self.blobs.put(page.sha, page.png)
        shas = {page.page_no: page.sha for page in result.pages}
        pages = from_ipc(row["pages_ipc"]).to_pylist()
        for page in pages:
            page["image_sha"] = shas.get(page["page_no"])
        if result.reason:
            notes.append(result.reason)
        return {"pages_ipc": to_ipc(to_table("pages", pages)), "notes": notes, "rendered": len(result.pages),
                "limited": bool(result.reason)}
