"""The visual-page stages of the ingest, as plain classes over Arrow batches (no Ray import).

Both run between :class:`~kb_ray.ingest.stages.ParseStage` and
:class:`~kb_ray.ingest.stages.EmbedWriteStage`, only when ``pages.enabled``:

* :class:`RenderStage` — renders the pages of each freshly parsed PDF (ParseStage hands
  the raw bytes on in a ``raw`` column only for those), writes the PNGs content-addressed
  to the blob store, fills ``image_sha`` in the document's ``pages`` rows and drops the
  bytes. Over-limit documents keep their text path and note the reason in ``error``.
* :class:`PageEmbedStage` — embeds the page images the ``page_embeddings`` cache does not
  hold yet and hands the new rows on in ``page_embeddings_ipc``; the driver commits them
  with the micro-batch, before the documents flip.

A version the catalog already holds is not re-parsed, so its pages are not re-rendered;
a new version whose pages look the same renders to the same shas and embeds nothing.
"""

from __future__ import annotations

import io
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from kb_ray.catalog.blobs import BlobStore
from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.config import PagesSettings
from kb_ray.ingest.rows import first_owners, from_ipc, on_first_row, replace_column, to_ipc, to_table
from kb_ray.pages import multivectors
from kb_ray.pages.render import PageRenderer


class RenderStage:
    def __init__(self, *, kb_root: str, storage_options: dict[str, str], pages: PagesSettings) -> None:
        self.renderer = PageRenderer(dpi=pages.dpi, max_pages=pages.max_pages, max_pixels=pages.max_pixels)
        self.blobs = BlobStore(kb_root, storage_options=storage_options, kind="pages")

    def __call__(self, batch: pa.Table) -> pa.Table:
        rows = batch.select(["raw", "pages_ipc", "error"]).to_pylist()
        results = [self._render(row) for row in rows]
        batch = replace_column(batch, "pages_ipc", [r[0] for r in results], pa.binary())
        batch = replace_column(batch, "error", [r[1] for r in results], pa.string())
        batch = replace_column(batch, "pages_rendered", [r[2] for r in results], pa.int32())
        return batch.drop_columns(["raw"])

    def _render(self, row: dict[str, Any]) -> tuple[bytes | None, str | None, int]:
        if row["raw"] is None or row["pages_ipc"] is None:
            return row["pages_ipc"], row["error"], 0
        result = self.renderer.render(row["raw"])
        for page in result.pages:
            self.blobs.put(page.sha, page.png)
        shas = {page.page_no: page.sha for page in result.pages}
        pages = from_ipc(row["pages_ipc"]).to_pylist()
        for page in pages:
            page["image_sha"] = shas.get(page["page_no"])
        error = "; ".join(filter(None, [row["error"], result.reason])) or None
        return to_ipc(to_table("pages", pages)), error, len(result.pages)


class PageEmbedStage:
    def __init__(self, *, kb_root: str, storage_options: dict[str, str], pages: PagesSettings) -> None:
        from kb_ray.pages.embedder import PageEmbedder

        self.catalog = DeltaCatalog.open(kb_root, storage_options=storage_options, create=False)
        self.blobs = BlobStore(kb_root, storage_options=storage_options, kind="pages")
        self.embedder = PageEmbedder(pages)
        self.embedder_fp = self.embedder.fingerprint

    def __call__(self, batch: pa.Table) -> pa.Table:
        owners = first_owners([from_ipc(blob).column("image_sha").to_pylist() if blob else []
                               for blob in batch.column("pages_ipc").to_pylist()])
        cached = self._cached(list(owners))
        missing = [sha for sha in owners if sha not in cached]
        rows = self._embed(missing)
        per_doc: list[list[dict[str, Any]]] = [[] for _ in range(batch.num_rows)]
        for row in rows:
            per_doc[owners[row["image_sha"]]].append(row)
        batch = replace_column(batch, "page_embeddings_ipc",
                               [to_ipc(to_table("page_embeddings", r)) if r else None for r in per_doc], pa.binary())
        batch = replace_column(batch, "page_embeddings_computed", on_first_row(batch.num_rows, len(missing)), pa.int32())
        return replace_column(batch, "page_embeddings_cached", on_first_row(batch.num_rows, len(cached)), pa.int32())

    def _cached(self, shas: list[str]) -> set[str]:
        if not shas:
            return set()
        found = self.catalog.read("page_embeddings", columns=["image_sha"], filter=(
            (pc.field("embedder_fp") == self.embedder_fp) & pc.field("image_sha").isin(shas)))
        return set(found.column("image_sha").to_pylist())

    def _embed(self, shas: list[str]) -> list[dict[str, Any]]:
        from PIL import Image

        rows, size = [], self.embedder.settings.batch_size
        for start in range(0, len(shas), size):  # decode only one model batch of PNGs at a time
            part = shas[start:start + size]
            images = [Image.open(io.BytesIO(self.blobs.get(sha))).convert("RGB") for sha in part]
            rows += [{"embedder_fp": self.embedder_fp, "image_sha": sha, "n_vectors": int(mv.shape[0]),
                      "dim": int(mv.shape[1]), "dtype": multivectors.STORED_DTYPE, "vectors": multivectors.encode(mv)}
                     for sha, mv in zip(part, self.embedder.embed_images(images))]
        return rows
