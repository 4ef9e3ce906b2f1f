"""The Ray Serve app over real HTTP on 127.0.0.1, on a catalog built from golden/."""

from __future__ import annotations

import io
import shutil
import threading
import time
from datetime import datetime, timezone

import httpx
import pyarrow as pa
import pytest
from PIL import Image

from kb_ray.catalog.blobs import BlobStore
from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.index import build_index
from kb_ray.pages.slides import converter_fingerprint
from kb_ray.search.page_images import render_key
from kb_ray.search.tiny_reranker import build_tiny_cross_encoder
from kb_ray.serving.app import start_service, stop_service
from tests.index_fixtures import copy_kb, golden_config

PORT = 8765
URL = f"http://127.0.0.1:{PORT}"
PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"


@pytest.fixture(scope="module")
def service(ray_session, golden_kb, tmp_path_factory):
    root = tmp_path_factory.mktemp("serve")
    kb_root = copy_kb(golden_kb, root / "kb")
    tiny = build_tiny_cross_encoder(root / "tiny-reranker")
    config = golden_config(kb_root, f"search.rerank_model_path={tiny}", "embedding.num_threads=1",
                           "search.rerank_candidates=10")
    build_index(config)
    start_service(config, port=PORT)
    yield config
    stop_service()


def search(**body) -> httpx.Response:
    return httpx.post(f"{URL}/v1/search", json=body, timeout=60)


def test_a_known_answer_comes_back_cited_with_page_and_box(service):
    response = search(query="mechanical seal kit part number for the AquaFlow pump", k=3, rerank=False)
    assert response.status_code == 200
    result = response.json()
    assert result["reranked"] is False and len(result["hits"]) == 3
    top = [hit for hit in result["hits"] if "AF-SK-118" in hit["text"]]
    assert top, [hit["text"][:80] for hit in result["hits"]]
    hit = top[0]
    assert hit["uri"].endswith("manual.pdf") and hit["pages"] and hit["quote"] == hit["text"]
    region = hit["regions"][0]
    assert region["page"] in hit["pages"] and all(0 <= v <= 1 for v in region["bbox"])
    assert set(hit["ranks"]) >= {"dense", "lexical", "fused"} and "total_service" in result["timing_ms"]
    assert all(h["lineage"]["generation"] == result["generation"] and h["lineage"]["run_id"] for h in result["hits"])


def test_hits_carry_evidence_confidence_and_context_and_the_response_abstain(service):
    result = search(query="mechanical seal kit part number for the AquaFlow pump", k=3, rerank=False,
                    context_chars=400).json()
    assert isinstance(result["abstain"], bool)
    for hit in result["hits"]:
        evidence = hit["evidence"]
        assert evidence["quote"] and evidence["quote"] in hit["text"] and len(evidence["spans"]) == 1
        assert set(evidence["pages"]) <= set(hit["pages"]) and 0.0 <= hit["confidence"] <= 1.0
        assert sum(len(c["text"]) for c in hit["context"]["before"] + hit["context"]["after"]) <= 400
    seal = next(hit for hit in result["hits"] if "AF-SK-118" in hit["text"])
    assert "AF-SK-118" in seal["evidence"]["quote"] and len(seal["evidence"]["quote"]) < len(seal["text"])
    unrelated = search(query="who won the 1998 football world cup final in Paris", k=3, rerank=False).json()
    assert max(h["confidence"] for h in unrelated["hits"]) < max(h["confidence"] for h in result["hits"])
    assert "context" not in unrelated["hits"][0]
    assert search(query="pump", k=3, context_chars=-1).status_code == 422


def test_rerank_through_the_reranker_deployment(service):
    result = search(query="day pass price", k=5, rerank=True).json()
    assert result["reranked"] is True and len(result["hits"]) == 5
    assert [hit["ranks"]["rerank"] for hit in result["hits"]] == [1, 2, 3, 4, 5]
    scores = [hit["score"] for hit in result["hits"]]
    assert scores == sorted(scores, reverse=True)


