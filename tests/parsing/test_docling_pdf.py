"""DoclingPdfParser: clear failures without weights, router fallback, and Docling's real
standard PDF pipeline end to end with a tiny random-weight layout model.

The tiny model's detections are meaningless (random weights, biased so that some queries
score as ``text`` and ``picture``), so these tests check the plumbing, not the layout: the
pipeline runs, every block has a page and a box in [0, 1], figures carry PNG crops, the
fingerprint follows the settings. TableFormer is not exercised here: it needs the
``docling_ibm_models`` package and torchvision (the ``docling`` extra, GPU images).
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import os
from pathlib import Path

import pypdfium2 as pdfium
import pytest

from kb_ray.config import DoclingPdfSettings
from kb_ray.parsing.base import ParseLimits
from kb_ray.parsing.docling_pdf import DoclingPdfParser
from kb_ray.parsing.docling_pdf_pipeline import LAYOUT_FOLDER
from kb_ray.parsing.docling_tiny import build_tiny_docling_artifacts
from kb_ray.parsing.router import ParserRouter

SOURCES = Path(__file__).resolve().parents[2] / "golden" / "sources"
PDF = "application/pdf"
LIMITS = ParseLimits(max_seconds=120)


def tiny_settings(artifacts: str | None, **overrides) -> DoclingPdfSettings:
    values = {"artifacts_path": artifacts, "do_table_structure": False, "isolate": False, "num_threads": 2}
    return DoclingPdfSettings(**{**values, **overrides})


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory) -> str:
    return build_tiny_docling_artifacts(tmp_path_factory.mktemp("docling_artifacts"), seed=0)


@pytest.fixture(scope="module")
def parser(artifacts) -> DoclingPdfParser:
    return DoclingPdfParser(settings=tiny_settings(artifacts))


@pytest.fixture(scope="module")
def results(parser) -> dict:
    """figure.pdf and manual.pdf through the in-process pipeline, parsed once."""
    return {name: parser.parse((SOURCES / name).read_bytes(), mime=PDF, filename=name, limits=LIMITS)
            for name in ("figure.pdf", "manual.pdf")}


def page_count(name: str) -> int:
    return len(pdfium.PdfDocument(SOURCES / name))


# ---- without weights -------------------------------------------------------------------------


@pytest.mark.parametrize("isolate", [False, True])
def test_no_artifacts_path_fails_with_the_fix_in_the_reason(isolate):
    parser = DoclingPdfParser(settings=tiny_settings(None, isolate=isolate))
    result = parser.parse((SOURCES / "figure.pdf").read_bytes(), mime=PDF, filename="figure.pdf")
    assert result.status == "failed" and result.parser == "docling_pdf"
    assert result.error.startswith("model_unavailable: parse.docling.artifacts_path is not set")
    assert "docling-tools models download" in result.error
    assert parser.worker_pid is None  # no child process started in vain


def test_missing_layout_folder_names_the_expected_path(tmp_path):
    result = DoclingPdfParser(settings=tiny_settings(str(tmp_path))).parse(
        (SOURCES / "figure.pdf").read_bytes(), mime=PDF, filename="figure.pdf")
    assert result.error.startswith(f"model_unavailable: docling layout weights not found at {tmp_path / LAYOUT_FOLDER}")


def test_table_structure_without_its_weights_or_package_is_reported(artifacts):
    parser = DoclingPdfParser(settings=tiny_settings(artifacts, do_table_structure=True))
    result = parser.parse((SOURCES / "figure.pdf").read_bytes(), mime=PDF, filename="figure.pdf")
    assert result.error.startswith("model_unavailable: TableFormer weights not found at ")
    assert "docling-project--docling-models/model_artifacts/tableformer/accurate" in result.error


def test_ocr_engine_that_is_not_installed_is_reported(artifacts):
    assert importlib.util.find_spec("easyocr") is None, "easyocr stands in for a missing engine here"
    parser = DoclingPdfParser(settings=tiny_settings(artifacts, do_ocr=True, ocr_engine="easyocr"))
    result = parser.parse((SOURCES / "figure.pdf").read_bytes(), mime=PDF, filename="figure.pdf", limits=LIMITS)
    assert result.error.startswith("ocr_unavailable: OCR engine 'easyocr' is not installed")


def scanned(name: str) -> bytes:
    """The PDF's first page as an image-only PDF (no text layer): what a scanner makes."""
    image = pdfium.PdfDocument(SOURCES / name)[0].render(scale=2).to_pil().convert("RGB")
    buffer = io.BytesIO()
    image.save(buffer, format="PDF", resolution=144)
    return buffer.getvalue()


def test_rapidocr_reads_a_scanned_page_with_the_models_in_its_wheel(artifacts):
    """OCR is real here: RapidOCR's PP-OCR ONNX models ship inside the rapidocr wheel, and the
    parser points Docling at them when artifacts_path has no RapidOcr folder."""
    data = scanned("figure.pdf")
    without_ocr = DoclingPdfParser(settings=tiny_settings(artifacts)).parse(data, mime=PDF, filename="scan.pdf")
    assert without_ocr.error.startswith("no_text_layer")
    parser = DoclingPdfParser(settings=tiny_settings(artifacts, do_ocr=True, force_full_page_ocr=True))
    result = parser.parse(data, mime=PDF, filename="scan.pdf", limits=LIMITS)
    assert result.status == "ok" and result.pages[0].has_text_layer is False
    text = " ".join(block.text for block in result.blocks)
    for words in ("Thermal Derating", "SolVerde SV-405M", "temperature coefficient"):
        assert words in text



