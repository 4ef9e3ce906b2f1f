"""PageEmbedStage: embed rendered page images the cache does not hold (``pages.enabled``).

DOCUMENT_RECORD → DOCUMENT_RECORD. Embeds each distinct page image of the batch that
the ``page_embeddings`` table does not hold under this embedder and hands the new rows
on in ``page_embeddings_ipc`` (on the first document that shows the image); the driver
commits them with the micro-batch, before the documents flip. Counts computed and
cached come back in the stage's statistics.
"""

from __future__ import annotations

import io
from typing import Any

import pyarrow as pa

from kb_ray.catalog.blobs import BlobStore
from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.catalog.key_set import KeySet, TableKeys
from kb_ray.config import PagesSettings
from kb_ray.ingest.record import DOCUMENT_RECORD, with_columns
from kb_ray.ingest.rows import first_owners, from_ipc, to_ipc, to_table
from kb_ray.ingest.stages.base import Stage
from kb_ray.pages import multivectors


class PageEmbedStage(Stage):
    name = "page_embed"

    def __init__(self, *, kb_root: str, storage_options: dict[str, str], pages: PagesSettings) -> None:
        from kb_ray.pages.embedder import PageEmbedder

        self.catalog = DeltaCatalog.open(kb_root, storage_options=storage_options, create=False)
        self.blobs = BlobStore(kb_root, storage_options=storage_options, kind="pages")
        self.embedder = PageEmbedder(pages)
        self.embedder_fp = self.embedder.fingerprint
        self.keys = TableKeys(self.catalog)  # an actor lives one run: model stages never run inline

    def process(self, batch: pa.Table) -> tuple[pa.Table, dict[str, int]]:
        owners = first_owners([from_ipc(blob).column("image_sha").to_pylist() if blob else []
                               for blob in batch.column("pages_ipc").to_pylist()])
        cached = self._cached(list(owners))
        missing = [sha for sha in owners if sha not in cached]
        per_doc: list[list[dict[str, Any]]] = [[] for _ in range(batch.num_rows)]
        computed = self._embed(missing)
        self._known().add_values(row["image_sha"] for row in computed)
        for row in computed:
            per_doc[owners[row["image_sha"]]].append(row)
        rows = [to_ipc(to_table("page_embeddings", r)) if r else None for r in per_doc]
        return with_columns(batch, {"page_embeddings_ipc": rows}, DOCUMENT_RECORD), {
            "page_embeddings_computed": len(missing), "page_embeddings_cached": len(cached)}

    def _cached(self, shas: list[str]) -> set[str]:
        """The shas whose vectors were stored when this actor's key set was loaded, or that it
        computed since (another actor's meanwhile are computed again; the driver keeps one)."""
        return set(self._known().held(shas)) if shas else set()

    def _known(self) -> KeySet:
        return self.keys.of("page_embeddings", ["image_sha"], where={"embedder_fp": self.embedder_fp})

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
