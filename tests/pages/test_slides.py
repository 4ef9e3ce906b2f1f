"""PPTX → PDF with LibreOffice (kb_ray/pages/slides.py): a shape's box as Docling reports it lands
on the shape in LibreOffice's PDF, hidden slides keep their numbers, and failures have a reason.

Needs ``soffice`` (``make office-deps``; .ci/run installs it); skipped with the reason without it."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from kb_ray.pages.render import page_count, render_page
from kb_ray.pages.slides import SlideConversionError, SlidePdfConverter
from kb_ray.parsing.docling_formats import PPTX_MIME, DoclingFormatsParser

pptx = pytest.importorskip("pptx", reason="python-pptx is not installed (pip install kb-ray[all])")
needs_soffice = pytest.mark.skipif(shutil.which("soffice") is None,
                                   reason="LibreOffice (soffice) is not installed: make office-deps")
BOX_TOLERANCE = 0.02  # of the slide's width and height
SHAPES = [(0.10, 0.30, 0.40, 0.20), (0.55, 0.60, 0.30, 0.25)]  # left, top, width, height of the slide


def blue_deck(path: Path, *, hide_first: bool = False) -> Path:
    """A 16:9 deck with one solid blue rectangle (with text) per slide at :data:`SHAPES`."""
    from pptx.dml.color import RGBColor
    from pptx.enum.shapes import MSO_SHAPE
    from pptx.util import Emu

    deck = pptx.Presentation()
    deck.slide_width, deck.slide_height = Emu(12192000), Emu(6858000)
    for number, (left, top, width, height) in enumerate(SHAPES, start=1):
        slide = deck.slides.add_slide(deck.slide_layouts[6])
        shape = slide.shapes.add_shape(MSO_SHAPE.RECTANGLE, *(Emu(round(v * s)) for v, s in (
            (left, deck.slide_width), (top, deck.slide_height), (width, deck.slide_width), (height, deck.slide_height))))
        shape.fill.solid()
        shape.fill.fore_color.rgb = RGBColor(0, 0, 255)
        shape.line.fill.background()
        shape.text_frame.text = f"Marker shape on slide {number}"
    if hide_first:
        deck.slides[0]._element.set("show", "0")
    deck.save(path)
    return path


def png_size(png: bytes) -> tuple[int, int]:
    return Image.open(io.BytesIO(png)).size


def blue_box(png: bytes) -> tuple[float, float, float, float]:
    """The blue pixels' bounding box as fractions of the image (origin top-left)."""
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    mask = (pixels[:, :, 2] > 200) & (pixels[:, :, 0] < 60) & (pixels[:, :, 1] < 60)
    rows, columns = np.nonzero(mask)
    height, width = mask.shape
    return columns.min() / width, rows.min() / height, (columns.max() + 1) / width, (rows.max() + 1) / height


@needs_soffice
def test_a_shapes_box_from_docling_lands_on_the_shape_in_the_libreoffice_pdf(tmp_path):
    data = blue_deck(tmp_path / "deck.pptx").read_bytes()
    parsed = DoclingFormatsParser().parse(data, mime=PPTX_MIME, filename="deck.pptx")
    pdf = SlidePdfConverter(timeout_s=120).convert(data)
    assert page_count(pdf) == len(parsed.pages) == len(SHAPES)
    for page in parsed.pages:
        [block] = [b for b in parsed.blocks if b.page == page.page_no]
        png = render_page(pdf, page.page_no, dpi=72, max_pixels=10**7)
        width, height = png_size(png)
        assert abs(width - page.width) <= 1 and abs(height - page.height) <= 1  # slide size = PDF page size
        assert all(abs(got - want) <= BOX_TOLERANCE for got, want in zip(blue_box(png), block.bbox)), block.bbox


@needs_soffice
def test_hidden_slides_are_converted_so_page_n_stays_slide_n(tmp_path):
    data = blue_deck(tmp_path / "hidden.pptx", hide_first=True).read_bytes()
    parsed = DoclingFormatsParser().parse(data, mime=PPTX_MIME, filename="hidden.pptx")
    pdf = SlidePdfConverter(timeout_s=120).convert(data)
    assert page_count(pdf) == len(parsed.pages) == 2
    [block] = [b for b in parsed.blocks if b.page == 2]
    assert all(abs(g - w) <= BOX_TOLERANCE for g, w in zip(blue_box(render_page(pdf, 2, dpi=72, max_pixels=10**7)),
                                                          block.bbox))


@needs_soffice
def test_a_conversion_over_its_timeout_is_killed_with_a_reason():
    with pytest.raises(SlideConversionError) as caught:
        SlidePdfConverter(timeout_s=0.05).convert(b"PK not really a deck")
    assert caught.value.reason == "convert_timeout"


def test_without_soffice_the_reason_is_no_renderer(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(SlideConversionError, match="make office-deps") as caught:
        SlidePdfConverter().convert(b"any")
    assert caught.value.reason == "no_renderer"
