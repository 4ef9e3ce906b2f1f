"""Graph mode end to end, without Ray: an inline ingest of golden sources writes concepts and
mentions (one commit per micro-batch, version-keyed), build-index with index.graph=true, and
graph hits with a filter applied."""

from __future__ import annotations

import shutil

from kb_ray.index import build_index
from kb_ray.ingest.run import run_ingest
from kb_ray.search import HybridSearcher
from tests.conftest import GOLDEN_SOURCES
from tests.ingest.helpers import catalog, ingest_config


def test_ingest_build_and_search_in_graph_mode(tmp_path):
    corpus = tmp_path / "src"
    corpus.mkdir()
    for name in ("guide.md", "notes.txt", "faq.html"):
        shutil.copy(GOLDEN_SOURCES / name, corpus / name)
    config = ingest_config(tmp_path / "kb", [corpus], "ingest.inline_max_docs=10", "index.graph=true",
                           "search.evidence=lexical")
    report = run_ingest(config)
    assert report.status == "succeeded" and report.stages["concepts"]["rows_in"] == 3
    cat = catalog(tmp_path / "kb")
    mentions, versions = cat.read("mentions"), cat.read("versions", columns=["version_id"])
    assert set(mentions.column("version_id").to_pylist()) == set(versions.column("version_id").to_pylist())
    assert set(cat.read("mentions", columns=["chunk_id"]).column("chunk_id").to_pylist()) <= \
        set(cat.read("version_chunks", columns=["chunk_id"]).column("chunk_id").to_pylist())
    assert cat.read("concepts").num_rows > 0
    manifest = build_index(config)
    assert manifest.graph["chunks"] == manifest.rows and "mentions" in manifest.catalog_versions
    searcher = HybridSearcher.open(config)
    result = searcher.search("signed configuration snapshot rollout waves", mode="graph", k=5)
    assert result.hits and result.hits[0]["ranks"]["graph"] is not None
    assert any(seed["key"] == "snapshot" for seed in result.graph["seeds"])
    filtered = searcher.search("plot fees waiting list", mode="graph", k=5, filters={"mime": "text/plain"})
    assert filtered.hits and {hit["mime"] for hit in filtered.hits} == {"text/plain"}
    assert filtered.hits[0]["ranks"]["graph"] is not None
