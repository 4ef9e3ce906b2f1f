"""Page images of the viewer (kb_ray/search/page_images.py) over a private copy of the golden
catalog, without Ray Serve: where the bytes come from (raw blob, unchanged source, an ingest's
own render), the cache, the limits and the 404 / 410 answers. The HTTP route and its auth are
tested in tests/serving/test_service.py and tests/serving/test_read_api.py."""

from __future__ import annotations

import io
import os
import shutil

import pyarrow as pa
import pytest
from PIL import Image

from kb_ray.catalog.blobs import BlobStore
from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.pages import slides
from kb_ray.search.page_images import (
    PageImageError,
    PageImageLimits,
    PageImages,
    conversion_key,
    render_key,
)
from tests.index_fixtures import copy_kb

needs_soffice = pytest.mark.skipif(shutil.which("soffice") is None,
                                   reason="LibreOffice (soffice) is not installed: make office-deps")


@pytest.fixture(scope="module")
def kb(golden_kb, tmp_path_factory):
    root = tmp_path_factory.mktemp("page_images")
    kb_root = copy_kb(golden_kb, root / "kb")
    catalog = DeltaCatalog.open(kb_root, create=False)
    documents = {row["uri"].rsplit("/", 1)[-1]: row for row in catalog.read("documents").to_pylist()}
    return {"root": root, "catalog": catalog, "documents": documents}


def images(kb, **limits) -> PageImages:
    return PageImages(kb["catalog"], limits=PageImageLimits(**limits))


def _size(png: bytes) -> tuple[int, int]:
    return Image.open(io.BytesIO(png)).size


def _is_page_at(png: bytes, row: dict, dpi: int) -> bool:
    """The PNG is the page's size in points at ``dpi`` (pdfium rounds a fraction of a pixel up)."""
    width, height = _size(png)
    return abs(width - row["width"] * dpi / 72) < 1 and abs(height - row["height"] * dpi / 72) < 1


def _move_source(kb, name: str) -> str:
    """Point the document at a private copy of its source (so the test may change it); its id."""
    document = kb["documents"][name]
    copy = kb["root"] / f"moved-{name}"
    shutil.copy(document["uri"], copy)
    rows = pa.Table.from_pylist([{**document, "uri": str(copy)}], schema=kb["catalog"].read("documents").schema)
    kb["catalog"].merge_upsert("documents", rows, keys=["document_id"])
    return document["document_id"]


def test_a_pdf_page_renders_at_the_asked_dpi_and_is_cached_by_content(kb):
    pages = images(kb)
    document_id = kb["documents"]["manual.pdf"]["document_id"]
    row = pages.page_row(document_id, 2)
    png = pages.png(row, 2, dpi=72)
    assert png.startswith(b"\x89PNG") and _is_page_at(png, row, 72)
    assert _is_page_at(pages.png(row, 2), row, 144)  # the default dpi
    key = render_key(row["raw_sha"], 2, 72)
    assert pages.renders.get(key) == png  # cached under a hash of raw sha, page, dpi and renderer
    assert render_key(row["raw_sha"], 2, 73) != key and render_key(row["raw_sha"], 3, 72) != key


def test_limits_and_unknown_pages_are_refused_with_their_status(kb):
    pages = images(kb, max_dpi=200, max_pixels=2_000_000)
    document_id = kb["documents"]["manual.pdf"]["document_id"]
    row = pages.page_row(document_id, 1)
    for dpi, status in ((201, 400), (35, 400), (0, 400), (199, 400)):  # A4 at 199 dpi is 3.8 M pixels
        with pytest.raises(PageImageError) as caught:
            pages.png(row, 1, dpi=dpi)
        assert caught.value.status == status, dpi
    for page_no in (0, 4, 99):
        with pytest.raises(PageImageError, match=r"pages 1\.\.3") as caught:
            pages.png(pages.page_row(document_id, page_no), page_no)
        assert caught.value.status == 404
    assert pages.page_row("doc_does_not_exist", 1) is None
    with pytest.raises(PageImageError) as caught:
        pages.png(None, 1)
    assert caught.value.status == 404
    html = kb["documents"]["faq.html"]["document_id"]
    with pytest.raises(PageImageError, match="PDFs and PPTX only") as caught:
        pages.png(pages.page_row(html, 1), 1)
    assert (caught.value.status, caught.value.reason) == (404, "not_paginated")


