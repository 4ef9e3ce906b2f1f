"""``HybridSearcher``: the in-process search core (no Ray, no HTTP).

Per query: validate → compile filters and the hydration gate into one row mask per shard
→ dense (FAISS) and lexical (BM25) top-n per shard with that mask applied before top-k →
gather across shards → fusion (``search.fusion``: RRF or a convex combination of normalized
scores, kb_ray.search.fusion) → optional cross-encoder rerank → hydrate the top hits, add
evidence and confidence, re-sort the top ``search.confidence_rerank`` by confidence (hybrid
mode without a cross-encoder) → ``k`` hits. Because the gate (documents' current active
versions, re-read every ``gate_max_age_s`` seconds) is part of the mask, tombstoned or superseded chunks never take a slot, and a query
returns exactly ``k`` hits whenever at least ``k`` allowed chunks match. Mode ``tree`` first
picks sections (kb_ray/search/tree.py, docs/tree.md) and narrows the masks to their chunks; mode
``graph`` adds a third list to the fusion, the chunks of a personalized PageRank over the
chunk-concept graph seeded with the query's concepts (kb_ray/search/graph.py, docs/graph.md).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.config import KbConfig
from kb_ray.embedding.fingerprint import embedder_fingerprint
from kb_ray.errors import KbRayError
from kb_ray.index.generations import GenerationError, load_manifest, local_generation_dir, read_current
from kb_ray.index.manifest import GenerationManifest
from kb_ray.index.segments import latest_segment, lineage_manifest
from kb_ray.search.assembly import HitAssembler, dense_floor, resort_by_confidence
from kb_ray.search.errors import SearchRequestError, query_too_long
from kb_ray.search.evidence import ChunkText, StoredCosines
from kb_ray.search.filters import parse_filters
from kb_ray.search.fusion import fuse, tie_break_retrievers
from kb_ray.search.gate import ActivePointers
from kb_ray.search.graph import ConceptGraph
from kb_ray.search.hits import Candidate, ChunkLocator, chunk_text, hydrate
from kb_ray.search.pages import PAGE_SHARD, PageIndex
from kb_ray.search.rerank import Reranker, reranker_from_settings
from kb_ray.search.segment_sets import SegmentSets, attach_segments
from kb_ray.search.shard import SearchShard, gather_ranked, unknown_terms_share
from kb_ray.search.tree import LlmNavigator, SectionTree, section_chunks

logger = logging.getLogger(__name__)

Mode = Literal["dense", "lexical", "hybrid", "page", "hybrid+page", "tree", "graph"]
MODES = ("dense", "lexical", "hybrid", "page", "hybrid+page", "tree", "graph")
EVIDENCE_MODES = ("none", "lexical", "hybrid")  # search.evidence; a request may choose another
DENSE_MODES, LEXICAL_MODES, PAGE_MODES = ("dense", "hybrid", "hybrid+page", "tree", "graph"), \
    ("lexical", "hybrid", "hybrid+page", "tree", "graph"), ("page", "hybrid+page")


@dataclass
class SearchResult:
    hits: list[dict[str, Any]]
    generation: str
    mode: str
    k: int
    reranked: bool
    timing_ms: dict[str, float] = field(default_factory=dict)
    abstain: bool | None = None  # best hit confidence < search.abstain_below (None: no threshold known)
    rerank_error: str | None = None  # why a configured rerank failed (the fused order was kept)
    tree: dict[str, Any] | None = None  # tree mode: the sections taken and the descent's steps
    graph: dict[str, Any] | None = None  # graph mode: the query concepts that seeded the walk

    def to_dict(self) -> dict[str, Any]:
        return {"hits": self.hits, "generation": self.generation, "mode": self.mode, "k": self.k,
                "reranked": self.reranked, "abstain": self.abstain, "timing_ms": self.timing_ms,
                **({"rerank_error": self.rerank_error} if self.rerank_error else {}),
                **({"tree": self.tree} if self.tree is not None else {}),
                **({"graph": self.graph} if self.graph is not None else {})}


@dataclass(frozen=True)
class _Loaded:
    manifest: GenerationManifest
    shards: list[SearchShard]
    pages: PageIndex | None = None
    locator: ChunkLocator | None = None
    sets: SegmentSets | None = None  # the base and delta segment shards as loaded (kb_ray/search/segment_sets.py)
    lineage: GenerationManifest | None = None  # with segments: catalog_versions of the newest one
    tree: SectionTree | None = None  # the section tree (index.tree), base generation only
    graph: ConceptGraph | None = None  # the chunk-concept graph (index.graph), base generation only

    @property
    def segment(self) -> int:
        return self.sets.number if self.sets else 0


class _Timer:
    def __init__(self) -> None:
        self.ms: dict[str, float] = {}
        self._start = self._last = time.perf_counter()

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self.ms[stage] = round((now - self._last) * 1000, 3)
        self._last = now

    def total(self) -> dict[str, float]:
        return {**self.ms, "total": round((time.perf_counter() - self._start) * 1000, 3)}


class HybridSearcher:
    """Searches the live (or a pinned) index generation of one knowledge base."""

    def __init__(self, config: KbConfig, *, generation_id: str | None = None, reranker: Reranker | None = None,
                 embedder: Any = None, gate_max_age_s: float = 2.0, page_embedder: Any = None,
                 gate_version: int | None = None, segment: int | None = None) -> None:
        self.config = config
        self.pinned_segment = segment  # with generation_id: load its delta segments 1..segment only (as-of)
        if config.search.faiss_threads:
            import faiss

            faiss.omp_set_num_threads(config.search.faiss_threads)  # OpenMP spin hurts on small boxes
        self._page_embedder = page_embedder
        self.pinned = generation_id
        self.catalog = DeltaCatalog.open(config.kb_root, storage_options=config.storage_options, create=False)
        self.gate = ActivePointers(self.catalog, max_age_s=gate_max_age_s, version=gate_version)
        self.reranker = reranker
        self._navigator: Any = None  # search.tree.llm_navigate's generator, made at its first use
        self._embedder = embedder
        self._lock = threading.Lock()
        self.assembler = HitAssembler(config.search)
        self._embedder_fp: str | None = None
        self._loaded = self._load(generation_id or self._current())

    @classmethod
    def open(cls, config: KbConfig, *, generation_id: str | None = None, reranker: Reranker | None = None,
             embedder: Any = None, gate_max_age_s: float = 2.0, page_embedder: Any = None,
             gate_version: int | None = None, segment: int | None = None) -> HybridSearcher:
        """Load the live generation (or ``generation_id``); a reranker comes from config if set;
        ``gate_version`` fixes the gate at that ``documents`` version and ``segment`` the pinned
        generation's delta segments at 1..segment (as-of search)."""
        if reranker is None:
            reranker = reranker_from_settings(config.search)
        return cls(config, generation_id=generation_id, reranker=reranker, embedder=embedder,
                   gate_max_age_s=gate_max_age_s, page_embedder=page_embedder, gate_version=gate_version,
                   segment=segment)

    def at(self, *, generation_id: str, gate_version: int, segment: int = 0) -> HybridSearcher:
        """A searcher pinned to ``generation_id`` with its delta segments up to ``segment``, whose
        gate reads ``documents`` at ``gate_version`` (as-of search, kb_ray/search/as_of.py); it
        shares this one's models."""
        return HybridSearcher(self.config, generation_id=generation_id, reranker=self.reranker,
                              embedder=self._embedder, page_embedder=self._page_embedder, gate_version=gate_version,
                              segment=segment)

    @property
    def manifest(self) -> GenerationManifest:
        """The manifest of the generation being served."""
        return self._loaded.manifest

    @property
    def generation(self) -> str:
        return self.manifest.generation_id

    @property
    def has_page_index(self) -> bool:
        return self._loaded.pages is not None

    @property
    def has_tree_index(self) -> bool:
        return self._loaded.tree is not None

    @property
    def has_graph_index(self) -> bool:
        return self._loaded.graph is not None

    @property
    def segment(self) -> int:
        """The newest delta segment of the generation being served (0: none)."""
        return self._loaded.segment

    def refresh(self) -> bool:
        """Follow ``CURRENT`` and the live generation's delta segments; True if what is
        searched changed (a new generation, or new segments of this one)."""
        if self.pinned is not None:
            return False
        current = self._current()
        with self._lock:
            if current == self.generation:
                upto = latest_segment(self.config.kb_root, current, storage_options=self.config.storage_options)
                if upto == self._loaded.segment:
                    return False
                self._loaded = self._with_segments(self._loaded.manifest, self._loaded.sets, self._loaded.pages,
                                                   upto=upto, tree=self._loaded.tree, graph=self._loaded.graph)
                self.gate.invalidate()  # a segment's documents are active: do not wait out the gate's cache
                logger.info("search loaded segments of %s up to %d", current, upto)
                return True
            self._loaded = self._load(current)
            self.gate.invalidate()  # a new generation's documents are active: do not wait out the gate's cache
        logger.info("search switched to generation %s", current)
        return True

    def _current(self) -> str:
        current = read_current(self.config.kb_root, storage_options=self.config.storage_options)
        if current is None:
            raise GenerationError(f"no live index generation under {self.config.kb_root}: run build_index first")
        return current

    def _load(self, generation_id: str) -> _Loaded:
        options = self.config.storage_options
        manifest = load_manifest(self.config.kb_root, generation_id, storage_options=options)
        folder = local_generation_dir(self.config.kb_root, generation_id, storage_options=options)
        shards = [SearchShard.load(folder, info, manifest.lexical_type) for info in manifest.shards]
        pages = PageIndex.load(folder, manifest.pages) if manifest.pages else None
        tree = SectionTree.load(folder, manifest.tree) if manifest.tree else None
        graph = ConceptGraph.load(folder, manifest.graph) if manifest.graph else None
        logger.info("loaded generation %s (%d chunks, %d shards, %d pages)", generation_id, manifest.rows,
                    len(shards), manifest.pages["rows"] if manifest.pages else 0)
        upto = self.pinned_segment if self.pinned_segment is not None else \
            latest_segment(self.config.kb_root, generation_id, storage_options=options)
        return self._with_segments(manifest, SegmentSets(shards), pages, upto=upto, tree=tree, graph=graph)

    def _with_segments(self, manifest: GenerationManifest, sets: SegmentSets, pages: PageIndex | None, *,
                       upto: int, tree: SectionTree | None = None, graph: ConceptGraph | None = None) -> _Loaded:
        sets, shards = attach_segments(self.config, manifest, sets, upto=upto)
        lineage = lineage_manifest(manifest, sets.segments[-1]) if sets.segments else None
        return _Loaded(manifest, shards, pages, ChunkLocator(shards), sets, lineage, tree, graph)

    # -- searching ---------------------------------------------------------------------

    def search(self, query: str = "", *, k: int | None = None, mode: Mode = "hybrid",
               filters: dict[str, Any] | None = None, query_vector: np.ndarray | None = None,
               rerank: bool | None = None, query_multivector: np.ndarray | None = None,
               context_chars: int = 0, evidence: str | None = None) -> SearchResult:
        """Top ``k`` hits with citations, evidence and confidence; ``rerank=None`` reranks when a
        reranker is set; ``context_chars`` > 0 adds neighbouring chunks as each hit's ``context``;
        ``evidence`` (none | lexical | hybrid) overrides ``search.evidence`` for this search.

        Page modes embed the query with the page embedder unless ``query_multivector`` is given."""
        loaded, timer = self._loaded, _Timer()
        k = self._validate(query, k=k, mode=mode, query_vector=query_vector, loaded=loaded,
                           query_multivector=query_multivector)
        self._check_context(context_chars)
        evidence = self._evidence_mode(evidence)
        masks, page_mask = self._masks(loaded, filters)
        timer.lap("filter")
        if mode in DENSE_MODES:  # embedded once: retrieval and evidence scoring share it
            query_vector = self._query_vector(query, query_vector, loaded.manifest)
        full_masks, tree_ranked, tree_info = masks, None, None
        if mode == "tree":
            masks, tree_ranked, tree_info = self._tree_select(loaded, query, query_vector, filters, masks, k)
            timer.lap("tree")
        do_rerank = self.reranker is not None and rerank is not False
        if rerank and self.reranker is None:
            raise SearchRequestError("rerank was requested but no reranker is configured "
                                     "(search.rerank_model_path or search.rerank_endpoint)")
        n = max(self.config.search.candidates, k, self.config.search.rerank_candidates if do_rerank else 0)
        ranked = self._retrieve(loaded, query, mode=mode, n=n, masks=masks, query_vector=query_vector, timer=timer)
        if mode in PAGE_MODES:
            ranked["page"] = self._page_retrieve(loaded, query, n=n, mask=page_mask, given=query_multivector)
            timer.lap("page")
        if tree_ranked is not None and self.config.search.tree.fuse_sections:
            ranked["tree"] = tree_ranked
        graph_info = None
        if mode == "graph":
            ranked["graph"], graph_info = self._graph_rank(loaded, query, masks, n)
            timer.lap("graph")
        candidates = self._fuse(ranked, loaded)
        if mode == "tree" and len(candidates) < k:  # the sections held too few: the rest in hybrid order
            candidates = self._filled(candidates, loaded, query, n=n, masks=full_masks, query_vector=query_vector,
                                      timer=timer)
        timer.lap("fuse")
        rerank_error = None
        if do_rerank:
            candidates, rerank_error = self._rerank_or_keep(query, candidates, loaded)
            do_rerank = rerank_error is None
            timer.lap("rerank")
        depth = self._confidence_depth(mode, do_rerank)
        head = candidates[:max(k, depth)]
        hits = [self._hydrate(c, loaded, query, do_rerank) for c in head]
        if mode == "tree":
            for hit in hits:
                hit["section_id"], hit["section_path"] = loaded.tree.section_path(hit["chunk_id"])
        timer.lap("hydrate")
        abstain = self._assemble(hits, head, candidates, loaded, query, query_vector, evidence)
        hits = resort_by_confidence(hits, depth=depth)[:k]
        if context_chars:
            self.assembler.context(hits, context_chars=context_chars, neighbour=loaded.locator)
        timer.lap("evidence")
        return SearchResult(hits=hits, generation=loaded.manifest.generation_id, mode=mode, k=k,
                            reranked=do_rerank, timing_ms=timer.total(), abstain=abstain, rerank_error=rerank_error,
                            tree=tree_info, graph=graph_info)

    # -- tree mode (kb_ray/search/tree.py) -----------------------------------------------

    def _tree_select(self, loaded: _Loaded, query: str, query_vector: np.ndarray | None,
                     filters: dict[str, Any] | None, masks: list[np.ndarray], k: int):
        settings = self.config.search
        token, active = self.gate.snapshot()
        search_filter = parse_filters(filters, filterable_metadata=self.config.index.filterable_metadata)
        node_mask = loaded.tree.mask(search_filter, gate_token=token, active_versions=active)
        scores = loaded.tree.scores(query, query_vector, node_mask, settings)
        navigator = LlmNavigator(self._navigator_generator(), query) if settings.tree.llm_navigate else None
        descent = loaded.tree.navigate(scores, target_chunks=max(k, settings.tree.min_chunks),
                                       max_steps=settings.tree.max_steps, navigator=navigator,
                                       llm_max_steps=settings.tree.llm_max_steps,
                                       llm_candidates=settings.tree.llm_candidates)
        narrowed, ranked = section_chunks(loaded.tree, descent, loaded.shards, masks)
        info = {"sections": [{"node_id": loaded.tree.node_ids[row], "path": loaded.tree.paths[row],
                              "score": round(descent.scores[row], 6)} for row in descent.sections],
                "trace": descent.trace}
        return narrowed, ranked, info

    def _navigator_generator(self):
        """The answer generator ``search.tree.llm_navigate`` asks (made once, kept)."""
        if self._navigator is None:
            from kb_ray.answer.generators import make_generator

            answer = self.config.answer.model_copy(update={"max_new_tokens": self.config.search.tree.llm_max_tokens})
            self._navigator = make_generator(answer)
        return self._navigator

    # -- graph mode (kb_ray/search/graph.py) ---------------------------------------------

    def _graph_rank(self, loaded: _Loaded, query: str, masks: list[np.ndarray], n: int):
        settings = self.config.search.graph
        seed = loaded.graph.seeds(query)
        scores = loaded.graph.rank(seed, loaded.graph.allowed(loaded.shards, masks), restart=settings.restart,
                                   iterations=settings.iterations)
        return loaded.graph.ranked(scores, loaded.shards, masks, n), {"seeds": loaded.graph.seed_labels(seed)}

    def _filled(self, candidates: list[Candidate], loaded: _Loaded, query: str, *, n: int,
                masks: list[np.ndarray], query_vector: np.ndarray | None, timer: _Timer) -> list[Candidate]:
        seen = {c.chunk_id for c in candidates}
        rest = self._fuse(self._retrieve(loaded, query, mode="hybrid", n=n, masks=masks, query_vector=query_vector,
                                         timer=timer), loaded)
        extra = [c for c in rest if c.chunk_id not in seen]
        for rank, candidate in enumerate(extra, len(candidates) + 1):
            candidate.ranks["fused"] = rank
        return candidates + extra

    # -- hit assembly: evidence, confidence, context ------------------------------------

    def _confidence_depth(self, mode: str, reranked: bool) -> int:
        """How many fused hits confidence re-sorts: hybrid mode only (the model was fitted on
        hybrid hits), never after a cross-encoder."""
        return 0 if mode != "hybrid" or reranked else self.config.search.confidence_rerank

    def _assemble(self, hits: list[dict[str, Any]], head: list[Candidate], candidates: list[Candidate],
                  loaded: _Loaded, query: str, query_vector: np.ndarray | None, evidence: str) -> bool | None:
        chunks = [None if c.shard == PAGE_SHARD else chunk_text(c, loaded.shards[c.shard]) for c in head]
        wants_vector = evidence == "hybrid" and any(c is not None for c in chunks)
        if wants_vector and not self._embedder_matches(loaded.manifest):
            query_vector = None  # stored vectors can only be compared with a query vector of the same model
        elif query_vector is None and wants_vector and query.strip():
            query_vector = self._query_vector(query, None, loaded.manifest)
        stored = None if query_vector is None else stored_cosines(head, chunks, loaded, query_vector)
        self.assembler.evidence(query, hits, chunks, stored, mode=evidence)
        return self.assembler.confidence(query, hits, dense_floor=dense_floor(candidates), mode=evidence,
                                         unknown=unknown_terms_share(query, loaded.shards))

    def _evidence_mode(self, evidence: str | None) -> str:
        if evidence is None:
            return self.config.search.evidence
        if evidence not in EVIDENCE_MODES:
            raise SearchRequestError(f"unknown evidence mode {evidence!r}; use one of {', '.join(EVIDENCE_MODES)}")
        return evidence

    def _embedder_matches(self, manifest: GenerationManifest) -> bool:
        """Whether the configured embedder made this generation's vectors (else evidence is lexical);
        read from the settings, so a searcher given query vectors never loads the model."""
        if self._embedder_fp is None:
            self._embedder_fp = (self._embedder.fingerprint if self._embedder is not None
                                 else embedder_fingerprint(self.config.embedding))
        return self._embedder_fp == manifest.embedder_fp

    def _check_context(self, context_chars: int) -> None:
        limit = self.config.search.max_context_chars
        if isinstance(context_chars, bool) or not isinstance(context_chars, int) or not 0 <= context_chars <= limit:
            raise SearchRequestError(f"context_chars must be an integer between 0 and {limit}, got {context_chars!r}")

    def _validate(self, query: str, *, k: int | None, mode: str, query_vector: np.ndarray | None,
                  loaded: _Loaded, query_multivector: np.ndarray | None) -> int:
        manifest = loaded.manifest
        if mode not in MODES:
            raise SearchRequestError(f"unknown search mode {mode!r}; use one of {', '.join(MODES)}")
        if mode == "graph" and loaded.graph is None:
            raise SearchRequestError(f"generation {manifest.generation_id} has no concept graph: build the index "
                                     "with index.graph=true")
        if mode == "tree" and loaded.tree is None:
            raise SearchRequestError(f"generation {manifest.generation_id} has no section tree: build the index "
                                     "with index.tree=true")
        if mode == "tree" and self.config.search.tree.llm_navigate and self.config.answer.generator == "extractive":
            raise SearchRequestError("search.tree.llm_navigate needs a model generator: set answer.generator "
                                     "(openai, vllm or transformers) and its model, or turn llm_navigate off")
        if mode in PAGE_MODES and loaded.pages is None:
            raise SearchRequestError(f"generation {manifest.generation_id} has no page index: ingest with "
                                     "pages.enabled=true, then build_index")
        needs_text = not ((mode == "dense" and query_vector is not None)
                          or (mode == "page" and query_multivector is not None))
        if not isinstance(query, str) or (needs_text and not query.strip()):
            raise SearchRequestError("the query is empty: pass a non-empty query string"
                                     + (" (or a query_vector in dense mode)" if mode == "dense" else ""))
        if len(query) > self.config.search.max_query_chars:
            raise SearchRequestError(query_too_long(len(query), self.config.search.max_query_chars))
        k = self.config.search.default_k if k is None else k
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= self.config.search.max_k:
            raise SearchRequestError(f"k must be an integer between 1 and {self.config.search.max_k}, got {k!r}")
        if query_vector is not None and np.asarray(query_vector).reshape(-1).shape[0] != manifest.dim:
            raise SearchRequestError(f"query_vector has {np.asarray(query_vector).size} dimensions; "
                                     f"generation {manifest.generation_id} has {manifest.dim}")
        return k

    def _masks(self, loaded: _Loaded, filters: dict[str, Any] | None) -> tuple[list[np.ndarray], np.ndarray | None]:
        search_filter = parse_filters(filters, filterable_metadata=self.config.index.filterable_metadata)
        token, active = self.gate.snapshot()
        masks = [shard.mask(search_filter, gate_token=token, active_versions=active) for shard in loaded.shards]
        pages = loaded.pages.mask(search_filter, gate_token=token, active_versions=active) if loaded.pages else None
        return masks, pages

    def _retrieve(self, loaded: _Loaded, query: str, *, mode: str, n: int, masks: list[np.ndarray],
                  query_vector: np.ndarray | None, timer: _Timer) -> dict[str, list]:
        ranked: dict[str, list] = {}
        if mode in DENSE_MODES:
            vector = self._query_vector(query, query_vector, loaded.manifest)
            timer.lap("embed")
            per_shard = [(s, s.dense(vector, n, m)) for s, m in zip(loaded.shards, masks)]
            ranked["dense"] = gather_ranked(per_shard, n)
            timer.lap("dense")
        if mode in LEXICAL_MODES:
            channels = self.config.search.lexical_channels
            per_shard = [(s, s.lexical(query, n, m, channels)) for s, m in zip(loaded.shards, masks)]
            ranked["lexical"] = gather_ranked(per_shard, n)
            timer.lap("lexical")
        return ranked

    def _query_vector(self, query: str, given: np.ndarray | None, manifest: GenerationManifest) -> np.ndarray:
        if given is not None:
            return np.asarray(given, dtype=np.float32).reshape(-1)
        embedder = self._get_embedder()
        if embedder.fingerprint != manifest.embedder_fp:
            raise KbRayError(f"generation {manifest.generation_id} was built with embedder {manifest.embedder_fp} "
                             f"but the configured embedder is {embedder.fingerprint}: rebuild the index or "
                             "restore the embedding settings")
        return embedder.embed_query(query)

    def _page_retrieve(self, loaded: _Loaded, query: str, *, n: int, mask: np.ndarray,
                       given: np.ndarray | None) -> list:
        if given is None:
            embedder = self._get_page_embedder()
            if embedder.fingerprint != loaded.pages.embedder_fp:
                raise KbRayError(f"generation {loaded.manifest.generation_id} indexed pages of page embedder "
                                 f"{loaded.pages.embedder_fp} but the configured one is {embedder.fingerprint}: "
                                 "rebuild the index or restore the pages settings")
            given = embedder.embed_queries([query])[0]
        return loaded.pages.search(np.asarray(given, np.float32), n, mask, shortlist=self.config.pages.shortlist)

    def _get_page_embedder(self) -> Any:
        if self._page_embedder is None:
            from kb_ray.pages.embedder import PageEmbedder

            self._page_embedder = PageEmbedder(self.config.pages)
        return self._page_embedder

    def _hydrate(self, candidate: Candidate, loaded: _Loaded, query: str, reranked: bool) -> dict[str, Any]:
        score = self._final_score(candidate, reranked)
        if candidate.shard == PAGE_SHARD:
            return loaded.pages.hydrate(candidate.row, query=query, score=score, ranks=candidate.ranks,
                                        scores=candidate.scores)
        return hydrate(candidate, loaded.shards[candidate.shard], score=score,
                       manifest=loaded.lineage or loaded.manifest)

    def _get_embedder(self) -> Any:
        if self._embedder is None:
            from kb_ray.embedding.text import TextEmbedder

            self._embedder = TextEmbedder.from_settings(self.config.embedding,
                                                        num_threads=self.config.search.query_threads)
        return self._embedder

    def _fuse(self, ranked: dict[str, list], loaded: _Loaded) -> list[Candidate]:
        where = {cid: (shard, row) for items in ranked.values() for cid, _, shard, row in items}
        tie_keys = {cid: loaded.shards[shard].tie_keys[row] for cid, (shard, row) in where.items() if shard != PAGE_SHARD}
        settings = self.config.search
        weights = {"graph": settings.graph.weight, **settings.weights}
        fused = fuse({name: [item[:2] for item in items] for name, items in ranked.items()}, method=settings.fusion,
                     rrf_k=settings.rrf_k, weights=weights, tie_keys=tie_keys,
                     tie_break=tie_break_retrievers(settings.rrf_tie_break))
        positions = {name: {item[0]: (rank, item[1]) for rank, item in enumerate(items, 1)}
                     for name, items in ranked.items()}
        candidates = []
        for fused_rank, (cid, score) in enumerate(fused, 1):
            ranks: dict[str, int | None] = {"dense": None, "lexical": None, **dict.fromkeys(ranked), "fused": fused_rank, "rerank": None}
            scores: dict[str, float | None] = {"dense": None, "lexical": None, **dict.fromkeys(ranked), "fused": score, "rerank": None}
            for name, found in positions.items():
                if cid in found:
                    ranks[name], scores[name] = found[cid]
            candidates.append(Candidate(cid, *where[cid], ranks=ranks, scores=scores))
        return candidates

    def _rerank_or_keep(self, query: str, candidates: list[Candidate],
                        loaded: _Loaded) -> tuple[list[Candidate], str | None]:
        """Reranked candidates, or the fused ones and why the reranker failed: a reranker outage
        (a remote server down, a timeout) costs the rerank, never the search."""
        try:
            return self._rerank(query, candidates, loaded), None
        except Exception as exc:  # noqa: BLE001 - any reranker failure falls back to the fused order
            logger.warning("rerank failed, keeping the fused order: %s", exc, exc_info=not isinstance(exc, KbRayError))
            return candidates, str(exc)

    def _rerank(self, query: str, candidates: list[Candidate], loaded: _Loaded) -> list[Candidate]:
        head = candidates[: self.config.search.rerank_candidates]
        texts = [loaded.pages.text(c.row) if c.shard == PAGE_SHARD
                 else loaded.shards[c.shard].hydration.column("text")[c.row].as_py() for c in head]
        scores = self.reranker.score(query, texts)
        order = sorted(range(len(head)), key=lambda i: (-scores[i], head[i].ranks["fused"]))
        reranked = []
        for rank, i in enumerate(order, 1):
            candidate = head[i]
            candidate.ranks["rerank"], candidate.scores["rerank"] = rank, scores[i]
            reranked.append(candidate)
        return reranked + candidates[len(head):]

    @staticmethod
    def _final_score(candidate: Candidate, reranked: bool) -> float:
        rerank_score = candidate.scores.get("rerank")
        return float(rerank_score) if reranked and rerank_score is not None else float(candidate.scores["fused"])


def stored_cosines(head: list[Candidate], chunks: list[ChunkText | None], loaded: _Loaded,
                   query_vector: np.ndarray) -> Callable[[int], StoredCosines | None]:
    """Hit ``i``'s stored dense vectors (read back from its shard's FAISS index) as cosines to
    ``query_vector``, with the characters of the chunk each stands for (the generation's vector
    layout, kb_ray/index/vector_layout.py): evidence reads them, nothing is embedded again."""
    from kb_ray.index.dense import normalized
    from kb_ray.index.vector_layout import VectorLayout  # here: kb_ray.index.passages reads kb_ray.search.evidence

    layout = VectorLayout.from_spec(loaded.manifest.spec)
    query = normalized(np.asarray(query_vector, np.float32).reshape(1, -1))[0]

    def cosines(i: int) -> StoredCosines | None:
        chunk, candidate = chunks[i], head[i]
        vectors = None if chunk is None else loaded.shards[candidate.shard].row_vectors(candidate.row)
        if chunk is None or vectors is None or not len(vectors):
            return None
        return layout.vector_spans(chunk.text, len(vectors)), vectors @ query

    return cosines
