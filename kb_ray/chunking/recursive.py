"""The recursive baseline: fixed-size character windows with overlap.

Split the canonical text at the coarsest separator (blank line, newline, sentence end,
space) that yields pieces under ``chunk_chars``, pack pieces into windows, and start each
next window ``overlap`` characters back. Structure-blind on purpose: it is the baseline
the structural chunker is measured against, and the shape of common public benchmarks
(2,048 characters with 200 overlap).
"""

from __future__ import annotations

from typing import Any

from kb_ray.chunking.base import ChunkDraft, Chunker
from kb_ray.chunking.structural import heading_path
from kb_ray.model import Element, Span

SEPARATORS = ("\n\n", "\n", ". ", " ")


class RecursiveChunker(Chunker):
    name = "recursive"
    version = "1"

    def __init__(self, *, chunk_chars: int = 2048, overlap: int = 200) -> None:
        if not 0 <= overlap < chunk_chars:
            raise ValueError("overlap must be >= 0 and smaller than chunk_chars")
        self.chunk_chars = chunk_chars
        self.overlap = overlap

    def config(self) -> dict[str, Any]:
        return {"chunk_chars": self.chunk_chars, "overlap": self.overlap}

    def draft(self, canonical: str, elements: list[Element]) -> list[ChunkDraft]:
        pieces = _pieces(canonical, 0, len(canonical), self.chunk_chars, 0)
        windows = self._windows(pieces)
        by_id = {element.element_id: element for element in elements}
        body = [element for element in elements if element.span is not None]
        return [ChunkDraft(spans=[window], heading_path=_path_at(window[0], body, by_id)) for window in windows]

    def _windows(self, pieces: list[Span]) -> list[Span]:
        windows: list[Span] = []
        index = 0
        while index < len(pieces):
            start, end = pieces[index][0], pieces[index][1]
            index += 1
            while index < len(pieces) and pieces[index][1] - start <= self.chunk_chars:
                end = pieces[index][1]
                index += 1
            windows.append((start, end))
            if index < len(pieces) and self.overlap:
                back = index
                while back - 1 > 0 and end - pieces[back - 1][0] <= self.overlap and pieces[back - 1][0] > start:
                    back -= 1
                index = back if back < index and pieces[back][0] > start else index
        return windows


def _pieces(text: str, start: int, end: int, limit: int, level: int) -> list[Span]:
    """Spans under ``limit`` characters, split at the coarsest separator that works."""
    if end - start <= limit:
        return [(start, end)] if text[start:end].strip() else []
    if level >= len(SEPARATORS):
        return [(s, min(s + limit, end)) for s in range(start, end, limit)]
    separator, pieces, position = SEPARATORS[level], [], start
    while position < end:
        cut = text.find(separator, position, end)
        stop = end if cut < 0 else cut + len(separator)
        pieces.extend(_pieces(text, position, stop, limit, level + 1))
        position = stop
    return [_trim(text, span) for span in pieces if text[span[0]:span[1]].strip()]


def _trim(text: str, span: Span) -> Span:
    start, end = span
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end)


def _path_at(offset: int, body: list[Element], by_id: dict[str, Element]) -> tuple[str, ...]:
    for element in body:
        if element.span[0] <= offset < element.span[1] or element.span[0] >= offset:  # type: ignore[index]
            path = heading_path(element, by_id)
            return path + (element.text,) if element.kind in ("title", "heading") else path
    return ()
