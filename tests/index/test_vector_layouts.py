"""Vector layouts end to end (``index.vector_layout``, kb_ray/index/vector_layout.py): an ingest
and a build under each find every vector and score each chunk by its best one; a catalog
ingested under one layout and built under another reports missing rows until ``reembed``;
delta segments keep their base generation's layout. Small inline ingests (no Ray)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from kb_ray.catalog import DeltaCatalog
from kb_ray.catalog.verify import verify_catalog
from kb_ray.embedding.text import format_embed_text
from kb_ray.index import build_index
from kb_ray.index.segments import load_segments
from kb_ray.index.vector_layout import LAYOUTS, VectorLayout
from kb_ray.ingest.reembed import embed_missing
from kb_ray.ingest.run import run_ingest
from kb_ray.search import HybridSearcher
from tests.conftest import GOLDEN_SOURCES
from tests.ingest.helpers import ingest_config

QUERY = "How long would the rail tunnel under the hills be?"


def _config(kb, sources, layout: str, *extra: str):
    return ingest_config(kb, [sources], "ingest.inline_max_docs=10", "index.shards=1",
                         f"index.vector_layout={layout}", "index.late_overlap_tokens=16", *extra)


def _sources(folder, *names: str):
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copy(GOLDEN_SOURCES / name, folder / name)
    return folder


def _best_vectors_scored(config, manifest, embedder, query: str = QUERY) -> int:
    """Check each dense hit's score is the best cosine among its layout's vectors, recomputed
    here; return how many hits had more than one vector."""
    layout = VectorLayout.from_spec(manifest.spec)
    searcher = HybridSearcher.open(config, generation_id=manifest.generation_id, embedder=embedder)
    hits = searcher.search(query, k=5, mode="dense").hits
    assert hits
    query_vector, several = embedder.embed_query(query), 0
    shards = searcher._loaded.shards  # the base shard and any delta segment's
    for hit in hits:
        plan = layout.chunk(hit["text"], hit["heading_path"])
        vectors = embedder.embed_late([plan.late], overlap_tokens=layout.overlap_tokens)[0][0] if plan.late \
            else embedder.embed_texts([plan.texts[key] for key in plan.keys])
        several += len(vectors) > 1
        assert hit["scores"]["dense"] == pytest.approx(float(np.max(vectors @ query_vector)), abs=1e-4)
        _stored_vectors_are_the_layouts(shards, hit, plan, np.asarray(vectors), layout)
    return several


def _stored_vectors_are_the_layouts(shards, hit, plan, vectors, layout) -> None:
    """What query time reads back (evidence, answers: nothing re-embedded) is the layout's
    vectors in key order, each standing for the characters it was embedded or pooled from."""
    shard = next(s for s in reversed(shards) if hit["chunk_id"] in s.chunk_ids)  # the newest segment holding it
    stored = shard.row_vectors(shard.chunk_ids.index(hit["chunk_id"]))
    assert stored.shape == vectors.shape
    assert np.allclose(stored, vectors / np.linalg.norm(vectors, axis=1, keepdims=True), atol=1e-5)
    spans = layout.vector_spans(hit["text"], len(stored))
    if plan.late:
        start = plan.late.spans[0][0]
        assert [(a - start, b - start) for a, b in plan.late.spans] == spans
    else:
        assert [plan.texts[key] for key in plan.keys] == [
            format_embed_text(text=hit["text"][a:b], heading_path=hit["heading_path"]) for a, b in spans]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_an_ingest_and_a_build_under_each_layout_find_every_vector(tmp_path, text_embedder, layout):
    config = _config(tmp_path / "kb", _sources(tmp_path / "src", "long_report.pdf"), layout)
    report = run_ingest(config)
    counts = report.stages["embed_write"]["counts"]
    manifest = build_index(config)
    assert manifest.stats["passages_missing_rows"] == 0 and manifest.stats["passages"] > 0
    assert manifest.spec["passages"].get("layout", "chunk_and_passages") == layout
    catalog = DeltaCatalog.open(config.kb_root, create=False)
    assert verify_catalog(catalog, layout=VectorLayout.from_settings(config.index)).ok(strict=True)
    assert counts["embed_tokens"] > counts["text_tokens"] > 0
    assert bool(counts["late_chunks"]) == (layout == "late")
    assert _best_vectors_scored(config, manifest, text_embedder)


def test_a_catalog_ingested_passages_only_reports_missing_rows_when_built_with_chunk_vectors(tmp_path):
    sources = _sources(tmp_path / "src", "long_report.pdf", "guide.md")
    passages, today = (_config(tmp_path / "kb", sources, layout) for layout in ("passages", "chunk_and_passages"))
    run_ingest(passages)
    assert build_index(passages).stats["passages_missing_rows"] == 0
    manifest = build_index(today)  # today's layout wants the chunk texts' vectors: never embedded here
    with_passages = manifest.stats["passages_missing_rows"]
    assert with_passages > 0 and manifest.stats["passages"] > 0  # the rows keep the passages they have
    assert HybridSearcher.open(today).search(QUERY, k=3, mode="dense").hits
    late = build_index(_config(tmp_path / "kb", sources, "late"))
    assert late.stats["passages_missing_rows"] == with_passages  # no late vector of any of them either

    report = embed_missing(DeltaCatalog.open(today.kb_root, create=False), embedding=today.embedding,
                           layout=VectorLayout.from_settings(today.index))
    assert report.embedded == with_passages and report.passages == 0  # their chunk texts, nothing else
    assert build_index(today).stats["passages_missing_rows"] == 0


def test_late_vectors_of_a_catalog_ingested_today_come_from_reembed_and_segments_keep_the_layout(
        tmp_path, text_embedder):
    sources = _sources(tmp_path / "src", "long_report.pdf")
    today, late = (_config(tmp_path / "kb", sources, layout, "index.compact_ratio=10")
                   for layout in ("chunk_and_passages", "late"))
    run_ingest(today)
    assert build_index(_config(tmp_path / "kb", sources, "passages")).stats["passages_missing_rows"] == 0
    missing = build_index(late).stats["passages_missing_rows"]  # served by today's chunk vectors meanwhile
    assert missing > 0
    report = embed_missing(DeltaCatalog.open(late.kb_root, create=False), embedding=late.embedding,
                           layout=VectorLayout.from_settings(late.index))
    assert report.late_chunks == missing and report.embedded > missing
    base = build_index(late)
    assert base.stats["passages_missing_rows"] == 0

    _sources(sources, "guide.md")
    ingest = run_ingest(late)
    assert ingest.index_refresh["action"] == "segment" and ingest.stages["embed_write"]["counts"]["late_chunks"]
    (segment,) = load_segments(late.kb_root, base.generation_id)
    assert segment.shards[0].dense_owners  # the new document's passage vectors, pooled late
    assert _best_vectors_scored(late, base, text_embedder, "roll out a change safely to a canary wave of five devices")
