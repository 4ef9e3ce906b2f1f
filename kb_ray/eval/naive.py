"""The naive reference retriever the eval reports next to every kb-ray mode.

What a user would write in an afternoon, over the SAME parsed canonical texts (so quotes
resolve the same way): fixed windows of :data:`WINDOW_CHARS` characters overlapping by
:data:`OVERLAP_CHARS`, cut per page for paginated documents (per document otherwise);
``bm25s`` with its default tokenization and English stopwords; the packaged MiniLM
embedder with exact cosine similarity; reciprocal rank fusion (k = 60) for hybrid. No
headings, no structure, no filters, no reranking. A window is relevant to a query when
it overlaps a gold quote span (the same rule as for kb-ray chunks); because windows overlap
each other, windows that cover the same gold spans count as one (:func:`label_by_gold`).

Hits have the shape the eval's outcome code reads from kb-ray hits (``chunk_id``,
``version_id``, ``spans``, ``pages``, ``score``, ``scores``; ``quote`` is None, so no
citation check applies).
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.compute as pc

from kb_ray.errors import KbRayError

logger = logging.getLogger(__name__)

WINDOW_CHARS = 800
OVERLAP_CHARS = 100
RRF_K = 60
FUSION_DEPTH = 100  # hits taken from each of dense and lexical before fusing
NAIVE_MODES = ("naive-dense", "naive-lexical", "naive-hybrid")


class NaiveRetrieverError(KbRayError):
    """The naive reference cannot be built (no active documents, bad window sizes)."""


@dataclass(frozen=True)
class Window:
    window_id: str
    version_id: str
    start: int
    end: int
    page: int | None


def window_bounds(start: int, end: int, *, size: int = WINDOW_CHARS, overlap: int = OVERLAP_CHARS) -> list[tuple[int, int]]:
    """``[start, end)`` cut into windows of ``size`` characters, each starting ``size - overlap`` after
    the previous one; the last window ends at ``end`` (it may be shorter)."""
    if size <= 0 or not 0 <= overlap < size:
        raise NaiveRetrieverError(f"window size {size} and overlap {overlap}: need size > 0 and 0 <= overlap < size")
    bounds, step = [], size - overlap
    for left in range(start, max(end, start + 1), step):
        bounds.append((left, min(left + size, end)))
        if left + size >= end:
            break
    return [(s, e) for s, e in bounds if e > s]


def page_ranges(text_length: int, elements: list[tuple[int, int, int | None]]) -> list[tuple[int | None, int, int]]:
    """``(page, start, end)`` ranges of the canonical text: one per page when elements carry
    pages (each page from its first element's start to the next page's start), else the whole text."""
    firsts: dict[int, int] = {}
    for start, _end, page in sorted(e for e in elements if e[2] is not None):
        firsts.setdefault(page, start)
    if not firsts:
        return [(None, 0, text_length)]
    starts = sorted((offset, page) for page, offset in firsts.items())
    starts[0] = (0, starts[0][1])  # text before the first paged element belongs to that page
    ends = [offset for offset, _ in starts[1:]] + [text_length]
    return [(page, offset, end) for (offset, page), end in zip(starts, ends) if end > offset]


def make_windows(version_id: str, text: str, elements: list[tuple[int, int, int | None]]) -> list[Window]:
    windows = []
    for page, start, end in page_ranges(len(text), elements):
        for s, e in window_bounds(start, end):
            if text[s:e].strip():
                windows.append(Window(f"naive:{version_id}:{s}", version_id, s, e, page))
    return windows


class NaiveRetriever:
    """Windows, a bm25s index and exact dense vectors over the given canonical texts."""

    def __init__(self, windows: list[Window], texts: dict[str, str], embedder: Any,
                 *, cache_dir: str | Path | None = None) -> None:
        import bm25s

        if not windows:
            raise NaiveRetrieverError("the naive reference has no windows: the catalog has no active text")
        self.windows = windows
        self.embedder = embedder
        bodies = [texts[w.version_id][w.start:w.end] for w in windows]
        self._bm25 = bm25s.BM25()
        self._bm25.index(bm25s.tokenize(bodies, stopwords="en", show_progress=False), show_progress=False)
        self._vectors = _unit(embed_cached(embedder, bodies, cache_dir=cache_dir))
        logger.info("naive reference: %d windows of %d chars (overlap %d)", len(windows), WINDOW_CHARS, OVERLAP_CHARS)

    @classmethod
    def from_catalog(cls, catalog: Any, embedder: Any, *, cache_dir: str | Path | None = None) -> NaiveRetriever:
        texts = _active_texts(catalog)
        elements = _element_pages(catalog, sorted(texts))
        windows = [w for vid in sorted(texts) for w in make_windows(vid, texts[vid], elements.get(vid, []))]
        return cls(windows, texts, embedder, cache_dir=cache_dir)

    def relevant(self, gold: list) -> set[str]:
        """Ids of the windows that overlap a gold span (``GoldSpan``)."""
        return {w.window_id for g in gold for w in self.windows
                if w.version_id == g.version_id and w.start < g.end and g.start < w.end}

    def qrels(self, gold: list) -> set[str]:
        """The relevant units of one query (see :func:`gold_units`)."""
        versions = {g.version_id for g in gold}
        return gold_units(gold, [w for w in self.windows if w.version_id in versions])

    def search(self, query: str, *, k: int, mode: str) -> list[dict]:
        if mode not in NAIVE_MODES:
            raise NaiveRetrieverError(f"unknown naive mode {mode!r}; use {', '.join(NAIVE_MODES)}")
        depth = k if mode != "naive-hybrid" else max(k, FUSION_DEPTH)
        dense = self._dense(query, depth) if mode != "naive-lexical" else []
        lexical = self._lexical(query, depth) if mode != "naive-dense" else []
        if mode == "naive-dense":
            ranked = [(row, score) for row, score in dense]
        elif mode == "naive-lexical":
            ranked = [(row, score) for row, score in lexical]
        else:
            ranked = rrf_fuse([r for r, _ in dense], [r for r, _ in lexical], k=RRF_K)
        scores = {"dense": dict(dense), "lexical": dict(lexical)}
        return [self._hit(row, score, scores) for row, score in ranked[:k]]

    def _dense(self, query: str, k: int) -> list[tuple[int, float]]:
        scores = self._vectors @ _unit(self.embedder.embed_query(query)[None, :])[0]
        return _top(scores, k)

    def _lexical(self, query: str, k: int) -> list[tuple[int, float]]:
        import bm25s

        terms = bm25s.tokenize(query, stopwords="en", return_ids=False, show_progress=False)[0]
        ids = self._bm25.get_tokens_ids(terms)
        if not ids:
            return []
        scores = self._bm25.get_scores_from_ids(ids)
        return [(row, score) for row, score in _top(scores, k) if score > 0]

    def _hit(self, row: int, score: float, scores: dict[str, dict[int, float]]) -> dict:
        w = self.windows[row]
        return {"chunk_id": w.window_id, "version_id": w.version_id, "spans": [(w.start, w.end)],
                "pages": [w.page] if w.page is not None else [], "score": float(score), "quote": None,
                "scores": {name: (float(s[row]) if row in s else None) for name, s in scores.items()}}


def embed_cached(embedder: Any, bodies: list[str], *, cache_dir: str | Path | None) -> np.ndarray:
    """``embedder.embed_texts(bodies)``, reusing vectors stored in ``cache_dir`` (one ``.npz``
    per embedder fingerprint, keyed by each text's sha256) and adding the new ones to it."""
    if cache_dir is None:
        return embedder.embed_texts(bodies)
    path = Path(cache_dir) / f"naive-{hashlib.sha256(embedder.fingerprint.encode()).hexdigest()[:16]}.npz"
    cached = dict(zip(*_load_cache(path)))
    keys = [hashlib.sha256(body.encode()).hexdigest() for body in bodies]
    missing = sorted({k: b for k, b in zip(keys, bodies) if k not in cached}.items())
    if missing:
        vectors = embedder.embed_texts([body for _, body in missing])
        cached.update({k: v for (k, _), v in zip(missing, vectors)})
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, keys=np.array(list(cached)), vectors=np.stack(list(cached.values())))
    logger.info("naive reference: %d of %d window vectors from the cache %s", len(bodies) - len(missing), len(bodies), path)
    return np.stack([cached[k] for k in keys])


