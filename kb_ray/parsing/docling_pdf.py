"""PDFs through Docling's standard pipeline: layout model, TableFormer, optional OCR.

The ``DoclingDocument`` is mapped to blocks by :mod:`kb_ray.parsing.docling_mapping` (the
same mapping as DOCX/HTML, here with a page and a box on every element), tables keep their
rows, and every figure keeps a PNG crop in :attr:`ParseResult.images` named by
``attrs["crop_sha"]``.

With ``settings.isolate`` (the default) the pipeline runs in a child process through
:class:`~kb_ray.parsing.isolation.ProcessIsolatedParser`, which builds a non-isolated
``DoclingPdfParser`` there: the timeout is then a hard one and a crash fails one document.
Docling's own ``document_timeout`` (cooperative) is set to ``limits.max_seconds`` as well.

Failure reasons of this parser (besides the base ones): ``model_unavailable`` (weights or
packages missing), ``ocr_unavailable``, ``no_text_layer`` (no text layer and OCR off),
``layout_empty`` (pages have text but docling placed none of it), ``partial`` (docling lost
pages), ``conversion_failed`` (docling reported failure), ``timeout``, ``crashed``.
"""

from __future__ import annotations

import functools
import logging
from io import BytesIO
from typing import TYPE_CHECKING, Any

from kb_ray.config import DoclingPdfSettings
from kb_ray.errors import ParseError
from kb_ray.parsing.base import ParseLimits, Parser
from kb_ray.parsing.blocks import PageInfo, ParseResult
from kb_ray.parsing.docling_formats import package_version
from kb_ray.parsing.docling_pdf_pipeline import (
    LAYOUT_REPO_ID,
    build_pdf_converter,
    missing_models,
)

if TYPE_CHECKING:
    from docling.datamodel.document import ConversionResult
    from docling.document_converter import DocumentConverter
    from docling_core.types.doc import DoclingDocument

    from kb_ray.parsing.isolation import ProcessIsolatedParser

logger = logging.getLogger(__name__)

PDF_MIME = "application/pdf"


class DoclingPdfParser(Parser):
    """Docling's layout-model PDF pipeline; weights only from ``settings.artifacts_path``."""

    name = "docling_pdf"
    version = "1"
    mimes = frozenset({PDF_MIME})

    def __init__(self, *, settings: DoclingPdfSettings | None = None) -> None:
        self.settings = settings or DoclingPdfSettings()
        self._converters: dict[float | None, DocumentConverter] = {}  # by document timeout
        self._isolated: ProcessIsolatedParser | None = None

    def config(self) -> dict[str, Any]:
        """What changes the output; batch sizes, device, threads and isolation do not."""
        s = self.settings
        return {
            "layout_model": LAYOUT_REPO_ID,
            "table_structure": s.table_mode if s.do_table_structure else None,
            "ocr": {"engine": s.ocr_engine, "full_page": s.force_full_page_ocr} if s.do_ocr else None,
            "images_scale": s.images_scale,
            "docling": package_version("docling-slim", "docling"),
            "docling_core": package_version("docling-core"),
        }

    def parse(self, data: bytes, *, mime: str, filename: str = "", limits: ParseLimits | None = None) -> ParseResult:
        if not self.settings.isolate:
            return super().parse(data, mime=mime, filename=filename, limits=limits)
        problem = missing_models(self.settings)  # checked here: no child started in vain
        if problem is not None:
            return ParseResult.failed(parser=self.name, mime=mime, reason=problem.reason, detail=problem.detail)
        return self._isolated_parser().parse(data, mime=mime, filename=filename, limits=limits)

    def prepare(self, *, limits: ParseLimits | None = None) -> None:
        """Load the models for documents under ``limits`` now (the isolated child does this
        before its first document). Docling's own timeout is part of its pipeline options, so
        other limits later build (and load) a second pipeline."""
        from docling.datamodel.base_models import InputFormat

        problem = missing_models(self.settings)
        if problem is not None:
            raise problem
        self._converter((limits or ParseLimits()).max_seconds).initialize_pipeline(InputFormat.PDF)

    def close(self) -> None:
        """Stop the isolated child process, if one runs."""
        if self._isolated is not None:
            self._isolated.close()

    @property
    def worker_pid(self) -> int | None:
        """The isolated child's process id (``None`` when not isolated or not started)."""
        return self._isolated.child_pid if self._isolated is not None else None

    def _isolated_parser(self) -> ProcessIsolatedParser:
        if self._isolated is None:
            from kb_ray.parsing.isolation import ProcessIsolatedParser

            inner = self.settings.model_copy(update={"isolate": False})
            self._isolated = ProcessIsolatedParser(factory=functools.partial(DoclingPdfParser, settings=inner),
                                                   recycle_after_pages=self.settings.recycle_after_pages,
                                                   limit_memory=False)  # CUDA maps far more address space
        return self._isolated

    # ---- one document, in this process ------------------------------------------------------

    def _parse(self, data: bytes, *, mime: str, filename: str, limits: ParseLimits) -> ParseResult:
        if mime != PDF_MIME:
            raise ParseError("unsupported_type", f"{mime!r} is not {PDF_MIME}")
        problem = missing_models(self.settings)
        if problem is not None:
            raise problem
        text_layers = pdf_text_layers(data, max_pages=limits.max_pages)
        if not self.settings.do_ocr and not any(text_layers):
            raise ParseError("no_text_layer", f"none of {len(text_layers)} pages has a text layer and "
                                              "parse.docling.do_ocr is off")
        doc, notes = self._convert(data, filename=filename, limits=limits, page_count=len(text_layers))
        result = self._result(doc, mime=mime, text_layers=text_layers)
        result.notes.extend(notes)
        return result

    def _convert(self, data: bytes, *, filename: str, limits: ParseLimits,
                 page_count: int) -> tuple[DoclingDocument, list[str]]:
        from docling.datamodel.base_models import DocumentStream

        stream = DocumentStream(name=_pdf_name(filename), stream=BytesIO(data))
        result = self._converter(limits.max_seconds).convert(stream, raises_on_error=False)
        notes = check_conversion(result, page_count=page_count, max_seconds=limits.max_seconds)
        for note in notes:
            logger.info("docling converted %s with a note: %s", filename, note)
        return result.document, notes

    def _result(self, doc: DoclingDocument, *, mime: str, text_layers: list[bool]) -> ParseResult:
        from kb_ray.parsing.docling_mapping import map_document, picture_crop_attrs

        images: dict[str, bytes] = {}
        mapping = map_document(doc, figure_attrs=functools.partial(picture_crop_attrs, doc, images))
        if any(text_layers) and not any(block.text.strip() for block in mapping.blocks):
            raise ParseError("layout_empty", f"docling placed no text on {len(text_layers)} pages "
                                             "that have a text layer")
        return ParseResult(status="ok", parser=self.name, mime=mime, blocks=mapping.blocks,
                           pages=_page_infos(doc, text_layers), title=mapping.title, images=images)

    def _converter(self, document_timeout: float | None) -> DocumentConverter:
        if document_timeout not in self._converters:
            self._converters[document_timeout] = build_pdf_converter(self.settings, document_timeout=document_timeout)
        return self._converters[document_timeout]


