"""ConceptStage: the key terms and noun phrases of every chunk, as ``concepts`` / ``mentions`` rows.

DOCUMENT_RECORD → DOCUMENT_RECORD. For each document that parsed, runs the
:class:`~kb_ray.index.concepts.ConceptExtractor` over its chunks (``chunks_ipc``, figure
descriptions included when captions ran before) and sets the ``concepts_ipc`` and
``mentions_ipc`` payloads; the embed+write stage writes them as data files with the version's
other rows and the driver commits them (version-keyed, append-only). No model, no Ray, no
catalog reads. Counts beside the data: ``documents``, ``chunks``, ``mentions``, ``concepts``.
"""

from __future__ import annotations

import pyarrow as pa

from kb_ray.index.concepts import ConceptExtractor, version_concepts
from kb_ray.ingest.record import DOCUMENT_RECORD, conform_record, with_columns
from kb_ray.ingest.rows import from_ipc, to_ipc, to_table
from kb_ray.ingest.stages.base import Stage


class ConceptStage(Stage):
    name = "concepts"

    def __init__(self, *, extractor: ConceptExtractor | None = None) -> None:
        self.extractor = extractor or ConceptExtractor()

    def process(self, batch: pa.Table) -> tuple[pa.Table, dict[str, int]]:
        batch = conform_record(batch, DOCUMENT_RECORD)
        columns: dict[str, list] = {"concepts_ipc": [], "mentions_ipc": []}
        counts = {"documents": 0, "chunks": 0, "mentions": 0, "concepts": 0}
        for row in batch.select(["version_id", "status", "chunks_ipc"]).to_pylist():
            if row["status"] == "failed" or not row["chunks_ipc"]:
                columns["concepts_ipc"].append(None)
                columns["mentions_ipc"].append(None)
                continue
            chunks = from_ipc(row["chunks_ipc"])
            pairs = zip(chunks.column("chunk_id").to_pylist(), chunks.column("text").to_pylist())
            concepts, mentions = version_concepts(row["version_id"], pairs, self.extractor)
            columns["concepts_ipc"].append(to_ipc(to_table("concepts", concepts)))
            columns["mentions_ipc"].append(to_ipc(to_table("mentions", mentions)))
            counts["documents"] += 1
            counts["chunks"] += chunks.num_rows
            counts["mentions"] += len(mentions)
            counts["concepts"] += len(concepts)
        return with_columns(batch, columns, DOCUMENT_RECORD), counts
