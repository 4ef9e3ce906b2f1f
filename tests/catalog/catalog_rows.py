"""Small rows for each catalog table, shared by the catalog tests."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pyarrow as pa

from kb_ray.catalog import DeltaCatalog

NOW = datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def embedding_rows(*shas: str, embedder_fp: str = "fp_e", dim: int = 2) -> pa.Table:
    return pa.table(
        {
            "embedder_fp": [embedder_fp] * len(shas),
            "embed_text_sha": list(shas),
            "dim": pa.array([dim] * len(shas), pa.int32()),
            "vector": [[float(i)] * dim for i in range(len(shas))],
        }
    )


def _documents() -> pa.Table:
    return pa.table(
        {
            "document_id": ["doc_a", "doc_b", "doc_c"],
            "collection": ["papers", "papers", "notes"],
            "key": ["a.pdf", "b.pdf", "c.md"],
            "uri": ["file:///a.pdf", "file:///b.pdf", "file:///c.md"],
            "title": ["A", "B", "C"],
            "mime": ["application/pdf", "application/pdf", "text/markdown"],
            "tags": [["x"], [], ["y", "z"]],
            "metadata_json": ["{}", "{}", "{}"],
            "active_version_id": ["ver_a", None, "ver_c"],
            "created_at": [NOW] * 3,
            "updated_at": [NOW] * 3,
            "deleted_at": [None, NOW, None],
        }
    )


def _versions() -> pa.Table:
    return pa.table(
        {
            "version_id": ["ver_a", "ver_c", "ver_bad"],
            "document_id": ["doc_a", "doc_c", "doc_b"],
            "status": ["committed", "committed", "failed"],
            "canonical_text": ["Alpha beta.", "Gamma.", ""],
            "error": [None, None, "encrypted: password required"],
            "reason": [None, None, "encrypted"],
            "created_at": [NOW] * 3,
        }
    )


def _chunks() -> pa.Table:
    return pa.table(
        {
            "chunk_id": ["ch_1", "ch_2", "ch_3"],
            "document_id": ["doc_a", "doc_a", "doc_c"],
            "text": ["Alpha", "beta.", "Gamma."],
            "token_count": pa.array([1, 1, 2], pa.int32()),
            "heading_path": [["H"], ["H"], []],
            "embed_text_sha": ["s1", "s2", "s3"],
        }
    )


def _version_chunks() -> pa.Table:
    span = pa.list_(pa.struct([("start", pa.int64()), ("end", pa.int64())]))
    return pa.table(
        {
            "version_id": ["ver_a", "ver_a", "ver_c"],
            "chunk_id": ["ch_1", "ch_2", "ch_3"],
            "ordinal": pa.array([0, 1, 0], pa.int32()),
            "spans": pa.array([[{"start": 0, "end": 5}], [{"start": 6, "end": 11}],
                               [{"start": 0, "end": 6}]], span),
            "pages": [[1], [1], []],
        }
    )


def _ingest_log() -> pa.Table:
    return pa.table(
        {
            "run_id": ["run_1"] * 3,
            "batch": pa.array([0, 0, 1], pa.int32()),
            "collection": ["papers", "papers", "notes"],
            "uri": ["file:///a.pdf", "file:///b.pdf", "file:///c.md"],
            "action": ["new", "failed", "new"],
            "status": ["ok", "failed", "ok"],
            "error": [None, "encrypted: password required", None],
            "reason": [None, "encrypted", None],
            "parse_seconds": [0.5, 0.1, 0.2],
            "total_seconds": [1.0, 0.1, 0.4],
            "n_chunks": pa.array([2, 0, 1], pa.int32()),
            "logged_at": [NOW] * 3,
        }
    )


def populate(catalog: DeltaCatalog) -> DeltaCatalog:
    """Three documents (two active, one tombstoned), chunks, embeddings for two of three
    active chunks, a failed parse and an ingest run."""
    catalog.append("documents", _documents())
    catalog.append("versions", _versions())
    catalog.append("chunks", _chunks())
    catalog.append("version_chunks", _version_chunks())
    catalog.append("embeddings", embedding_rows("s1", "s3"))
    catalog.append("ingest_log", _ingest_log())
    run = {"run_id": ["run_1"], "status": ["finished"], "config_json": [json.dumps({})]}
    catalog.append("ingest_runs", pa.table(run))
    return catalog