def _load_cache(path: Path) -> tuple[list[str], list[np.ndarray]]:
    if not path.is_file():
        return [], []
    with np.load(path) as data:
        return list(data["keys"]), list(data["vectors"])


def gold_units(gold: list, windows: list[Window]) -> set[str]:
    """The qrels of one query for the naive reference: one unit per distinct set of gold spans
    that some window overlaps (``gold:0``, ``gold:0,1``, ...)."""
    return {label for w in windows if (label := _gold_label(w.version_id, w.start, w.end, gold))}


def label_by_gold(hits: list[dict], gold: list) -> list[dict]:
    """Hits with ``chunk_id`` replaced by the set of gold spans they overlap (``gold:<i,j>``);
    a later hit with a label already ranked becomes ``dup:<window>`` (not relevant).

    Windows overlap, so a quote inside the 100-character overlap lies in two windows: counting
    both as relevant would cap recall@1 at 0.5 for that query. Windows that cover the same gold
    spans are one unit, as a kb-ray chunk that holds the quote is."""
    seen: set[str] = set()
    out = []
    for hit in hits:
        start, end = hit["spans"][0]
        label = _gold_label(hit["version_id"], start, end, gold)
        chunk_id = hit["chunk_id"] if not label else (f"dup:{hit['chunk_id']}" if label in seen else label)
        seen.add(label)
        out.append({**hit, "chunk_id": chunk_id})
    return out