@pytest.mark.parametrize("body, status, message", [
    ({"query": "", "k": 3}, 400, "empty"),
    ({"query": "pump", "k": 0}, 400, "k must be"),
    ({"query": "pump", "k": 1000}, 400, "k must be"),
    ({"query": "pump", "mode": "psychic"}, 422, "mode"),
    ({"query": "pump", "filter": {"colour": "red"}}, 400, "unknown filter field"),
    ({"query": "pump", "limit": 3}, 422, "limit"),
    ({"k": 3}, 422, "query"),
])
def test_bad_requests_get_4xx_with_a_message(service, body, status, message):
    response = search(**body)
    assert response.status_code == status, response.text
    assert message in response.text


def test_filters_apply_before_top_k(service):
    result = search(query="pump", k=5, mode="hybrid", filter={"mime": "text/plain"}, rerank=False).json()
    assert len(result["hits"]) == 5 and {hit["mime"] for hit in result["hits"]} == {"text/plain"}


def test_health_documents_and_openapi(service):
    health = httpx.get(f"{URL}/healthz").json()
    assert health["ok"] is True and health["reranker"] is True
    hit = search(query="eelgrass transplant survival", k=1, rerank=False).json()["hits"][0]
    document = httpx.get(f"{URL}/v1/documents/{hit['document_id']}").json()
    assert document["active_version_id"] == hit["version_id"]
    assert any(chunk["chunk_id"] == hit["chunk_id"] for chunk in document["chunks"])
    assert httpx.get(f"{URL}/v1/documents/doc_missing").status_code == 404
    assert "/v1/search" in httpx.get(f"{URL}/openapi.json").json()["paths"]


def test_page_images_render_with_limits_and_404s(service):
    """GET /v1/documents/{id}/pages/{n}.png (docs/viewer.md); the sources, cache and 410 are tested
    Ray-free in tests/search/test_page_images.py."""
    hit = search(query="eelgrass transplant survival", k=1, rerank=False).json()["hits"][0]
    base = f"{URL}/v1/documents/{hit['document_id']}/pages"
    page = hit["regions"][0]["page"]
    image = httpx.get(f"{base}/{page}.png", params={"dpi": 72}, timeout=60)
    assert image.status_code == 200 and image.headers["content-type"] == "image/png"
    width, height = Image.open(io.BytesIO(image.content)).size
    assert 590 <= width <= 620 and 780 <= height <= 850  # a Letter or A4 page at 72 dpi
    assert httpx.get(f"{base}/{page}.png", timeout=60).content != image.content  # default: pages.dpi (144)
    for path, params, status in ((f"{base}/{page}.png", {"dpi": 301}, 400), (f"{base}/{page}.png", {"dpi": 10}, 400),
                                 (f"{base}/0.png", {}, 404), (f"{base}/999.png", {}, 404),
                                 (f"{base}/one.png", {}, 422), (f"{URL}/v1/documents/doc_missing/pages/1.png", {}, 404)):
        assert httpx.get(path, params=params, timeout=60).status_code == status, (path, params)
    html = search(query="CycleLink day pass price", k=1, rerank=False, filter={"mime": "text/html"}).json()["hits"][0]
    refused = httpx.get(f"{URL}/v1/documents/{html['document_id']}/pages/1.png", timeout=60)
    assert refused.status_code == 404 and "PDFs and PPTX only" in refused.json()["detail"]
    assert refused.headers["x-kb-ray-reason"] == "not_paginated"


@pytest.mark.skipif(shutil.which("soffice") is None, reason="LibreOffice (soffice) is not installed: make office-deps")
def test_a_pptx_slide_is_served_as_a_png_of_the_slides_shape(service):
    """A PPTX slide goes through LibreOffice to PDF (kb_ray/pages/slides.py); the second request is
    the cached render, byte for byte."""
    hit = search(query="Helios BMS field failure rate", k=1, rerank=False, filter={"mime": [PPTX]}).json()["hits"][0]
    page = hit["regions"][0]["page"]
    url = f"{URL}/v1/documents/{hit['document_id']}/pages/{page}.png"
    first = httpx.get(url, params={"dpi": 72}, timeout=120)
    assert first.status_code == 200 and first.headers["content-type"] == "image/png", first.text
    assert Image.open(io.BytesIO(first.content)).size == (720, 540)  # the 4:3 slide's points at 72 dpi
    renders = BlobStore(service.kb_root, kind="renders")
    key = render_key(hit_raw_sha(service, hit), page, 72, converter=converter_fingerprint())
    assert renders.get(key) == first.content  # cached under a key that includes the soffice build
    renders.delete([key])
    renders.put(key, b"cached")  # the second request is answered from the cache
    assert httpx.get(url, params={"dpi": 72}, timeout=60).content == b"cached"
    assert len(BlobStore(service.kb_root, kind="conversions").list_shas()) == 1  # one PDF of the deck


