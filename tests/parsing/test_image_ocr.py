"""Images as documents: real RapidOCR on images drawn with Pillow at test time."""

from __future__ import annotations

import io
import re
import sys
import time

import pytest
from PIL import Image, ImageDraw, ImageFont

from kb_ray.outcomes import Reason
from kb_ray.parsing.base import ParseLimits
from kb_ray.parsing.image_ocr import ImageOcrParser
from kb_ray.parsing.mime import EXTENSION_MIMES, content_mismatch, sniff_mime
from kb_ray.parsing.router import DEFAULT_ROUTES, DOCLING_PDF_ROUTES, ParserRouter
from tests.images import png_claiming

pytest.importorskip("rapidocr")
FONT = ImageFont.load_default(size=44)
if not isinstance(FONT, ImageFont.FreeTypeFont):
    pytest.skip("Pillow has no TrueType default font (built without FreeType)", allow_module_level=True)

Drawn = list[tuple[str, tuple[float, float, float, float]]]  # text, normalized box where it was drawn


def draw(lines: list[tuple[str, tuple[int, int]]], *, size=(1000, 420), mode="RGB", background="white") -> tuple[Image.Image, Drawn]:
    image = Image.new(mode, size, background)
    pen = ImageDraw.Draw(image)
    drawn = []
    for text, at in lines:
        pen.text(at, text, fill="black", font=FONT)
        x0, y0, x1, y1 = pen.textbbox(at, text, font=FONT)
        drawn.append((text, (x0 / size[0], y0 / size[1], x1 / size[0], y1 / size[1])))
    return image, drawn


def encoded(image: Image.Image | list[Image.Image], fmt: str) -> bytes:
    out = io.BytesIO()
    if isinstance(image, list):
        image[0].save(out, format=fmt, save_all=True, append_images=image[1:])
    else:
        image.save(out, format=fmt)
    return out.getvalue()


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def recall(drawn: str, recognised: str) -> float:
    return len(words(drawn) & words(recognised)) / len(words(drawn))


def overlap(a, b) -> float:
    """Intersection over the smaller box's area."""
    width = min(a[2], b[2]) - max(a[0], b[0])
    height = min(a[3], b[3]) - max(a[1], b[1])
    if width <= 0 or height <= 0:
        return 0.0
    smaller = min((a[2] - a[0]) * (a[3] - a[1]), (b[2] - b[0]) * (b[3] - b[1]))
    return width * height / smaller


@pytest.fixture(scope="module")
def parser() -> ImageOcrParser:
    return ImageOcrParser()


THREE_PARAGRAPHS = [("Pressure relief valve", (40, 40)), ("Maintenance log", (560, 40)),
                    ("Replace filter quarterly", (40, 260))]


@pytest.mark.parametrize("fmt, mime", [("PNG", "image/png"), ("JPEG", "image/jpeg"), ("WEBP", "image/webp")])
def test_each_format_reads_its_words_in_reading_order_with_boxes_over_them(parser, fmt, mime):
    image, drawn = draw(THREE_PARAGRAPHS)
    result = parser.parse(encoded(image, fmt), mime=mime, filename=f"scan.{fmt.lower()}")
    assert result.status == "ok", result.error
    assert [(p.page_no, p.width, p.height, p.has_text_layer) for p in result.pages] == [(1, 1000.0, 420.0, False)]
    assert len(result.blocks) == 3  # top-left, top-right (same row), then below
    for block, (text, box) in zip(result.blocks, drawn):
        assert recall(text, block.text) >= 0.66, (text, block.text)
        assert block.page == 1 and block.kind == "paragraph" and overlap(block.bbox, box) > 0.6, (block.bbox, box)


def test_close_lines_make_one_paragraph_with_a_box_per_line(parser):
    lines = [("The pump starts at dawn", (40, 40)), ("and stops when the tank", (40, 95)),
             ("reaches its upper mark", (40, 150))]
    image, drawn = draw(lines, size=(900, 260))
    (block,) = parser.parse(encoded(image, "PNG"), mime="image/png").blocks
    assert recall(" ".join(text for text, _ in lines), block.text) >= 0.8
    assert [line[2] for line in block.attrs["lines"]] == [1, 1, 1]
    for (start, end, _, *box), (text, drawn_box) in zip(block.attrs["lines"], drawn):
        assert recall(text, block.text[start:end]) >= 0.6 and overlap(box, drawn_box) > 0.6


def test_each_tiff_frame_is_a_page_with_its_own_text(parser):
    first, drawn_first = draw([("Invoice number seven", (40, 60))])
    second, drawn_second = draw([("Delivery address Oslo", (300, 200))])
    result = parser.parse(encoded([first, second], "TIFF"), mime="image/tiff", filename="two.tiff")
    assert result.status == "ok", result.error
    assert [p.page_no for p in result.pages] == [1, 2]
    by_page = {page: " ".join(b.text for b in result.blocks if b.page == page) for page in (1, 2)}
    assert recall("Invoice number seven", by_page[1]) >= 0.66 and recall("Delivery address Oslo", by_page[2]) >= 0.66
    assert words("invoice seven") & words(by_page[2]) == set()
    page_two = [b for b in result.blocks if b.page == 2]
    assert overlap(page_two[0].bbox, drawn_second[0][1]) > 0.6


