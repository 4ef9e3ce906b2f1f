"""A generation's build options belong to it (kb_ray/index/build_options.py): an upload ingested
by a process whose config lacks ``index.tree`` and ``index.graph`` (the upload worker of a
service configured so) refreshes a tree + graph generation with a segment, and a compaction
after it, that keep both, so modes ``tree`` and ``graph`` still answer. Inline ingests (no
Ray), the packaged embedder, real Delta tables."""

from __future__ import annotations

import json
import shutil

import pytest

from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.config import load_config
from kb_ray.index import build_index, load_manifest, read_current
from kb_ray.index.build import index_spec
from kb_ray.index.build_options import generation_config, options_from_spec
from kb_ray.index.refresh import compact_index, refresh_index
from kb_ray.index.segments import latest_segment
from kb_ray.ingest.run import run_ingest
from kb_ray.ingest.uploads import UploadFields, UploadQueue, ingest_pending
from kb_ray.search import HybridSearcher
from tests.conftest import GOLDEN_SOURCES, REPO_ROOT
from tests.ingest.helpers import ingest_config

NOTE = (b"# Zephyrine pump notes\n\n## Impeller\n\nThe zephyrine impeller is checked every spring.\n\n"
        b"## Seals\n\nThe zephyrine seal kit is replaced every autumn.\n")
QUERY = "zephyrine impeller checked in spring"


def _service_config(kb_root):
    """A service's config: no index.tree, no index.graph; the upload worker ingests inline."""
    return load_config(REPO_ROOT / "conf" / "local.yaml", overrides=[
        f"kb_root={kb_root}", "ingest.inline_max_docs=10", "embedding.num_threads=1", "search.evidence=lexical",
        "index.compact_ratio=100"])


def _upload_and_ingest(kb_root, config) -> None:
    queue = UploadQueue(DeltaCatalog.open(str(kb_root)))
    ingest_id, _ = queue.enqueue([("zephyrine.md", NOTE)], collection="default", tenant=None, fields=UploadFields())
    assert ingest_pending(config) == 1
    status = queue.status(ingest_id)
    assert status["status"] == "done" and status["files"][0]["action"] == "new", status


def _assert_tree_and_graph_find_the_upload(searcher: HybridSearcher) -> None:
    tree = searcher.search(QUERY, mode="tree", k=3)
    assert tree.hits and tree.hits[0]["uri"] == "upload://default/zephyrine.md", tree.hits
    assert tree.hits[0]["section_path"], tree.hits[0]
    graph = searcher.search(QUERY, mode="graph", k=3)
    assert graph.hits and graph.hits[0]["uri"] == "upload://default/zephyrine.md", graph.hits


def test_an_upload_keeps_the_tree_and_graph_of_the_live_generation(tmp_path):
    corpus, kb = tmp_path / "src", tmp_path / "kb"
    corpus.mkdir()
    for name in ("guide.md", "notes.txt"):
        shutil.copy(GOLDEN_SOURCES / name, corpus / name)
    built = ingest_config(kb, [corpus], "ingest.inline_max_docs=10", "embedding.num_threads=1",
                          "index.tree=true", "index.graph=true")
    assert run_ingest(built).documents["new"] == 2
    base = build_index(built)
    assert base.tree and base.graph and base.build_options["index"]["tree"] and base.build_options["index"]["graph"]

    service = _service_config(kb)
    _upload_and_ingest(kb, service)  # the run's auto-refresh: a segment over the live generation
    assert read_current(str(kb)) == base.generation_id and latest_segment(str(kb), base.generation_id) == 1
    searcher = HybridSearcher.open(service)
    assert searcher.search(QUERY, mode="tree", k=3).hits  # the base's tree; the upload has no sections yet
    # graph mode finds a segment's rows by dense + lexical (their concepts join the graph at compaction,
    # so a base chunk the graph leg favours may still rank first)
    graph = searcher.search(QUERY, mode="graph", k=3)
    assert "upload://default/zephyrine.md" in [hit["uri"] for hit in graph.hits], graph.hits

    compacted = compact_index(service)
    manifest = load_manifest(str(kb), compacted.generation)
    assert compacted.generation != base.generation_id and manifest.tree and manifest.graph
    assert manifest.graph["chunks"] == manifest.rows  # the upload's concepts were extracted for the graph
    assert manifest.spec == base.spec and manifest.embedder_fp == base.embedder_fp
    assert searcher.refresh() and searcher.generation == compacted.generation
    _assert_tree_and_graph_find_the_upload(searcher)
    assert refresh_index(service).action == "none"


@pytest.mark.parametrize("overrides", [
    [], ["index.tree=true", "index.graph=true"], ["index.passage_chars=0", "index.lexical_stem=true"],
    ["index.contextual=true", "index.contextual_in=dense", "index.shards=3", "index.dense=hnsw"],
    ["index.tree=true", "index.lexical_identifiers=true", "index.lexical_heading_in_body=false"],
    ["index.lexical=bm25s", "index.tree=true", "index.lexical_stem=true"]])
def test_a_manifest_without_recorded_options_has_them_read_from_its_spec(tmp_path, overrides):
    """A generation built before ``build_options`` were recorded: its spec tells enough to build
    its segments and compactions the same way (the same spec), whatever the caller's config."""
    from kb_ray.index.manifest import GenerationManifest

    config = load_config(REPO_ROOT / "conf" / "local.yaml", overrides=[f"kb_root={tmp_path}", *overrides])
    spec = index_spec(config.index, config.answer)
    old = GenerationManifest(generation_id="gen_old", kind="hybrid", spec=spec, catalog_versions={},
                             embedder_fp="", dim=0, lexical_type=config.index.lexical, shards=[], created_at="")
    assert GenerationManifest.from_json(json.dumps({k: v for k, v in json.loads(old.to_json()).items()
                                                    if k != "build_options"})) == old
    caller = load_config(REPO_ROOT / "conf" / "local.yaml", overrides=[f"kb_root={tmp_path}", "index.shards=5"])
    rebuilt = generation_config(caller, old)
    assert index_spec(rebuilt.index, rebuilt.answer) == spec, options_from_spec(spec)
    assert rebuilt.kb_root == caller.kb_root and rebuilt.search == caller.search
