"""BM25 over chunks behind one small interface: the default backend and two baselines.

``load(path) / save(path) / search(query, k, mask, weights=None)``. Rows are positions in
the shard's hydration file. ``search`` applies the row mask before taking the top ``k``
and returns only rows that share at least one term with the query, best first.

* :class:`ChannelBm25Index` (``bm25``, default; kb_ray.index.channels) — BM25 per channel
  (body, heading, path, exact) with corpus-wide statistics, summed with weights.
  Ties are broken by a location-independent key of the row.

The baselines (``build(texts)``; statistics per shard, ties broken by row):

* :class:`Bm25sIndex` (default) — bm25s: scores every document with numpy sparse ops; the
  mask is bm25s' ``weight_mask``. Lowercased ``\\w\\w+`` tokens, English stopwords.
* :class:`TantivyIndex` — tantivy (Rust, Lucene-like) with the ``en_stem`` analyzer; the
  mask is a zero-scored ``TermSetQuery`` over a ``row`` field that every hit must match.
"""

from __future__ import annotations

import logging
import re
import shutil
import tempfile
from pathlib import Path
from typing import Protocol

import numpy as np

logger = logging.getLogger(__name__)

Rows = tuple[np.ndarray, np.ndarray]  # (rows int64, scores float32), best first


class LexicalIndex(Protocol):
    name: str

    @classmethod
    def load(cls, path: str | Path) -> LexicalIndex: ...

    def save(self, path: str | Path) -> None: ...

    def search(self, query: str, k: int, mask: np.ndarray | None = None, weights=None) -> Rows: ...


def lexical_index_class(name: str) -> type:
    from kb_ray.index.channels import ChannelBm25Index

    classes = {"bm25": ChannelBm25Index, "bm25s": Bm25sIndex, "tantivy": TantivyIndex}
    if name not in classes:
        raise ValueError(f"unknown lexical index {name!r}; use one of {sorted(classes)}")
    return classes[name]


def library_version(name: str) -> str:
    module = __import__(name)
    return str(getattr(module, "__version__", "unknown"))


def _empty() -> Rows:
    return np.empty(0, np.int64), np.empty(0, np.float32)


def _best(rows: np.ndarray, scores: np.ndarray, k: int) -> Rows:
    order = np.lexsort((rows, -scores))[:k]
    return rows[order].astype(np.int64), scores[order].astype(np.float32)


class Bm25sIndex:
    name = "bm25s"

    def __init__(self, retriever) -> None:
        self._retriever = retriever

    @classmethod
    def build(cls, texts: list[str]) -> Bm25sIndex:
        import bm25s

        tokens = bm25s.tokenize(list(texts), stopwords="en", show_progress=False)
        retriever = bm25s.BM25()
        retriever.index(tokens, show_progress=False)
        return cls(retriever)

    @classmethod
    def load(cls, path: str | Path) -> Bm25sIndex:
        import bm25s

        return cls(bm25s.BM25.load(str(path), show_progress=False, verbosity=0))

    def save(self, path: str | Path) -> None:
        self._retriever.save(str(path), show_progress=False)

    def search(self, query: str, k: int, mask: np.ndarray | None = None, weights=None) -> Rows:
        import bm25s

        terms = bm25s.tokenize(query, stopwords="en", return_ids=False, show_progress=False)[0]
        ids = self._retriever.get_tokens_ids(terms)
        if not ids or k <= 0:
            return _empty()
        weights = None if mask is None else mask.astype(np.float32)
        scores = self._retriever.get_scores_from_ids(ids, weight_mask=weights)
        rows = np.flatnonzero(scores > 0)
        return _best(rows, scores[rows], k)


class TantivyIndex:
    name = "tantivy"

    def __init__(self, index, folder: Path, *, owns_folder: bool = False) -> None:
        self._index = index
        self._folder = folder
        self._owns_folder = owns_folder

    @staticmethod
    def _schema():
        import tantivy

        builder = tantivy.SchemaBuilder()
        builder.add_text_field("text", stored=False, tokenizer_name="en_stem")
        builder.add_unsigned_field("row", stored=True, indexed=True, fast=True)
        return builder.build()

    @classmethod
    def build(cls, texts: list[str]) -> TantivyIndex:
        import tantivy

        folder = Path(tempfile.mkdtemp(prefix="kb_ray_tantivy_"))
        index = tantivy.Index(cls._schema(), path=str(folder))
        writer = index.writer(heap_size=64_000_000, num_threads=1)  # one segment order: deterministic
        for row, text in enumerate(texts):
            document = tantivy.Document()
            document.add_text("text", text)
            document.add_unsigned("row", row)
            writer.add_document(document)
        writer.commit()
        writer.wait_merging_threads()
        index.reload()
        return cls(index, folder, owns_folder=True)

    @classmethod
    def load(cls, path: str | Path) -> TantivyIndex:
        import tantivy

        return cls(tantivy.Index.open(str(path)), Path(path))

    def save(self, path: str | Path) -> None:
        shutil.copytree(self._folder, path, dirs_exist_ok=True)

    def search(self, query: str, k: int, mask: np.ndarray | None = None, weights=None) -> Rows:
        import tantivy

        words = " ".join(re.findall(r"\w+", query.lower()))
        if not words or k <= 0 or (mask is not None and not mask.any()):
            return _empty()
        parsed = self._index.parse_query(words, ["text"])
        if mask is not None and not mask.all():
            allowed = tantivy.Query.term_set_query(self._index.schema, "row", np.flatnonzero(mask).tolist())
            parsed = tantivy.Query.boolean_query([
                (tantivy.Occur.Must, parsed),
                (tantivy.Occur.Must, tantivy.Query.const_score_query(allowed, 0.0)),
            ])
        return self._top(parsed, k)

    def _top(self, query, k: int) -> Rows:
        searcher = self._index.searcher()
        hits = searcher.search(query, limit=k + 16, count=False).hits  # a margin for ties at the cut
        rows = np.array([searcher.doc(address)["row"][0] for _, address in hits], dtype=np.int64)
        scores = np.array([score for score, _ in hits], dtype=np.float32)
        return _best(rows, scores, k) if len(rows) else _empty()

    def __del__(self) -> None:
        if self._owns_folder:
            shutil.rmtree(self._folder, ignore_errors=True)
