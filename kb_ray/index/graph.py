"""The chunk-concept graph of a generation (``index.graph``): a bipartite graph per collection.

Built by ``build_index`` from the generation's hydration rows (its active chunks) and the
``mentions`` / ``concepts`` rows of their versions at the generation's named catalog versions:
no text is re-read and nothing is extracted here. A concept node is ``(collection, concept_id)``
(the graph of each collection is its own block), a chunk node is one hydration row; an edge's
weight is the number of times the chunk mentions the concept. Files under ``{generation}/graph/``:

* ``chunks.parquet`` — ``chunk_id`` per chunk node, in the hydration's (chunk id) order;
* ``concepts.parquet`` — per concept node: ``concept_id``, ``collection``, ``key`` (the
  normalized form the query side matches), ``label``, ``kind`` and ``df`` (its chunks);
* ``edges.parquet`` — ``chunk`` and ``concept`` node numbers and ``weight``, sorted.

Rows are sorted by ids, so a rebuild from the same catalog versions writes the same files.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from kb_ray.errors import CatalogError
from kb_ray.index.concepts import EXTRACTOR_VERSION, ConceptExtractor

logger = logging.getLogger(__name__)

GRAPH_DIR, CHUNKS_FILE, CONCEPTS_FILE, EDGES_FILE = "graph", "chunks.parquet", "concepts.parquet", "edges.parquet"
GRAPH_INDEX_FORMAT = 1
GRAPH_TABLES = ("concepts", "mentions")

_EDGES = """
    SELECT i.collection, m.chunk_id, m.concept_id, m.count FROM mentions m
    JOIN indexed i ON i.version_id = m.version_id AND i.chunk_id = m.chunk_id
    WHERE m.extractor_fp = ?
"""
_CONCEPTS = """
    SELECT c.concept_id, c.key, c.kind, c.label, sum(c.mentions) AS n FROM concepts c
    WHERE c.extractor_fp = ? AND c.version_id IN (SELECT DISTINCT version_id FROM indexed)
    GROUP BY c.concept_id, c.key, c.kind, c.label
"""
_MISSING = """
    SELECT count(DISTINCT i.version_id) FROM indexed i WHERE i.version_id NOT IN
        (SELECT version_id FROM mentions WHERE extractor_fp = ?)
"""


def graph_spec(extractor: ConceptExtractor) -> dict[str, Any]:
    """What changes the graph's content (part of the generation's spec)."""
    return {"format": GRAPH_INDEX_FORMAT, "extractor": extractor.fingerprint, "extractor_version": EXTRACTOR_VERSION,
            "nodes": "collection x concept", "weight": "mention count"}


def build_graph_index(folder: Path, hydration: pa.Table, connection: Any, *,
                      extractor: ConceptExtractor) -> dict[str, Any] | None:
    """Write the graph files into ``folder``; the manifest entry, or None without chunks.
    ``connection`` is the build's DuckDB session with ``mentions`` and ``concepts`` registered."""
    if hydration.num_rows == 0:
        return None
    fp = extractor.fingerprint
    connection.register("indexed", hydration.select(["chunk_id", "version_id", "collection"]))
    try:
        missing = connection.execute(_MISSING, [fp]).fetchall()[0][0]
        if missing:
            raise CatalogError(f"index.graph: {missing} indexed versions have no concepts of extractor {fp} "
                               "(ingested before ingest.concepts, or by another extractor): run "
                               "`kb-ray backfill-concepts`, then build again")
        edges = connection.execute(_EDGES, [fp]).fetchall()
        labels = _labels(connection.execute(_CONCEPTS, [fp]).fetchall())
    finally:
        connection.unregister("indexed")
    chunk_ids = hydration.column("chunk_id").to_pylist()
    chunk_row = {cid: row for row, cid in enumerate(chunk_ids)}
    nodes = sorted({(collection, concept) for collection, _, concept, _ in edges})
    node_row = {node: row for row, node in enumerate(nodes)}
    triples = sorted((chunk_row[chunk], node_row[(collection, concept)], count)
                     for collection, chunk, concept, count in edges)
    df: dict[int, int] = {}
    for _, node, _ in triples:
        df[node] = df.get(node, 0) + 1
    folder.mkdir(parents=True)
    pq.write_table(pa.table({"chunk_id": pa.array(chunk_ids, pa.string())}), folder / CHUNKS_FILE)
    pq.write_table(pa.table({
        "concept_id": [c for _, c in nodes], "collection": [col for col, _ in nodes],
        "key": [labels[c][0] for _, c in nodes], "label": [labels[c][2] for _, c in nodes],
        "kind": [labels[c][1] for _, c in nodes], "df": pa.array([df[r] for r in range(len(nodes))], pa.int32()),
    }), folder / CONCEPTS_FILE, compression="zstd")
    pq.write_table(pa.table({"chunk": pa.array([t[0] for t in triples], pa.int32()),
                             "concept": pa.array([t[1] for t in triples], pa.int32()),
                             "weight": pa.array([t[2] for t in triples], pa.float32())}),
                   folder / EDGES_FILE, compression="zstd")
    logger.info("concept graph: %d chunks, %d concept nodes, %d edges", len(chunk_ids), len(nodes), len(triples))
    return {"format": GRAPH_INDEX_FORMAT, "dir": folder.name, "chunks": len(chunk_ids), "concepts": len(nodes),
            "edges": len(triples), "extractor": fp, "chunk_file": CHUNKS_FILE, "concept_file": CONCEPTS_FILE,
            "edge_file": EDGES_FILE}


def _labels(rows: list[tuple]) -> dict[str, tuple[str, str, str]]:
    """concept_id → (key, kind, label): the label with the most mentions over the indexed versions."""
    best: dict[str, tuple[int, str, str, str]] = {}
    for concept_id, key, kind, label, n in rows:
        candidate = (-int(n or 0), label or key, key, kind)
        if concept_id not in best or candidate < best[concept_id]:
            best[concept_id] = candidate
    return {cid: (key, kind, label) for cid, (_, label, key, kind) in best.items()}
