"""Rendering, the page embedder, multivector storage and box choice, without Ray."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from kb_ray.catalog.blobs import BlobStore
from kb_ray.config import PagesSettings
from kb_ray.ingest.rows import from_ipc, to_ipc, to_table
from kb_ray.ingest.stages.render import RenderStage
from kb_ray.pages import multivectors
from kb_ray.pages.embedder import PageEmbedder, page_embedder_fingerprint
from kb_ray.pages.render import PageRenderer
from kb_ray.search.pages import best_boxes
from tests.conftest import GOLDEN_SOURCES

MANUAL = (GOLDEN_SOURCES / "manual.pdf").read_bytes()


def _images(data: bytes = MANUAL) -> list[Image.Image]:
    return [Image.open(io.BytesIO(page.png)) for page in PageRenderer(dpi=72).render(data).pages]


def test_renderer_is_deterministic_and_content_addressed():
    first, second = PageRenderer(dpi=72).render(MANUAL), PageRenderer(dpi=72).render(MANUAL)
    assert [p.page_no for p in first.pages] == [1, 2, 3] and first.reason is None
    assert [p.sha for p in first.pages] == [p.sha for p in second.pages]
    assert len({p.sha for p in first.pages}) == 3
    assert first.pages[0].png.startswith(b"\x89PNG") and (first.pages[0].width_px, first.pages[0].height_px) == (596, 842)  # A4 at 72 dpi


def test_renderer_limits_are_fail_soft():
    too_many = PageRenderer(dpi=72, max_pages=2).render(MANUAL)
    assert too_many.pages == [] and "pages.max_pages 2" in too_many.reason
    too_big = PageRenderer(dpi=144, max_pixels=100_000).render(MANUAL)
    assert too_big.pages == [] and "over pages.max_pixels" in too_big.reason


def test_render_stage_fills_image_sha_and_notes_limits(tmp_path):
    pages = to_table("pages", [{"version_id": "ver_x", "page_no": n, "width": 595.0, "height": 842.0,
                                "has_text_layer": True, "image_sha": None} for n in (1, 2, 3)])
    import pyarrow as pa

    batch = pa.table({"raw": [MANUAL, MANUAL], "pages_ipc": [to_ipc(pages), to_ipc(pages)]})
    out, stats = RenderStage(kb_root=str(tmp_path), storage_options={}, pages=PagesSettings(dpi=72)).run(batch)
    assert out.column("raw").null_count == 2 and stats.counts == {"pages_rendered": 6, "documents_limited": 0}
    shas = from_ipc(out.column("pages_ipc")[0].as_py()).column("image_sha").to_pylist()
    store = BlobStore(str(tmp_path), kind="pages")
    assert all(store.exists(sha) for sha in shas) and store.list_shas() == sorted(shas)
    assert (tmp_path / "blobs" / "pages" / shas[0][:2] / f"{shas[0]}.png").is_file()
    limited, stats = RenderStage(kb_root=str(tmp_path), storage_options={}, pages=PagesSettings(max_pages=1)).run(batch)
    assert stats.counts == {"pages_rendered": 0, "documents_limited": 2}
    assert limited.column("notes")[0].as_py()[0].startswith("pages: 3 pages > pages.max_pages 1")


def test_page_embedder_shapes_dtype_and_determinism(page_embedder):
    images = _images()
    first = page_embedder.embed_images(images)
    again = page_embedder.embed_images(images[:1])
    assert len(first) == 3 and all(m.dtype == np.float32 and m.ndim == 2 and m.shape[1] == 128 for m in first)
    assert np.allclose(np.linalg.norm(first[0], axis=1), 1.0, atol=1e-4)
    np.testing.assert_allclose(first[0], again[0], atol=1e-5)
    queries = page_embedder.embed_queries(["mechanical seal kit", "pump"])
    assert [q.shape[1] for q in queries] == [128, 128] and queries[0].shape[0] > queries[1].shape[0]
    assert all(np.isfinite(q).all() for q in queries + first)


def test_mean_rows_pooling_shrinks_the_image_tokens(page_settings, page_embedder):
    pooled_settings = page_settings.model_copy(update={"pooling": "mean_rows", "pool_factor": 3})
    pooled = PageEmbedder(pooled_settings).embed_images(_images()[:1])[0]
    raw = page_embedder.embed_images(_images()[:1])[0]
    assert pooled.shape[1] == raw.shape[1] and pooled.shape[0] < raw.shape[0] * 0.6
    assert page_embedder_fingerprint(pooled_settings) != page_embedder.fingerprint
    assert page_embedder_fingerprint(page_settings) == page_embedder.fingerprint


def test_float16_blob_roundtrip_and_maxsim():
    rng = np.random.default_rng(0)
    pages = [multivectors.normalize_rows(rng.normal(size=(n, 16))) for n in (5, 7, 3)]
    blobs = [multivectors.encode(p) for p in pages]
    assert len(blobs[0]) == 5 * 16 * 2
    decoded = [multivectors.decode(b, len(p), 16) for b, p in zip(blobs, pages)]
    np.testing.assert_allclose(decoded[1], pages[1], atol=2e-3)
    offsets = np.array([0, 5, 12, 15])
    scores = multivectors.maxsim_many(pages[1], np.concatenate(decoded), offsets, np.arange(3))
    assert int(np.argmax(scores)) == 1 and scores[1] == pytest.approx(7.0, abs=0.02)


def test_best_boxes_prefers_elements_sharing_query_words():
    elements = [{"text": "Introduction", "x0": 0.1, "y0": 0.1, "x1": 0.9, "y1": 0.2},
                {"text": "The mechanical seal kit AF-SK-118", "x0": 0.1, "y0": 0.3, "x1": 0.9, "y1": 0.4},
                {"text": "seal", "x0": 0.1, "y0": 0.5, "x1": 0.9, "y1": 0.6}]
    boxes = best_boxes("mechanical seal kit", elements, 2)
    assert [b["bbox"][1] for b in boxes] == [0.3, 0.5] and all(b["page"] == 2 for b in boxes)
    assert best_boxes("zebra", elements, 2) == [{"page": 2, "bbox": [0.0, 0.0, 1.0, 1.0]}]