def _gold_label(version_id: str, start: int, end: int, gold: list) -> str:
    touched = [str(i) for i, g in enumerate(gold) if g.version_id == version_id and start < g.end and g.start < end]
    return "gold:" + ",".join(touched) if touched else ""


def rrf_fuse(*rankings: list[int], k: int = RRF_K) -> list[tuple[int, float]]:
    """Reciprocal rank fusion: ``sum 1 / (k + rank)`` (rank from 1); ties by row."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, row in enumerate(ranking, 1):
            fused[row] = fused.get(row, 0.0) + 1.0 / (k + rank)
    return sorted(fused.items(), key=lambda item: (-item[1], item[0]))


def _top(scores: np.ndarray, k: int) -> list[tuple[int, float]]:
    order = np.lexsort((np.arange(len(scores)), -scores))[:k]
    return [(int(row), float(scores[row])) for row in order]


def _unit(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)


def _active_texts(catalog: Any) -> dict[str, str]:
    active = catalog.read("documents", columns=["active_version_id"],
                          filter=pc.field("active_version_id").is_valid()).column("active_version_id").to_pylist()
    table = catalog.read("versions", columns=["version_id", "canonical_text"], filter=pc.field("version_id").isin(active))
    return {vid: text or "" for vid, text in zip(table.column("version_id").to_pylist(),
                                                 table.column("canonical_text").to_pylist())}


def _element_pages(catalog: Any, version_ids: list[str]) -> dict[str, list[tuple[int, int, int | None]]]:
    table = catalog.read("elements", columns=["version_id", "span_start", "span_end", "regions"],
                         filter=pc.field("version_id").isin(version_ids))
    out: dict[str, list[tuple[int, int, int | None]]] = {}
    for row in table.to_pylist():
        if row["span_start"] is not None:
            page = min(r["page"] for r in row["regions"]) if row["regions"] else None
            out.setdefault(row["version_id"], []).append((row["span_start"], row["span_end"], page))
    return out
