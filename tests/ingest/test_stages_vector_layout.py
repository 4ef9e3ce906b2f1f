"""EmbedWriteStage under each vector layout (``index.vector_layout``, kb_ray/index/vector_layout.py):
which vectors it computes and what that took (texts, late-pooled chunks, tokens), no Ray."""

from __future__ import annotations

import shutil

import pytest

from kb_ray.config import IndexSettings
from kb_ray.index.vector_layout import VectorLayout
from kb_ray.ingest.rows import concat_ipc, from_ipc
from kb_ray.ingest.stages.embed_write import EmbedWriteStage
from kb_ray.ingest.stages.fetch import FetchStage
from kb_ray.ingest.stages.parse import ParseStage
from tests.conftest import GOLDEN_SOURCES
from tests.ingest.stage_inputs import pipeline_fp, source_table, stage_config, storage

MAX_CHARS = IndexSettings().passage_chars


@pytest.fixture(scope="module")
def parsed(tmp_path_factory):
    """The parse stage's output for two golden documents with long chunks, and its chunks."""
    tmp_path = tmp_path_factory.mktemp("parsed")
    for name in ("long_report.pdf", "guide.md"):
        shutil.copy(GOLDEN_SOURCES / name, tmp_path / name)
    config, _ = stage_config(tmp_path)
    table = source_table([tmp_path / "long_report.pdf", tmp_path / "guide.md"])
    for stage in (FetchStage(storage_options=config.storage_options, pipeline_fp=pipeline_fp(config)),
                  ParseStage(**storage(config), parse=config.parse, chunking=config.chunking, run_id="run_t")):
        table, _ = stage.run(table)
    return table, concat_ipc(table.column("chunks_ipc").to_pylist(), "chunks")


def _embed(tmp_path, parsed, layout: VectorLayout):
    config, _ = stage_config(tmp_path)
    stage = EmbedWriteStage(**storage(config), embedding=config.embedding, vector_layout=layout)
    out, stats = stage.run(parsed[0])
    chunks = parsed[1]
    plans = [layout.chunk(t, p) for t, p in zip(chunks.column("text").to_pylist(),
                                                chunks.column("heading_path").to_pylist())]
    embedded = set(from_ipc(out.column("embeddings_ipc")[0].as_py()).column("embed_text_sha").to_pylist())
    return plans, embedded, stats.counts, stage.embedder


@pytest.fixture(scope="module")
def plain(tmp_path_factory, parsed):
    return _embed(tmp_path_factory.mktemp("plain"), parsed, VectorLayout("chunk_and_passages", MAX_CHARS))


def test_today_embeds_each_chunk_text_and_each_passage_text(plain):
    plans, embedded, counts, embedder = plain
    texts = {key: text for plan in plans for key, text in plan.texts.items()}
    assert embedded == set(texts) and any(plan.passages for plan in plans)
    assert {plan.chunk_key for plan in plans} <= embedded
    assert counts["embed_texts"] == len(texts) == counts["embeddings_computed"] and counts["late_chunks"] == 0
    assert counts["embed_tokens"] == embedder.count_tokens(list(texts.values()))


def test_passages_only_embeds_exactly_the_passages_and_no_text_of_a_chunk_with_passages(tmp_path, parsed, plain):
    plans, embedded, counts, embedder = _embed(tmp_path, parsed, VectorLayout("passages", MAX_CHARS))
    with_passages = [plan for plan in plans if plan.passages]
    assert with_passages and all(plan.chunk_key not in plan.keys for plan in with_passages)
    passage_texts = {key: text for plan in with_passages for key, text in plan.texts.items()}
    single = {plan.chunk_key for plan in plans if not plan.passages}
    assert embedded == set(passage_texts) | single
    assert not embedded & {plan.chunk_key for plan in with_passages} - single
    assert counts["embed_texts"] == len(embedded) and counts["late_chunks"] == 0
    assert counts["embed_tokens"] < plain[2]["embed_tokens"]  # the long chunks' texts are not embedded again
    assert embedded < plain[1]  # the same keys as today's: a catalog ingested today holds them


def test_late_pools_the_chunk_and_its_passages_from_one_pass_and_keys_them_apart(tmp_path, parsed, plain):
    layout = VectorLayout("late", MAX_CHARS, overlap_tokens=16)
    plans, embedded, counts, embedder = _embed(tmp_path, parsed, layout)
    with_passages = [plan for plan in plans if plan.passages]
    assert embedded == {key for plan in plans for key in plan.keys}
    assert not embedded & plain[1] - {plan.chunk_key for plan in plans if not plan.passages}  # no text's key
    assert counts["late_chunks"] == len({plan.chunk_key for plan in with_passages})
    assert counts["late_vectors"] == len({key for plan in with_passages for key in plan.keys})
    assert counts["embed_texts"] == len({plan.chunk_key for plan in plans if not plan.passages})
    assert counts["embed_tokens"] < plain[2]["embed_tokens"]
    assert 1.0 <= counts["embed_tokens"] / counts["text_tokens"] < 1.3  # about each token once
    assert counts["passage_texts"] == sum(plan.passages for plan in plans)
