from kb_ray.parsing.base import ParseLimits
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
    assert result.error.startswith("corrupt") and "image/png" in result.error


def test_unknown_type_is_refused():
    result = ParserRouter().parse(b"\x00\x01", filename="data.bin")
    assert result.status == "failed" and result.error.startswith("unsupported_type")


def test_over_the_byte_limit_fails():
    router = ParserRouter(limits=ParseLimits(max_bytes=10))
    result = router.parse(b"a" * 11, filename="big.txt")
    assert result.status == "failed" and result.error.startswith("too_large")


def test_router_fingerprint_is_stable():
    assert ParserRouter().fingerprint == ParserRouter().fingerprint
    assert ParserRouter().fingerprint != ParserRouter(routes={"text/plain": ["plain_text"]}).fingerprint
