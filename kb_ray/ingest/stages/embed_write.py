"""EmbedWriteStage: embed one micro-batch of documents and write its data files.

DOCUMENT_RECORD (one micro-batch) → BATCH_RECORD (one row). Computes the chunks' vectors
of the vector layout (``index.vector_layout``, kb_ray/index/vector_layout.py) that the
``embeddings`` cache does not hold under this embedder, drops chunk rows the catalog
already has, and writes each table's rows as one Parquet data file. The output row names
the data files for the driver to commit, the new vectors, the content-addressed rows
earlier stages handed on (page embeddings, enrichments) and the per-document summary
(SUMMARY_RECORD); its count columns (chunks new/reused, embeddings computed/cached)
describe that micro-batch's commit itself. The stage's counts, beside the data, say what
the embedding took: ``embed_texts`` (texts embedded on their own: chunk and passage texts),
``late_chunks`` / ``late_vectors`` (chunks encoded once and the vectors pooled from them),
``embed_tokens`` (tokens the model read: special tokens, heading paths, window overlaps
included) against ``text_tokens`` (the word pieces of the chunk texts those vectors are
of), ``passage_texts`` (passage vectors of the batch's chunks), and a remote embedder's usage
(requests, retries, prompt tokens).
"""

from __future__ import annotations

import json
import uuid

import pyarrow as pa
import pyarrow.compute as pc

from kb_ray import ids
from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.catalog.key_set import RunKeys, TableKeys
from kb_ray.config import EmbeddingSettings
from kb_ray.index.vector_layout import ChunkVectors, VectorLayout, embed_chunk_vectors
from kb_ray.ingest.record import (
    BATCH_COUNT_COLUMNS,
    BATCH_RECORD,
    DOCUMENT_RECORD,
    PASSED_ROW_TABLES,
    SUMMARY_RECORD,
    VERSION_TABLES,
    conform_record,
)
from kb_ray.ingest.rows import concat_ipc, first_of_each, to_ipc, to_table
from kb_ray.ingest.stages.base import Stage


