"""DOCX, PPTX, XLSX, HTML and Markdown through Docling's model-free backends.

Docling converts these formats without layout models (its ``SimplePipeline``), so this
parser runs on any CPU worker. The ``DoclingDocument`` it produces is mapped to blocks
in :mod:`kb_ray.parsing.docling_mapping` and never leaves these two modules.

Provenance: DOCX, HTML and Markdown have no pages (``page``/``bbox`` are ``None``).
PPTX gives one page per slide (sizes in EMU, reported in points) and a box per shape.
XLSX gives one page per sheet; boxes come from cell coordinates normalized by the
sheet's used range, and page sizes are that range in cells (columns × rows).
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging
import sys
import types
from io import BytesIO
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

from kb_ray.errors import ParseError
from kb_ray.parsing.archives import check_archive
from kb_ray.parsing.base import ParseLimits, Parser
from kb_ray.parsing.blocks import PageInfo, ParseResult
from kb_ray.parsing.markup import nesting_depth

if TYPE_CHECKING:
    from docling.document_converter import DocumentConverter
    from docling_core.types.doc import DoclingDocument

logger = logging.getLogger(__name__)

DOCX_MIME = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
PPTX_MIME = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
XLSX_MIME = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
HTML_MIME = "text/html"
MARKDOWN_MIME = "text/markdown"

# mime -> (docling InputFormat value, file extension docling recognizes)
_FORMATS: dict[str, tuple[str, str]] = {
    DOCX_MIME: ("docx", ".docx"),
    PPTX_MIME: ("pptx", ".pptx"),
    XLSX_MIME: ("xlsx", ".xlsx"),
    HTML_MIME: ("html", ".html"),
    MARKDOWN_MIME: ("md", ".md"),
}
_EXTRA_SUFFIXES = {HTML_MIME: (".htm", ".xhtml"), MARKDOWN_MIME: (".markdown",)}
_POINTS_PER_UNIT = {PPTX_MIME: 1 / 12700}  # EMU -> points; sheets stay in cells
_ASR_DECODER_MODULE = "docling.pipeline.asr_transformers"


class DoclingFormatsParser(Parser):
    """Office and web formats (DOCX, PPTX, XLSX, HTML, Markdown) via Docling."""

    name = "docling"
    version = "3"  # 2: inline code kept in backticks, no space before punctuation; 3: figures keep their image
    mimes = frozenset(_FORMATS)

    def __init__(self) -> None:
        self._converter: DocumentConverter | None = None

    def config(self) -> dict[str, Any]:
        return {"docling": package_version("docling-slim", "docling"),
                "docling_core": package_version("docling-core")}

    def _parse(self, data: bytes, *, mime: str, filename: str, limits: ParseLimits) -> ParseResult:
        if mime not in _FORMATS:
            raise ParseError("unsupported_type", f"{mime!r} is not one of {sorted(_FORMATS)}")
        notes = check_archive(data) if mime in (DOCX_MIME, PPTX_MIME, XLSX_MIME) else []
        for note in notes:
            logger.warning("%s: %s", filename, note)
        if mime == HTML_MIME and nesting_depth(data, stop_above=limits.max_nesting) > limits.max_nesting:
            raise ParseError("nesting_too_deep", f"elements nested over {limits.max_nesting} deep (parse.max_nesting)")
        doc = self._convert(data, mime=mime, filename=filename)
        from kb_ray.parsing.docling_mapping import map_document, picture_crop_attrs

        if len(doc.pages) > limits.max_pages:
            raise ParseError("too_many_pages", f"{len(doc.pages)} pages > limit {limits.max_pages}")
        images: dict[str, bytes] = {}
        mapping = map_document(doc, figure_attrs=functools.partial(picture_crop_attrs, doc, images))
        return ParseResult(status="ok", parser=self.name, mime=mime, blocks=mapping.blocks,
                           pages=_page_infos(doc, mime), title=mapping.title, images=images, notes=notes)

    def _convert(self, data: bytes, *, mime: str, filename: str) -> DoclingDocument:
        from docling.datamodel.base_models import ConversionStatus, DocumentStream

        stream = DocumentStream(name=_stream_name(filename, mime), stream=BytesIO(data))
        result = self._get_converter().convert(stream, raises_on_error=False)
        if result.status not in (ConversionStatus.SUCCESS, ConversionStatus.PARTIAL_SUCCESS):
            messages = "; ".join(error.error_message for error in result.errors)
            raise ParseError("corrupt", f"docling {result.status.value}: {messages or 'no detail'}"[:500])
        if result.errors:
            logger.info("docling converted %s partially: %s", filename, [e.error_message for e in result.errors])
        return result.document

    def _get_converter(self) -> DocumentConverter:
        if self._converter is None:
            self._converter = build_converter()
        return self._converter


def build_converter() -> DocumentConverter:
    """A Docling converter restricted to the formats this parser handles."""
    _stub_asr_decoder_without_torch()
    from docling.datamodel.base_models import InputFormat
    from docling.document_converter import DocumentConverter

    allowed = [InputFormat(fmt) for fmt, _ in _FORMATS.values()]
    return DocumentConverter(allowed_formats=allowed)


def _stub_asr_decoder_without_torch() -> None:
    """Let ``docling.document_converter`` import when torch is not installed.

    That module imports the ASR and video pipelines, which import
    ``docling.pipeline.asr_transformers``, which does ``import torch`` at module level.
    Only when torch cannot be imported, register a placeholder for that one module; the
    formats handled here never reach it, and an ASR conversion would fail with a clear
    message instead of an import error at start-up.
    """
    if _ASR_DECODER_MODULE in sys.modules:
        return
    try:
        import torch  # noqa: F401
    except Exception:  # absent, or present but broken: ASR cannot work either way
        placeholder = types.ModuleType(_ASR_DECODER_MODULE)
        placeholder.TransformersAsrDecoder = _TorchMissingAsrDecoder  # type: ignore[attr-defined]
        sys.modules[_ASR_DECODER_MODULE] = placeholder
        logger.debug("torch not importable; registered a placeholder for %s", _ASR_DECODER_MODULE)


class _TorchMissingAsrDecoder:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise ImportError("Docling's transformers ASR decoder needs torch: pip install torch")


def _stream_name(filename: str, mime: str) -> str:
    """A name whose extension matches ``mime``: Docling picks the backend from it."""
    suffix = _FORMATS[mime][1]
    name = PurePath(filename).name if filename else ""
    accepted = (suffix, *_EXTRA_SUFFIXES.get(mime, ()))
    if name.lower().endswith(accepted):
        return name
    return f"{PurePath(name).stem or 'document'}{suffix}"


def _page_infos(doc: DoclingDocument, mime: str) -> list[PageInfo]:
    scale = _POINTS_PER_UNIT.get(mime, 1.0)
    return [
        PageInfo(page_no=page_no, width=page.size.width * scale, height=page.size.height * scale)
        for page_no, page in sorted(doc.pages.items())
    ]


def package_version(*names: str) -> str:
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unknown"
