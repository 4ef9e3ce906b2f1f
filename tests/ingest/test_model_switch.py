"""A model switch (#18): another embedder's vectors for every active chunk — by the ingest when
the switch is allowed, or by ``reembed`` — and a generation for it beside the live one that
answers; the live one keeps serving until switched; old vectors go only when purge is told.
Real local Ray, Delta and indexes; the new embedder is a tiny random-weight model the test builds."""

from __future__ import annotations

import shutil

import pytest

from kb_ray.catalog.purge import purge
from kb_ray.config import IndexSettings
from kb_ray.embedding.fingerprint import embedder_fingerprint
from kb_ray.errors import CatalogError, KbRayError
from kb_ray.index import build_index, load_manifest, read_current, switch_generation
from kb_ray.index.rows import INDEXED_TABLES, open_session
from kb_ray.index.vector_layout import VectorLayout
from kb_ray.index.vector_lookup import chunks_missing_vectors
from kb_ray.ingest.reembed import check_generation_embedder, embed_missing, reembed
from kb_ray.ingest.run import run_ingest
from kb_ray.search import HybridSearcher
from tests.conftest import GOLDEN_SOURCES
from tests.ingest.helpers import INLINE, catalog, ingest_config

FRESH = "The quokka relief valve is replaced every 900 hours of operation."


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from kb_ray.embedding.tiny import build_tiny_text_model

    return build_tiny_text_model(tmp_path_factory.mktemp("tiny"))


def _missing(kb_root, fingerprint: str) -> tuple[int, int]:
    """(vectors the active chunks lack under ``fingerprint``, vectors they have in all) in the
    default vector layout (index.vector_layout: a long chunk's vectors are its passages')."""
    cat = catalog(kb_root)
    connection = open_session(cat, {name: cat.table_versions()[name] for name in INDEXED_TABLES})
    try:
        _, held, total = chunks_missing_vectors(connection, fingerprint, VectorLayout.from_settings(IndexSettings()))
    finally:
        connection.close()
    return total - len(held), total


def _ingested(tmp_path):
    corpus = tmp_path / "src"
    corpus.mkdir()
    shutil.copy(GOLDEN_SOURCES / "notes.txt", corpus / "notes.txt")
    config = ingest_config(tmp_path / "kb", [corpus], INLINE)
    run_ingest(config)
    return corpus, config, build_index(config).generation_id  # live, built by the packaged MiniLM


@pytest.mark.slow  # three ingests and a reembed, ~20 s inline; make test-cluster (CI) runs it
def test_an_allowed_switch_in_the_ingest_embeds_unchanged_chunks_and_builds_a_generation_that_answers(
        tmp_path, tiny_model):
    corpus, config, old_generation = _ingested(tmp_path)
    switched = ingest_config(tmp_path / "kb", [corpus], INLINE, f"embedding.model_path={tiny_model}", "embedding.model_id=tiny")
    with pytest.raises(CatalogError, match="another embedder"):
        run_ingest(switched)
    switched.embedding.allow_model_switch = True
    (corpus / "fresh.txt").write_text(FRESH + "\n")
    report = run_ingest(switched)

    new_fp = embedder_fingerprint(switched.embedding)
    assert report.documents["new"] == 1 and report.documents["unchanged"] == 1
    assert report.model_switch["embedded"] > 0  # notes.txt's chunks: unchanged, yet embedded by the new model
    assert _missing(tmp_path / "kb", new_fp)[0] == 0
    assert report.index_refresh["action"] == "none" and "model switch" in report.index_refresh["detail"]
    new_generation = report.model_switch["generation"]
    assert read_current(str(tmp_path / "kb")) == old_generation == report.model_switch["live_generation"]
    assert load_manifest(str(tmp_path / "kb"), new_generation).embedder_fp == new_fp

    hits = HybridSearcher.open(switched, generation_id=new_generation).search("quokka relief valve", k=3).hits
    assert hits[0]["uri"].endswith("fresh.txt") and hits[0]["ranks"]["dense"] is not None
    old_hits = HybridSearcher.open(config).search("quokka relief valve", k=3).hits  # the live one still serves
    assert old_hits and all(not hit["uri"].endswith("fresh.txt") for hit in old_hits)  # it predates fresh.txt

    old_fp = embedder_fingerprint(config.embedding)
    with pytest.raises(CatalogError, match="built the live index generation"):
        purge(catalog(tmp_path / "kb"), drop_embedder=old_fp, live_embedder=old_fp)
    switch_generation(str(tmp_path / "kb"), new_generation)
    dropped = purge(catalog(tmp_path / "kb"), drop_embedder=old_fp, live_embedder=new_fp)
    assert dropped.deleted_rows["embeddings_dropped_embedder"] > 0
    missing_old, texts = _missing(tmp_path / "kb", old_fp)
    assert missing_old == texts  # no active text keeps a vector of the dropped embedder
    assert _missing(tmp_path / "kb", new_fp)[0] == 0


@pytest.mark.slow  # the default run has the ingest path's switch above; this and the next: make test-cluster
def test_reembed_resumes_after_an_interruption_and_leaves_the_live_generation(tmp_path, tiny_model):
    _, config, live = _ingested(tmp_path)
    tiny = config.embedding.model_copy(update={"model_path": str(tiny_model), "model_id": "tiny"})
    new_fp = embedder_fingerprint(tiny)
    _, total = _missing(tmp_path / "kb", new_fp)
    assert total >= 2

    def interrupt(progress) -> None:
        raise KeyboardInterrupt  # after the first committed batch

    with pytest.raises(KeyboardInterrupt):
        embed_missing(catalog(tmp_path / "kb"), embedding=tiny, batch_texts=1, on_progress=interrupt,
                      layout=VectorLayout.from_settings(config.index))  # the vectors reembed computes
    assert _missing(tmp_path / "kb", new_fp)[0] == total - 1

    report = reembed(config, embedding=tiny, batch_texts=1)
    assert (report.cached, report.embedded, report.texts) == (1, total - 1, total)
    assert report.live_generation == live == read_current(str(tmp_path / "kb"))
    assert load_manifest(str(tmp_path / "kb"), report.generation).embedder_fp == new_fp
    again = reembed(config, embedding=tiny)
    assert again.embedded == 0 and again.generation == report.generation  # same versions, same generation


@pytest.mark.slow
def test_index_switch_needs_the_generations_embedder_configured(tmp_path, tiny_model):
    _, config, live = _ingested(tmp_path)
    tiny = config.embedding.model_copy(update={"model_path": str(tiny_model), "model_id": "tiny"})
    generation = reembed(config, embedding=tiny).generation
    with pytest.raises(KbRayError, match="configure the embedder the generation was built with"):
        check_generation_embedder(config, generation)
    check_generation_embedder(config.model_copy(update={"embedding": tiny}), generation)
    check_generation_embedder(config, live)