class EmbedWriteStage(Stage):
    name = "embed_write"

    def __init__(self, *, kb_root: str, storage_options: dict[str, str], embedding: EmbeddingSettings,
                 run_id: str = "", vector_layout: VectorLayout | None = None) -> None:
        from kb_ray.embedding.text import TextEmbedder

        self.catalog = DeltaCatalog.open(kb_root, storage_options=storage_options, create=False)
        self.embedder = TextEmbedder.from_settings(embedding)
        self.embedder_fp = self.embedder.fingerprint
        # index.vector_layout / passage_chars: which vectors each chunk gets (None: its text's alone)
        self.layout = vector_layout or VectorLayout()
        self.layout.check_embedder(self.embedder)
        self.run_id = run_id  # set anew when an inline ingest reuses this stage (kb_ray/ingest/inline.py)
        self._run_keys = RunKeys(self.catalog)
        self._usage_seen: dict[str, int] = {}
        self._usage_since_last_call()  # the probe request at construction is not a call's

    def process(self, batch: pa.Table) -> tuple[pa.Table, dict[str, int]]:
        batch = conform_record(batch, DOCUMENT_RECORD)
        tables = {name: concat_ipc(batch.column(f"{name}_ipc").to_pylist(), name) for name in VERSION_TABLES}
        chunks = self._with_embed_shas(tables["chunks"])
        texts = chunks.column("text").to_pylist()
        plans = [self.layout.chunk(text, path) for text, path in zip(texts, chunks.column("heading_path").to_pylist())]
        vectors, counts = self._embed_missing(plans, texts)
        new_chunks = self._drop_known_chunks(chunks)
        counts.update(chunks_new=new_chunks.num_rows, chunks_reused=chunks.num_rows - new_chunks.num_rows)
        usage = self._usage_since_last_call()
        passed = {name: concat_ipc(batch.column(f"{name}_ipc").to_pylist(), name) for name in PASSED_ROW_TABLES}
        tables["chunks"] = new_chunks.drop_columns(["embed_text"])
        files = [self.catalog.write_data_file(name, table).__dict__ for name, table in tables.items() if table.num_rows]
        out = pa.Table.from_pylist([{
            "batch_id": uuid.uuid4().hex, "files_json": json.dumps(files),
            "version_ids_json": json.dumps(tables["versions"].column("version_id").to_pylist()),
            "embeddings_ipc": to_ipc(vectors), **{f"{name}_ipc": to_ipc(rows) for name, rows in passed.items()},
            "summary_ipc": to_ipc(conform_record(batch, SUMMARY_RECORD)),
            **{name: counts[name] for name in BATCH_COUNT_COLUMNS},
        }], schema=BATCH_RECORD)
        return out, {**counts, **usage, "passage_texts": sum(plan.passages for plan in plans)}

    def _usage_since_last_call(self) -> dict[str, int]:
        """A remote embedder's requests, retries and prompt tokens in this call (stage counts
        ``embed_requests``, ``embed_retries``, ``embed_prompt_tokens``); nothing for a local one."""
        usage = getattr(self.embedder, "usage", None)
        if usage is None:
            return {}
        now = {f"embed_{key}": value for key, value in usage.items() if key != "texts"}
        since = {key: value - self._usage_seen.get(key, 0) for key, value in now.items()}
        self._usage_seen = now
        return since

    def _with_embed_shas(self, chunks: pa.Table) -> pa.Table:
        texts = [self.embedder.format_embed_text(text=text, heading_path=path or [])
                 for text, path in zip(chunks.column("text").to_pylist(), chunks.column("heading_path").to_pylist())]
        chunks = chunks.set_column(chunks.schema.get_field_index("embed_text_sha"), "embed_text_sha",
                                   pa.array([ids.sha256_text(text) for text in texts], pa.string()))
        return chunks.append_column("embed_text", pa.array(texts, pa.string()))

    @property
    def keys(self) -> TableKeys:
        """The catalog's key sets, loaded at their first use in a run: lookups never scan a table."""
        return self._run_keys.of_run(self.run_id)

    def _embed_missing(self, plans: list[ChunkVectors], texts: list[str]) -> tuple[pa.Table, dict[str, int]]:
        """Embed the vectors of the chunks' layout (kb_ray/index/vector_layout.py) the ``embeddings``
        cache lacks. The key set is this actor's view: the vectors that existed when it was loaded
        and the ones this actor computed since. A vector another actor computed meanwhile is
        computed again; the driver keeps one. ``text_tokens``: the word pieces of the chunk texts
        whose vectors were computed (the documents' own tokens, against ``embed_tokens``)."""
        wanted = list(dict.fromkeys(key for plan in plans for key in plan.keys))
        known = self.keys.of("embeddings", ["embed_text_sha"], where={"embedder_fp": self.embedder_fp})
        cached = set(known.held(wanted))
        computed, counts = embed_chunk_vectors(self.embedder, plans, held=cached,
                                               overlap_tokens=self.layout.overlap_tokens)
        rows = [{"embedder_fp": self.embedder_fp, "embed_text_sha": sha, "dim": self.embedder.dim,
                 "vector": vector.tolist()} for sha, vector in computed.items()]
        known.add_values(list(computed))
        return to_table("embeddings", rows), {"embeddings_computed": len(computed), "embeddings_cached": len(cached),
                                              **counts, "text_tokens": self._text_tokens(plans, computed, texts)}

    def _text_tokens(self, plans: list[ChunkVectors], computed: dict, texts: list[str]) -> int:
        count = getattr(self.embedder, "count_tokens", None)
        bodies = {plan.chunk_key: text or "" for plan, text in zip(plans, texts)
                  if any(key in computed for key in plan.keys)}
        return count(list(bodies.values()), embedded=False) if count is not None and bodies else 0

    def _drop_known_chunks(self, chunks: pa.Table) -> pa.Table:
        """Chunk rows the catalog lacks, once each. Chunk ids include the document id and each
        document is in one micro-batch of a run, so a key set loaded once is exact here."""
        if not chunks.num_rows:
            return chunks
        known = self.keys.of("chunks", ["chunk_id"]).contains(chunks, ["chunk_id"])
        return chunks.filter(pc.and_(pc.invert(pa.array(known)), first_of_each(chunks.column("chunk_id"))))
