"""The contextual generation's inputs (``index.contextual``, docs/contextual.md).

``build_index`` calls :func:`contextual_inputs` with the generation's hydration rows (read at
the named catalog versions). For each chunk it

1. writes a context (kb_ray/index/chunk_context.py) unless ``enrichments`` already holds one
   for ``(enricher_fp, input_sha)`` (kind ``chunk_context``; the new ones are MERGEd in);
2. forms the embedded text ``context + "\\n" + chunk text`` (through the embedder's text
   template), whose sha256 keys the ``embeddings`` cache like any chunk's embed text, and
   embeds only the texts with no vector under the generation's embedder fingerprint
   (committed in batches as insert-only MERGEs, as kb_ray/ingest/reembed.py does).

Both caches are read at their latest versions: their rows are content-addressed and never
change, so a rebuild from the same catalog versions gives the same generation (promise 1)
and a second build embeds and writes nothing. The hydration rows (text, spans, pages,
evidence) are untouched: only the indexed text changes.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kb_ray import ids
from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.config import AnswerSettings, IndexSettings
from kb_ray.errors import CatalogError, KbRayError
from kb_ray.index.analyzer import TextAnalyzer
from kb_ray.index.channels import contextual_text
from kb_ray.index.chunk_context import (
    CONTEXT_FORMAT,
    CONTEXT_KIND,
    MAX_CONTEXT_CHARS,
    SYSTEM_PROMPT,
    USER_PROMPT,
    ChunkPlace,
    ExtractiveContextWriter,
    chunk_places,
    clean_context,
    context_messages,
)

logger = logging.getLogger(__name__)

EMBED_BATCH = 256
COMMIT_BATCH = 1024


class LlmEnrichmentWriter:
    """``enrichments`` rows written by the configured answer generator (``openai``, ``vllm``,
    ``transformers``), one per input, content-addressed by the sha of the prompt. Subclasses say
    what they write: :meth:`messages` of one input and :meth:`clean` of a reply."""

    name, kind = "generator", CONTEXT_KIND

    def __init__(self, answer: AnswerSettings, *, max_tokens: int, fingerprint: str, setting: str,
                 generator: Any = None) -> None:
        if answer.generator == "extractive":
            raise KbRayError(f"{setting}=generator needs a model generator: set answer.generator "
                             f"(openai, vllm or transformers) and its model, or use {setting}=extractive")
        self.settings = answer.model_copy(update={"max_new_tokens": max_tokens})
        self.fingerprint = fingerprint
        self.model = answer.model_id or answer.model_path or answer.generator
        self._generator = generator

    def messages(self, item: Any) -> list[dict[str, str]]:
        raise NotImplementedError

    def clean(self, text: str) -> str:
        raise NotImplementedError

    def input_sha(self, item: Any) -> str:
        return ids.sha256_text(json.dumps(self.messages(item), ensure_ascii=False, sort_keys=True))

    def write(self, items: list[Any]) -> list[dict[str, Any]]:
        """One ``enrichments`` row per item (``status`` ok, or failed with the error code)."""
        from kb_ray.answer.generators import make_generator

        logger.info("writing %d %s enrichments with %s", len(items), self.kind, self.model)
        generator = self._generator or make_generator(self.settings)
        try:
            with ThreadPoolExecutor(max_workers=self.settings.max_concurrency) as pool:
                return list(pool.map(lambda item: self._row(generator, item), items))
        finally:
            if self._generator is None:
                generator.close()

    def _row(self, generator: Any, item: Any) -> dict[str, Any]:
        started = time.perf_counter()
        result = generator.run(self.messages(item))
        text = self.clean(result.text) if result.error is None else None
        return enrichment_row(self, self.input_sha(item), text=text, error=result.error or (None if text else "empty"),
                              prompt_tokens=result.prompt_tokens, completion_tokens=result.completion_tokens,
                              seconds=time.perf_counter() - started, cost_usd=result.cost_usd)


class LlmContextWriter(LlmEnrichmentWriter):
    """Chunk contexts written by the configured answer generator."""

    def __init__(self, answer: AnswerSettings, index: IndexSettings, *, generator: Any = None) -> None:
        super().__init__(answer, max_tokens=index.contextual_max_tokens, setting="index.contextual_writer",
                         fingerprint=llm_enricher_fingerprint(answer, index), generator=generator)
        self.document_chars = index.contextual_document_chars

    def messages(self, item: ChunkPlace) -> list[dict[str, str]]:
        return context_messages(item, document_chars=self.document_chars)

    def clean(self, text: str) -> str:
        return clean_context(text)


def llm_enricher_fingerprint(answer: AnswerSettings, index: IndexSettings) -> str:
    config = {"format": CONTEXT_FORMAT, "backend": answer.generator, "model_id": answer.model_id,
              "model_path": answer.model_path, "max_tokens": index.contextual_max_tokens,
              "temperature": answer.temperature, "system": SYSTEM_PROMPT, "user": USER_PROMPT,
              "document_chars": index.contextual_document_chars, "max_context_chars": MAX_CONTEXT_CHARS}
    return ids.fingerprint(kind="enricher", name="LlmChunkContext", version="1", config=config)


def context_writer(index: IndexSettings, answer: AnswerSettings, *, generator: Any = None):
    if index.contextual_writer == "generator":
        return LlmContextWriter(answer, index, generator=generator)
    return ExtractiveContextWriter()


def contextual_spec(index: IndexSettings, answer: AnswerSettings) -> dict[str, Any]:
    """What changes the contextual generation's content (part of the generation's spec)."""
    fp = (llm_enricher_fingerprint(answer, index) if index.contextual_writer == "generator"
          else ExtractiveContextWriter().fingerprint)
    spec = {"format": CONTEXT_FORMAT, "writer": index.contextual_writer, "enricher_fp": fp,
            "indexed_text": "context, newline, chunk text (embedded and the BM25 body channel)"}
    if index.contextual_in != "both":  # a key only when set, so "both" keeps its generation ids
        spec["in"] = index.contextual_in
    return spec


def enrichment_row(writer: Any, input_sha: str, *, text: str | None, error: str | None = None,
                   prompt_tokens: int = 0, completion_tokens: int = 0, seconds: float = 0.0,
                   cost_usd: float = 0.0) -> dict[str, Any]:
    """An ``enrichments`` row of ``writer`` (of kind ``writer.kind``)."""
    return {"enricher_fp": writer.fingerprint, "input_sha": input_sha, "kind": writer.kind, "model": writer.model,
            "status": "ok" if error is None else "failed", "text": text, "error": error,
            "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "seconds": seconds,
            "cost_usd": cost_usd, "run_id": None, "created_at": datetime.now(timezone.utc)}


@dataclass
class ContextualInputs:
    contexts: list[str]  # per hydration row
    vectors: np.ndarray | None  # per hydration row, of context + text (None: contexts only)
    stats: dict[str, Any] = field(default_factory=dict)


def contextual_inputs(catalog: DeltaCatalog, hydration: pa.Table, *, writer: Any, analyzer: TextAnalyzer,
                      embedder_fp: str, embedder: Callable[[], Any], embed: bool = True) -> ContextualInputs:
    """Contexts and vectors of ``context + text`` for every hydration row; ``embedder()`` gives
    the text embedder (called only when a text has no cached vector). ``embed=False``: contexts
    only (``vectors`` is None)."""
    started = time.perf_counter()
    places = chunk_places(hydration, analyzer)
    contexts, written, failed = _contexts(catalog, places, writer)
    texts = [contextual_text(c, p.text) for c, p in zip(contexts, places)]
    vectors, embedded, cached = (_vectors(catalog, texts, embedder_fp=embedder_fp, embedder=embedder) if embed
                                 else (None, 0, 0))
    stats = {"writer": writer.name, "contexts_written": written, "contexts_failed": failed,
             "texts_embedded": embedded, "texts_cached": cached,
             "seconds": round(time.perf_counter() - started, 3)}
    logger.info("contextual inputs: %s", stats)
    return ContextualInputs(contexts=contexts, vectors=vectors, stats=stats)


def _contexts(catalog: DeltaCatalog, places: list[ChunkPlace], writer: Any) -> tuple[list[str], int, int]:
    """Each place's context: stored, or written now (and stored). A failed model call leaves a
    failed row (retried by the next build) and the extractive context in its place."""
    texts, rows = stored_or_written(catalog, writer, places, write=lambda todo: _write(writer, todo))
    fallback = ExtractiveContextWriter()
    contexts = [text or fallback.render(place) for text, place in zip(texts, places)]
    return contexts, len(rows), sum(row["status"] != "ok" for row in rows)


def _write(writer: Any, places: list[ChunkPlace]) -> list[dict[str, Any]]:
    if isinstance(writer, ExtractiveContextWriter):
        return [enrichment_row(writer, writer.input_sha(place), text=writer.render(place)) for place in places]
    return writer.write(places)


def stored_or_written(catalog: DeltaCatalog, writer: Any, items: list[Any], *,
                      write: Callable[[list[Any]], list[dict[str, Any]]] | None = None
                      ) -> tuple[list[str | None], list[dict[str, Any]]]:
    """Each item's ``writer.kind`` enrichment (content-addressed by ``writer.input_sha``): the
    stored one, or written now by ``write`` (default ``writer.write``) and MERGEd into
    ``enrichments``; None where the call failed. Also the rows written."""
    shas = [writer.input_sha(item) for item in items]
    stored = stored_enrichments(catalog, writer.fingerprint, kind=writer.kind)
    todo = {sha: item for sha, item in zip(shas, items) if sha not in stored}
    rows = (write or writer.write)(list(todo.values())) if todo else []
    for offset in range(0, len(rows), COMMIT_BATCH):
        merge_enrichments(catalog, rows[offset:offset + COMMIT_BATCH])
    stored.update({row["input_sha"]: row["text"] for row in rows if row["status"] == "ok"})
    return [stored.get(sha) for sha in shas], rows


def stored_enrichments(catalog: DeltaCatalog, enricher_fp: str, *, kind: str = CONTEXT_KIND) -> dict[str, str]:
    """input_sha -> text of the ``kind`` enrichments of ``enricher_fp`` (status ok)."""
    table = catalog.dataset("enrichments").to_table(columns=["enricher_fp", "input_sha", "kind", "status", "text"])
    keep = pc.and_(pc.and_(pc.equal(table["enricher_fp"].cast(pa.string()), enricher_fp),
                           pc.equal(table["kind"].cast(pa.string()), kind)),
                   pc.equal(table["status"].cast(pa.string()), "ok"))
    found = table.filter(keep)
    return dict(zip(found["input_sha"].to_pylist(), found["text"].to_pylist()))


def merge_enrichments(catalog: DeltaCatalog, rows: list[dict[str, Any]]) -> None:
    from kb_ray.ingest.rows import to_table

    catalog.merge_upsert("enrichments", to_table("enrichments", rows), keys=["enricher_fp", "input_sha"])


def _vectors(catalog: DeltaCatalog, texts: list[str], *, embedder_fp: str,
             embedder: Callable[[], Any]) -> tuple[np.ndarray, int, int]:
    loaded = None
    if texts:
        loaded = _embedder_if_needed(catalog, texts, embedder_fp, embedder)
    shas = [ids.sha256_text(_embed_text(loaded, t)) for t in texts]
    cached = cached_vectors(catalog, embedder_fp, set(shas))
    missing = sorted({sha: text for sha, text in zip(shas, texts) if sha not in cached}.items())
    for offset in range(0, len(missing), COMMIT_BATCH):
        cached.update(_embed_and_store(catalog, loaded or _checked(embedder(), embedder_fp),
                                       missing[offset:offset + COMMIT_BATCH]))
    vectors = np.stack([cached[sha] for sha in shas]) if shas else np.zeros((0, 0), np.float32)
    return vectors.astype(np.float32), len(missing), len(set(shas)) - len(missing)


def _embedder_if_needed(catalog: DeltaCatalog, texts: list[str], embedder_fp: str, embedder: Callable[[], Any]):
    """The embedder when some text may need a vector: its template decides the embedded text.
    A catalog that has every vector already (a rebuild) does not load it."""
    shas = {ids.sha256_text(_embed_text(None, t)) for t in texts}
    if len(cached_vectors(catalog, embedder_fp, shas, count_only=True)) == len(shas):
        return None
    return _checked(embedder(), embedder_fp)


def _checked(embedder: Any, embedder_fp: str) -> Any:
    if embedder.fingerprint != embedder_fp:
        raise CatalogError(f"index.contextual embeds with the generation's embedder {embedder_fp}, but the "
                           f"configured one is {embedder.fingerprint}: restore the embedding settings")
    return embedder


def _embed_text(embedder: Any, text: str) -> str:
    """The embedder's template around the contextual text (no heading path: the context has it)."""
    if embedder is not None and hasattr(embedder, "format_embed_text"):
        return embedder.format_embed_text(text=text, heading_path=[])
    from kb_ray.embedding.fingerprint import DEFAULT_TEXT_TEMPLATE

    return ids.nfc(DEFAULT_TEXT_TEMPLATE.format(heading_path="", text=text).strip())


