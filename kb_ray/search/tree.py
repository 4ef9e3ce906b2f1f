"""Search mode ``tree``: pick sections, then rank their chunks (docs/tree.md).

``SectionTree`` is a generation's section tree as loaded (kb_ray/index/tree.py). Per query:

1. the nodes allowed by the filter and the hydration gate (the same mask as chunks get)
   are scored: dense (flat FAISS over the node texts) and lexical (channel BM25), top
   ``search.tree.candidates`` each, fused by RRF (``search.rrf_k``);
2. best-first descent: a heap seeded with the document roots, keyed by the best score in
   each branch; popping a branch pushes its children and the node's own chunks as a
   "section" item; popping a section takes it. It stops when the sections taken hold
   ``max(k, search.tree.min_chunks)`` chunks, after ``search.tree.max_steps`` pops, or when
   no scored branch is left. The steps are returned as the descent's ``trace``.

With ``search.tree.llm_navigate`` a :class:`LlmNavigator` (the configured answer generator)
chooses, at up to ``search.tree.llm_max_steps`` expansions, which of the best-scored branches
the descent opens next (:meth:`SectionTree.navigate`); each choice is a trace step.

The searcher (kb_ray/search/searcher.py) then runs its dense + lexical retrieval with the
chunk masks narrowed to the chunks of the sections taken.
"""

from __future__ import annotations

import heapq
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kb_ray.config import SearchSettings
from kb_ray.index.channels import ChannelBm25Index
from kb_ray.index.dense import FaissShard
from kb_ray.search.filters import SearchFilter, metadata_column


@dataclass
class Descent:
    """The sections a descent took (node rows, best first), their scores and its steps."""

    sections: list[int] = field(default_factory=list)
    scores: dict[int, float] = field(default_factory=dict)
    trace: list[dict[str, Any]] = field(default_factory=list)


