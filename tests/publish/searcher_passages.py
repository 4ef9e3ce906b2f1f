"""The passage vectors a kb-ray searcher scores (kb_ray/index/dense.py ``MultiVectorShard``), per
served chunk: what a publication's passage table must hold."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from kb_ray.index.dense import MultiVectorShard


def searcher_passages(searcher) -> dict[str, list[np.ndarray]]:
    """chunk_id → its passage vectors in index order, for the rows the searcher serves now
    (its hydration gate and its segments' replacements applied)."""
    token, active = searcher.gate.snapshot()
    passages: dict[str, list[np.ndarray]] = defaultdict(list)
    for shard in searcher._loaded.shards:
        dense = shard.dense_index
        if not isinstance(dense, MultiVectorShard):
            continue
        served = shard.gate_mask(token, active)
        vectors = dense.vectors.index.reconstruct_n(0, dense.vectors.index.ntotal)
        for vector, owner in zip(vectors[shard.rows:], dense.owners[shard.rows:]):
            if served[owner]:
                passages[shard.chunk_ids[owner]].append(vector)
    return dict(passages)


def table_passages(connection, table: str = "kb_passages") -> dict[str, list[np.ndarray]]:
    """chunk_id → its passage vectors in ``passage`` order, from a publication's passage table or view."""
    from psycopg import sql

    passages: dict[str, list[np.ndarray]] = defaultdict(list)
    query = sql.SQL("SELECT chunk_id, embedding FROM {} ORDER BY chunk_id, passage").format(sql.Identifier(table))
    for chunk_id, vector in connection.execute(query):
        passages[chunk_id].append(vector.to_numpy())
    return dict(passages)


def assert_same_passages(found: dict[str, list[np.ndarray]], expected: dict[str, list[np.ndarray]]) -> None:
    assert found.keys() == expected.keys()
    for chunk_id, vectors in expected.items():
        np.testing.assert_allclose(np.stack(found[chunk_id]), np.stack(vectors), atol=1e-6, err_msg=chunk_id)