def cached_vectors(catalog: DeltaCatalog, embedder_fp: str, shas: set[str], *,
                   count_only: bool = False) -> dict[str, np.ndarray]:
    """sha -> vector of ``embedder_fp`` for those of ``shas`` in ``embeddings`` (latest version)."""
    connection = duckdb.connect(":memory:")
    try:
        connection.execute("SET disabled_optimizers = 'filter_pushdown'")
        connection.register("embeddings", catalog.dataset("embeddings"))
        connection.register("wanted", pa.table({"sha": pa.array(sorted(shas), pa.string())}))
        column = "NULL AS vector" if count_only else "e.vector"
        found = connection.sql(f"""SELECT e.embed_text_sha, {column} FROM embeddings e
            WHERE e.embedder_fp = ? AND e.embed_text_sha IN (SELECT sha FROM wanted)""",
                               params=[embedder_fp]).fetchall()
    finally:
        connection.close()
    return {sha: (None if count_only else np.asarray(vector, np.float32)) for sha, vector in found}


def _embed_and_store(catalog: DeltaCatalog, embedder: Any, batch: list[tuple[str, str]]) -> dict[str, np.ndarray]:
    from kb_ray.ingest.rows import to_table

    texts = [_embed_text(embedder, text) for _, text in batch]
    vectors = np.concatenate([np.asarray(embedder.embed_texts(texts[i:i + EMBED_BATCH]), np.float32)
                              for i in range(0, len(texts), EMBED_BATCH)])
    rows = [{"embedder_fp": embedder.fingerprint, "embed_text_sha": sha, "dim": int(vector.shape[0]),
             "vector": vector.tolist()} for (sha, _), vector in zip(batch, vectors)]
    catalog.merge_upsert("embeddings", to_table("embeddings", rows), keys=["embedder_fp", "embed_text_sha"],
                         insert_only=True)
    return {sha: vector for (sha, _), vector in zip(batch, vectors)}
