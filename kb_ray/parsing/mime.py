"""MIME types from file names, checked against the bytes' magic numbers."""

from __future__ import annotations

import mimetypes
from pathlib import PurePosixPath

EXTENSION_MIMES = {
    ".pdf": "application/pdf",
    ".txt": "text/plain",
    ".text": "text/plain",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".html": "text/html",
    ".htm": "text/html",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".tif": "image/tiff",
    ".tiff": "image/tiff",
    ".webp": "image/webp",
}
_MAGIC = (
    (b"%PDF-", "application/pdf"),
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF8", "image/gif"),
    (b"II*\x00", "image/tiff"),  # little-endian TIFF
    (b"MM\x00*", "image/tiff"),  # big-endian TIFF
    (b"II+\x00", "image/tiff"),  # BigTIFF
    (b"MM\x00+", "image/tiff"),
    (b"PK\x03\x04", "application/zip"),
)
OOXML_MIMES = frozenset(mime for ext, mime in EXTENSION_MIMES.items() if ext in (".docx", ".pptx", ".xlsx"))
IMAGE_MIMES = frozenset(mime for mime in EXTENSION_MIMES.values() if mime.startswith("image/"))
"""The image types parsed as documents (OCR, kb_ray/parsing/image_ocr.py)."""


def mime_from_name(name: str) -> str:
    suffix = PurePosixPath(name).suffix.lower()
    if suffix in EXTENSION_MIMES:
        return EXTENSION_MIMES[suffix]
    guessed, _ = mimetypes.guess_type(name)
    return guessed or "application/octet-stream"


def sniff_mime(data: bytes) -> str | None:
    """The type the leading bytes prove, or ``None`` when they prove nothing."""
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    head = data[:1024].lstrip(b"\xef\xbb\xbf \t\r\n")
    for magic, mime in _MAGIC:
        if head.startswith(magic):
            return mime
    if data[:1024].find(b"%PDF-") >= 0:  # PDFs may have junk before the header
        return "application/pdf"
    return None


def content_mismatch(*, claimed: str, data: bytes) -> str | None:
    """Why the bytes cannot be of the claimed type, or ``None`` when they may be."""
    sniffed = sniff_mime(data)
    if sniffed is None:
        if claimed in IMAGE_MIMES and data:
            return f"no PNG, JPEG, TIFF or WebP header, but the name says {claimed}"
        return "no PDF header" if claimed == "application/pdf" and data else None
    if sniffed == claimed or (sniffed == "application/zip" and claimed in OOXML_MIMES):
        return None
    if sniffed in IMAGE_MIMES and claimed in IMAGE_MIMES:  # a JPEG named .png: Pillow reads the content
        return None
    if claimed in OOXML_MIMES or claimed in IMAGE_MIMES or claimed == "application/pdf" or sniffed.startswith("image/"):
        return f"the content is {sniffed}, but the name says {claimed}"
    return None
