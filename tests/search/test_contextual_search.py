"""End to end: a few Markdown files ingested (in the driver), the plain and the contextual
generation built from the same catalog versions, and a query that only the chunk's context
answers (the document title, given by a sidecar, is in neither the chunk's text nor its heading
path nor its file name): the contextual generation ranks that chunk first, the plain one does not;
both return the plain chunk text, its spans, pages and evidence."""

from __future__ import annotations

import json

import pytest

from kb_ray.index import build_index
from kb_ray.ingest.run import run_ingest
from kb_ray.search import HybridSearcher
from tests.index_fixtures import golden_config

FILES = {
    "a.md": ("Zephyr Kettle Care Guide",
             "# Cleaning\n\nDescale the unit every month with white vinegar, then rinse it twice with clean water.\n"),
    "b.md": ("Boreal Coffee Maker Guide",
             "# Cleaning\n\nDescale the kettle every month with citric acid, then rinse it twice with clean water.\n"),
    "c.md": ("Garden Irrigation Notes",
             "# Watering\n\nWater the raised beds early in the morning and check the drip lines weekly.\n"),
}
QUERY = "descale the Zephyr kettle"


@pytest.fixture(scope="module")
def kb(tmp_path_factory, text_embedder):
    source = tmp_path_factory.mktemp("src")
    for name, (title, body) in FILES.items():
        (source / name).write_text(body, encoding="utf-8")
        (source / f"{name}.meta.json").write_text(json.dumps({"title": title}), encoding="utf-8")
    root = tmp_path_factory.mktemp("kb")
    config = golden_config(root, f"ingest.sources=[{source}]", "ingest.inline_max_docs=10", "index.shards=1",
                           "index.auto_refresh=false")
    assert run_ingest(config).status == "succeeded"
    plain = build_index(config)
    contextual = build_index(config.model_copy(update={"index": config.index.model_copy(
        update={"contextual": True, "switch_after_build": False})}), text_embedder=text_embedder)
    searchers = {g.generation_id: HybridSearcher.open(config, generation_id=g.generation_id, embedder=text_embedder)
                 for g in (plain, contextual)}
    return config, plain, contextual, searchers


def _search(kb, generation_id: str) -> list[dict]:
    return kb[3][generation_id].search(QUERY, k=3).hits


def test_the_context_brings_the_titled_chunk_first_only_in_the_contextual_generation(kb):
    _, plain, contextual, _ = kb
    assert contextual.catalog_versions == plain.catalog_versions and contextual.embedder_fp == plain.embedder_fp
    assert contextual.stats["contextual"]["texts_embedded"] == 3
    plain_hits, contextual_hits = _search(kb, plain.generation_id), _search(kb, contextual.generation_id)
    assert contextual_hits[0]["title"] == "Zephyr Kettle Care Guide"
    assert plain_hits[0]["title"] == "Boreal Coffee Maker Guide"  # "kettle" is in its text


def test_contextual_hits_carry_the_plain_chunk_text_spans_pages_and_evidence(kb):
    _, plain, contextual, _ = kb
    by_chunk = {h["chunk_id"]: h for h in _search(kb, plain.generation_id)}
    for hit in _search(kb, contextual.generation_id):
        same = by_chunk[hit["chunk_id"]]
        assert not hit["text"].startswith("Document:") and "Zephyr Kettle Care Guide" not in hit["text"]
        for key in ("text", "spans", "pages", "quote"):
            assert hit[key] == same[key], key
        assert hit["evidence"]["quote"] in hit["text"] and hit["evidence"]["spans"] == same["evidence"]["spans"]
