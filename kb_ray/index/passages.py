"""Passage vectors: a chunk's dense score is its best passage's (``index.passage_chars``).

A chunk of up to 512 word pieces is one vector of its first 254 (MiniLM's input), and a
question about one of its sentences matches that mean weakly: the packaged MiniLM was trained on short
passages. So a chunk longer than ``passage_chars`` characters is also embedded as passages:
its sentences grouped, in order and without overlap, into windows of at most that many
characters (a longer sentence cut at whitespace), each with the chunk's heading path as the
embedder reads it. The dense index holds the chunk's vector and its passages' vectors, with
the row each belongs to, and a chunk scores the best cosine among them
(:class:`kb_ray.index.dense.MultiVectorShard`). Measured in benchmarks/results/eval.md
("Passage vectors").

The windows are a pure function of the chunk's text, so ingest embeds them beside the
chunk (the ``embeddings`` table is keyed by the embedded text's sha, nothing new is stored
per chunk) and an index build finds them again by sha. A chunk of one window is its own
passage and adds nothing. Whether a chunk with passages keeps its own text's vector, and
whether the passages are embedded as texts or pooled from the chunk's token states, is the
vector layout's choice (``index.vector_layout``, kb_ray/index/vector_layout.py); finding the
vectors in the catalog is kb_ray/index/vector_lookup.py's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kb_ray import ids
from kb_ray.embedding.text import format_embed_text
from kb_ray.search.evidence import sentence_bounds

Span = tuple[int, int]
Passages = tuple[np.ndarray, np.ndarray]  # (owners: the row of each vector, vectors)


def passage_spans(text: str, *, max_chars: int) -> list[Span]:
    """The passage windows of ``text``: consecutive sentences up to ``max_chars`` characters,
    without overlap, a sentence longer than that (a table, a code block, a list without
    full stops) cut at whitespace into windows of at most ``max_chars``; ``[]`` when the whole
    text is one window (or ``max_chars`` is 0)."""
    if max_chars <= 0 or len(text.strip()) <= max_chars:
        return []
    sentences = [piece for sentence in sentence_bounds(text) for piece in _cut(text, sentence, max_chars)]
    windows: list[Span] = []
    start = 0
    while start < len(sentences):
        end = start + 1
        while end < len(sentences) and sentences[end][1] - sentences[start][0] <= max_chars:
            end += 1
        windows.append((sentences[start][0], sentences[end - 1][1]))
        start = end
    return windows if len(windows) > 1 else []


def _cut(text: str, span: Span, max_chars: int) -> list[Span]:
    """``span`` in pieces of at most ``max_chars`` characters, cut after the last whitespace
    that fits (mid-word only where a word is longer than ``max_chars``), without the
    whitespace between pieces."""
    start, end = span
    pieces: list[Span] = []
    while end - start > max_chars:
        limit = start + max_chars
        cut = max(text.rfind(" ", start + 1, limit + 1), text.rfind("\n", start + 1, limit + 1))
        cut = cut if cut > start else limit
        pieces.append((start, cut))
        start = cut
        while start < end and text[start].isspace():
            start += 1
    return [*pieces, (start, end)] if start < end else pieces


def passage_texts(text: str, heading_path: Sequence[str] | None, *, max_chars: int) -> list[str]:
    """The embedded texts of the passages of one chunk (see :func:`passage_spans`)."""
    return [format_embed_text(text=text[a:b], heading_path=heading_path or [])
            for a, b in passage_spans(text or "", max_chars=max_chars)]


def passage_texts_by_sha(texts: Sequence[str | None], heading_paths: Sequence[Sequence[str] | None], *,
                         max_chars: int) -> dict[str, str]:
    """``sha -> embedded text`` of the passages of every chunk (``texts[i]`` under
    ``heading_paths[i]``): the keys the ``embeddings`` cache holds them under."""
    if not max_chars:
        return {}
    return {ids.sha256_text(passage): passage for text, path in zip(texts, heading_paths, strict=True)
            for passage in passage_texts(text or "", path, max_chars=max_chars)}


def shard_passages(passages: Passages | None, rows: np.ndarray) -> Passages | None:
    """The passages of the generation rows ``rows`` (one shard), owners renumbered to the
    shard's rows (``rows[i]`` is the shard's row ``i``)."""
    if passages is None or not len(passages[0]):
        return None
    local = np.full(int(max(passages[0].max(), rows.max(initial=-1))) + 1, -1, np.int64)
    local[rows] = np.arange(len(rows))
    mine = local[passages[0]] >= 0
    return local[passages[0][mine]], passages[1][mine]
