"""Gold quotes → spans of the active canonical text → relevant chunks (the qrels).

A quote matches **exactly** when it is a substring of the canonical text. Otherwise it may
match **after whitespace normalization** (every run of whitespace, including newlines,
read as one space on both sides), because text layers re-flow lines between parser
versions while the words stay; the span then covers the original characters. A quote
found several times yields every occurrence (the dataset test requires one). Documents
are matched by file name: the active document whose ``uri`` ends with ``/<doc>``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

import pyarrow.compute as pc
import pyarrow.dataset as pads

from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.errors import KbRayError
from kb_ray.eval.dataset import EvalQuery

Span = tuple[int, int]
_WHITESPACE = re.compile(r"\s+")


class QuoteResolutionError(KbRayError):
    """A gold quote or its document cannot be found in the catalog's active versions."""


@dataclass(frozen=True)
class GoldSpan:
    doc: str
    version_id: str
    start: int
    end: int
    page: int | None
    match: Literal["exact", "whitespace"]
    quote: int = 0  # index of the gold quote in the query's ``relevant`` list


@dataclass
class Resolution:
    spans: dict[str, list[GoldSpan]] = field(default_factory=dict)  # query id -> gold spans
    unresolved: list[str] = field(default_factory=list)  # "query id: reason"
    ambiguous: list[str] = field(default_factory=list)  # quotes found more than once
    normalized: list[str] = field(default_factory=list)  # quotes matched only after whitespace folding


def find_quote(text: str, quote: str) -> tuple[list[Span], Literal["exact", "whitespace"] | None]:
    """All spans of ``quote`` in ``text``: exact matches, else whitespace-normalized ones."""
    exact = _occurrences(text, quote)
    if exact:
        return exact, "exact"
    folded, origin = _fold_whitespace(text)
    needle = _WHITESPACE.sub(" ", quote.strip())
    spans = [(origin[s], origin[e - 1] + 1) for s, e in _occurrences(folded, needle)]
    return spans, ("whitespace" if spans else None)


def _occurrences(text: str, needle: str) -> list[Span]:
    spans, start = [], text.find(needle)
    while needle and start >= 0:
        spans.append((start, start + len(needle)))
        start = text.find(needle, start + 1)
    return spans


def _fold_whitespace(text: str) -> tuple[str, list[int]]:
    """``text`` with whitespace runs as one space, and each kept character's original offset."""
    chars, origin, last = [], [], 0
    for match in _WHITESPACE.finditer(text):
        chars.append(text[last:match.start()])
        origin.extend(range(last, match.start()))
        chars.append(" ")
        origin.append(match.start())
        last = match.end()
    chars.append(text[last:])
    origin.extend(range(last, len(text)))
    return "".join(chars), origin


class CanonicalTexts:
    """The active version of each document and canonical texts by version id (cached)."""

    def __init__(self, catalog: DeltaCatalog) -> None:
        self.catalog = catalog
        rows = catalog.read("documents", columns=["uri", "active_version_id"],
                            filter=pc.field("active_version_id").is_valid()).to_pylist()
        self._active = [(row["uri"] or "", row["active_version_id"]) for row in rows]
        self._texts: dict[str, str] = {}

    def version_for(self, doc: str) -> str:
        found = [vid for uri, vid in self._active if uri == doc or uri.endswith("/" + doc)]
        if len(found) != 1:
            problem = "no active document" if not found else f"{len(found)} active documents"
            raise QuoteResolutionError(f"{problem} with a uri ending in /{doc}: ingest the golden files "
                                       "(or fix the 'doc' name in the dataset)")
        return found[0]

    def text(self, version_id: str) -> str:
        if version_id not in self._texts:
            self.load([version_id])
        if version_id not in self._texts:
            raise QuoteResolutionError(f"version {version_id} is not in the catalog's versions table")
        return self._texts[version_id]

    def load(self, version_ids: list[str]) -> None:
        missing = sorted(set(version_ids) - set(self._texts))
        if missing:
            table = self.catalog.read("versions", columns=["version_id", "canonical_text"],
                                      filter=pc.field("version_id").isin(missing))
            self._texts.update(zip(table.column("version_id").to_pylist(), table.column("canonical_text").to_pylist()))


def resolve_queries(queries: list[EvalQuery], texts: CanonicalTexts) -> Resolution:
    """Gold spans of every answerable query; problems are collected, not raised."""
    resolution = Resolution()
    for query in queries:
        resolution.spans[query.id] = []
        for index, gold in enumerate(query.relevant):
            try:
                version_id = texts.version_for(gold.doc)
                spans, match = find_quote(texts.text(version_id), gold.quote)
            except QuoteResolutionError as exc:
                resolution.unresolved.append(f"{query.id}: {exc}")
                continue
            _record(resolution, query.id, gold, version_id, spans, match, index)
    return resolution


def _record(resolution: Resolution, query_id: str, gold, version_id: str, spans: list[Span], match,
            index: int = 0) -> None:
    label = f"{query_id}: {gold.quote!r} in {gold.doc}"
    if not spans:
        resolution.unresolved.append(f"{label} not found in the canonical text")
    if len(spans) > 1:
        resolution.ambiguous.append(f"{label} found {len(spans)} times")
    if spans and match == "whitespace":
        resolution.normalized.append(label)
    resolution.spans[query_id] += [GoldSpan(gold.doc, version_id, s, e, gold.page, match, index)
                                    for s, e in spans]


def chunk_spans(catalog: DeltaCatalog, version_ids: list[str]) -> dict[str, list[tuple[str, list[Span]]]]:
    """``version_id -> [(chunk_id, spans)]`` from ``version_chunks``."""
    table = catalog.read("version_chunks", columns=["version_id", "chunk_id", "spans"],
                         filter=pads.field("version_id").isin(sorted(set(version_ids))))
    out: dict[str, list[tuple[str, list[Span]]]] = {}
    for row in table.to_pylist():
        spans = [(s["start"], s["end"]) for s in row["spans"] or []]
        out.setdefault(row["version_id"], []).append((row["chunk_id"], spans))
    return out


def overlaps(spans: list[Span], start: int, end: int) -> bool:
    return any(s < end and start < e for s, e in spans)


def relevant_chunks(gold: list[GoldSpan], chunks: dict[str, list[tuple[str, list[Span]]]]) -> set[str]:
    """Chunks of the gold spans' versions whose spans overlap at least one gold span."""
    return {chunk_id for g in gold for chunk_id, spans in chunks.get(g.version_id, []) if overlaps(spans, g.start, g.end)}
