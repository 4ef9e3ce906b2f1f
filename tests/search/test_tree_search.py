"""Search mode ``tree`` (kb_ray/search/tree.py) on a synthetic catalog (no Ray): hits are chunks of
the sections taken, with their section path; filters and the hydration gate apply as in hybrid mode."""

from __future__ import annotations

import pyarrow as pa
import pytest

from kb_ray.index import build_index
from kb_ray.search import HybridSearcher
from kb_ray.search.errors import SearchRequestError
from tests.index.test_tree import DOCS, HashEmbedder
from tests.index_fixtures import SyntheticDoc, golden_config, synthetic_docs, write_synthetic_catalog

GUIDE = SyntheticDoc(key="guide", collection="beta",
                     texts=["Set ORCHARD_TOKEN in the CI pipeline.", "Snapshots are signed.",
                            "Error E1042 means the snapshot signature does not match."],
                     headings=[["Guide", "CI"], ["Guide", "Snapshots"], ["Guide", "Snapshots", "Errors"]])
ALL = [*DOCS, GUIDE, *synthetic_docs(6)]


@pytest.fixture
def kb(tmp_path):
    root = tmp_path / "kb"
    catalog = write_synthetic_catalog(root, ALL)
    config = golden_config(root, "index.tree=true", "index.shards=2", "search.evidence=lexical")
    build_index(config, text_embedder=HashEmbedder())
    return config, catalog


def _search(config, query: str, **kwargs):
    searcher = HybridSearcher.open(config, embedder=HashEmbedder(), gate_max_age_s=0.0)
    return searcher.search(query, mode="tree", **kwargs)


def test_hits_carry_their_section_path(kb):
    config, _ = kb
    result = _search(config, "mechanical seal kit replacement hours", k=3)
    top = result.hits[0]
    assert top["chunk_id"] == "ch_manual_3" and top["section_path"] == ["Pump manual", "Maintenance"]
    assert top["section_id"].startswith("sec_") and top["ranks"]["tree"] is not None
    assert result.tree["sections"][0]["path"] == ["Pump manual", "Maintenance"]
    assert result.tree["trace"][0]["step"] == "branch" and len(result.tree["trace"]) <= config.search.tree.max_steps
    assert len(result.hits) == 3  # the sections held fewer: the rest in hybrid order


def test_filters_apply(kb):
    config, _ = kb
    result = _search(config, "snapshot signature error", k=5, filters={"collection": "beta"})
    assert result.hits and {h["collection"] for h in result.hits} == {"beta"}
    assert result.hits[0]["section_path"] == ["Guide", "Snapshots", "Errors"]


def test_a_deleted_document_is_hidden(kb):
    config, catalog = kb
    rows = [{**row, "active_version_id": None} for row in catalog.read("documents").to_pylist()
            if row["document_id"] == "doc_manual"]
    catalog.merge_upsert("documents", pa.Table.from_pylist(rows, schema=catalog.read("documents").schema),
                         keys=["document_id"])
    result = _search(config, "mechanical seal kit replacement hours", k=10)
    assert result.hits and all(h["document_id"] != "doc_manual" for h in result.hits)
    assert all("Pump manual" not in s["path"] for s in result.tree["sections"])


def test_tree_mode_needs_a_tree(tmp_path):
    write_synthetic_catalog(tmp_path / "kb", ALL)
    config = golden_config(tmp_path / "kb", "search.evidence=lexical")
    build_index(config)
    searcher = HybridSearcher.open(config, embedder=HashEmbedder())
    assert not searcher.has_tree_index
    with pytest.raises(SearchRequestError, match="index.tree=true"):
        searcher.search("seal", mode="tree")
