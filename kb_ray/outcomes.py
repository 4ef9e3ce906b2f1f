"""The closed set of reason codes a document can fail with, shared by every layer.

A per-document failure is a :class:`Reason` (machine-readable, one of the codes below)
plus a human ``detail``. Parsers return it in :class:`~kb_ray.parsing.blocks.ParseResult`,
the ingest stages carry it in the ``reason`` / ``detail`` columns of their records
(:mod:`kb_ray.ingest.record`), the catalog stores the code in ``versions.reason`` and
``ingest_log.reason`` and, for display, the rendered ``error`` text. Nothing reads a
reason back out of a string. A code not in this set is a bug (``ValueError``).
"""

from __future__ import annotations

from enum import StrEnum


class Reason(StrEnum):
    """Why a document has no searchable version. Fetching the source:"""

    UNREADABLE = "unreadable"  # the source could not be read (permissions, gone, network)
    OUTSIDE_SOURCE = "outside_source"  # a local file (a symlink) resolving outside every source directory
    INVALID_NAME = "invalid_name"  # a local file whose name is not UTF-8 (listed with U+FFFD for its bad bytes)
    # Before any parser runs (router) or in every parser:
    UNSUPPORTED_TYPE = "unsupported_type"  # no parser for the type, or the bytes are not that type
    TOO_LARGE = "too_large"  # over parse.max_bytes
    TOO_MANY_PAGES = "too_many_pages"  # over parse.max_pages
    EMPTY = "empty"  # no bytes, no pages, or no body text once furniture is set aside
    CORRUPT = "corrupt"  # the library could not read it (or raised on it)
    ENCRYPTED = "encrypted"  # password-protected PDF
    INVALID_ENCODING = "invalid_encoding"  # a text file that is not UTF-8
    NO_TEXT_LAYER = "no_text_layer"  # scanned or image-only PDF (needs OCR)
    TIMEOUT = "timeout"  # over parse.max_seconds (the parser's process is killed), or the model parser's own timeout
    # the parser's process ran out of parse.max_memory_mb, or pdfium out of parse.pdfium_memory_mb for one page
    MEMORY_LIMIT = "memory_limit"
    NESTING_TOO_DEEP = "nesting_too_deep"  # markup nested deeper than parse.max_nesting (or than the parser recurses)
    # an archive (DOCX/PPTX/XLSX) inflating past its limits, or an image (frame) over parse.max_image_pixels
    DECOMPRESSION_BOMB = "decompression_bomb"
    CRASHED = "crashed"  # the parser's process died (segfault, kill)
    # Model parsers (docling_pdf, run isolated in a child process of their own):
    MODEL_UNAVAILABLE = "model_unavailable"  # weights missing where configured
    OCR_UNAVAILABLE = "ocr_unavailable"  # the configured OCR engine is not installed
    LAYOUT_EMPTY = "layout_empty"  # the layout model placed no text
    CONVERSION_FAILED = "conversion_failed"  # docling reported a failed conversion
    PARTIAL = "partial"  # docling lost pages
    # Per-file metadata (kb_ray/ingest/metadata.py):
    BAD_METADATA = "bad_metadata"  # a sidecar (.meta.json/.meta.yaml) or Markdown front matter that is not valid
    # A failed version the catalog recorded before reason codes were stored:
    UNKNOWN = "unknown"


class NoteCode(StrEnum):
    """Codes of non-fatal notes on a document that parsed: such a note reads ``"code: detail"``
    in ``notes`` and in the ingest log's ``error`` (other notes, a parser fallback or a page
    limit, are plain text)."""

    UNSAFE_ARCHIVE_MEMBER = "unsafe_archive_member"  # a ZIP member named outside the archive (../, absolute): not read


def reason_code(value: str | Reason) -> Reason:
    """``value`` as a :class:`Reason`; an unknown code raises, naming the known ones."""
    try:
        return Reason(value)
    except ValueError:
        known = ", ".join(reason.value for reason in Reason)
        raise ValueError(f"unknown failure reason {value!r}; known reasons: {known}") from None


def render_error(reason: str | None, detail: str | None) -> str | None:
    """The display text of a failure (``"reason: detail"``), as ``error`` columns hold it."""
    if reason is None:
        return None
    return f"{reason}: {detail}" if detail else str(reason)
