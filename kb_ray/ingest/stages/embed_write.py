"""EmbedWriteStage: embed one micro-batch of documents and write its data files.

DOCUMENT_RECORD (one micro-batch) → BATCH_RECORD (one row). Embeds the chunk texts the
``embeddings`` cache does not hold under this embedder, drops chunk rows the catalog
already has, and writes each table's rows as one Parquet data file. The output row names
the data files for the driver to commit, the new vectors, the content-addressed rows
earlier stages handed on (page embeddings, enrichments) and the per-document summary
(SUMMARY_RECORD); its count columns (chunks new/reused, embeddings computed/cached)
describe that micro-batch's commit itself. A remote embedder's usage (requests, retries,
prompt tokens) goes into the stage's counts, beside the data.
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
from kb_ray.index.passages import passage_texts_by_sha
from kb_ray.ingest.record import (
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
                 run_id: str = "", passage_chars: int = 0) -> None:
        from kb_ray.embedding.text import TextEmbedder

        self.catalog = DeltaCatalog.open(kb_root, storage_options=storage_options, create=False)
        self.embedder = TextEmbedder.from_settings(embedding)
        self.embedder_fp = self.embedder.fingerprint
        self.passage_chars = passage_chars  # index.passage_chars: also embed each chunk's passages
        self.run_id = run_id  # set anew when an inline ingest reuses this stage (kb_ray/ingest/inline.py)
        self._run_keys = RunKeys(self.catalog)
        self._usage_seen: dict[str, int] = {}
        self._usage_since_last_call()  # the probe request at construction is not a call's

    def process(self, batch: pa.Table) -> tuple[pa.Table, dict[str, int]]:
        batch = conform_record(batch, DOCUMENT_RECORD)
        tables = {name: concat_ipc(batch.column(f"{name}_ipc").to_pylist(), name) for name in VERSION_TABLES}
        chunks = self._with_embed_shas(tables["chunks"])
        passages = self._passage_texts(chunks)
        vectors, counts = self._embed_missing(chunks, passages)
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
            "summary_ipc": to_ipc(conform_record(batch, SUMMARY_RECORD)), **counts,
        }], schema=BATCH_RECORD)
        return out, {**counts, **usage, "passage_texts": len(passages)}

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

    def _passage_texts(self, chunks: pa.Table) -> dict[str, str]:
        """``sha -> embedded text`` of the chunks' passages (kb_ray/index/passages.py), which the
        index scores beside the chunk vectors; none when ``passage_chars`` is 0."""
        return passage_texts_by_sha(chunks.column("text").to_pylist(), chunks.column("heading_path").to_pylist(),
                                    max_chars=self.passage_chars)

    def _embed_missing(self, chunks: pa.Table, passages: dict[str, str]) -> tuple[pa.Table, dict[str, int]]:
        """Embed the texts (chunks' and ``passages``) the ``embeddings`` cache lacks. The key set
        is this actor's view: the vectors that existed when it was loaded and the ones this actor
        computed since. A text another actor embedded meanwhile is embedded again; the driver keeps one."""
        wanted = {**passages, **dict(zip(chunks.column("embed_text_sha").to_pylist(),
                                         chunks.column("embed_text").to_pylist()))}
        known = self.keys.of("embeddings", ["embed_text_sha"], where={"embedder_fp": self.embedder_fp})
        cached = set(known.held(list(wanted)))
        missing = [sha for sha in wanted if sha not in cached]
        vectors = self.embedder.embed_texts([wanted[sha] for sha in missing]) if missing else []
        rows = [{"embedder_fp": self.embedder_fp, "embed_text_sha": sha, "dim": self.embedder.dim,
                 "vector": vector.tolist()} for sha, vector in zip(missing, vectors)]
        known.add_values(missing)
        return to_table("embeddings", rows), {"embeddings_computed": len(missing), "embeddings_cached": len(cached)}

    def _drop_known_chunks(self, chunks: pa.Table) -> pa.Table:
        """Chunk rows the catalog lacks, once each. Chunk ids include the document id and each
        document is in one micro-batch of a run, so a key set loaded once is exact here."""
        if not chunks.num_rows:
            return chunks
        known = self.keys.of("chunks", ["chunk_id"]).contains(chunks, ["chunk_id"])
        return chunks.filter(pc.and_(pc.invert(pa.array(known)), first_of_each(chunks.column("chunk_id"))))