def check_conversion(result: ConversionResult, *, page_count: int, max_seconds: float) -> list[str]:
    """Raise for a failed or cut-short conversion; return notes for a partial success that
    kept every page (a stage failed on part of a page)."""
    from docling.datamodel.base_models import ConversionStatus, FailureCategory

    messages = "; ".join(error.error_message for error in result.errors)[:400] or "no detail"
    if any(error.category == FailureCategory.TIMEOUT or "timeout" in error.error_message.lower()
           for error in result.errors):
        raise ParseError("timeout", f"docling stopped at its document timeout ({max_seconds:.0f}s): {messages}")
    if result.status not in (ConversionStatus.SUCCESS, ConversionStatus.PARTIAL_SUCCESS):
        raise ParseError("conversion_failed", f"docling {result.status.value}: {messages}")
    lost = {error.page_no for error in result.errors if error.page_no} | (
        set(range(1, page_count + 1)) - set(result.document.pages))
    if lost:
        raise ParseError("partial", f"docling lost {len(lost)} of {page_count} pages {sorted(lost)[:10]}: {messages}")
    return [f"docling partial success: {messages}"] if result.errors else []


def pdf_text_layers(data: bytes, *, max_pages: int) -> list[bool]:
    """Per page, whether it has a text layer; raises for encrypted, broken or over-long PDFs."""
    from kb_ray.parsing.pdf_text import opened_pdf

    with opened_pdf(data, max_pages=max_pages) as pdf:
        return [_has_text(pdf, index) for index in range(len(pdf))]


def _has_text(pdf: Any, index: int) -> bool:
    page = pdf[index]
    try:
        textpage = page.get_textpage()
        try:
            return bool(textpage.get_text_range().strip())
        finally:
            textpage.close()
    finally:
        page.close()


def _page_infos(doc: DoclingDocument, text_layers: list[bool]) -> list[PageInfo]:
    return [
        PageInfo(page_no=page_no, width=page.size.width, height=page.size.height,
                 has_text_layer=text_layers[page_no - 1] if page_no <= len(text_layers) else True)
        for page_no, page in sorted(doc.pages.items())
    ]


def _pdf_name(filename: str) -> str:
    name = filename.rsplit("/", 1)[-1] if filename else ""
    return name if name.lower().endswith(".pdf") else f"{name or 'document'}.pdf"