@pytest.mark.parametrize("name", ["manual.pdf", "figure.pdf"])
def test_router_falls_back_to_pdf_text_when_docling_has_no_weights(name):
    router = ParserRouter(routes={PDF: ["docling_pdf", "pdf_text"]},
                          parser_options={"docling_pdf": {"settings": tiny_settings(None, isolate=True)}})
    result = router.parse((SOURCES / name).read_bytes(), filename=name)
    assert result.status == "ok" and result.parser == "pdf_text"


def test_fingerprint_follows_output_settings_only(artifacts):
    def fingerprint(**overrides) -> str:
        return DoclingPdfParser(settings=tiny_settings(artifacts, **overrides)).fingerprint

    base = fingerprint()
    assert base == fingerprint(layout_batch_size=16, num_threads=8, device="cpu", isolate=True,
                               recycle_after_pages=5, artifacts_path="/elsewhere")
    assert base != fingerprint(images_scale=1.0)
    assert base != fingerprint(do_ocr=True)
    assert fingerprint(do_table_structure=True) != fingerprint(do_table_structure=True, table_mode="fast")


# ---- input checks before the pipeline runs ---------------------------------------------------


def test_too_many_pages_and_pages_without_text(parser):
    data = (SOURCES / "manual.pdf").read_bytes()
    over = parser.parse(data, mime=PDF, filename="manual.pdf", limits=ParseLimits(max_pages=1))
    assert over.error.startswith("too_many_pages")
    blank = pdfium.PdfDocument.new()
    blank.new_page(612, 792)
    buffer = io.BytesIO()
    blank.save(buffer)
    result = parser.parse(buffer.getvalue(), mime=PDF, filename="blank.pdf")
    assert result.error.startswith("no_text_layer")


# ---- the real pipeline with the tiny layout model --------------------------------------------


def test_tiny_artifacts_are_small_and_reproducible(artifacts, tmp_path):
    folder = Path(artifacts) / LAYOUT_FOLDER
    assert {"config.json", "model.safetensors", "preprocessor_config.json"} <= {p.name for p in folder.iterdir()}
    assert sum(p.stat().st_size for p in folder.iterdir()) < 5 * 1024 * 1024
    again = Path(build_tiny_docling_artifacts(tmp_path, seed=0)) / LAYOUT_FOLDER
    digest = lambda path: hashlib.sha256((path / "model.safetensors").read_bytes()).hexdigest()  # noqa: E731
    assert digest(again) == digest(folder)


@pytest.mark.parametrize("name", ["figure.pdf", "manual.pdf"])
def test_standard_pipeline_runs_end_to_end(results, name):
    result = results[name]
    assert result.status == "ok", result.error
    assert result.parser == "docling_pdf" and result.notes == []
    assert [page.page_no for page in result.pages] == list(range(1, page_count(name) + 1))
    assert all(page.width > 500 and page.height > 800 and page.has_text_layer for page in result.pages)
    assert result.blocks and all(block.page is not None for block in result.blocks)
    for block in result.blocks:
        x0, y0, x1, y1 = block.bbox
        assert 0 <= x0 <= x1 <= 1 and 0 <= y0 <= y1 <= 1


@pytest.mark.parametrize("name", ["figure.pdf", "manual.pdf"])
def test_every_figure_block_names_its_png_crop(results, name):
    result = results[name]
    figures = [block for block in result.blocks if block.kind == "figure"]
    assert figures, "the tiny model is biased to detect pictures"
    assert {block.attrs["crop_sha"] for block in figures} == set(result.images)
    for sha, png in result.images.items():
        assert png.startswith(b"\x89PNG") and hashlib.sha256(png).hexdigest() == sha


def test_text_of_the_golden_pdf_survives(results):
    text = " ".join(block.text for block in results["manual.pdf"].blocks)
    assert "AquaFlow AF-220 Centrifugal Pump" in text


def test_doclings_own_timeout_is_reported_as_timeout(parser):
    result = parser.parse((SOURCES / "manual.pdf").read_bytes(), mime=PDF, filename="manual.pdf",
                          limits=ParseLimits(max_seconds=0.001))
    assert result.status == "failed" and result.error.startswith("timeout: docling stopped at its document timeout")


def test_isolated_parse_matches_the_in_process_one(artifacts, results):
    parser = DoclingPdfParser(settings=tiny_settings(artifacts, isolate=True))
    try:
        result = parser.parse((SOURCES / "figure.pdf").read_bytes(), mime=PDF, filename="figure.pdf", limits=LIMITS)
        assert parser.worker_pid not in (None, os.getpid())
    finally:
        parser.close()
    assert parser.worker_pid is None
    expected = results["figure.pdf"]
    assert result.status == "ok" and result.parser == "docling_pdf"
    assert [(b.kind, b.text, b.page) for b in result.blocks] == [(b.kind, b.text, b.page) for b in expected.blocks]
    assert result.images == expected.images
