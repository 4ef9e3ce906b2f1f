"""The Docling model parser in the ingest: unset, configured without weights, configured
with (tiny random) weights. Real Ray, a real Docling pipeline in a child process of the
model-parse actor, real Delta tables."""

from __future__ import annotations

import shutil

import pytest

from kb_ray.catalog.verify import verify_catalog
from kb_ray.ingest.run import run_ingest
from kb_ray.parsing.docling_tiny import build_tiny_docling_artifacts
from tests.conftest import GOLDEN_SOURCES
from tests.ingest.helpers import INLINE, catalog, ingest_config, log_rows

pytestmark = pytest.mark.usefixtures("ray_session")
PDFS = ("figure.pdf", "manual.pdf")


@pytest.fixture()
def sources(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in (*PDFS, "notes.txt"):
        shutil.copy(GOLDEN_SOURCES / name, src / name)
    return src


def parsers_by_file(kb) -> dict[str, str]:
    uris = {row["document_id"]: row["uri"].rsplit("/", 1)[-1] for row in catalog(kb).read("documents").to_pylist()}
    active = {row["active_version_id"] for row in catalog(kb).read("documents").to_pylist()}
    return {uris[row["document_id"]]: row["parser"] for row in catalog(kb).read("versions").to_pylist()
            if row["version_id"] in active}


# a Ray ingest, ~20 s; Docling's parser is tested without Ray in tests/parsing/test_docling_pdf.py;
# make test-cluster (CI) runs it
@pytest.mark.slow
def test_unset_docling_parses_pdfs_with_pdf_text(tmp_path, sources):
    report = run_ingest(ingest_config(tmp_path / "kb", [sources], INLINE))
    assert report.fallbacks == 0 and report.documents["new"] == 3
    assert parsers_by_file(tmp_path / "kb") == {"figure.pdf": "pdf_text", "manual.pdf": "pdf_text",
                                                "notes.txt": "plain_text"}


@pytest.mark.slow  # a Ray ingest, ~22 s; make test-cluster (CI) runs it
def test_docling_without_weights_falls_back_to_pdf_text_and_says_why(tmp_path, sources):
    missing = tmp_path / "no-weights"
    config = ingest_config(tmp_path / "kb", [sources], "parse.docling.enabled=true",
                           f"parse.docling.artifacts_path={missing}")
    report = run_ingest(config)
    assert report.documents["new"] == 3 and report.documents["failed"] == 0 and report.fallbacks == 2
    assert set(parsers_by_file(tmp_path / "kb").values()) == {"pdf_text", "plain_text"}
    notes = {row["uri"].rsplit("/", 1)[-1]: row["error"] for row in log_rows(tmp_path / "kb", report.run_id)}
    for name in PDFS:
        assert notes[name].startswith("docling_pdf failed (model_unavailable:") and str(missing) in notes[name]
        assert notes[name].endswith("; parsed by pdf_text")
    assert notes["notes.txt"] is None


@pytest.mark.slow  # a Docling model-pool ingest, ~25 s; CI runs it (make test-cluster)
def test_docling_with_weights_parses_pdfs_in_the_model_pool(tmp_path, sources):
    artifacts = build_tiny_docling_artifacts(tmp_path / "docling-tiny")
    config = ingest_config(tmp_path / "kb", [sources], "parse.docling.enabled=true",
                           f"parse.docling.artifacts_path={artifacts}", "parse.docling.do_table_structure=false",
                           "parse.docling.device=cpu", "parse.docling.num_threads=1")
    report = run_ingest(config)
    assert report.documents["new"] == 3 and report.documents["failed"] == 0
    parsers = parsers_by_file(tmp_path / "kb")
    assert parsers["notes.txt"] == "plain_text"
    # The tiny layout model has random weights: a PDF it lays out is a docling_pdf version;
    # one whose layout comes out empty falls back to pdf_text with the reason noted.
    notes = {row["uri"].rsplit("/", 1)[-1]: row["error"] for row in log_rows(tmp_path / "kb", report.run_id)}
    for name in PDFS:
        assert parsers[name] == "docling_pdf" or notes[name].startswith("docling_pdf failed (")
    assert "docling_pdf" in parsers.values()
    versions = [row for row in catalog(tmp_path / "kb").read("versions").to_pylist() if row["parser"] == "docling_pdf"]
    elements = catalog(tmp_path / "kb").read("elements").to_pylist()
    for version in versions:
        mine = [e for e in elements if e["version_id"] == version["version_id"] and e["layer"] == "body"]
        assert mine and all(e["regions"] and 0 <= e["regions"][0]["x0"] <= e["regions"][0]["x1"] <= 1 for e in mine)
    assert verify_catalog(catalog(tmp_path / "kb")).ok(strict=True)

    again = run_ingest(config)  # same weights, same settings: same versions, nothing parsed
    assert again.documents["unchanged"] == 3 and again.parses == 0


@pytest.mark.slow  # two Docling OCR ingests, ~35 s; CI runs it (make test-cluster)
def test_a_scanned_pdf_fails_without_ocr_and_is_searchable_text_with_docling_ocr(tmp_path):
    import pypdfium2 as pdfium

    src = tmp_path / "src"
    src.mkdir()
    image = pdfium.PdfDocument(GOLDEN_SOURCES / "figure.pdf")[0].render(scale=2).to_pil().convert("RGB")
    image.save(src / "scanned.pdf", format="PDF", resolution=144)  # image only: no text layer
    plain = run_ingest(ingest_config(tmp_path / "plain", [src], INLINE))
    assert plain.documents["failed"] == 1 and plain.failures[0]["reason"] == "no_text_layer"
    assert plain.failure_reasons == {"no_text_layer": 1}

    artifacts = build_tiny_docling_artifacts(tmp_path / "docling-tiny")
    config = ingest_config(tmp_path / "kb", [src], "parse.docling.enabled=true", f"parse.docling.artifacts_path={artifacts}",
                           "parse.docling.do_table_structure=false", "parse.docling.device=cpu",
                           "parse.docling.do_ocr=true", "parse.docling.force_full_page_ocr=true")
    report = run_ingest(config)
    assert report.documents["new"] == 1 and report.documents["failed"] == 0
    (version,) = catalog(tmp_path / "kb").read("versions").to_pylist()
    assert version["parser"] == "docling_pdf" and "Thermal Derating" in version["canonical_text"]
    assert verify_catalog(catalog(tmp_path / "kb")).ok(strict=True)
