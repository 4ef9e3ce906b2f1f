"""Route a file to the parsers that accept its type, with fallback.

The router checks that the bytes can be of the claimed type (a PNG renamed ``.pdf`` is
refused with that reason), then tries each candidate parser in order until one succeeds.
Failures that another parser cannot fix (over a limit, encrypted, empty) stop the chain.
Parsers are built lazily, so a deployment that never sees DOCX never imports Docling.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

from kb_ray import ids
from kb_ray.parsing.base import ParseLimits, Parser
from kb_ray.parsing.blocks import ParseResult
from kb_ray.parsing.mime import EXTENSION_MIMES, OOXML_MIMES, content_mismatch, mime_from_name

FINAL_REASONS = frozenset({"too_large", "too_many_pages", "encrypted", "empty", "timeout", "invalid_encoding"})
_DOCLING_MIMES = OOXML_MIMES | {"text/html", "text/markdown"}

PARSER_FACTORIES: dict[str, str] = {
    "pdf_text": "kb_ray.parsing.pdf_text:PdfTextParser",
    "docling_pdf": "kb_ray.parsing.docling_pdf:DoclingPdfParser",
    "docling": "kb_ray.parsing.docling_formats:DoclingFormatsParser",
    "plain_text": "kb_ray.parsing.plain_text:PlainTextParser",
}
DEFAULT_ROUTES: dict[str, list[str]] = {
    "application/pdf": ["pdf_text"],
    "text/plain": ["plain_text"],
    "text/markdown": ["docling", "plain_text"],
    "text/html": ["docling"],
    **{mime: ["docling"] for mime in OOXML_MIMES},
}


def _load(spec: str) -> Callable[[], Parser]:
    module, _, attribute = spec.partition(":")
    return getattr(importlib.import_module(module), attribute)


class ParserRouter:
    """Chooses parsers by MIME type; the routes and parser names are configuration."""

    name = "router"

    def __init__(self, *, routes: dict[str, list[str]] | None = None, limits: ParseLimits | None = None,
                 parser_options: dict[str, dict[str, Any]] | None = None) -> None:
        self.routes = routes or DEFAULT_ROUTES
        self.limits = limits or ParseLimits()
        self.parser_options = parser_options or {}  # parser name -> keyword arguments of its constructor
        self._parsers: dict[str, Parser] = {}

    def parser(self, name: str) -> Parser:
        if name not in self._parsers:
            self._parsers[name] = _load(PARSER_FACTORIES[name])(**self.parser_options.get(name, {}))
        return self._parsers[name]

    @property
    def fingerprint(self) -> str:
        """Routes plus the fingerprints of every parser they name."""
        names = sorted({name for chain in self.routes.values() for name in chain})
        config = {"routes": self.routes, "parsers": {name: self.parser(name).fingerprint for name in names}}
        return ids.fingerprint(kind="parser", name=self.name, version="1", config=config)

    def parse(self, data: bytes, *, filename: str, mime: str | None = None) -> ParseResult:
        mime = mime or mime_from_name(filename)
        chain = self.routes.get(mime)
        if not chain:
            known = ", ".join(sorted(EXTENSION_MIMES))
            return ParseResult.failed(parser=self.name, mime=mime, reason="unsupported_type",
                                      detail=f"no parser for {mime!r} ({filename}); supported: {known}")
        mismatch = content_mismatch(claimed=mime, data=data) if data else None
        if mismatch and mime != "application/pdf":
            return ParseResult.failed(parser=self.name, mime=mime, reason="unsupported_type", detail=mismatch)
        if mismatch:
            return ParseResult.failed(parser=self.name, mime=mime, reason="corrupt", detail=mismatch)
        return self._first_success(chain, data, filename=filename, mime=mime)

    def _first_success(self, chain: list[str], data: bytes, *, filename: str, mime: str) -> ParseResult:
        first_failure: ParseResult | None = None
        for name in chain:
            result = self.parser(name).parse(data, mime=mime, filename=filename, limits=self.limits)
            if result.status == "ok":
                return result
            first_failure = first_failure or result
            if (result.error or "").split(":")[0] in FINAL_REASONS:
                break
        assert first_failure is not None
        return first_failure