def test_dark_text_on_a_transparent_background_is_read(parser):
    image, _ = draw([("Transparent label text", (40, 60))], mode="RGBA", background=(0, 0, 0, 0))
    result = parser.parse(encoded(image, "PNG"), mime="image/png")
    assert result.status == "ok" and recall("Transparent label text", result.blocks[0].text) >= 0.66


def test_a_blank_image_is_empty(parser):
    result = parser.parse(encoded(Image.new("RGB", (640, 480), "white"), "PNG"), mime="image/png")
    assert result.status == "failed" and result.reason == Reason.EMPTY


@pytest.mark.parametrize("width, height, said", [(8000, 8000, "parse.max_image_pixels"), (40000, 40000, "Pillow")])
def test_a_decompression_bomb_is_refused_from_its_header_fast(parser, width, height, said):
    data = png_claiming(width, height)
    assert len(data) < 2000
    started = time.perf_counter()
    result = parser.parse(data, mime="image/png", filename="bomb.png")
    assert time.perf_counter() - started < 2.0
    assert result.status == "failed" and result.reason == Reason.DECOMPRESSION_BOMB and said in result.detail


def test_the_pixel_limit_is_configurable():
    image, _ = draw([("Small", (10, 10))], size=(200, 100))
    result = ImageOcrParser().parse(encoded(image, "PNG"), mime="image/png", limits=ParseLimits(max_image_pixels=10_000))
    assert result.reason == Reason.DECOMPRESSION_BOMB and "200 x 100 = 20,000 pixels" in result.detail


def test_a_tiff_with_more_frames_than_pages_allowed_is_refused():
    frames = [Image.new("L", (64, 64), 255) for _ in range(3)]
    result = ImageOcrParser().parse(encoded(frames, "TIFF"), mime="image/tiff", limits=ParseLimits(max_pages=2))
    assert result.reason == Reason.TOO_MANY_PAGES and "3 frames" in result.detail


def test_truncated_image_bytes_are_corrupt():
    image, _ = draw([("Cut short", (40, 60))])
    data = encoded(image, "PNG")
    result = ImageOcrParser().parse(data[: len(data) // 2], mime="image/png")
    assert result.status == "failed" and result.reason == Reason.CORRUPT


def test_image_types_are_routed_and_sniffed():
    for ext in (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp"):
        assert DEFAULT_ROUTES[EXTENSION_MIMES[ext]] == DOCLING_PDF_ROUTES[EXTENSION_MIMES[ext]] == ["image_ocr"]
    image = Image.new("RGB", (32, 32), "white")
    for fmt, mime in [("PNG", "image/png"), ("JPEG", "image/jpeg"), ("TIFF", "image/tiff"), ("WEBP", "image/webp")]:
        data = encoded(image, fmt)
        assert sniff_mime(data) == mime and content_mismatch(claimed=mime, data=data) is None
    assert content_mismatch(claimed="image/png", data=encoded(image, "JPEG")) is None  # Pillow reads the content
    assert "no PNG, JPEG, TIFF or WebP header" in content_mismatch(claimed="image/png", data=b"just some text\n")
    assert content_mismatch(claimed="image/jpeg", data=b"%PDF-1.7\n") is not None


def test_a_text_file_named_png_is_refused_before_ocr():
    result = ParserRouter().parse(b"Meeting notes: nothing to see.\n", filename="notes.png")
    assert result.parser == "router" and result.reason == Reason.UNSUPPORTED_TYPE


def test_the_fingerprint_names_the_engine_models_and_grouping():
    config = ImageOcrParser().config()
    assert config["engine"].startswith("rapidocr ") and config["models"]["rec"][0].startswith("PP-OCR")
    assert ImageOcrParser(min_score=0.7).fingerprint != ImageOcrParser().fingerprint
    assert ImageOcrParser(paragraph_gap=1.2).fingerprint != ImageOcrParser().fingerprint
    assert ImageOcrParser(num_threads=4).fingerprint == ImageOcrParser().fingerprint  # threads do not change output


def test_through_the_router_in_the_isolated_child_under_the_memory_cap():
    router = ParserRouter(isolate=True, limits=ParseLimits(max_memory_bytes=4096 << 20))
    try:
        image, drawn = draw([("Isolated child reads this", (40, 60))])
        result = router.parse(encoded(image, "PNG"), filename="child.png")
        assert result.status == "ok", result.error
        assert result.parser == "image_ocr" and router._isolated.child_pid is not None
        assert recall("Isolated child reads this", result.blocks[0].text) >= 0.75
        assert overlap(result.blocks[0].bbox, drawn[0][1]) > 0.6
        bomb = router.parse(png_claiming(8000, 8000), filename="bomb.png")
        assert bomb.reason == Reason.DECOMPRESSION_BOMB
    finally:
        router.close()


def test_without_rapidocr_an_image_fails_as_ocr_unavailable(monkeypatch):
    monkeypatch.setitem(sys.modules, "rapidocr", None)  # import rapidocr raises ModuleNotFoundError
    image, _ = draw([("Needs OCR", (40, 60))])
    result = ImageOcrParser().parse(encoded(image, "PNG"), mime="image/png")
    assert result.reason == Reason.OCR_UNAVAILABLE and "kb-ray[ocr]" in result.detail
