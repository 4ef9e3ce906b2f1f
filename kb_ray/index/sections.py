"""Sections of a document version: the nodes of the section tree (docs/tree.md).

A pure function of one version's chunks (``chunks.heading_path`` and the ``version_chunks``
spans, pages and ordinals), so the index build (kb_ray/index/tree.py) and
``GET /v1/documents/{id}/tree`` (kb_ray/search/documents.py) give the same nodes:

* one root per document (heading path ``[]``, titled with the document title); a document
  without headings is that root alone, holding every chunk;
* one node per distinct heading path prefix, its parent the path one shorter; a heading
  path that occurs in two places of a document is one node;
* a node's chunks are those whose heading path is exactly its path (in ordinal order); its
  span runs from the first to the last character of the chunks of its subtree (the heading
  line itself, before the first chunk, is not covered) and its pages are theirs;
* the summary is extractive and deterministic: the first :data:`LEAD_SENTENCES` sentences
  of the first chunk of its subtree, and :data:`KEY_TERMS` key terms: the subtree's terms
  weighted ``tf · ln(1 + chunks / df)`` with document frequencies over that document's
  chunks (ties by term).

``node_id`` is content-addressed: a hash of the version id and the heading path.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from kb_ray.index.analyzer import TextAnalyzer

LEAD_SENTENCES = 2
LEAD_MAX_CHARS = 320
KEY_TERMS = 8
PATH_SEPARATOR = " > "
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")


@dataclass(frozen=True)
class SectionChunk:
    """What the tree needs of one chunk of the version."""

    chunk_id: str
    ordinal: int
    text: str
    heading_path: tuple[str, ...]
    spans: tuple[tuple[int, int], ...]
    pages: tuple[int, ...]


@dataclass
class Section:
    node_id: str
    document_id: str
    version_id: str
    parent_id: str | None
    title: str
    heading_path: list[str]
    depth: int
    ordinal: int  # position of the node in the document (first appearance order)
    span_start: int | None = None
    span_end: int | None = None
    pages: list[int] = field(default_factory=list)
    chunk_ids: list[str] = field(default_factory=list)
    subtree_chunks: int = 0
    summary: str = ""
    key_terms: list[str] = field(default_factory=list)

    def text(self) -> str:
        """What the node's dense vector and lexical body are made of: path, summary, key terms."""
        path = PATH_SEPARATOR.join(self.heading_path) or self.title
        return f"{path}\n{self.summary}\n{' '.join(self.key_terms)}".strip()


def node_id(version_id: str, heading_path: Sequence[str]) -> str:
    payload = version_id + "\x1e" + "\x1f".join(heading_path)
    return "sec_" + hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]


def document_sections(document_id: str, version_id: str, title: str | None, chunks: Sequence[SectionChunk], *,
                      analyzer: TextAnalyzer) -> list[Section]:
    """The nodes of one version, in document order (a parent before its children)."""
    ordered = sorted(chunks, key=lambda c: c.ordinal)
    nodes = {(): _new(document_id, version_id, (), title or "", 0)}
    members: dict[tuple[str, ...], list[SectionChunk]] = {(): []}  # chunks of each node's subtree
    for chunk in ordered:
        path = tuple(chunk.heading_path)
        for depth in range(1, len(path) + 1):
            prefix = path[:depth]
            if prefix not in nodes:
                nodes[prefix] = _new(document_id, version_id, prefix, prefix[-1], len(nodes))
                members[prefix] = []
        nodes[path].chunk_ids.append(chunk.chunk_id)
        for depth in range(len(path) + 1):
            members[path[:depth]].append(chunk)
    statistics = _DocumentTerms(ordered, analyzer)
    for path, node in nodes.items():
        _describe(node, members[path], statistics)
    return list(nodes.values())


def _new(document_id: str, version_id: str, path: tuple[str, ...], title: str, ordinal: int) -> Section:
    return Section(node_id=node_id(version_id, path), document_id=document_id, version_id=version_id,
                   parent_id=node_id(version_id, path[:-1]) if path else None, title=title,
                   heading_path=list(path), depth=len(path), ordinal=ordinal)


def _describe(node: Section, members: list[SectionChunk], statistics: _DocumentTerms) -> None:
    spans = [span for chunk in members for span in chunk.spans]
    if spans:
        node.span_start, node.span_end = min(s for s, _ in spans), max(e for _, e in spans)
    node.pages = sorted({page for chunk in members for page in chunk.pages})
    node.subtree_chunks = len(members)
    node.summary = lead_sentences(members[0].text) if members else ""
    node.key_terms = statistics.key_terms(members)


def lead_sentences(text: str, *, sentences: int = LEAD_SENTENCES, max_chars: int = LEAD_MAX_CHARS) -> str:
    """The first ``sentences`` sentences of ``text`` (whitespace folded), cut at a word end."""
    folded = " ".join(text.split())
    lead = " ".join(_SENTENCE_END.split(folded)[:sentences])
    if len(lead) <= max_chars:
        return lead
    cut = lead[:max_chars].rsplit(" ", 1)[0]
    return cut + " …"


class _DocumentTerms:
    """Term frequencies per chunk and document frequencies over the document's chunks."""

    def __init__(self, chunks: Sequence[SectionChunk], analyzer: TextAnalyzer) -> None:
        self.counts = {chunk.chunk_id: Counter(analyzer.terms(chunk.text)) for chunk in chunks}
        self.df: Counter = Counter()
        for counts in self.counts.values():
            self.df.update(counts.keys())
        self.n = len(chunks)

    def key_terms(self, members: Sequence[SectionChunk], top: int = KEY_TERMS) -> list[str]:
        tf: Counter = Counter()
        for chunk in members:
            tf.update(self.counts[chunk.chunk_id])
        weighted = [(-count * math.log1p(self.n / self.df[term]), term) for term, count in tf.items()]
        return [term for _, term in sorted(weighted)[:top]]
