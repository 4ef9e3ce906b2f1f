"""Search mode ``graph`` (kb_ray/search/graph.py, kb_ray/index/graph.py): personalized PageRank on a
hand-made graph against its closed form, and on a synthetic catalog (no Ray) whose concepts are
backfilled: graph hits, filters and the hydration gate, identical rebuilds."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from kb_ray.errors import CatalogError
from kb_ray.eval.runner import unavailable_reason
from kb_ray.index import build_index
from kb_ray.index.generations import drop_generation, local_generation_dir
from kb_ray.ingest.concepts_backfill import backfill_concepts
from kb_ray.search import HybridSearcher
from kb_ray.search.errors import SearchRequestError
from kb_ray.search.graph import ConceptGraph
from kb_ray.serving.api import SearchRequest
from tests.index.test_tree import HashEmbedder
from tests.index_fixtures import SyntheticDoc, golden_config, synthetic_docs, write_synthetic_catalog

#            c0: k0 k1    c1: k1 k2    c2: k3    c3: k0
EDGES = [(0, 0, 1.0), (0, 1, 1.0), (1, 1, 1.0), (1, 2, 1.0), (2, 3, 1.0), (3, 0, 1.0)]


def _tiny() -> ConceptGraph:
    chunk, concept, weight = (np.array(column) for column in zip(*EDGES))
    return ConceptGraph({}, ["c0", "c1", "c2", "c3"], ["k0", "k1", "k2", "k3"], ["k0", "k1", "k2", "k3"],
                        np.array([2.0, 2.0, 1.0, 1.0]), (chunk.astype(np.int32), concept.astype(np.int32), weight))


def _closed_form(adjacency: np.ndarray, seed: np.ndarray, allowed: np.ndarray, restart: float) -> np.ndarray:
    """x_k = r s + (1-r) B x_c, x_c = (1-r) M x_k, solved exactly (M: concept -> allowed chunk, B: chunk -> concept)."""
    a = adjacency * allowed[:, None]
    m = a / np.where(a.sum(0) > 0, a.sum(0), 1.0)
    b = (adjacency / np.where(adjacency.sum(1) > 0, adjacency.sum(1), 1.0)[:, None]).T
    x_k = restart * np.linalg.solve(np.eye(len(seed)) - (1 - restart) ** 2 * b @ m, seed)
    return (1 - restart) * m @ x_k


def test_pagerank_on_a_tiny_graph_matches_the_closed_form():
    graph = _tiny()
    seed = np.array([1.0, 0, 0, 0])
    allowed = np.ones(4, bool)
    scores = graph.rank(seed, allowed, restart=0.5, iterations=60)
    adjacency = graph.matrix.toarray()
    assert np.allclose(scores, _closed_form(adjacency, seed, allowed, 0.5), rtol=1e-9, atol=1e-12)
    assert scores[0] > scores[3] > scores[1] > 0 == scores[2]  # c1 only through k1, two hops; c2 unreachable
    hidden = np.array([False, True, True, True])  # c0 filtered out: k1, hence c1, is cut off
    masked = graph.rank(seed, hidden, restart=0.5, iterations=60)
    assert masked[0] == 0 and masked[1] == 0 and masked[3] > 0
    assert np.allclose(masked, _closed_form(adjacency, seed, hidden, 0.5), rtol=1e-9, atol=1e-12)


def test_equal_mass_falls_in_tie_key_order_not_chunk_id_order():
    """Two chunks in the same place of the graph get the same mass; chunk ids follow the source path,
    so the order between them is the shard's content tie key's, as in the dense and lexical lists."""
    from types import SimpleNamespace

    edges = (np.array([0, 1], np.int32), np.array([0, 0], np.int32), np.array([1.0, 1.0]))
    graph = ConceptGraph({}, ["chunk-a", "chunk-b"], ["k0"], ["k0"], np.array([2.0]), edges)
    scores = graph.rank(np.array([1.0]), np.ones(2, bool), restart=0.5, iterations=30)
    assert scores[0] == scores[1] > 0
    shard = SimpleNamespace(chunk_ids=["chunk-b", "chunk-a"], tie_keys=["1111|b.txt|000000000", "9999|a.txt|000000000"],
                            info=SimpleNamespace(shard=0))
    ranked = graph.ranked(scores, [shard], [np.ones(2, bool)], n=2)
    assert [(cid, row) for cid, _, _, row in ranked] == [("chunk-b", 0), ("chunk-a", 1)]


def test_query_concepts_seed_the_nodes_weighted_by_specificity():
    chunk, concept, weight = (np.array(column) for column in zip(*EDGES))
    keys = ["seal", "pump", "gasket", "seal kit"]  # df 2, 2, 1, 1
    graph = ConceptGraph({}, ["c0", "c1", "c2", "c3"], keys, keys, np.array([2.0, 2.0, 1.0, 1.0]),
                         (chunk.astype(np.int32), concept.astype(np.int32), weight))
    seed = graph.seeds("Seals of the pump, gaskets")  # stemmed like the ingest; "of the" dropped
    assert np.allclose(seed, np.array([0.5, 0.5, 1.0, 0.0]) / 2.0)
    assert graph.seeds("seal kit")[3] == pytest.approx(1 / 1.5)  # the phrase 1/1 of seal 1/2 + phrase 1/1 ("kit": no node)
    assert not graph.seeds("impeller").any()


MANUAL = SyntheticDoc(key="manual", collection="alpha",
                      texts=["Replace the mechanical seal kit every 4000 hours.",
                             "The seal kit AF-SK-118 ships with two gaskets.",
                             "Gaskets are stored in the spare parts cabinet."])
PARTS = SyntheticDoc(key="parts", collection="alpha", texts=["The cabinet key hangs in the office."])
GUIDE = SyntheticDoc(key="guide", collection="beta",
                     texts=["Order a mechanical seal kit from the spare parts cabinet list.",
                            "Snapshots are signed with the release key."])
ALL = [MANUAL, PARTS, GUIDE, *synthetic_docs(6)]


@pytest.fixture
def kb(tmp_path):
    root = tmp_path / "kb"
    catalog = write_synthetic_catalog(root, ALL)
    config = golden_config(root, "index.graph=true", "index.shards=2", "search.evidence=lexical")
    with pytest.raises(CatalogError, match="backfill-concepts"):
        build_index(config)
    report = backfill_concepts(config)
    assert report.versions == len(ALL) and report.chunks == sum(d.chunks if d.texts is None else len(d.texts)
                                                                 for d in ALL)
    assert backfill_concepts(config).versions == 0  # nothing left to do
    manifest = build_index(config)
    return config, catalog, manifest


def _search(config, query: str, **kwargs):
    searcher = HybridSearcher.open(config, embedder=HashEmbedder(), gate_max_age_s=0.0)
    return searcher.search(query, mode="graph", **kwargs)


def test_graph_hits_reach_chunks_that_share_no_query_word(kb):
    config, _, manifest = kb
    assert manifest.graph["chunks"] == manifest.rows and manifest.stats["graph_edges"] > 0
    result = _search(config, "AF-SK-118 gaskets", k=10)
    ranks = {h["chunk_id"]: h["ranks"]["graph"] for h in result.hits}
    assert ranks["ch_manual_1"] == 1  # both seeds
    assert ranks.get("ch_manual_2") is not None  # gaskets
    assert ranks.get("ch_parts_0") is not None  # no query word: reached through "cabinet"
    assert ranks.get("ch_guide_0") is None  # "cabinet" too, but one graph per collection
    assert {s["key"] for s in result.graph["seeds"]} == {"af-sk-118", "gasket"}


def test_filters_and_the_gate_apply(kb):
    config, catalog, _ = kb
    result = _search(config, "mechanical seal kit", k=5, filters={"collection": "beta"})
    assert result.hits and {h["collection"] for h in result.hits} == {"beta"}
    assert result.hits[0]["chunk_id"] == "ch_guide_0" and result.hits[0]["ranks"]["graph"] == 1
    rows = [{**row, "active_version_id": None} for row in catalog.read("documents").to_pylist()
            if row["document_id"] == "doc_guide"]
    catalog.merge_upsert("documents", pa.Table.from_pylist(rows, schema=catalog.read("documents").schema),
                         keys=["document_id"])
    hidden = _search(config, "mechanical seal kit spare parts cabinet", k=10)
    assert hidden.hits and all(h["document_id"] != "doc_guide" for h in hidden.hits)


def test_a_rebuild_writes_the_same_graph(kb):
    config, _, manifest = kb
    folder = local_generation_dir(config.kb_root, manifest.generation_id) / "graph"
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    build_index(golden_config(config.kb_root, "search.evidence=lexical"))  # another live one, to drop this one
    drop_generation(config.kb_root, manifest.generation_id)
    assert not folder.exists()
    again = build_index(config, catalog_versions=manifest.catalog_versions)
    assert again.generation_id == manifest.generation_id and "mentions" in again.catalog_versions
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_graph_mode_needs_a_graph(tmp_path):
    write_synthetic_catalog(tmp_path / "kb", ALL)
    config = golden_config(tmp_path / "kb", "search.evidence=lexical")
    build_index(config)
    searcher = HybridSearcher.open(config, embedder=HashEmbedder())
    assert not searcher.has_graph_index
    with pytest.raises(SearchRequestError, match="index.graph=true"):
        searcher.search("seal", mode="graph")
    assert "index.graph=true" in unavailable_reason("graph", searcher)  # kb-ray eval --modes ...,graph
    assert SearchRequest.model_validate({"query": "seal", "mode": "graph"}).mode == "graph"  # POST /v1/search
