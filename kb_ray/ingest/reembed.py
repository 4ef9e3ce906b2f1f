"""Model switch: vectors of another embedder for every active chunk, then an index generation
for it beside the live one (docs/model_switch.md).

The ``embeddings`` table is keyed by (embedder fingerprint, sha of the embedded text), so a new
embedder's vectors sit beside the old ones and never mix: a generation reads one fingerprint.
:func:`embed_missing` computes, in micro-batches, the vectors of the active chunks under the
configured vector layout (``index.vector_layout``: their texts', their passages', or those
pooled late from their tokens, kb_ray/index/vector_layout.py) that have no row under the new
fingerprint and commits each batch as an insert-only MERGE — vectors already there (from an
earlier, interrupted run, or shared by several chunks) are not computed again, so a rerun
resumes where the last one stopped. The same fills the vectors a catalog ingested under
another layout lacks (the build's ``passages_missing_rows``). :func:`reembed` holds the
catalog's writer lease for that and then builds the new embedder's generation without
switching to it: the live generation keeps serving until ``kb-ray index switch``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.config import EmbeddingSettings, KbConfig
from kb_ray.errors import KbRayError
from kb_ray.index.rows import INDEXED_TABLES, open_session
from kb_ray.index.vector_layout import ChunkVectors, VectorLayout, embed_chunk_vectors
from kb_ray.index.vector_lookup import chunks_missing_vectors
from kb_ray.ingest.rows import to_table

logger = logging.getLogger(__name__)


@dataclass
class ReembedProgress:
    texts_done: int
    texts_total: int
    elapsed_s: float


@dataclass
class ReembedReport:
    embedder_fp: str
    model_id: str
    texts: int = 0  # distinct vectors of the active chunks (their texts', passages', late-pooled spans')
    cached: int = 0  # of those, already embedded under this fingerprint before the run
    embedded: int = 0  # computed by this run
    passages: int = 0  # of those, passage vectors (index.passage_chars, kb_ray/index/passages.py)
    late_chunks: int = 0  # chunks encoded once for late-pooled vectors (index.vector_layout late)
    batches: int = 0
    seconds: float = 0.0  # listing, embedding and committing (model loading not included)
    load_seconds: float = 0.0
    generation: str | None = None  # the generation built for this embedder (not switched to)
    live_generation: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def render(self) -> str:
        rate = self.embedded / self.seconds if self.seconds else 0.0
        lines = [f"reembed {self.model_id} ({self.embedder_fp}): {self.embedded} texts embedded in "
                 f"{self.batches} batches ({rate:.1f} texts/s; {self.passages} of them passages), "
                 f"{self.cached} already there, "
                 f"{self.texts} in all, {self.seconds:.1f}s (+{self.load_seconds:.1f}s loading the model)"]
        if self.generation:
            lines.append(f"built {self.generation} for it beside the live {self.live_generation or '(none)'}; "
                         f"switch with: kb-ray index switch {self.generation} (with this embedder configured)")
        return "\n".join(lines)


def embed_missing(catalog: DeltaCatalog, *, embedding: EmbeddingSettings, batch_texts: int = 512,
                  on_progress: Callable[[ReembedProgress], None] | None = None,
                  layout: VectorLayout | None = None) -> ReembedReport:
    """Compute every vector the active chunks have under ``layout`` (kb_ray/index/vector_layout.py;
    None: each chunk's text alone) that ``embedding``'s embedder has not: chunk and passage texts
    in batches of ``batch_texts``, chunks pooled late in batches of ``batch_texts / 8``."""
    from kb_ray.embedding.text import TextEmbedder

    layout = layout or VectorLayout()
    loading = time.perf_counter()
    embedder = TextEmbedder.from_settings(embedding)
    layout.check_embedder(embedder)
    started = time.perf_counter()  # texts/s from here: loading (or a first ONNX export) is load_seconds
    report = ReembedReport(embedder_fp=embedder.fingerprint, model_id=embedding.model_id,
                           load_seconds=started - loading)
    connection = open_session(catalog, {name: catalog.table_versions()[name] for name in INDEXED_TABLES})
    try:
        missing, held, report.texts = chunks_missing_vectors(connection, embedder.fingerprint, layout)
    finally:
        connection.close()
    report.cached = report.texts - len({key for plan in missing for key in plan.keys} - held)
    held_before = set(held)
    texts = {key: text for plan in missing for key, text in plan.texts.items() if key not in held}
    late = [plan for plan in missing if plan.late is not None]
    logger.info("reembed %s: %d texts to embed and %d chunks to pool late (%d vectors in all, %d held)",
                embedder.fingerprint, len(texts), len(late), report.texts, report.cached)
    items = list(texts.items())
    batches = [[ChunkVectors(key, (key,), {key: text}) for key, text in items[offset:offset + batch_texts]]
               for offset in range(0, len(items), batch_texts)]
    step = max(1, batch_texts // 8)
    batches += [late[offset:offset + step] for offset in range(0, len(late), step)]
    todo = report.texts - report.cached
    for batch in batches:
        done = _embed_batch(catalog, embedder, batch, held=held, overlap_tokens=layout.overlap_tokens)
        report.embedded += done
        report.batches += 1
        if on_progress is not None:
            on_progress(ReembedProgress(report.embedded, todo, time.perf_counter() - started))
    report.passages = len({key for plan in missing for key in plan.keys[len(plan.keys) - plan.passages:]} - held_before)
    report.late_chunks = len(late)
    report.seconds = time.perf_counter() - started
    return report


def _embed_batch(catalog: DeltaCatalog, embedder, plans: list[ChunkVectors], *, held: set[str],
                 overlap_tokens: int) -> int:
    vectors, _ = embed_chunk_vectors(embedder, plans, held=held, overlap_tokens=overlap_tokens)
    held.update(vectors)
    rows = to_table("embeddings", [{"embedder_fp": embedder.fingerprint, "embed_text_sha": sha, "dim": embedder.dim,
                                    "vector": vector.tolist()} for sha, vector in vectors.items()])
    catalog.merge_upsert("embeddings", rows, keys=["embedder_fp", "embed_text_sha"], insert_only=True)
    return len(vectors)


def reembed(config: KbConfig, *, embedding: EmbeddingSettings, batch_texts: int = 512, build: bool = True,
            on_progress: Callable[[ReembedProgress], None] | None = None) -> ReembedReport:
    """Vectors of ``embedding``'s embedder for every active chunk (under the writer lease), then
    its generation built beside the live one (``build``); nothing is switched."""
    from kb_ray.catalog.lease import writer_lease

    catalog = DeltaCatalog.open(config.kb_root, storage_options=config.storage_options, create=False)
    with writer_lease(catalog, config, holder="reembed"):
        report = embed_missing(catalog, embedding=embedding, batch_texts=batch_texts, on_progress=on_progress,
                               layout=VectorLayout.from_settings(config.index))
    if build:
        build_beside_live(config.model_copy(update={"embedding": embedding}), report)
    else:
        report.live_generation = _live(config)
    return report


def build_beside_live(config: KbConfig, report: ReembedReport) -> None:
    """Build the generation of ``report``'s embedder at the latest catalog versions without
    switching to it; ``report`` names it and the generation that stays live."""
    from kb_ray.index import build_index

    switched_off = config.index.model_copy(update={"switch_after_build": False})
    manifest = build_index(config.model_copy(update={"index": switched_off}), embedder_fp=report.embedder_fp)
    report.generation, report.live_generation = manifest.generation_id, _live(config)


def _live(config: KbConfig) -> str | None:
    from kb_ray.index import read_current

    return read_current(config.kb_root, storage_options=config.storage_options)


def check_generation_embedder(config: KbConfig, generation_id: str) -> None:
    """Queries are embedded by the configured embedder: switching to a generation another one
    built (a model switch) needs that embedder configured first, in the service's config too."""
    from kb_ray.embedding.fingerprint import embedder_fingerprint
    from kb_ray.index import load_manifest

    built_by = load_manifest(config.kb_root, generation_id, storage_options=config.storage_options).embedder_fp
    configured = embedder_fingerprint(config.embedding)
    if built_by and built_by != configured:
        raise KbRayError(f"generation {generation_id} was built by embedder {built_by}, but the configured one is "
                         f"{configured} ({config.embedding.model_id}): configure the embedder the generation was "
                         "built with (embedding.model_path / model_id / runtime) in the config the service and this "
                         "command use, then switch")