def hit_raw_sha(config, hit) -> str:
    versions = DeltaCatalog.open(config.kb_root, create=False).read("versions", columns=["version_id", "raw_sha"])
    return next(row["raw_sha"] for row in versions.to_pylist() if row["version_id"] == hit["version_id"])


def test_the_canonical_text_holds_every_cited_span(service):
    hit = search(query="CycleLink day pass price", k=1, rerank=False, filter={"mime": "text/html"}).json()["hits"][0]
    text = httpx.get(f"{URL}/v1/documents/{hit['document_id']}/text", timeout=60).json()
    assert text["version_id"] == hit["version_id"] and text["mime"] == "text/html"
    [(start, end)] = hit["evidence"]["spans"]
    assert text["text"][start:end] == hit["evidence"]["quote"]
    assert "\n".join(text["text"][s:e] for s, e in hit["spans"]) == hit["text"]
    assert httpx.get(f"{URL}/v1/documents/doc_missing/text", timeout=60).status_code == 404


def test_the_viewer_files_are_served(service):
    page = httpx.get(f"{URL}/ui", timeout=60)
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert httpx.get(f"{URL}/ui/doc/doc_anything", timeout=60).text == page.text  # deep links: the same page
    assert "/ui/assets/app.js" in page.text and "/ui/assets/app.css" in page.text
    for name, kind in (("app.js", "javascript"), ("app.css", "text/css")):
        asset = httpx.get(f"{URL}/ui/assets/{name}", timeout=60)
        assert asset.status_code == 200 and kind in asset.headers["content-type"]
    assert httpx.get(f"{URL}/ui/assets/index.html", timeout=60).status_code == 404  # only the named files
    assert httpx.get(f"{URL}/ui/assets/..%2Fviewer.py", timeout=60).status_code == 404


def test_a_deleted_document_never_comes_back(service):
    from kb_ray.catalog.delta import DeltaCatalog

    hit = search(query="beekeeper hives in the community garden", k=1, rerank=False).json()["hits"][0]
    catalog = DeltaCatalog.open(service.kb_root, create=False)
    row = catalog.read("documents").filter(pa.compute.equal(pa.compute.field("document_id"), hit["document_id"]))
    tombstoned = row.to_pylist()[0] | {"active_version_id": None, "deleted_at": datetime.now(timezone.utc)}
    catalog.merge_upsert("documents", pa.Table.from_pylist([tombstoned], schema=row.schema), keys=["document_id"])
    time.sleep(2.5)  # the searcher re-reads active pointers at most every 2 s
    for mode in ("hybrid", "dense", "lexical"):
        hits = search(query="beekeeper hives in the community garden", k=10, mode=mode, rerank=False).json()["hits"]
        assert hit["document_id"] not in {h["document_id"] for h in hits}, mode


def test_generation_switch_under_traffic_drops_no_request(service):
    before = search(query="pump", k=3, rerank=False).json()["generation"]
    errors, generations, stop = [], set(), threading.Event()

    def client() -> None:
        with httpx.Client(timeout=60) as http:
            while not stop.is_set():
                try:
                    response = http.post(f"{URL}/v1/search", json={"query": "rail tunnel length", "k": 3,
                                                                   "rerank": False})
                except httpx.HTTPError as exc:  # a dropped request is a failure, not a silently dead client
                    errors.append(repr(exc))
                    return
                if response.status_code != 200:
                    errors.append(response.text)
                else:
                    generations.add(response.json()["generation"])

    thread = threading.Thread(target=client)
    thread.start()
    try:
        rebuilt = build_index(service.model_copy(update={"index": service.index.model_copy(update={"shards": 3})}))
        deadline = time.time() + 120  # a replica loads the new generation inside a request: slow on a busy box
        while rebuilt.generation_id not in generations and not errors and time.time() < deadline:
            time.sleep(0.2)
    finally:
        stop.set()
        thread.join(timeout=60)
    assert not errors
    assert rebuilt.generation_id != before and {before, rebuilt.generation_id} <= generations
