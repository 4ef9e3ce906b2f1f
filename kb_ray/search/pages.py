"""``PageIndex``: MaxSim page search over one generation's page index, and page hits.

Search: the query multivector's normalized mean finds a shortlist of ``pages.shortlist``
pages in the pooled FAISS index (filters and the hydration gate applied before top-k, as
in the text shards), then exact MaxSim with the full float16 multivectors ranks them.
A page hit carries the page's text chunks (text, spans, heading path) plus its page
number, and as regions the boxes of the (up to 3) elements on the page whose words
overlap the query most; the whole page when none does.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kb_ray.index.dense import FaissShard
from kb_ray.pages import multivectors
from kb_ray.search.filters import SearchFilter, metadata_column

PAGE_SHARD = -1  # the "shard" number of page candidates in fusion
TOP_BOXES = 3
_WORD = re.compile(r"\w+", re.UNICODE)


def page_key(version_id: str, page_no: int) -> str:
    return f"page:{version_id}:{page_no}"


class PageIndex:
    def __init__(self, info: dict[str, Any], rows: pa.Table, pooled: FaissShard, vectors: np.ndarray,
                 offsets: np.ndarray) -> None:
        self.info, self.rows, self.pooled, self.vectors, self.offsets = info, rows, pooled, vectors, offsets
        self.keys = [page_key(v, p) for v, p in zip(rows.column("version_id").to_pylist(),
                                                       rows.column("page_no").to_pylist())]
        self._metadata: dict[str, list[Any]] = {}
        self._gate: tuple[int, np.ndarray] | None = None

    @classmethod
    def load(cls, generation_dir: Path, info: dict[str, Any]) -> PageIndex:
        folder = generation_dir / info["dir"]
        return cls(info, pq.read_table(folder / info["pages"]), FaissShard.load(folder / info["pooled"], "flat"),
                   np.load(folder / info["multivectors"], mmap_mode="r"), np.load(folder / info["offsets"]))

    @property
    def embedder_fp(self) -> str:
        return self.info["embedder_fp"]

    def mask(self, search_filter: SearchFilter, *, gate_token: int, active_versions: pa.Array) -> np.ndarray:
        if self._gate is None or self._gate[0] != gate_token:
            active = pc.is_in(self.rows.column("version_id"), value_set=active_versions)
            self._gate = (gate_token, pc.fill_null(active, False).to_numpy(zero_copy_only=False).astype(bool))
        mask = self._gate[1]
        if not search_filter.is_empty:
            mask = mask & search_filter.mask(self.rows, self._metadata_values)
        return mask

    def _metadata_values(self, name: str) -> list[Any]:
        if name not in self._metadata:
            self._metadata[name] = metadata_column(self.rows.column("metadata_json").to_pylist(), name)
        return self._metadata[name]

    def search(self, query: np.ndarray, n: int, mask: np.ndarray, *, shortlist: int) -> list[tuple[str, float, int, int]]:
        """Best ``n`` allowed pages as (key, MaxSim score, PAGE_SHARD, row), ties by key."""
        if not mask.any():
            return []
        summary = multivectors.pooled_summary(query)
        rows, _ = self.pooled.search(summary, max(shortlist, n), None if mask.all() else mask)
        scores = multivectors.maxsim_many(query, self.vectors, self.offsets, rows)
        ranked = sorted(zip(rows.tolist(), scores.tolist()), key=lambda item: (-item[1], self.keys[item[0]]))
        return [(self.keys[row], float(score), PAGE_SHARD, int(row)) for row, score in ranked[:n]]

    def multivector(self, row: int) -> np.ndarray:
        return np.asarray(self.vectors[self.offsets[row]:self.offsets[row + 1]], dtype=np.float32)

    def text(self, row: int) -> str:
        return self.rows.column("text")[row].as_py() or ""

    def hydrate(self, row: int, *, query: str, score: float, ranks: dict, scores: dict) -> dict[str, Any]:
        page = self.rows.slice(row, 1).to_pylist()[0]
        chunk_ids = list(page["chunk_ids"] or [])
        return {
            "kind": "page", "chunk_id": chunk_ids[0] if chunk_ids else None, "chunk_ids": chunk_ids,
            "document_id": page["document_id"], "version_id": page["version_id"], "title": page["title"],
            "uri": page["uri"], "collection": page["collection"], "mime": page["mime"], "score": score,
            "ranks": dict(ranks), "scores": dict(scores), "text": page["text"], "quote": page["text"],
            "spans": [(span["start"], span["end"]) for span in page["spans"] or []],
            "page": page["page_no"], "pages": [page["page_no"]], "image_sha": page["image_sha"],
            "regions": best_boxes(query, page["elements"] or [], page["page_no"]),
            "heading_path": list(page["heading_path"] or []),
        }


def best_boxes(query: str, elements: list[dict[str, Any]], page_no: int, top: int = TOP_BOXES) -> list[dict]:
    """Boxes of the elements sharing the most distinct query words (ties: reading order)."""
    words = {w.lower() for w in _WORD.findall(query or "")}
    scored = [(len(words & {w.lower() for w in _WORD.findall(e["text"] or "")}), i, e) for i, e in enumerate(elements)]
    best = sorted((item for item in scored if item[0] > 0), key=lambda item: (-item[0], item[1]))[:top]
    if not best:
        return [{"page": page_no, "bbox": [0.0, 0.0, 1.0, 1.0]}]
    return [{"page": page_no, "bbox": [round(e[c], 4) for c in ("x0", "y0", "x1", "y1")]} for _, _, e in best]
