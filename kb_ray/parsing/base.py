"""The parser interface and per-document limits."""

from __future__ import annotations

import abc
import time
from dataclasses import dataclass
from typing import Any

from kb_ray.errors import ParseError
from kb_ray.ids import fingerprint
from kb_ray.parsing.blocks import ParseResult


@dataclass(frozen=True)
class ParseLimits:
    """Per-document limits; a document over one fails with a clear reason."""

    max_bytes: int = 100 * 1024 * 1024
    max_pages: int = 2000
    max_seconds: float = 300.0
    max_memory_bytes: int | None = None  # address space of an isolated parser process (RLIMIT_AS)
    pdfium_memory_bytes: int | None = None  # what reading one PDF page may add to it (kb_ray/parsing/native_memory.py)
    max_nesting: int = 256  # element depth of markup (HTML/XML) a parser is given
    max_image_pixels: int = 50_000_000  # width x height of one image (frame) an image parser decodes


class Parser(abc.ABC):
    """Turns one document's bytes into parser-neutral blocks.

    Subclasses implement :meth:`_parse` and raise :class:`ParseError` for bad input;
    :meth:`parse` turns that (and any other exception from the wrapped library) into a
    failed :class:`ParseResult`, so one bad file never kills a batch.
    """

    name: str = "parser"
    version: str = "1"
    mimes: frozenset[str] = frozenset()

    def config(self) -> dict[str, Any]:
        """Settings that change the output; part of the fingerprint."""
        return {}

    @property
    def fingerprint(self) -> str:
        return fingerprint(kind="parser", name=self.name, version=self.version, config=self.config())

    def parse(self, data: bytes, *, mime: str, filename: str = "", limits: ParseLimits | None = None) -> ParseResult:
        limits = limits or ParseLimits()
        started = time.perf_counter()
        try:
            if len(data) == 0:
                raise ParseError("empty", "the file has no bytes")
            if len(data) > limits.max_bytes:
                raise ParseError("too_large", f"{len(data)} bytes > limit {limits.max_bytes}")
            result = self._parse(data, mime=mime, filename=filename, limits=limits)
            if result.status == "ok" and not any(block.text.strip() for block in result.blocks):
                raise ParseError("empty", "no text could be extracted")
        except ParseError as exc:
            result = ParseResult.failed(parser=self.name, mime=mime, reason=exc.reason, detail=exc.detail)
        except MemoryError:  # under RLIMIT_AS in an isolated parser process
            limit = f" of {limits.max_memory_bytes >> 20} MiB" if limits.max_memory_bytes else ""
            result = ParseResult.failed(parser=self.name, mime=mime, reason="memory_limit",
                                        detail=f"the parser ran out of its memory limit{limit}")
        except RecursionError:
            result = ParseResult.failed(parser=self.name, mime=mime, reason="nesting_too_deep",
                                        detail="the document is nested deeper than the parser can recurse")
        except Exception as exc:  # the wrapped library failed on this input
            detail = f"{type(exc).__name__}: {exc}"[:500]
            result = ParseResult.failed(parser=self.name, mime=mime, reason="corrupt", detail=detail)
        result.seconds = time.perf_counter() - started
        if result.status == "ok" and result.seconds > limits.max_seconds:
            result = ParseResult.failed(
                parser=self.name, mime=mime, reason="timeout",
                detail=f"{result.seconds:.1f}s > limit {limits.max_seconds}s",
            )
        return result

    @abc.abstractmethod
    def _parse(self, data: bytes, *, mime: str, filename: str, limits: ParseLimits) -> ParseResult:
        """Parse ``data``; raise :class:`ParseError` for bad input."""
