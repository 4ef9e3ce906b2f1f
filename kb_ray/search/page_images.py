"""``PageImages``: one page of a document's active version as a PNG, for the viewer
(``GET /v1/documents/{id}/pages/{n}.png``, docs/viewer.md).

Where the bytes come from, in order:

1. the image a ``pages.enabled`` ingest rendered (``pages.image_sha`` in ``blobs/pages``),
   when the asked dpi is the ingest's ``pages.dpi``;
2. a render cached by an earlier request, ``blobs/renders/<key>.png``, where ``key`` hashes
   the version's ``raw_sha``, the page, the dpi and the renderer fingerprint (so a changed
   source, dpi or pdfium never reads a stale image);
3. a fresh render with pypdfium2 of the version's raw bytes: the raw blob
   (``blobs/raw/<raw_sha>``: uploads, and ``ingest.keep_raw``), else the source file when
   its sha256 still equals ``raw_sha``; otherwise the page is gone (:class:`PageImageError`
   with status 410). A PPTX is first converted to PDF with LibreOffice
   (kb_ray/pages/slides.py), cached as ``blobs/conversions/<key>.pdf`` where ``key`` hashes
   ``raw_sha`` and the converter fingerprint (the soffice build; it is in the render key too).

Limits: dpi in ``[MIN_DPI, serve.page_image_max_dpi]`` and at most
``serve.page_image_max_pixels`` pixels (both 400); an unknown page is 404, and so is a
document whose format has no page images (PDF and PPTX are rendered). A PPTX without
soffice installed is 501, a failed conversion 500. Every :class:`PageImageError` carries a
``reason`` code, one of :data:`REASONS`.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import Any

import fsspec

from kb_ray import ids
from kb_ray.catalog.blobs import BlobStore
from kb_ray.catalog.sql import open_sql_session
from kb_ray.catalog.storage import fsspec_options
from kb_ray.errors import KbRayError
from kb_ray.pages.render import PageTooLarge, page_count, render_page, renderer_fingerprint
from kb_ray.pages.slides import CONVERT_LOCK, SlideConversionError, SlidePdfConverter, converter_fingerprint
from kb_ray.parsing.docling_formats import PPTX_MIME

logger = logging.getLogger(__name__)
MIN_DPI = 36
PDF_MIME = "application/pdf"
RENDERED_MIMES = (PDF_MIME, PPTX_MIME)
REASONS = ("bad_dpi", "too_large", "no_document", "no_page", "not_paginated", "source_changed",
           "source_unreadable", "no_renderer", "convert_failed", "convert_timeout", "page_count_mismatch")
_CONVERSION_STATUS = {"no_renderer": 501, "convert_failed": 500, "convert_timeout": 500}
_VERSION_SQL = """
SELECT d.document_id, d.collection, d.acl, d.uri, v.version_id, v.raw_sha, v.mime, v.n_pages, p.width, p.height, p.image_sha
FROM documents d JOIN versions v ON v.version_id = d.active_version_id
LEFT JOIN pages p ON p.version_id = v.version_id AND p.page_no = $page_no
WHERE d.document_id = $document_id
"""


class PageImageError(KbRayError):
    """A page image that cannot be served: ``status`` is the HTTP code (400, 404, 410, 500, 501),
    ``reason`` one of :data:`REASONS`."""

    def __init__(self, message: str, *, status: int, reason: str) -> None:
        self.status, self.reason = status, reason
        super().__init__(message)


@dataclass(frozen=True)
class PageImageLimits:
    default_dpi: int = 144  # pages.dpi: the ingest's own renders are reused at this dpi
    max_dpi: int = 300
    max_pixels: int = 16_000_000
    convert_timeout_s: float = 60.0  # one PPTX -> PDF conversion with LibreOffice

    @classmethod
    def from_config(cls, config: Any) -> PageImageLimits:
        return cls(default_dpi=config.pages.dpi, max_dpi=config.serve.page_image_max_dpi,
                   max_pixels=config.serve.page_image_max_pixels,
                   convert_timeout_s=config.serve.page_image_convert_timeout_s)


class PageImages:
    """Serves page PNGs of one catalog; stateless apart from the blob stores."""

    def __init__(self, catalog: Any, *, limits: PageImageLimits) -> None:
        self.catalog, self.limits = catalog, limits
        options = dict(catalog.storage_options or {})
        self.storage_options = options
        self.raw = BlobStore(catalog.kb_root, kind="raw", storage_options=options)
        self.ingest_pages = BlobStore(catalog.kb_root, kind="pages", storage_options=options)
        self.renders = BlobStore(catalog.kb_root, kind="renders", storage_options=options)
        self.conversions = BlobStore(catalog.kb_root, kind="conversions", storage_options=options)
        self.converter = SlidePdfConverter(timeout_s=limits.convert_timeout_s)

    def checked_dpi(self, dpi: int | None) -> int:
        dpi = self.limits.default_dpi if dpi is None else dpi
        if not MIN_DPI <= dpi <= self.limits.max_dpi:
            raise PageImageError(f"dpi must be between {MIN_DPI} and {self.limits.max_dpi}, got {dpi}", status=400,
                                 reason="bad_dpi")
        return dpi

    def page_row(self, document_id: str, page_no: int) -> dict[str, Any] | None:
        """The document (``collection``, ``acl`` for the visibility check) and its active version's
        facts for one page (``width``/``height`` in points, None when the
        ``pages`` table has no row for it), or None when the document has no active version."""
        connection = open_sql_session(self.catalog)
        try:
            result = connection.execute(_VERSION_SQL, {"document_id": document_id, "page_no": page_no})
            rows = result.fetchall()
            return dict(zip([c[0] for c in result.description], rows[0])) if rows else None
        finally:
            connection.close()

    def png(self, row: dict[str, Any] | None, page_no: int, *, dpi: int | None = None) -> bytes:
        """The PNG of page ``page_no`` of :meth:`page_row`'s ``row``; raises :class:`PageImageError`
        (400 limits, 404 unknown document or page, 410 raw bytes gone, 500/501 a PPTX not converted)."""
        if row is None:
            raise PageImageError("no such document", status=404, reason="no_document")
        dpi = self.checked_dpi(dpi)
        if row["mime"] not in RENDERED_MIMES:
            raise PageImageError(f"document {row['document_id']} is {row['mime']}: page images are rendered for "
                                 "PDFs and PPTX only (the viewer shows its canonical text)", status=404,
                                 reason="not_paginated")
        if not 1 <= page_no <= (row["n_pages"] or 0):
            raise PageImageError(f"document {row['document_id']} has pages 1..{row['n_pages'] or 0}, not {page_no}",
                                 status=404, reason="no_page")
        self._check_pixels(row, dpi)
        if dpi == self.limits.default_dpi and row["image_sha"] and self.ingest_pages.exists(row["image_sha"]):
            return self.ingest_pages.get(row["image_sha"])
        key = render_key(row["raw_sha"], page_no, dpi, converter=_converter_of(row))
        if self.renders.exists(key):
            return self.renders.get(key)
        png = self._render(row, page_no, dpi)
        self.renders.put(key, png)
        return png

    def _check_pixels(self, row: dict[str, Any], dpi: int) -> None:
        if row["width"] is None or row["height"] is None:
            return  # checked again on the page itself while rendering
        pixels = round(row["width"] * dpi / 72) * round(row["height"] * dpi / 72)
        if pixels > self.limits.max_pixels:
            raise PageImageError(f"page at {dpi} dpi is {pixels} pixels, over the limit of {self.limits.max_pixels}; "
                                 "ask for a lower dpi", status=400, reason="too_large")

    def _render(self, row: dict[str, Any], page_no: int, dpi: int) -> bytes:
        data = self.pdf_bytes(row)
        try:
            return render_page(data, page_no, dpi=dpi, max_pixels=self.limits.max_pixels)
        except PageTooLarge as exc:
            raise PageImageError(f"{exc}; ask for a lower dpi", status=400, reason="too_large") from exc

    def pdf_bytes(self, row: dict[str, Any]) -> bytes:
        """The version as PDF: its raw bytes, or a PPTX's cached (else fresh) LibreOffice conversion."""
        if row["mime"] == PDF_MIME:
            return self.raw_bytes(row)
        key = conversion_key(row["raw_sha"], _converter_of(row))
        with CONVERT_LOCK:  # a second request for the same deck waits, then reads the first one's PDF
            if self.conversions.exists(key):
                return self.conversions.get(key)
            data = self.raw_bytes(row)
            try:
                pdf = self.converter.convert(data)
            except SlideConversionError as exc:
                raise _conversion_error(exc) from exc
            if (pages := page_count(pdf)) != row["n_pages"]:
                raise PageImageError(f"LibreOffice made {pages} pages of the {row['n_pages']} slides of document "
                                     f"{row['document_id']}: its boxes would not line up", status=500,
                                     reason="page_count_mismatch")
            self.conversions.put(key, pdf)
            return pdf

    def raw_bytes(self, row: dict[str, Any]) -> bytes:
        """The version's raw bytes: the raw blob, else the source while its sha matches; else 410."""
        raw_sha = row["raw_sha"]
        if self.raw.exists(raw_sha):
            return self.raw.get(raw_sha)
        uri = row["uri"]
        try:
            with fsspec.open(uri, "rb", **fsspec_options(uri, self.storage_options)) as handle:
                data = handle.read()
        except (OSError, ValueError) as exc:
            raise PageImageError(f"the source {uri} of this version cannot be read ({type(exc).__name__}) and its "
                                 "bytes were not kept (ingest.keep_raw): the page cannot be rendered", status=410,
                                 reason="source_unreadable") from exc
        if ids.sha256_bytes(data) != raw_sha:
            raise PageImageError(f"the source {uri} changed since this version was ingested and its bytes were not "
                                 "kept (ingest.keep_raw): re-ingest it to see its current pages", status=410,
                                 reason="source_changed")
        return data


def render_key(raw_sha: str, page_no: int, dpi: int, *, converter: str | None = None) -> str:
    """The cache name of one render: a sha256 over what the pixels depend on (for a PPTX, also
    the converter that made its PDF)."""
    parts = [raw_sha, str(page_no), str(dpi), renderer_fingerprint(), *([converter] if converter else [])]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def conversion_key(raw_sha: str, converter: str) -> str:
    """The cache name of a presentation's PDF: a sha256 over its bytes' sha and the converter."""
    return hashlib.sha256(f"{raw_sha}\n{converter}".encode()).hexdigest()


def _converter_of(row: dict[str, Any]) -> str | None:
    """The converter fingerprint a PPTX's pixels depend on (None for a PDF); 501 without soffice."""
    if row["mime"] == PDF_MIME:
        return None
    try:
        return converter_fingerprint()
    except SlideConversionError as exc:
        raise _conversion_error(exc) from exc


def _conversion_error(exc: SlideConversionError) -> PageImageError:
    return PageImageError(str(exc), status=_CONVERSION_STATUS[exc.reason], reason=exc.reason)
