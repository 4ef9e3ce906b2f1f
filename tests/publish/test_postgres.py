"""``kb-ray publish postgres`` against a real Postgres with pgvector and the real golden catalog."""

from __future__ import annotations

import faiss
import numpy as np
import pyarrow.parquet as pq
import pytest

from kb_ray.index import build_index
from kb_ray.index.generations import local_generation_dir
from kb_ray.publish.postgres import PostgresPublisher, table_name
from tests.index_fixtures import copy_kb, golden_config

psycopg = pytest.importorskip("psycopg")
pytest.importorskip("pgvector")


def _connect(dsn: str):
    from pgvector.psycopg import register_vector

    connection = psycopg.connect(dsn, autocommit=True)
    register_vector(connection)
    return connection


@pytest.fixture
def kb(golden_kb, tmp_path):
    """A private copy of the golden catalog with a one-shard generation live."""
    root = copy_kb(golden_kb, tmp_path / "kb")
    build_index(golden_config(root, "index.shards=1"))
    return root


def _index_vectors(config, manifest) -> dict[str, np.ndarray]:
    folder = local_generation_dir(config.kb_root, manifest.generation_id)
    vectors = {}
    for info in manifest.shards:
        ids = pq.read_table(folder / info.dir / info.hydration, columns=["chunk_id"]).column(0).to_pylist()
        index = faiss.read_index(str(folder / info.dir / info.dense))
        vectors.update(zip(ids, index.reconstruct_n(0, index.ntotal)))
    return vectors


def test_publish_golden_writes_every_chunk_with_its_index_vector(kb, postgres_dsn):
    config = golden_config(kb, "index.shards=1")
    manifest = build_index(config)
    result = PostgresPublisher(config, postgres_dsn).publish()
    assert result.action == "published" and result.switched
    assert result.table == table_name(manifest.generation_id, 0)
    assert result.rows == result.copied_rows == manifest.rows > 100
    expected = _index_vectors(config, manifest)
    with _connect(postgres_dsn) as connection:
        rows = connection.execute("SELECT chunk_id, embedding, text, spans, tsv::text <> '' FROM kb_chunks").fetchall()
        indexes = {r[0] for r in connection.execute("SELECT indexdef FROM pg_indexes WHERE tablename = %s",
                                                     [result.table])}
        live = connection.execute("SELECT table_name, generation_id, rows FROM kb_publications WHERE live").fetchall()
    assert len(rows) == manifest.rows and {r[0] for r in rows} == set(expected)
    for chunk_id, vector, text, spans, has_terms in rows:
        np.testing.assert_allclose(vector.to_numpy(), expected[chunk_id], atol=1e-6)
        assert text and spans and all(set(span) == {"start", "end"} for span in spans) and has_terms
    assert any("hnsw" in d and "vector_cosine_ops" in d for d in indexes)
    assert any("gin" in d and "(tsv)" in d for d in indexes)
    assert live == [(result.table, manifest.generation_id, manifest.rows)]
