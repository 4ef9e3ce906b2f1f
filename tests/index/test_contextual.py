"""The contextual generation (kb_ray/index/chunk_context.py, kb_ray/index/contextual.py) on
synthetic catalogs (no Ray): contexts from Arrow rows, the enrichment and embedding caches, and
LLM-written contexts from a real local OpenAI-compatible server with scripted replies."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from kb_ray.catalog import DeltaCatalog
from kb_ray.config import AnswerSettings
from kb_ray.index import build_index
from kb_ray.index.analyzer import TextAnalyzer
from kb_ray.index.chunk_context import ExtractiveContextWriter, chunk_places
from kb_ray.index.contextual import stored_enrichments
from kb_ray.index.generations import local_generation_dir
from kb_ray.index.rows import open_session, read_index_rows
from tests.enrich.openai_server import serve_openai
from tests.index.test_tree import DOCS, HashEmbedder
from tests.index_fixtures import SYNTHETIC_FP, golden_config, write_synthetic_catalog

MODEL = "kb-ray/test-llm"


class CountingEmbedder(HashEmbedder):
    def __init__(self) -> None:
        self.texts: list[str] = []

    def embed_texts(self, texts):
        self.texts.extend(texts)
        return super().embed_texts(texts)


def _hydration(root: Path):
    catalog = DeltaCatalog.open(str(root), create=False)
    connection = open_session(catalog, {n: catalog.table_versions()[n] for n in
                                        ("documents", "versions", "chunks", "version_chunks", "embeddings")})
    try:
        return read_index_rows(connection, SYNTHETIC_FP)[0]
    finally:
        connection.close()


def _config(root: Path, *overrides: str):
    return golden_config(root, "index.contextual=true", "index.shards=2", *overrides)


def _contexts(tmp_path: Path) -> dict[str, str]:
    write_synthetic_catalog(tmp_path / "kb", DOCS)
    hydration = _hydration(tmp_path / "kb")
    writer = ExtractiveContextWriter()
    return {c.chunk_id: c.text for c in writer.contexts(chunk_places(hydration, TextAnalyzer()))}


def test_extractive_contexts_name_title_path_position_and_section_lead(tmp_path):
    contexts = _contexts(tmp_path)
    assert contexts["ch_manual_0"] == "Document: Title manual. Section: Pump manual (section 1 of 4, part 1 of 1)."
    assert contexts["ch_manual_2"] == ("Document: Title manual. Section: Pump manual > Installation > Priming "
                                       "(section 3 of 4, part 1 of 1).")
    # the second chunk of "Maintenance" gets the section's lead (the first chunk's sentences)
    assert contexts["ch_manual_3"] == "Document: Title manual. Section: Pump manual > Maintenance (section 4 of 4, part 1 of 2)."
    assert contexts["ch_manual_4"] == ("Document: Title manual. Section: Pump manual > Maintenance (section 4 of 4, "
                                       "part 2 of 2). Section begins: Replace the mechanical seal kit AF-SK-118 "
                                       "every 4000 hours.")
    # no headings: the title, the position and the document's lead
    assert contexts["ch_notes_0"] == "Document: Title notes. (part 1 of 2)."
    assert contexts["ch_notes_1"] == ("Document: Title notes. (part 2 of 2). Document begins: Garden notes without "
                                      "headings. Plots are full.")


def test_input_sha_changes_with_what_the_context_says(tmp_path):
    write_synthetic_catalog(tmp_path / "kb", DOCS)
    places = chunk_places(_hydration(tmp_path / "kb"), TextAnalyzer())
    writer = ExtractiveContextWriter()
    shas = [writer.input_sha(p) for p in places]
    assert len(set(shas)) == len(shas) and all(len(s) == 64 for s in shas)


def test_contextual_generation_indexes_context_and_keeps_plain_hydration(tmp_path):
    write_synthetic_catalog(tmp_path / "kb", DOCS)
    embedder = CountingEmbedder()
    plain = build_index(golden_config(tmp_path / "kb", "index.shards=2"), text_embedder=embedder)
    assert embedder.texts == []  # the plain generation reads the ingest's vectors
    manifest = build_index(_config(tmp_path / "kb"), text_embedder=embedder)
    assert manifest.generation_id != plain.generation_id and manifest.spec["contextual"]["writer"] == "extractive"
    assert manifest.embedder_fp == SYNTHETIC_FP and manifest.rows == 7
    assert manifest.stats["contextual"]["contexts_written"] == 7
    assert manifest.stats["contextual"]["texts_embedded"] == 7 and len(embedder.texts) == 7
    assert any(t.startswith("Document: Title manual. Section: Pump manual > Maintenance") and
               t.endswith("Check the impeller for wear once a year.") for t in embedder.texts)
    folder = Path(local_generation_dir(str(tmp_path / "kb"), manifest.generation_id))
    hydrated = pq.read_table(folder / "shard-000" / "hydration.parquet").to_pylist() + \
        pq.read_table(folder / "shard-001" / "hydration.parquet").to_pylist()
    assert not any(row["text"].startswith("Document:") for row in hydrated)
    catalog = DeltaCatalog.open(str(tmp_path / "kb"), create=False)
    assert len(stored_enrichments(catalog, ExtractiveContextWriter().fingerprint)) == 7


def test_a_second_build_embeds_and_writes_nothing(tmp_path):
    write_synthetic_catalog(tmp_path / "kb", DOCS)
    config = _config(tmp_path / "kb")
    first = build_index(config, text_embedder=CountingEmbedder())
    catalog = DeltaCatalog.open(str(tmp_path / "kb"), create=False)
    versions = catalog.table_versions()
    again_embedder = CountingEmbedder()
    # another shard count: another generation, built from the same catalog versions
    again = build_index(config.model_copy(update={"index": config.index.model_copy(update={"shards": 3})}),
                        text_embedder=again_embedder)
    assert again.generation_id != first.generation_id and again_embedder.texts == [] and again.stats["contextual"]["texts_embedded"] == 0
    assert again.stats["contextual"]["texts_cached"] == 7 and again.stats["contextual"]["contexts_written"] == 0
    assert {n: v for n, v in catalog.table_versions().items() if n in ("embeddings", "enrichments")} == \
        {n: versions[n] for n in ("embeddings", "enrichments")}


def _generator_config(root: Path, server, **answer):
    config = _config(root, "index.contextual_writer=generator")
    settings = AnswerSettings(generator="openai", endpoint=server.base_url, model_id=MODEL, max_concurrency=1, **answer)
    return config.model_copy(update={"answer": settings})


def test_llm_contexts_come_from_the_configured_generator_once(tmp_path):
    write_synthetic_catalog(tmp_path / "kb", DOCS)
    replies = [f"Context number {n} of the pump manual." for n in range(7)]
    with serve_openai(model=MODEL, chat_replies=replies) as server:
        embedder = CountingEmbedder()
        manifest = build_index(_generator_config(tmp_path / "kb", server), text_embedder=embedder)
        requests = server.chat_requests()
    assert len(requests) == 7 and manifest.stats["contextual"]["contexts_written"] == 7
    assert manifest.spec["contextual"]["writer"] == "generator"
    first = requests[0]
    assert first["model"] == MODEL and first["max_tokens"] == 128
    user = first["messages"][1]["content"]
    assert user.startswith("<document>\n# Title ") and "<chunk>" in user
    chunk = user.split("<chunk>\n", 1)[1].split("\n</chunk>", 1)[0]
    embedded = [t for t in embedder.texts if t.startswith(replies[0])]
    assert embedded == [f"{replies[0]}\n{chunk}"]  # the reply to a chunk's prompt is that chunk's context

    with serve_openai(model=MODEL, chat_replies=[]) as server:  # asked again, it would answer 409
        again = build_index(_generator_config(tmp_path / "kb", server).model_copy(
            update={"index": _config(tmp_path / "kb", "index.contextual_writer=generator", "index.shards=1").index}),
            text_embedder=CountingEmbedder())
        assert server.chat_requests() == []
    assert again.stats["contextual"]["contexts_written"] == 0 and again.stats["contextual"]["texts_embedded"] == 0


def test_a_failed_llm_call_is_stored_failed_and_falls_back_to_the_extractive_context(tmp_path):
    write_synthetic_catalog(tmp_path / "kb", DOCS)
    with serve_openai(model=MODEL, always_fail=True) as server:
        embedder = CountingEmbedder()
        manifest = build_index(_generator_config(tmp_path / "kb", server, retries=0), text_embedder=embedder)
    assert manifest.stats["contextual"]["contexts_failed"] == 7
    assert all(t.startswith("Document: Title ") for t in embedder.texts)
    catalog = DeltaCatalog.open(str(tmp_path / "kb"), create=False)
    rows = catalog.dataset("enrichments").to_table().to_pylist()
    assert {(r["kind"], r["status"], r["error"]) for r in rows} == {("chunk_context", "failed", "http_5xx")}


def test_generator_writer_needs_a_model_generator(tmp_path):
    from kb_ray.errors import KbRayError

    write_synthetic_catalog(tmp_path / "kb", DOCS)
    with pytest.raises(KbRayError, match="contextual_writer=generator"):
        build_index(_config(tmp_path / "kb", "index.contextual_writer=generator"), text_embedder=HashEmbedder())


def test_vectors_are_those_of_the_contextual_text(tmp_path):
    write_synthetic_catalog(tmp_path / "kb", DOCS)
    manifest = build_index(_config(tmp_path / "kb", "index.shards=1"), text_embedder=HashEmbedder())
    import faiss

    folder = Path(local_generation_dir(str(tmp_path / "kb"), manifest.generation_id)) / "shard-000"
    index = faiss.read_index(str(folder / "dense.faiss"))
    rows = pq.read_table(folder / "hydration.parquet")
    contexts = _contexts(tmp_path / "other")
    first = rows.column("chunk_id")[0].as_py()
    expected = HashEmbedder().embed_texts([f"{contexts[first]}\n{rows.column('text')[0].as_py()}"])[0]
    assert np.allclose(index.reconstruct(0), expected, atol=1e-6)


def test_a_refresh_of_a_live_contextual_generation_is_a_full_build(tmp_path, monkeypatch):
    from kb_ray.embedding.text import TextEmbedder
    from kb_ray.index.refresh import refresh_index
    from tests.index_fixtures import SyntheticDoc

    write_synthetic_catalog(tmp_path / "kb", DOCS)
    config = _config(tmp_path / "kb")
    first = build_index(config, text_embedder=HashEmbedder())
    write_synthetic_catalog(tmp_path / "kb", [SyntheticDoc(key="late", texts=["A late note about seals."])], seed=1)
    monkeypatch.setattr(TextEmbedder, "from_settings", classmethod(lambda cls, settings, **_: HashEmbedder()))
    result = refresh_index(config)  # the compaction embeds the new chunk's contextual text
    assert result.action == "compacted" and "contextual" in result.detail and result.generation != first.generation_id


def test_context_only_in_the_lexical_index_embeds_nothing(tmp_path):
    write_synthetic_catalog(tmp_path / "kb", DOCS)
    embedder = CountingEmbedder()
    both = build_index(_config(tmp_path / "kb", "index.switch_after_build=false"), text_embedder=embedder)
    lexical = build_index(_config(tmp_path / "kb", "index.contextual_in=lexical"), text_embedder=CountingEmbedder())
    dense = build_index(_config(tmp_path / "kb", "index.contextual_in=dense"), text_embedder=CountingEmbedder())
    assert "in" not in both.spec["contextual"] and lexical.spec["contextual"]["in"] == "lexical"
    assert len({both.generation_id, lexical.generation_id, dense.generation_id}) == 3
    assert lexical.stats["contextual"]["texts_embedded"] == 0 and lexical.stats["contextual"]["texts_cached"] == 0
    assert dense.stats["contextual"]["texts_cached"] == 7 and dense.stats["contextual"]["texts_embedded"] == 0
