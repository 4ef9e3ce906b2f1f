"""Route a file to the parsers that accept its type, with fallback.

The router checks that the bytes can be of the claimed type (a PNG renamed ``.pdf`` is
refused with that reason), then tries each candidate parser in order until one succeeds.
Failures that another parser cannot fix (over a limit, encrypted, empty) stop the chain,
except after a *model* parser (Docling's layout pipeline): its timeout, crash or empty
output says nothing about the text layer, so the chain goes on to ``pdf_text``.
Parsers are built lazily, so a deployment that never sees DOCX never imports Docling.

A model parser can run elsewhere (a GPU actor pool): :meth:`ParserRouter.parse_first`
runs only the chain's first parser, and ``parse(..., done=result)`` continues the chain
from that result.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

from kb_ray import ids
from kb_ray.outcomes import Reason
from kb_ray.parsing.base import ParseLimits, Parser
from kb_ray.parsing.blocks import ParseResult
from kb_ray.parsing.mime import EXTENSION_MIMES, IMAGE_MIMES, OOXML_MIMES, content_mismatch, mime_from_name

FINAL_REASONS = frozenset({Reason.TOO_LARGE, Reason.TOO_MANY_PAGES, Reason.ENCRYPTED, Reason.EMPTY, Reason.TIMEOUT,
                           Reason.INVALID_ENCODING})
MODEL_PARSER_RETRYABLE = frozenset({Reason.EMPTY, Reason.TIMEOUT})  # after a model parser, pdf_text may still succeed
MODEL_PARSERS = frozenset({"docling_pdf"})
_DOCLING_MIMES = OOXML_MIMES | {"text/html", "text/markdown"}

PARSER_FACTORIES: dict[str, str] = {
    "pdf_text": "kb_ray.parsing.pdf_text:PdfTextParser",
    "docling_pdf": "kb_ray.parsing.docling_pdf:DoclingPdfParser",
    "docling": "kb_ray.parsing.docling_formats:DoclingFormatsParser",
    "plain_text": "kb_ray.parsing.plain_text:PlainTextParser",
    "image_ocr": "kb_ray.parsing.image_ocr:ImageOcrParser",
}
DEFAULT_ROUTES: dict[str, list[str]] = {
    "application/pdf": ["pdf_text"],
    "text/plain": ["plain_text"],
    "text/markdown": ["docling", "plain_text"],
    "text/html": ["docling"],
    **{mime: ["docling"] for mime in OOXML_MIMES},
    **{mime: ["image_ocr"] for mime in sorted(IMAGE_MIMES)},
}
DOCLING_PDF_ROUTES: dict[str, list[str]] = {**DEFAULT_ROUTES, "application/pdf": ["docling_pdf", "pdf_text"]}


def load_factory(spec: str) -> Callable[..., Parser]:
    """The parser class a ``"module:Class"`` spec names (imported now)."""
    module, _, attribute = spec.partition(":")
    return getattr(importlib.import_module(module), attribute)


class ParserRouter:
    """Chooses parsers by MIME type; the routes and parser names are configuration."""

    name = "router"

    def __init__(self, *, routes: dict[str, list[str]] | None = None, limits: ParseLimits | None = None,
                 parser_options: dict[str, dict[str, Any]] | None = None, isolate: bool = False) -> None:
        """``isolate``: every parser but the model parsers (which isolate themselves) runs in one
        child process under ``limits`` (kb_ray/parsing/isolation.py), started on first use."""
        self.routes = routes or DEFAULT_ROUTES
        self.limits = limits or ParseLimits()
        self.parser_options = parser_options or {}  # parser name -> keyword arguments of its constructor
        self.isolate = isolate
        self._parsers: dict[str, Parser] = {}
        self._isolated: Any = None  # IsolatedParsers, made with the first isolated parser

    def parser(self, name: str) -> Parser:
        if name not in self._parsers:
            local = load_factory(PARSER_FACTORIES[name])(**self.parser_options.get(name, {}))
            self._parsers[name] = self._in_child(name, local) if self.isolate and name not in MODEL_PARSERS else local
        return self._parsers[name]

    def _in_child(self, name: str, local: Parser) -> Parser:
        if self._isolated is None:
            from kb_ray.parsing.isolation import IsolatedParsers

            names = {n for chain in self.routes.values() for n in chain if n not in MODEL_PARSERS}
            self._isolated = IsolatedParsers({n: (PARSER_FACTORIES[n], self.parser_options.get(n, {})) for n in names})
        return self._isolated.parser(name, local)

    def close(self) -> None:
        """Stop the isolated parsers' process, if one runs (a later parse starts another)."""
        if self._isolated is not None:
            self._isolated.close()

    @property
    def fingerprint(self) -> str:
        """Routes plus the fingerprints of every parser they name."""
        names = sorted({name for chain in self.routes.values() for name in chain})
        config = {"routes": self.routes, "parsers": {name: self.parser(name).fingerprint for name in names}}
        return ids.fingerprint(kind="parser", name=self.name, version="1", config=config)

    def model_parser_for(self, *, filename: str, mime: str | None = None) -> str | None:
        """The model parser that heads this file's chain, if any (what the GPU pool runs)."""
        chain = self.routes.get(mime or mime_from_name(filename)) or []
        return chain[0] if chain and chain[0] in MODEL_PARSERS else None

    def parse_first(self, data: bytes, *, filename: str, mime: str | None = None) -> ParseResult:
        """Run only the first parser of the chain (the caller continues with ``parse(done=)``)."""
        mime = mime or mime_from_name(filename)
        refused = self._refusal(data, filename=filename, mime=mime)
        if refused is not None:
            return refused
        return self.parser(self.routes[mime][0]).parse(data, mime=mime, filename=filename, limits=self.limits)

    def parse(self, data: bytes, *, filename: str, mime: str | None = None, done: ParseResult | None = None) -> ParseResult:
        """Parse with the first parser of the chain that succeeds.

        ``done``: the result :meth:`parse_first` gave elsewhere for these bytes; returned when
        it succeeded or cannot be retried, else the chain continues after that parser."""
        mime = mime or mime_from_name(filename)
        refused = self._refusal(data, filename=filename, mime=mime)
        if refused is not None:
            return refused
        chain = self.routes[mime]
        if done is not None and (done.status == "ok" or done.parser not in chain or self._is_final(done)):
            return done
        start = chain.index(done.parser) + 1 if done is not None else 0
        return self._first_success(chain[start:], data, filename=filename, mime=mime, failure=done)

    def _refusal(self, data: bytes, *, filename: str, mime: str) -> ParseResult | None:
        if not self.routes.get(mime):
            known = ", ".join(sorted(EXTENSION_MIMES))
            return ParseResult.failed(parser=self.name, mime=mime, reason=Reason.UNSUPPORTED_TYPE,
                                      detail=f"no parser for {mime!r} ({filename}); supported: {known}")
        mismatch = content_mismatch(claimed=mime, data=data) if data else None
        if mismatch:
            reason = Reason.CORRUPT if mime == "application/pdf" else Reason.UNSUPPORTED_TYPE
            return ParseResult.failed(parser=self.name, mime=mime, reason=reason, detail=mismatch)
        return None

    def _first_success(self, chain: list[str], data: bytes, *, filename: str, mime: str,
                       failure: ParseResult | None = None) -> ParseResult:
        failures: list[ParseResult] = [failure] if failure is not None else []
        for name in chain:
            result = self.parser(name).parse(data, mime=mime, filename=filename, limits=self.limits)
            if result.status == "ok":
                if failures:
                    result.fallback_from, result.fallback_reason = failures[0].parser, failures[0].reason
                result.notes += [f"{f.parser} failed ({f.error}); parsed by {name}" for f in failures]
                return result
            failures.append(result)
            if self._is_final(result):
                break
        assert failures
        return failures[0]

    @staticmethod
    def _is_final(result: ParseResult) -> bool:
        """A failure no later parser can fix."""
        if result.parser in MODEL_PARSERS and result.reason in MODEL_PARSER_RETRYABLE:
            return False
        return result.reason in FINAL_REASONS

