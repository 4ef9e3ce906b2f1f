"""Which dense vectors a chunk has (``index.vector_layout``) and their keys in ``embeddings``.

A chunk longer than ``index.passage_chars`` characters has passages (kb_ray/index/passages.py);
a chunk of one window has one vector, its embedded text's, in every layout. Where a chunk
has passages, the layout decides its vectors:

* ``passages`` (the default since #38): the passages alone, heading path included, each
  embedded on its own; no chunk-text vector. Each token is embedded about once (plus the
  heading path per passage). Keys: the sha of each embedded text.
* ``chunk_and_passages`` (the layout of every ingest before #38): also the chunk's embedded
  text (heading path + text, cut by the model at its input length). Same keys, so a catalog
  ingested under it holds every vector ``passages`` needs.
* ``late`` (experimental: it lost on the realdocs test split and golden, docs/indexes.md):
  one forward pass over the chunk's embedded text in windows of the model's input
  (``index.late_overlap_tokens`` shared by neighbours), the chunk's vector and each passage's
  pooled from its token states (kb_ray/embedding/late.py; the heading path is encoded once
  per window and pooled into every vector, as a passage embedded on its own reads it). Such
  a vector depends on the whole chunk, so its key names the chunk's embedded text, the span
  and the pooling (:func:`late_key`), never a text's sha: it cannot be mistaken for a
  separately embedded passage.

The embedder fingerprint is the same in every layout (queries are embedded one way); the
generation's spec records the layout (:meth:`VectorLayout.spec`), and a build, a delta
segment and ``kb-ray reembed`` ask this module for a chunk's keys, so an ingest and the
index it feeds always agree. A build that does not find a chunk's vectors counts it in
``passages_missing_rows`` (kb_ray/index/passages.py) and ``kb-ray reembed`` embeds them.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from kb_ray import ids
from kb_ray.embedding.late import LateItem
from kb_ray.embedding.text import format_embed_text
from kb_ray.errors import KbRayError
from kb_ray.index.passages import Span, passage_spans

if TYPE_CHECKING:
    from kb_ray.config import IndexSettings

LAYOUTS = ("chunk_and_passages", "passages", "late")
DEFAULT_LAYOUT = "passages"  # index.vector_layout's default (chosen in #38, benchmarks/results/eval.md)
# what every ingest before layouts wrote, and what a generation spec without a ``layout`` entry means
LEGACY_LAYOUT = "chunk_and_passages"
LATE_VERSION = "1"  # the pooling of kb_ray/embedding/late.py: a change of it is a new version


@dataclass(frozen=True)
class ChunkVectors:
    """The dense vectors of one chunk: ``keys`` (its own first, then in text order), the
    embedded text of each key embedded as a text of its own, and the late forward pass the
    other keys are pooled from (its spans in key order)."""

    chunk_key: str  # the sha of the chunk's embedded text (chunks.embed_text_sha)
    keys: tuple[str, ...]
    texts: dict[str, str] = field(default_factory=dict)
    late: LateItem | None = None
    passages: int = 0  # how many of ``keys`` are passages' (the others: the chunk's own vector)


@dataclass(frozen=True)
class VectorLayout:
    """``kind`` (one of :data:`LAYOUTS`), ``max_chars`` (``index.passage_chars``; 0: a chunk
    vector alone in every layout) and ``overlap_tokens`` (``late`` only)."""

    kind: str = DEFAULT_LAYOUT
    max_chars: int = 0
    overlap_tokens: int = 0

    def __post_init__(self) -> None:
        if self.kind not in LAYOUTS:
            raise KbRayError(f"unknown vector layout {self.kind!r}: choose one of {', '.join(LAYOUTS)}")

    @classmethod
    def from_settings(cls, index: IndexSettings) -> VectorLayout:
        return cls(index.vector_layout, index.passage_chars, index.late_overlap_tokens)

    @classmethod
    def from_spec(cls, spec: dict) -> VectorLayout:
        """The layout a generation was built with (its spec's ``passages`` entry; none: no passages)."""
        passages = spec.get("passages") or {}
        return cls(passages.get("layout", LEGACY_LAYOUT), int(passages.get("max_chars", 0)),
                   int((passages.get("late") or {}).get("overlap_tokens", 0)))

    def spec(self) -> dict | None:
        """The generation spec's ``passages`` entry (kb_ray/index/build.py ``index_spec``); the
        legacy layout's is the one generations had before layouts, so their ids stay."""
        if not self.max_chars:
            return None
        spec = {"max_chars": self.max_chars, "windows": "sentences, no overlap; a longer sentence cut at whitespace",
                "score": "max(chunk, passages)",
                "embed_text": "heading path + passage (kb_ray.embedding.text.format_embed_text)"}
        if self.kind == "passages":
            spec.update(layout=self.kind, score="max(passages); a chunk of one window: its own vector")
        elif self.kind == "late":
            spec.update(layout=self.kind, embed_text="pooled from the chunk's token states",
                        late={"version": LATE_VERSION, "overlap_tokens": self.overlap_tokens,
                              "pooling": "mean over the span's tokens and its windows' [CLS], heading, [SEP]"})
        return spec

    def chunk(self, text: str | None, heading_path: Sequence[str] | None) -> ChunkVectors:
        """The vectors the layout gives the chunk ``text`` under ``heading_path``."""
        text, path = text or "", list(heading_path or [])
        embedded = format_embed_text(text=text, heading_path=path)
        sha = ids.sha256_text(embedded)
        if self.kind == "late":
            return self._late(text, embedded, sha)
        spans = passage_spans(text, max_chars=self.max_chars)
        if not spans:
            return ChunkVectors(sha, (sha,), {sha: embedded})
        passages = [format_embed_text(text=text[a:b], heading_path=path) for a, b in spans]
        keys = tuple(ids.sha256_text(passage) for passage in passages)
        texts = dict(zip(keys, passages))
        if self.kind == "passages":
            return ChunkVectors(sha, keys, texts, passages=len(keys))
        return ChunkVectors(sha, (sha, *keys), {sha: embedded, **texts}, passages=len(keys))

    def _late(self, text: str, embedded: str, sha: str) -> ChunkVectors:
        body = ids.nfc(text).strip()
        spans = passage_spans(body, max_chars=self.max_chars)
        if not spans:
            return ChunkVectors(sha, (sha,), {sha: embedded})
        start = embedded.rfind(body)
        if start < 0:
            raise KbRayError(f"the chunk text is not part of its embedded text {embedded[:80]!r}: late pooling "
                             "needs the text template to keep the text whole")
        spans = [(0, len(body)), *spans]
        keys = tuple(late_key(sha, span, overlap_tokens=self.overlap_tokens) for span in spans)
        late = LateItem(embedded, start, tuple((start + a, start + b) for a, b in spans))
        return ChunkVectors(sha, keys, late=late, passages=len(keys) - 1)

    def vector_spans(self, text: str | None, count: int) -> list[Span]:
        """The characters of ``text`` (a chunk's) each of its ``count`` stored vectors stands for,
        in the build's order (kb_ray/index/vector_lookup.py): the whole text for a chunk-text
        vector, a passage's window for a passage vector. A row indexed with earlier ingests'
        vectors (``passages_missing_rows``) has a count the layout does not give: its first
        vector then stands for the whole text and the others for nothing (``(0, 0)``)."""
        text = text or ""
        whole = (0, len(text))
        if self.kind == "late":  # pooled over the stripped NFC text (:meth:`_late`): offsets hold where NFC changed nothing
            body = ids.nfc(text).strip()
            start = text.find(body) if body else -1
            spans = [] if start < 0 else [(start + a, start + b) for a, b in passage_spans(body, max_chars=self.max_chars)]
        else:
            spans = passage_spans(text, max_chars=self.max_chars)
        if spans and count == len(spans) and self.kind != "late":
            return spans
        if spans and count == len(spans) + 1:
            return [whole, *spans]
        return [whole] + [(0, 0)] * (count - 1)

    def plain(self) -> VectorLayout:
        """The legacy layout with the same passages: the vectors every earlier ingest wrote."""
        return replace(self, kind=LEGACY_LAYOUT)

    def check_embedder(self, embedder: Any) -> None:
        if self.kind == "late" and self.max_chars and not hasattr(embedder, "embed_late"):
            raise KbRayError("index.vector_layout late pools the model's token states: it needs a local embedder "
                             "(embedding.runtime torch or onnx), not a remote one")


def late_key(chunk_key: str, span: tuple[int, int], *, overlap_tokens: int) -> str:
    """The ``embeddings`` key of the vector pooled over ``span`` (characters of the chunk's
    stripped text) of the chunk whose embedded text has sha ``chunk_key``. The model's input
    length is part of the embedder fingerprint, the other pooling choices are named here."""
    return ids.sha256_text(f"late-pooled v{LATE_VERSION}, overlap {overlap_tokens} tokens, "
                           f"chunk {chunk_key}, characters [{span[0]}, {span[1]})")


def embed_chunk_vectors(embedder: Any, plans: Sequence[ChunkVectors], *, held: Collection[str],
                        overlap_tokens: int) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """The vectors of ``plans``' keys not in ``held``, and what it took (the stage counts
    ``embed_texts``, ``late_chunks``, ``late_vectors``, ``embed_tokens``: tokens the model read,
    special tokens, heading paths and window overlaps included). A late chunk with any key
    missing is encoded again whole; only its missing keys come back."""
    texts = {key: text for plan in plans for key, text in plan.texts.items() if key not in held}
    late = {plan.chunk_key: plan for plan in plans if plan.late is not None and any(k not in held for k in plan.keys)}
    vectors: dict[str, np.ndarray] = {}
    counts = {"embed_texts": len(texts), "late_chunks": len(late), "late_vectors": 0, "embed_tokens": 0}
    if texts:
        vectors.update(zip(texts, embedder.embed_texts(list(texts.values()))))
        counts["embed_tokens"] += embedder.count_tokens(list(texts.values())) if hasattr(embedder, "count_tokens") else 0
    if late:
        pooled, tokens = embedder.embed_late([plan.late for plan in late.values()], overlap_tokens=overlap_tokens)
        counts["embed_tokens"] += tokens
        for plan, spans in zip(late.values(), pooled):
            fresh = {key: vector for key, vector in zip(plan.keys, spans) if key not in held}
            counts["late_vectors"] += len(fresh)
            vectors.update(fresh)
    return vectors, counts