def test_a_changed_source_is_gone_unless_its_raw_bytes_were_kept(kb):
    document_id = _move_source(kb, "two_column.pdf")
    pages = images(kb)
    row = pages.page_row(document_id, 1)
    original = open(row["uri"], "rb").read()
    assert _size(pages.png(row, 1, dpi=50))  # the source still has the version's sha
    with open(row["uri"], "ab") as handle:
        handle.write(b"\n% edited after ingest\n")
    with pytest.raises(PageImageError, match="changed since this version was ingested") as caught:
        pages.png(row, 1, dpi=51)
    assert caught.value.status == 410
    assert pages.png(row, 1, dpi=50)  # an earlier render stays in the cache
    BlobStore(kb["catalog"].kb_root, kind="raw").put(row["raw_sha"], original)  # ingest.keep_raw / an upload
    assert _size(pages.png(row, 1, dpi=51))
    BlobStore(kb["catalog"].kb_root, kind="raw").delete([row["raw_sha"]])
    os.remove(row["uri"])
    with pytest.raises(PageImageError, match="cannot be read") as caught:
        pages.png(row, 1, dpi=52)
    assert caught.value.status == 410


def test_the_image_a_pages_enabled_ingest_rendered_is_reused_at_its_dpi(kb):
    catalog, pages = kb["catalog"], images(kb, default_dpi=144)
    document_id = kb["documents"]["figure.pdf"]["document_id"]
    row = pages.page_row(document_id, 1)
    marker = io.BytesIO()
    Image.new("RGB", (7, 9), "white").save(marker, format="PNG")
    sha = BlobStore(catalog.kb_root, kind="pages").put_bytes(marker.getvalue())
    stored = [page for page in catalog.read("pages").to_pylist() if page["version_id"] == row["version_id"]]
    rows = [{**page, "image_sha": sha if page["page_no"] == 1 else page["image_sha"]} for page in stored]
    catalog.merge_upsert("pages", pa.Table.from_pylist(rows, schema=catalog.read("pages").schema),
                         keys=["version_id", "page_no"])
    row = pages.page_row(document_id, 1)
    assert row["image_sha"] == sha and pages.png(row, 1) == marker.getvalue()
    assert _is_page_at(pages.png(row, 1, dpi=72), row, 72)  # another dpi: rendered


@needs_soffice
def test_a_pptx_slide_renders_from_its_libreoffice_pdf_and_both_are_cached(kb, monkeypatch):
    pages = images(kb)
    row = pages.page_row(kb["documents"]["slides.pptx"]["document_id"], 2)
    png = pages.png(row, 2, dpi=72)
    assert png.startswith(b"\x89PNG") and _is_page_at(png, row, 72)  # 720 x 540 points: the 4:3 slide
    width, height = _size(png)
    assert abs(width / height - 4 / 3) < 0.01
    converter = slides.converter_fingerprint()
    assert pages.conversions.exists(conversion_key(row["raw_sha"], converter))
    assert pages.renders.get(render_key(row["raw_sha"], 2, 72, converter=converter)) == png
    assert render_key(row["raw_sha"], 2, 72, converter=converter) != render_key(row["raw_sha"], 2, 72)
    monkeypatch.setattr(pages.converter, "convert", _no_second_conversion)
    assert pages.png(row, 2, dpi=72) == png  # the render cache
    assert _is_page_at(pages.png(pages.page_row(row["document_id"], 5), 5, dpi=50), row, 50)  # the PDF cache


def test_a_pptx_without_soffice_is_501_no_renderer(kb, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    pages = images(kb)
    row = pages.page_row(kb["documents"]["slides.pptx"]["document_id"], 1)
    with pytest.raises(PageImageError, match="make office-deps") as caught:
        pages.png(row, 1, dpi=72)
    assert (caught.value.status, caught.value.reason) == (501, "no_renderer")


def _no_second_conversion(data: bytes) -> bytes:
    raise AssertionError("converted again: the cached PDF was not used")
