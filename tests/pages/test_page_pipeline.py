"""Pages end to end on a real local Ray with the tiny ColQwen2: ingest (render + page-embed),
Delta storage, content-addressed reuse, page index build, MaxSim and hybrid+page search,
verify and purge."""

from __future__ import annotations

import numpy as np
import pytest

from kb_ray.catalog.blobs import BlobStore
from kb_ray.catalog.purge import purge
from kb_ray.catalog.verify import verify_catalog
from kb_ray.index import build_index
from kb_ray.ingest.run import run_ingest
from kb_ray.pages import multivectors
from kb_ray.search.searcher import HybridSearcher
from tests.ingest.helpers import catalog, ingest_config
from tests.pages.conftest import page_overrides

pytestmark = pytest.mark.usefixtures("ray_session")
PDF_PAGES = 3 + 2  # manual.pdf + figure.pdf


@pytest.fixture(scope="module")
def pages_kb(tmp_path_factory, pdf_sources, tiny_colqwen2):
    kb = tmp_path_factory.mktemp("kb")
    config = ingest_config(kb, [pdf_sources], "ingest.sync=full", *page_overrides(tiny_colqwen2))
    first = run_ingest(config)
    second = run_ingest(config)
    manifest = build_index(config)
    return {"kb": kb, "config": config, "first": first, "second": second, "manifest": manifest}


@pytest.fixture(scope="module")
def searcher(pages_kb):
    return HybridSearcher.open(pages_kb["config"])


def test_ingest_renders_and_embeds_every_pdf_page(pages_kb):
    first, kb = pages_kb["first"], pages_kb["kb"]
    assert first.documents["failed"] == 0 and first.documents["new"] == 2
    assert first.page_images["rendered"] == PDF_PAGES
    assert first.page_embeddings == {"computed": PDF_PAGES, "cached": 0}
    pages = catalog(kb).read("pages").to_pylist()
    assert len(pages) == PDF_PAGES and all(p["image_sha"] for p in pages)
    store = BlobStore(str(kb), kind="pages")
    assert store.list_shas() == sorted(p["image_sha"] for p in pages)


def test_page_embeddings_are_float16_blobs_keyed_by_image_sha(pages_kb, page_embedder):
    rows = catalog(pages_kb["kb"]).read("page_embeddings").to_pylist()
    assert len(rows) == PDF_PAGES and {r["embedder_fp"] for r in rows} == {page_embedder.fingerprint}
    row = rows[0]
    assert row["dtype"] == "float16" and row["dim"] == 128 and len(row["vectors"]) == row["n_vectors"] * 128 * 2
    import io

    from PIL import Image

    image = Image.open(io.BytesIO(BlobStore(str(pages_kb["kb"]), kind="pages").get(row["image_sha"])))
    fresh = page_embedder.embed_images([image])[0]
    stored = multivectors.decode(row["vectors"], row["n_vectors"], row["dim"])
    np.testing.assert_allclose(stored.astype(np.float32), fresh, atol=2e-3)  # same image -> same multivector


def test_unchanged_reingest_renders_and_embeds_nothing(pages_kb):
    second = pages_kb["second"]
    assert second.documents["unchanged"] == 2 and second.parses == 0
    assert second.page_images["rendered"] == 0 and second.page_embeddings["computed"] == 0
    assert verify_catalog(catalog(pages_kb["kb"])).ok(strict=True)


def test_generation_has_a_page_index(pages_kb):
    manifest = pages_kb["manifest"]
    assert manifest.pages["rows"] == PDF_PAGES and manifest.pages["dim"] == 128
    assert {"pages", "page_embeddings", "elements"} <= set(manifest.catalog_versions)
    assert manifest.spec["pages"]["embedder_fp"] == manifest.pages["embedder_fp"]


def test_a_pages_own_multivector_ranks_it_first(searcher):
    index = searcher._loaded.pages
    for row in range(len(index.keys)):
        result = searcher.search("", k=2, mode="page", query_multivector=index.multivector(row), rerank=False)
        hit = result.hits[0]
        assert hit["kind"] == "page" and f"page:{hit['version_id']}:{hit['page']}" == index.keys[row]
        assert hit["scores"]["page"] == pytest.approx(index.multivector(row).shape[0], rel=1e-3)


def test_page_hits_carry_text_pages_and_query_boxes(searcher):
    result = searcher.search("mechanical seal kit part number", k=PDF_PAGES, mode="page", rerank=False)
    assert len(result.hits) == PDF_PAGES and all(h["kind"] == "page" for h in result.hits)
    manual = next(h for h in result.hits if h["title"].startswith("AquaFlow") and h["page"] == 3)
    assert manual["pages"] == [3] and manual["chunk_ids"] and "seal" in manual["text"].lower()
    assert 1 <= len(manual["regions"]) <= 3 and all(r["page"] == 3 for r in manual["regions"])
    assert manual["regions"][0]["bbox"] != [0.0, 0.0, 1.0, 1.0]


def test_hybrid_plus_page_fuses_page_and_chunk_hits(searcher):
    result = searcher.search("mechanical seal kit part number", k=30, mode="hybrid+page", rerank=False)
    kinds = {hit["kind"] for hit in result.hits}
    assert kinds == {"page", "chunk"}
    page_hit = next(h for h in result.hits if h["kind"] == "page")
    chunk_hit = next(h for h in result.hits if h["kind"] == "chunk")
    assert page_hit["ranks"]["page"] is not None and page_hit["ranks"]["dense"] is None
    assert chunk_hit["ranks"]["page"] is None and chunk_hit["ranks"]["fused"] is not None
    fused = [h["ranks"]["fused"] for h in result.hits]
    assert fused == sorted(fused)


def test_filters_apply_to_page_hits(searcher, pages_kb):
    doc = searcher.search("seal", k=1, mode="page", rerank=False).hits[0]["document_id"]
    result = searcher.search("seal", k=10, mode="page", rerank=False, filters={"document_ids": [doc]})
    assert {h["document_id"] for h in result.hits} == {doc}


def test_deleting_a_document_then_purge_removes_its_page_embeddings_and_blobs(pages_kb, pdf_sources):
    (pdf_sources / "figure.pdf").unlink()
    report = run_ingest(pages_kb["config"])
    assert report.documents["deleted"] == 1
    purged = purge(catalog(pages_kb["kb"]))
    assert purged.deleted_rows["page_embeddings"] == 2 and purged.deleted_rows["page_blobs"] == 2
    assert len(BlobStore(str(pages_kb["kb"]), kind="pages").list_shas()) == 3
    assert verify_catalog(catalog(pages_kb["kb"])).ok(strict=True)