class SectionTree:
    def __init__(self, info: dict[str, Any], nodes: pa.Table, dense: FaissShard, lexical: ChannelBm25Index) -> None:
        self.info, self.nodes, self.dense, self.lexical = info, nodes, dense, lexical
        self.node_ids: list[str] = nodes.column("node_id").to_pylist()
        self.chunk_ids: list[list[str]] = [list(c or []) for c in nodes.column("chunk_ids").to_pylist()]
        self.paths: list[list[str]] = [list(p or []) for p in nodes.column("heading_path").to_pylist()]
        row_of = {node: row for row, node in enumerate(self.node_ids)}
        self.children: dict[int, list[int]] = {}
        self.roots: list[int] = []
        for row, parent in enumerate(nodes.column("parent_id").to_pylist()):
            if parent is None or parent not in row_of:
                self.roots.append(row)
            else:
                self.children.setdefault(row_of[parent], []).append(row)
        self.section_of: dict[str, int] = {cid: row for row, cids in enumerate(self.chunk_ids) for cid in cids}
        self._metadata: dict[str, list[Any]] = {}
        self._gate: tuple[int, np.ndarray] | None = None

    @classmethod
    def load(cls, generation_dir: Path, info: dict[str, Any]) -> SectionTree:
        folder = generation_dir / info["dir"]
        return cls(info, pq.read_table(folder / info["nodes"]), FaissShard.load(folder / info["dense"], "flat"),
                   ChannelBm25Index.load(folder / info["lexical"]))

    def mask(self, search_filter: SearchFilter, *, gate_token: int, active_versions: pa.Array) -> np.ndarray:
        """Nodes of active versions that the filter allows."""
        if self._gate is None or self._gate[0] != gate_token:
            active = pc.is_in(self.nodes.column("version_id"), value_set=active_versions)
            self._gate = (gate_token, pc.fill_null(active, False).to_numpy(zero_copy_only=False).astype(bool))
        mask = self._gate[1]
        if not search_filter.is_empty:
            mask = mask & search_filter.mask(self.nodes, self._metadata_values)
        return mask

    def _metadata_values(self, name: str) -> list[Any]:
        if name not in self._metadata:
            self._metadata[name] = metadata_column(self.nodes.column("metadata_json").to_pylist(), name)
        return self._metadata[name]

    def scores(self, query: str, vector: np.ndarray | None, mask: np.ndarray, settings: SearchSettings) -> np.ndarray:
        """RRF of the dense and lexical ranks of the allowed nodes; 0 for nodes in neither top list."""
        fused = np.zeros(len(self.node_ids), np.float64)
        if not mask.any():
            return fused
        n, allowed = settings.tree.candidates, None if mask.all() else mask
        ranked = [self.lexical.search(query, n, allowed, weights=settings.lexical_channels)[0]]
        if vector is not None:
            ranked.append(self.dense.search(vector, n, allowed)[0])
        for rows in ranked:
            for rank, row in enumerate(rows.tolist(), 1):
                fused[row] += 1.0 / (settings.rrf_k + rank)
        return fused

    def descend(self, scores: np.ndarray, *, target_chunks: int, max_steps: int) -> Descent:
        """Best-first over branches (key: best node score in the branch); see the module doc."""
        return self.navigate(scores, target_chunks=target_chunks, max_steps=max_steps, navigator=None,
                             llm_max_steps=0, llm_candidates=2)

    def navigate(self, scores: np.ndarray, *, target_chunks: int, max_steps: int, navigator: LlmNavigator | None,
                 llm_max_steps: int, llm_candidates: int) -> Descent:
        """:meth:`descend` where ``navigator`` picks the branches to open (none: the score order alone). Before a pop, while calls
        are left and at least two branches wait, the best-scored ``llm_candidates`` of them are
        offered; the chosen ones (in the order named) move ahead of every other item, and what
        they push (their own section, their children, scored or not) inherits that place, so the
        descent reads the chosen branch first. A failed or unparseable reply chooses nothing: that
        step keeps the score order (``fallback`` says why). Pops are bounded by ``max_steps``."""
        best = self._branch_best(scores)
        # items: (priority, position in the reply, -score, node id, kind, row); priority 0 unless chosen
        heap = [(0, 0, -best[r], self.node_ids[r], "branch", r) for r in self.roots if best[r] > 0]
        heapq.heapify(heap)
        descent, chunks, pops, calls = Descent(), 0, 0, 0
        while heap and pops < max_steps and chunks < target_chunks:
            asking = navigator is not None and calls < llm_max_steps
            branches = sorted(item for item in heap if item[4] == "branch")[:llm_candidates] if asking else []
            if len(branches) >= 2:
                calls += 1
                offered = [item[5] for item in branches]
                chosen, reason = navigator.choose(self, offered)
                descent.trace.append({"step": "llm", "offered": [self.node_ids[r] for r in offered],
                                      "chosen": [self.node_ids[r] for r in (chosen or offered[:1])],
                                      "fallback": reason})
                if chosen:
                    picked = set(chosen)
                    heap = [item for item in heap if not (item[4] == "branch" and item[5] in picked)]
                    heap.extend((-calls, place, -best[r], self.node_ids[r], "branch", r)
                                for place, r in enumerate(chosen))
                    heapq.heapify(heap)
            priority, place, negative, _, kind, row = heapq.heappop(heap)
            pops += 1
            descent.trace.append({"step": kind, "node_id": self.node_ids[row], "score": round(-negative, 6)})
            if kind == "section":
                descent.sections.append(row)
                descent.scores[row] = -negative
                chunks += len(self.chunk_ids[row])
                continue
            chosen_branch = priority < 0
            if (scores[row] > 0 or chosen_branch) and self.chunk_ids[row]:
                heapq.heappush(heap, (priority, place, -scores[row], self.node_ids[row], "section", row))
            for child in self.children.get(row, []):
                if best[child] > 0 or chosen_branch:
                    heapq.heappush(heap, (priority, place, -best[child], self.node_ids[child], "branch", child))
        return descent

    def node_field(self, name: str, row: int) -> Any:
        return self.nodes.column(name)[row].as_py()

    def _branch_best(self, scores: np.ndarray) -> np.ndarray:
        """The best own score in each node's subtree (children come after parents in the rows)."""
        best = scores.copy()
        for row in range(len(best) - 1, -1, -1):
            for child in self.children.get(row, []):
                best[row] = max(best[row], best[child])
        return best

    def section_path(self, chunk_id: str) -> tuple[str | None, list[str]]:
        row = self.section_of.get(chunk_id)
        return (None, []) if row is None else (self.node_ids[row], self.paths[row])


