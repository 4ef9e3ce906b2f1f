"""The section tree (kb_ray/index/sections.py, kb_ray/index/tree.py) on synthetic catalogs (no Ray):
its nodes, its files in a generation, and identical rebuilds from the same catalog versions."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from kb_ray.errors import CatalogError
from kb_ray.index import build_index
from kb_ray.index.analyzer import TextAnalyzer
from kb_ray.index.generations import local_generation_dir
from kb_ray.index.sections import SectionChunk, document_sections, lead_sentences, node_id
from tests.index_fixtures import SYNTHETIC_FP, SyntheticDoc, golden_config, write_synthetic_catalog

MANUAL = SyntheticDoc(
    key="manual", collection="alpha",
    texts=["The pump manual covers installation. It also covers upkeep. Read it first.",
           "Mount the pump on a level base. Tighten the anchor bolts to 40 Nm.",
           "Prime the pump before the first start. The pump is not self-priming.",
           "Replace the mechanical seal kit AF-SK-118 every 4000 hours.",
           "Check the impeller for wear once a year."],
    headings=[["Pump manual"], ["Pump manual", "Installation"], ["Pump manual", "Installation", "Priming"],
              ["Pump manual", "Maintenance"], ["Pump manual", "Maintenance"]])
PLAIN = SyntheticDoc(key="notes", collection="beta", texts=["Garden notes without headings. Plots are full.",
                                                            "The waiting list has 23 names."],
                     headings=[[], []])
DOCS = [MANUAL, PLAIN]


class HashEmbedder:
    """A deterministic stand-in for the text embedder (unit vectors seeded by the text)."""

    fingerprint, dim = SYNTHETIC_FP, 16

    def embed_texts(self, texts):
        return np.stack([_vector(t) for t in texts]) if texts else np.zeros((0, self.dim), np.float32)

    def embed_query(self, text):
        return _vector(text)


def _vector(text: str) -> np.ndarray:
    seed = int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)
    vector = np.random.default_rng(seed).normal(size=16).astype(np.float32)
    return vector / np.linalg.norm(vector)


def _config(root: Path, *overrides: str):
    return golden_config(root, "index.tree=true", "index.shards=2", *overrides)


def test_sections_of_one_document():
    chunks = [SectionChunk(f"c{i}", i, text, tuple(path), ((i * 100, i * 100 + 50),), (i + 1,))
              for i, (text, path) in enumerate(zip(MANUAL.texts, MANUAL.headings))]
    nodes = document_sections("doc", "ver", "The manual", chunks, analyzer=TextAnalyzer())
    by_path = {tuple(n.heading_path): n for n in nodes}
    assert list(by_path) == [(), ("Pump manual",), ("Pump manual", "Installation"),
                             ("Pump manual", "Installation", "Priming"), ("Pump manual", "Maintenance")]
    root, maintenance = by_path[()], by_path[("Pump manual", "Maintenance")]
    assert root.parent_id is None and root.title == "The manual" and root.chunk_ids == [] and root.subtree_chunks == 5
    assert maintenance.parent_id == node_id("ver", ["Pump manual"]) and maintenance.chunk_ids == ["c3", "c4"]
    assert (maintenance.span_start, maintenance.span_end, maintenance.pages) == (300, 450, [4, 5])
    assert by_path[("Pump manual", "Installation")].pages == [2, 3]
    assert maintenance.summary.startswith("Replace the mechanical seal kit")
    assert "impeller" in maintenance.key_terms and len(maintenance.key_terms) == 8
    assert by_path[("Pump manual",)].summary == "The pump manual covers installation. It also covers upkeep."


def test_a_document_without_headings_is_one_root():
    chunks = [SectionChunk(f"c{i}", i, t, (), ((0, 1),), ()) for i, t in enumerate(PLAIN.texts)]
    nodes = document_sections("doc", "ver", "Notes", chunks, analyzer=TextAnalyzer())
    assert len(nodes) == 1 and nodes[0].chunk_ids == ["c0", "c1"] and nodes[0].heading_path == []


def test_lead_sentences_are_cut_at_a_word_end():
    assert lead_sentences("One. Two!  Three?") == "One. Two!"
    long = lead_sentences("word " * 200)
    assert long.endswith(" …") and len(long) <= 322


def test_the_tree_is_part_of_the_generation_and_rebuilds_identically(tmp_path):
    write_synthetic_catalog(tmp_path / "kb", DOCS)
    config = _config(tmp_path / "kb")
    manifest = build_index(config, text_embedder=HashEmbedder())
    assert manifest.tree["rows"] == 6 and manifest.spec["tree"]["summary"] == "extractive"
    assert manifest.stats["tree_nodes"] == 6
    folder = Path(local_generation_dir(config.kb_root, manifest.generation_id)) / "tree"
    nodes = pq.read_table(folder / "nodes.parquet")
    assert set(nodes.column("collection").to_pylist()) == {"alpha", "beta"}
    first = {p.name: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}

    rebuilt_root = tmp_path / "again"
    write_synthetic_catalog(rebuilt_root, DOCS)
    again = build_index(_config(rebuilt_root), text_embedder=HashEmbedder())
    assert again.generation_id == manifest.generation_id
    second_folder = Path(local_generation_dir(str(rebuilt_root), again.generation_id)) / "tree"
    second = {p.name: p.read_bytes() for p in sorted(second_folder.rglob("*")) if p.is_file()}
    assert second.keys() == first.keys() and all(second[name] == first[name] for name in first)


def test_without_index_tree_there_is_no_tree(tmp_path):
    write_synthetic_catalog(tmp_path / "kb", DOCS)
    manifest = build_index(golden_config(tmp_path / "kb"))
    assert manifest.tree is None and "tree" not in manifest.spec


def test_a_tree_needs_the_generations_embedder(tmp_path):
    write_synthetic_catalog(tmp_path / "kb", DOCS)
    other = HashEmbedder()
    other.fingerprint = "another"
    with pytest.raises(CatalogError, match="index.tree"):
        build_index(_config(tmp_path / "kb"), text_embedder=other)


def test_the_document_route_shows_the_indexed_nodes_nested(tmp_path):
    from kb_ray.catalog import DeltaCatalog
    from kb_ray.search.document_tree import document_tree

    write_synthetic_catalog(tmp_path / "kb", DOCS)
    config = _config(tmp_path / "kb")
    manifest = build_index(config, text_embedder=HashEmbedder())
    catalog = DeltaCatalog.open(config.kb_root, create=False)
    view = document_tree(catalog, "doc_manual", analyzer=TextAnalyzer())
    root = view["tree"]
    assert view["collection"] == "alpha" and root["heading_path"] == [] and root["subtree_chunks"] == 5
    (manual,) = root["children"]
    assert [c["title"] for c in manual["children"]] == ["Installation", "Maintenance"]
    assert manual["children"][0]["children"][0]["chunk_ids"] == ["ch_manual_2"]

    def flat(node):
        return [node, *(n for child in node["children"] for n in flat(child))]

    folder = Path(local_generation_dir(config.kb_root, manifest.generation_id)) / "tree"
    indexed = {row["node_id"]: row for row in pq.read_table(folder / "nodes.parquet").to_pylist()
               if row["document_id"] == "doc_manual"}
    assert {n["node_id"] for n in flat(root)} == set(indexed)
    for node in flat(root):
        row = indexed[node["node_id"]]
        assert (node["summary"], node["key_terms"], node["chunk_ids"], node["span"]) == \
            (row["summary"], row["key_terms"], row["chunk_ids"], [row["span_start"], row["span_end"]])
    assert document_tree(catalog, "doc_nope", analyzer=TextAnalyzer()) is None
