"""The structural chunker: heading-aware, token-budgeted, evidence units kept whole.

1. Body elements become *units*: a paragraph, list item or code block; a table or figure
   together with its caption (one evidence unit). Headings are not units of their own:
   they are carried into the next unit so a section's title is part of its first chunk.
2. A unit over the token budget is split: prose at sentence boundaries (then at token
   boundaries for a giant sentence); tables by row groups, each repeating the header row
   (a chunk with two spans: header, rows).
3. Consecutive units of the same section are merged while they fit the budget. Tables and
   figures stay chunks of their own. Every chunk records its section's heading path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from kb_ray.chunking.base import ChunkDraft, Chunker
from kb_ray.chunking.tokens import RegexCounter, TokenCounter
from kb_ray.embedding.fingerprint import HEADING_SEPARATOR
from kb_ray.model import Element, Span

_SENTENCE_END = re.compile(r"(?<=[.!?…。！？])[\"')\]]*\s+")


@dataclass
class _Unit:
    start: int
    end: int
    kind: str  # text | table | figure
    heading_path: tuple[str, ...]
    tokens: int
    spans: list[Span] | None = None  # only for table row groups (header + rows)


class StructuralChunker(Chunker):
    name = "structural"
    version = "2"  # 2: chunks start at their first line, so heading/list markup is part of the text

    def __init__(self, *, max_tokens: int = 200, table_rows_per_chunk_min: int = 2,
                 counter: TokenCounter | None = None, headings_in_budget: bool = False) -> None:
        """``counter`` counts the budget's tokens (default: regex words); with
        ``headings_in_budget`` a chunk's heading path (which the embedder sees before its
        text) takes its tokens out of that chunk's budget."""
        self.max_tokens = max_tokens
        self.table_rows_per_chunk_min = table_rows_per_chunk_min
        self.counter = counter or RegexCounter()
        self.headings_in_budget = headings_in_budget
        self._heading_cost: dict[tuple[str, ...], int] = {}

    def config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"max_tokens": self.max_tokens, "tokenizer": self.counter.name}
        if self.headings_in_budget:
            config["headings_in_budget"] = True
        return config

    def draft(self, canonical: str, elements: list[Element]) -> list[ChunkDraft]:
        units = []
        for unit in _units(canonical, elements, self.counter):
            units.extend(self._split(canonical, unit))
        return self._pack(canonical, units)

    def budget(self, heading_path: tuple[str, ...]) -> int:
        """Tokens a chunk under ``heading_path`` may hold (at least a quarter of the budget)."""
        if not self.headings_in_budget or not heading_path:
            return self.max_tokens
        if heading_path not in self._heading_cost:
            self._heading_cost[heading_path] = self.counter.count(HEADING_SEPARATOR.join(heading_path))
        return max(self.max_tokens - self._heading_cost[heading_path], self.max_tokens // 4)

    def _split(self, canonical: str, unit: _Unit) -> list[_Unit]:
        if unit.tokens <= self.budget(unit.heading_path):
            return [unit]
        if unit.kind == "table":
            return self._split_table(canonical, unit)
        return _split_prose(canonical, unit, self.budget(unit.heading_path), self.counter)

    def _split_table(self, canonical: str, unit: _Unit) -> list[_Unit]:
        """Row groups under the budget, each with the header (and any heading/caption
        text before the table) as a first span; text after the table joins the last group."""
        lines = _line_spans(canonical, unit.start, unit.end)
        rows = [i for i, (s, e) in enumerate(lines) if canonical[s:e].startswith("|")]
        budget, count = self.budget(unit.heading_path), self.counter.count
        if len(rows) < 4 or not canonical[lines[rows[1]][0]:].startswith("| ---"):
            return _split_prose(canonical, unit, budget, self.counter)
        header = (unit.start, lines[rows[1]][1])
        header_tokens = count(canonical[header[0]:header[1]])
        groups: list[list[Span]] = [[]]
        for line in (lines[i] for i in rows[2:]):
            group = groups[-1]
            if group and header_tokens + count(canonical[group[0][0]:line[1]]) > budget:
                groups.append([])
            groups[-1].append(line)
        bounds = [(group[0][0], group[-1][1]) for group in groups]
        bounds[-1] = (bounds[-1][0], unit.end)
        return [
            _Unit(start, end, "table", unit.heading_path,
                  header_tokens + count(canonical[start:end]), spans=[header, (start, end)])
            for start, end in bounds
        ]

    def _pack(self, canonical: str, units: list[_Unit]) -> list[ChunkDraft]:
        drafts: list[ChunkDraft] = []
        current: _Unit | None = None
        for unit in units:
            if current is not None and self._fits(current, unit):
                current = _Unit(current.start, unit.end, "text", current.heading_path,
                                self.counter.count(canonical[current.start:unit.end]))
                continue
            if current is not None:
                drafts.append(_to_draft(current))
            current = unit
        if current is not None:
            drafts.append(_to_draft(current))
        return drafts

    def _fits(self, current: _Unit, unit: _Unit) -> bool:
        return (
            current.kind == unit.kind == "text"
            and current.spans is None and unit.spans is None
            and current.heading_path == unit.heading_path
            and current.tokens + unit.tokens <= self.budget(current.heading_path)
        )


def _to_draft(unit: _Unit) -> ChunkDraft:
    return ChunkDraft(spans=unit.spans or [(unit.start, unit.end)], heading_path=unit.heading_path, kind=unit.kind)


def _units(canonical: str, elements: list[Element], counter: TokenCounter) -> list[_Unit]:
    """Body elements → units; headings folded into the next unit, captions into theirs."""
    count_tokens = counter.count
    by_id = {element.element_id: element for element in elements}
    units: list[_Unit] = []
    pending_start: int | None = None
    last_heading: Element | None = None
    for element in elements:
        if element.span is None:
            continue
        start, end = element.span
        start = canonical.rfind("\n", 0, start) + 1  # from the line start: "# " and "- " markup is kept
        if element.kind in ("title", "heading"):
            pending_start = start if pending_start is None else pending_start
            last_heading = element
            continue
        parent = by_id.get(element.parent_id or "")
        if element.kind == "caption" and parent is not None and parent.ordinal > element.ordinal:
            pending_start = start if pending_start is None else pending_start  # caption above
            continue
        if element.kind == "caption" and parent is not None and parent.kind in ("table", "figure") and units \
                and units[-1].kind == parent.kind and units[-1].end <= start:
            units[-1].end = end
            units[-1].tokens = count_tokens(canonical[units[-1].start:end])
            continue
        kind = element.kind if element.kind in ("table", "figure") else "text"
        if pending_start is not None:
            start, pending_start = pending_start, None
        units.append(_Unit(start, end, kind, heading_path(element, by_id), count_tokens(canonical[start:end])))
    if pending_start is not None and last_heading is not None:  # trailing headings are kept
        path = heading_path(last_heading, by_id) + (last_heading.text,)
        end = last_heading.span[1]  # type: ignore[index]
        units.append(_Unit(pending_start, end, "text", path, count_tokens(canonical[pending_start:end])))
    return units


def heading_path(element: Element, by_id: dict[str, Element]) -> tuple[str, ...]:
    """Texts of the headings above ``element``, outermost first."""
    path = []
    current = by_id.get(element.parent_id or "")
    while current is not None:
        if current.kind in ("title", "heading"):
            path.append(current.text)
        current = by_id.get(current.parent_id or "")
    return tuple(reversed(path))


def _line_spans(canonical: str, start: int, end: int) -> list[Span]:
    spans, position = [], start
    for line in canonical[start:end].split("\n"):
        spans.append((position, position + len(line)))
        position += len(line) + 1
    return spans


def _split_prose(canonical: str, unit: _Unit, max_tokens: int, counter: TokenCounter) -> list[_Unit]:
    """Split at sentence ends, packing sentences up to the budget; giant sentences by tokens."""
    count_tokens = counter.count
    pieces: list[Span] = []
    for sentence in _sentences(canonical, unit.start, unit.end):
        pieces.extend(_split_by_tokens(canonical, sentence, max_tokens, counter))
    units: list[_Unit] = []
    for start, end in pieces:
        if units and count_tokens(canonical[units[-1].start:end]) <= max_tokens:
            units[-1].end = end
            units[-1].tokens = count_tokens(canonical[units[-1].start:end])
        else:
            units.append(_Unit(start, end, unit.kind if unit.kind != "table" else "text",
                               unit.heading_path, count_tokens(canonical[start:end])))
    return units


def _sentences(canonical: str, start: int, end: int) -> list[Span]:
    spans, position = [], start
    for match in _SENTENCE_END.finditer(canonical, start, end):
        spans.append((position, match.start() + len(match.group(0).rstrip())))
        position = match.end()
    if position < end:
        spans.append((position, end))
    return [(s, e) for s, e in spans if e > s]


def _split_by_tokens(canonical: str, span: Span, max_tokens: int, counter: TokenCounter) -> list[Span]:
    start, end = span
    cuts = counter.cuts(canonical[start:end], max_tokens)
    if not cuts:
        return [span]
    pieces, piece_start = [], start
    for cut in (start + offset for offset in cuts):
        pieces.append((piece_start, cut))
        piece_start = cut + (len(canonical[cut:end]) - len(canonical[cut:end].lstrip()))
    if piece_start < end:
        pieces.append((piece_start, end))
    return pieces
