"""``PageRenderer``: PDF bytes → one PNG per page at a fixed dpi (pypdfium2, no Ray).

pdfium is not thread-safe, so opening, rendering and closing run under the process-wide
lock of :mod:`kb_ray.parsing.pdf_text`; PNG encoding and hashing run outside it.

Limits are fail-soft: a document over ``max_pages`` renders no page, a page whose
bitmap would exceed ``max_pixels`` is skipped; both come back as a ``reason`` and the
text path of the document is unaffected.

:func:`render_page` renders one page on demand (the viewer's page images,
kb_ray/search/page_images.py), under the same lock and with the same engine.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from dataclasses import dataclass, field

import pypdfium2 as pdfium

from kb_ray import ids
from kb_ray.parsing.pdf_text import PDFIUM_LOCK

RENDERER_VERSION = "1"


@dataclass(frozen=True)
class RenderedPage:
    page_no: int  # 1-based, as in the ``pages`` table
    png: bytes
    sha: str
    width_px: int
    height_px: int


@dataclass
class RenderResult:
    pages: list[RenderedPage] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)

    @property
    def reason(self) -> str | None:
        return "; ".join(self.reasons) or None


class PageRenderer:
    """Renders every page of a PDF within the configured limits."""

    def __init__(self, *, dpi: int = 144, max_pages: int = 200, max_pixels: int = 4_000_000) -> None:
        self.dpi, self.max_pages, self.max_pixels = dpi, max_pages, max_pixels

    @property
    def fingerprint(self) -> str:
        return ids.fingerprint(kind="renderer", name=type(self).__name__, version=RENDERER_VERSION,
                               config={"dpi": self.dpi, "engine": f"pypdfium2 {pdfium.PYPDFIUM_INFO}"})

    def render(self, data: bytes) -> RenderResult:
        result = RenderResult()
        images = self._render_images(data, result)
        for page_no, image in images:
            buffer = io.BytesIO()
            image.save(buffer, format="PNG", optimize=False, compress_level=6)
            png = buffer.getvalue()
            result.pages.append(RenderedPage(page_no, png, ids.sha256_bytes(png), image.width, image.height))
        return result

    def _render_images(self, data: bytes, result: RenderResult) -> list:
        scale = self.dpi / 72.0
        with PDFIUM_LOCK:
            try:
                pdf = pdfium.PdfDocument(data)
            except pdfium.PdfiumError as exc:
                result.reasons.append(f"pages: cannot open for rendering ({exc})")
                return []
            try:
                return self._render_pages(pdf, scale, result)
            finally:
                pdf.close()

    def _render_pages(self, pdf: pdfium.PdfDocument, scale: float, result: RenderResult) -> list:
        count = len(pdf)
        if count > self.max_pages:
            result.reasons.append(f"pages: {count} pages > pages.max_pages {self.max_pages}; none rendered")
            return []
        images, too_big = [], []
        for index in range(count):
            page = pdf[index]
            try:
                width, height = page.get_size()
                if round(width * scale) * round(height * scale) > self.max_pixels:
                    too_big.append(index + 1)
                    continue
                bitmap = page.render(scale=scale)
                images.append((index + 1, bitmap.to_pil().convert("RGB")))
                bitmap.close()
            finally:
                page.close()
        if too_big:
            result.reasons.append(f"pages: {len(too_big)} page(s) over pages.max_pixels {self.max_pixels} "
                                  f"not rendered: {too_big[:10]}")
        return images


class PageTooLarge(ValueError):
    """The page's bitmap at the asked dpi would exceed the pixel limit."""


def renderer_fingerprint() -> str:
    """What a page's pixels depend on besides its bytes, page and dpi: this code and pdfium."""
    return ids.fingerprint(kind="renderer", name="render_page", version=RENDERER_VERSION,
                           config={"engine": f"pypdfium2 {pdfium.PYPDFIUM_INFO}"})


def render_page(data: bytes, page_no: int, *, dpi: int, max_pixels: int) -> bytes:
    """One page (1-based) of a PDF as PNG bytes at ``dpi``; raises :class:`PageTooLarge` over
    ``max_pixels`` (checked from the page size before a pixel is drawn), ``IndexError`` for a
    page the PDF does not have and ``ValueError`` for bytes pdfium cannot open."""
    scale = dpi / 72.0
    with _opened(data) as pdf:
        if not 1 <= page_no <= len(pdf):
            raise IndexError(f"the PDF has pages 1..{len(pdf)}, not {page_no}")
        page = pdf[page_no - 1]
        try:
            width, height = page.get_size()
            pixels = round(width * scale) * round(height * scale)
            if pixels > max_pixels:
                raise PageTooLarge(f"page {page_no} at {dpi} dpi is {pixels} pixels, over the limit of {max_pixels}")
            bitmap = page.render(scale=scale)
            image = bitmap.to_pil().convert("RGB")
            bitmap.close()
        finally:
            page.close()
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=False, compress_level=6)
    return buffer.getvalue()


def page_count(data: bytes) -> int:
    """How many pages a PDF has (under the pdfium lock); ``ValueError`` for bytes pdfium cannot open."""
    with _opened(data) as pdf:
        return len(pdf)


@contextlib.contextmanager
def _opened(data: bytes) -> Iterator[pdfium.PdfDocument]:
    """The PDF opened under the process-wide pdfium lock, closed on exit; ``ValueError`` for bytes
    pdfium cannot open."""
    with PDFIUM_LOCK:
        try:
            pdf = pdfium.PdfDocument(data)
        except pdfium.PdfiumError as exc:
            raise ValueError(f"pdfium cannot open the PDF ({exc})") from exc
        try:
            yield pdf
        finally:
            pdf.close()
