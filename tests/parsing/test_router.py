import pytest

from kb_ray.outcomes import Reason
from kb_ray.parsing.base import ParseLimits
from kb_ray.parsing.blocks import ParseResult
from kb_ray.parsing.mime import mime_from_name, sniff_mime
from kb_ray.parsing.router import ParserRouter

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


def test_mime_from_name_and_magic():
    assert mime_from_name("A/B.PDF") == "application/pdf"
    assert mime_from_name("x.md") == "text/markdown"
    assert sniff_mime(b"%PDF-1.7 ...") == "application/pdf"
    assert sniff_mime(PNG) == "image/png"


def test_png_renamed_pdf_is_refused_with_the_reason():
    result = ParserRouter().parse(PNG, filename="scan.pdf")
    assert result.status == "failed"
    assert result.reason == Reason.CORRUPT and "image/png" in result.detail
    assert result.error == f"corrupt: {result.detail}"  # the display text, rendered from the two


def test_unknown_type_is_refused():
    result = ParserRouter().parse(b"\x00\x01", filename="data.bin")
    assert result.status == "failed" and result.reason == Reason.UNSUPPORTED_TYPE


def test_over_the_byte_limit_fails():
    router = ParserRouter(limits=ParseLimits(max_bytes=10))
    result = router.parse(b"a" * 11, filename="big.txt")
    assert result.status == "failed" and result.reason == Reason.TOO_LARGE


def test_router_fingerprint_is_stable():
    assert ParserRouter().fingerprint == ParserRouter().fingerprint
    assert ParserRouter().fingerprint != ParserRouter(routes={"text/plain": ["plain_text"]}).fingerprint


def test_a_failure_needs_a_known_reason_code():
    with pytest.raises(ValueError, match="unknown failure reason 'broken'; known reasons: unreadable"):
        ParseResult.failed(parser="p", mime="text/plain", reason="broken")


def test_a_fallback_names_the_parser_that_failed_first(tmp_path):
    from kb_ray.config import ParseSettings
    from kb_ray.processing import build_router
    from tests.conftest import GOLDEN_SOURCES

    settings = ParseSettings.model_validate({"docling": {"enabled": True, "artifacts_path": str(tmp_path / "none")}})
    result = build_router(settings).parse((GOLDEN_SOURCES / "manual.pdf").read_bytes(), filename="manual.pdf")
    assert result.status == "ok" and result.parser == "pdf_text"
    assert (result.fallback_from, result.fallback_reason) == ("docling_pdf", Reason.MODEL_UNAVAILABLE)
    assert result.notes[0].startswith("docling_pdf failed (model_unavailable: ")
    assert result.notes[0].endswith("; parsed by pdf_text")