def section_chunks(tree: SectionTree, descent: Descent, shards: list[Any],
                   masks: list[np.ndarray]) -> tuple[list[np.ndarray], list[tuple[str, float, int, int]]]:
    """The chunk masks narrowed to the chunks of the sections taken, and those chunks as a ranked
    list (section order, then chunk order; score: the section's) for the fusion."""
    order = {cid: (position, j, row) for position, row in enumerate(descent.sections)
             for j, cid in enumerate(tree.chunk_ids[row])}
    value_set = pa.array(sorted(order), pa.string())
    narrowed, found = [], []
    for shard, mask in zip(shards, masks):
        taken = pc.fill_null(pc.is_in(shard.hydration.column("chunk_id"), value_set=value_set), False)
        taken = taken.to_numpy(zero_copy_only=False).astype(bool) & mask
        narrowed.append(taken)
        for row in np.flatnonzero(taken).tolist():
            cid = shard.chunk_ids[row]
            found.append((order[cid], cid, shard.info.shard, row))
    found.sort()
    return narrowed, [(cid, float(descent.scores[place[2]]), shard, row) for place, cid, shard, row in found]


NAVIGATE_SYSTEM = ("You navigate the table of contents of documents to find where a question is answered. "
                   "Answer only with section numbers.")
NAVIGATE_USER = """Question: {query}

Sections:
{sections}

Which of these sections should be opened to answer the question? Answer with the number of the best \
section (or up to {most} numbers, best first, separated by commas) and nothing else."""
SUMMARY_CHARS = 240  # of each offered section's summary in the prompt
_NUMBER = re.compile(r"(?<![\w.])(\d{1,3})(?!\w|\.\d)")


class LlmNavigator:
    """Asks ``generator`` (a :class:`~kb_ray.answer.types.Generator`) which offered branch to open
    for ``query``. :meth:`choose` never raises: a failed call or a reply with no valid number
    gives ``([], reason)``."""

    def __init__(self, generator: Any, query: str, *, most: int = 2) -> None:
        self.generator, self.query, self.most = generator, query, most

    def messages(self, tree: SectionTree, offered: list[int]) -> list[dict[str, str]]:
        lines = []
        for number, row in enumerate(offered, 1):
            path = " > ".join(tree.paths[row]) or tree.node_field("document_title", row) or tree.node_field("title", row)
            title = tree.node_field("title", row) or path
            summary = " ".join((tree.node_field("summary", row) or "").split())[:SUMMARY_CHARS]
            lines.append(f"{number}. {title} — {path}: {summary}".rstrip(": "))
        return [{"role": "system", "content": NAVIGATE_SYSTEM},
                {"role": "user", "content": NAVIGATE_USER.format(query=self.query, sections="\n".join(lines),
                                                                 most=self.most)}]

    def choose(self, tree: SectionTree, offered: list[int]) -> tuple[list[int], str | None]:
        try:
            result = self.generator.run(self.messages(tree, offered))
        except Exception as exc:  # noqa: BLE001 - a generator that raises falls back like a failed call
            return [], f"error: {type(exc).__name__}"
        if result.error is not None:
            return [], result.error
        chosen = parse_choice(result.text, len(offered), most=self.most)
        if not chosen:
            return [], "unparseable"
        return [offered[n - 1] for n in chosen], None


def parse_choice(text: str, offered: int, *, most: int) -> list[int]:
    """The distinct numbers 1..``offered`` named in ``text``, in order, at most ``most``."""
    chosen: list[int] = []
    for match in _NUMBER.finditer(text or ""):
        number = int(match.group(1))
        if 1 <= number <= offered and number not in chosen:
            chosen.append(number)
        if len(chosen) == most:
            break
    return chosen

