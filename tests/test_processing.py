"""DocumentProcessor end to end: bad input fails with a reason, good input is deterministic."""

from __future__ import annotations

import io
import random
from dataclasses import dataclass
from pathlib import Path

import pytest

from kb_ray.config import ParseSettings
from kb_ray.processing import DocumentProcessor

SOURCES_DIR = Path(__file__).resolve().parents[1] / "golden" / "sources"


@dataclass(frozen=True)
class BadInput:
    label: str
    filename: str
    data: bytes
    reason: str  # expected prefix of ``version.error`` before ":"
    detail: str  # a phrase the message must contain (case-insensitive)


def golden_bytes(name: str) -> bytes:
    return (SOURCES_DIR / name).read_bytes()


def encrypted_pdf() -> bytes:
    from reportlab.pdfgen import canvas

    buffer = io.BytesIO()
    pdf = canvas.Canvas(buffer, encrypt="secret", invariant=1)
    pdf.drawString(72, 720, "Quarterly figures, for the board only.")
    pdf.showPage()
    pdf.save()
    return buffer.getvalue()


def png_bytes() -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (16, 16), "white").save(buffer, format="PNG")
    return buffer.getvalue()


def bad_inputs() -> list[BadInput]:
    manual = golden_bytes("manual.pdf")
    noise = random.Random(1234).randbytes(4096)
    return [
        BadInput("empty", "empty.pdf", b"", "empty", "no bytes"),
        BadInput("truncated_pdf", "manual.pdf", manual[: int(len(manual) * 0.4)], "corrupt", "pdfium"),
        BadInput("encrypted_pdf", "secret.pdf", encrypted_pdf(), "encrypted", "password"),
        BadInput("png_renamed_pdf", "scan.pdf", png_bytes(), "corrupt", "image/png"),
        BadInput("invalid_utf8", "notes-latin1.txt", "Café menu\n\nCrème brûlée: €6".encode("cp1252"),
                 "invalid_encoding", "utf-8"),
        BadInput("unknown_extension", "data.xyz", noise[:512], "unsupported_type", "no parser"),
        # Random bytes named .docx: no zip header, so the router has nothing to refuse up front;
        # the archive check (kb_ray/parsing/archives.py) rejects it before Docling sees it.
        BadInput("corrupt_docx", "policy.docx", noise, "corrupt", "not a readable ZIP archive"),
    ]


BAD_INPUTS = bad_inputs()


@pytest.fixture(scope="module")
def processor() -> DocumentProcessor:
    return DocumentProcessor()


def process(processor: DocumentProcessor, data: bytes, name: str):
    return processor.process(data, collection="tests", key=name)


def assert_failed_with(version, bad: BadInput) -> None:
    assert version.status == "failed", f"{bad.label}: expected failure, got {version.status}"
    reason, _, detail = (version.error or "").partition(": ")
    assert reason == bad.reason, f"{bad.label}: {version.error}"
    assert bad.detail.lower() in detail.lower(), f"{bad.label}: {version.error}"
    assert not version.chunks and not version.elements and not version.canonical_text


@pytest.mark.parametrize("bad", BAD_INPUTS, ids=[bad.label for bad in BAD_INPUTS])
def test_bad_input_fails_with_its_reason(processor, bad):
    assert_failed_with(process(processor, bad.data, bad.filename), bad)


def test_too_many_pages():
    limited = DocumentProcessor(parse=ParseSettings(max_pages=2))
    version = process(limited, golden_bytes("manual.pdf"), "manual.pdf")
    assert version.status == "failed"
    assert version.error == "too_many_pages: 3 pages > limit 2"


def test_failed_version_still_has_ids_and_fingerprints(processor):
    version = process(processor, b"", "empty.pdf")
    assert version.version_id and version.document_id and version.raw_sha and version.pipeline_fp


GOOD_FILES = ["manual.pdf", "policy.docx", "notes.txt", "faq.html", "inventory.xlsx", "two_column.pdf"]


def test_mixed_batch_isolates_failures():
    # One processor for the whole batch; its page limit turns the 6-page report into a failure.
    processor = DocumentProcessor(parse=ParseSettings(max_pages=5))
    over_limit = BadInput("over_page_limit", "long_report.pdf", golden_bytes("long_report.pdf"),
                          "too_many_pages", "6 pages > limit 5")
    good = [(name, golden_bytes(name), None) for name in GOOD_FILES]
    bad = [(bad.filename, bad.data, bad) for bad in [*BAD_INPUTS, over_limit]]
    batch = [item for pair in zip(good, bad) for item in pair] + bad[len(good):]
    assert len(batch) == len(good) + len(bad)
    for name, data, expected_failure in batch:
        version = process(processor, data, name)
        if expected_failure is None:
            assert version.status == "staged", f"{name}: {version.error}"
            assert version.error is None and version.chunks, name
        else:
            assert_failed_with(version, expected_failure)


def test_same_bytes_give_the_same_ids(processor):
    for name in ("manual.pdf", "policy.docx", "notes.txt"):
        data = golden_bytes(name)
        first, second = process(processor, data, name), process(DocumentProcessor(), data, name)
        assert first.version_id == second.version_id
        assert [e.element_id for e in first.elements] == [e.element_id for e in second.elements]
        assert [c.chunk_id for c in first.chunks] == [c.chunk_id for c in second.chunks]
        assert first.canonical_text == second.canonical_text


def test_same_text_in_new_bytes_keeps_chunk_ids(processor):
    original = golden_bytes("notes.txt")
    crlf = original.replace(b"\n", b"\r\n")
    assert crlf != original
    before, after = process(processor, original, "notes.txt"), process(processor, crlf, "notes.txt")
    assert after.status == before.status == "staged"
    assert after.raw_sha != before.raw_sha and after.version_id != before.version_id
    assert after.document_id == before.document_id
    assert after.canonical_text == before.canonical_text
    assert [c.chunk_id for c in after.chunks] == [c.chunk_id for c in before.chunks]
