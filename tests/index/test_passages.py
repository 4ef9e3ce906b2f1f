"""Passage vectors (kb_ray/index/passages.py): the windows, the multi-vector dense shard, and
a golden build whose dense scores are each chunk's best vector, recomputed here."""

from __future__ import annotations

import numpy as np
import pytest

from kb_ray import ids
from kb_ray.catalog import DeltaCatalog
from kb_ray.embedding.text import format_embed_text
from kb_ray.index import build_index
from kb_ray.index.dense import FaissShard, MultiVectorShard, build_faiss_index
from kb_ray.index.passages import passage_spans, passage_texts, passage_texts_by_sha, shard_passages
from kb_ray.index.vector_layout import VectorLayout
from kb_ray.ingest.reembed import embed_missing
from kb_ray.search import HybridSearcher
from kb_ray.search.evidence import sentence_bounds
from tests.index_fixtures import copy_kb, golden_config

SENTENCES = [f"Sentence number {i} talks about topic {i} at some length here." for i in range(30)]
TEXT = " ".join(SENTENCES)


def test_windows_are_whole_sentences_in_order_without_overlap_and_within_the_budget():
    windows = passage_spans(TEXT, max_chars=200)
    assert len(windows) > 1
    starts = {a for a, _ in sentence_bounds(TEXT)}
    ends = {b for _, b in sentence_bounds(TEXT)}
    assert all(a in starts and b in ends and b - a <= 200 for a, b in windows)
    assert all(prev[1] < nxt[0] for prev, nxt in zip(windows, windows[1:]))
    assert windows[0][0] == 0 and windows[-1][1] == len(TEXT)
    covered = " ".join(TEXT[a:b] for a, b in windows)
    assert covered == TEXT  # every sentence in exactly one window


def test_a_sentence_longer_than_the_budget_is_cut_at_whitespace_into_windows_within_it():
    long = "Long " + "word " * 80 + "end."
    text = f"Short one. {long} Another short one."
    spans = passage_spans(text, max_chars=60)
    windows = [text[a:b] for a, b in spans]
    assert all(len(w) <= 60 and w == w.strip() for w in windows)
    assert " ".join(windows).split() == text.split()  # every word once, in order, none cut
    assert windows[0] == "Short one." and windows[-1].endswith("Another short one.")
    assert all(prev[1] < nxt[0] for prev, nxt in zip(spans, spans[1:]))


def test_one_long_run_without_full_stops_gets_windows_and_an_unbroken_word_is_cut_at_the_budget():
    table = " | ".join(f"row {i} | 0x{i:04x}" for i in range(60))  # no sentence end: one "sentence"
    windows = [table[a:b] for a, b in passage_spans(table, max_chars=100)]
    assert len(windows) > 5 and all(len(w) <= 100 for w in windows)
    assert " ".join(windows).split() == table.split()
    word = "x" * 250
    assert [b - a for a, b in passage_spans(word, max_chars=100)] == [100, 100, 50]


@pytest.mark.parametrize("text, max_chars", [(TEXT, 0), ("Two sentences. Both short.", 512), (TEXT, len(TEXT))])
def test_no_passages_when_off_or_the_chunk_is_one_window(text, max_chars):
    assert passage_spans(text, max_chars=max_chars) == []


def test_passage_texts_carry_the_heading_path_as_the_chunk_is_embedded():
    texts = passage_texts(TEXT, ["Guide", "Topics"], max_chars=200)
    first = TEXT[slice(*passage_spans(TEXT, max_chars=200)[0])]
    assert texts[0] == format_embed_text(text=first, heading_path=["Guide", "Topics"])
    assert texts[0] != first and "Topics" in texts[0]


def test_passages_by_sha_are_every_chunks_passages_once_keyed_as_the_embeddings_cache_keys_them():
    short = "One sentence only."
    by_sha = passage_texts_by_sha([TEXT, short, TEXT, None], [["Guide"], ["Guide"], ["Other"], None], max_chars=200)
    expected = passage_texts(TEXT, ["Guide"], max_chars=200) + passage_texts(TEXT, ["Other"], max_chars=200)
    assert sorted(by_sha.values()) == sorted(set(expected)) and len(expected) > 2
    assert all(sha == ids.sha256_text(text) for sha, text in by_sha.items())
    assert passage_texts_by_sha([TEXT], [["Guide"]], max_chars=0) == {}


def test_shard_passages_keep_the_shard_rows_owners_renumbered():
    owners = np.array([0, 0, 2, 3, 3, 5])
    vectors = np.arange(12, dtype=np.float32).reshape(6, 2)
    local_owners, local_vectors = shard_passages((owners, vectors), np.array([2, 3]))
    assert local_owners.tolist() == [0, 1, 1]
    assert local_vectors.tolist() == vectors[[2, 3, 4]].tolist()
    assert len(shard_passages((owners, vectors), np.array([1, 4]))[0]) == 0
    assert shard_passages(None, np.array([0])) is None


def _unit(*values: float) -> np.ndarray:
    vector = np.array(values, np.float32)
    return vector / np.linalg.norm(vector)


def _shard(vectors: list[np.ndarray], owners: list[int]) -> MultiVectorShard:
    return MultiVectorShard(FaissShard(build_faiss_index(np.stack(vectors), "flat"), "flat"), np.array(owners))


def test_a_row_scores_its_best_vector():
    query = _unit(1, 0, 0)
    # rows 0..2 own vectors 0..2; row 2 also owns a passage that matches the query best
    shard = _shard([_unit(0.5, 1, 0), _unit(0.9, 0.1, 0), _unit(0, 0, 1), _unit(1, 0.05, 0)], [0, 1, 2, 2])
    rows, scores = shard.search(query, 3)
    assert rows.tolist() == [2, 1, 0]
    assert scores[0] == pytest.approx(float(_unit(1, 0.05, 0) @ query), abs=1e-6)
    assert scores[2] == pytest.approx(float(_unit(0.5, 1, 0) @ query), abs=1e-6)


def test_a_row_with_many_vectors_does_not_crowd_out_the_k_rows_asked_for():
    query = _unit(1, 0, 0)
    vectors = [_unit(1, 0.01 * i, 0) for i in range(40)] + [_unit(0.2, 1, 0), _unit(0.1, 1, 0)]
    shard = _shard(vectors, [0] * 40 + [1, 2])  # row 0's 40 vectors all beat rows 1 and 2
    shard.depth_factor = 2
    rows, _ = shard.search(query, 3)
    assert rows.tolist() == [0, 1, 2]


def test_the_mask_removes_a_row_with_all_its_vectors():
    query = _unit(1, 0, 0)
    shard = _shard([_unit(0, 1, 0), _unit(0, 0, 1), _unit(1, 0, 0)], [0, 1, 0])
    rows, scores = shard.search(query, 2, np.array([False, True]))
    assert rows.tolist() == [1]
    assert scores[0] == pytest.approx(0.0, abs=1e-6)


def test_golden_dense_scores_are_each_chunks_best_vector(golden_kb, text_embedder):
    manifest = build_index(golden_config(golden_kb))
    assert manifest.spec["passages"]["max_chars"] == 512
    assert manifest.stats["passages"] > 0 and manifest.stats["passages_missing_rows"] == 0
    assert any(shard.dense_owners for shard in manifest.shards)
    searcher = HybridSearcher.open(golden_config(golden_kb), generation_id=manifest.generation_id,
                                   embedder=text_embedder)
    query = "maximum discharge pressure during normal pump operation"
    hits = searcher.search(query, k=10, mode="dense").hits
    query_vector = text_embedder.embed_query(query)
    with_passages = 0
    for hit in hits:
        texts = [format_embed_text(text=hit["text"], heading_path=hit["heading_path"] or [])]
        texts += passage_texts(hit["text"], hit["heading_path"], max_chars=512)
        with_passages += len(texts) > 1
        best = float(np.max(text_embedder.embed_texts(texts) @ query_vector))
        assert hit["scores"]["dense"] == pytest.approx(best, abs=1e-4)
    assert with_passages  # the check covered chunks that own passages


def test_rows_without_their_passage_vectors_keep_the_chunk_vector_until_reembed_fills_them(golden_kb, tmp_path):
    # the golden catalog was ingested with 512-character passages: 300-character ones are not embedded;
    # under chunk_and_passages (the layout of earlier ingests) a row keeps its chunk-text vector meanwhile
    root = copy_kb(golden_kb, tmp_path / "kb")
    legacy = embed_missing(DeltaCatalog.open(root, create=False), embedding=golden_config(root).embedding,
                           layout=VectorLayout("chunk_and_passages", 512))
    assert legacy.embedded > 0  # the default layout (passages) had not embedded the long chunks' own texts
    config = golden_config(root, "index.passage_chars=300", "index.vector_layout=chunk_and_passages")
    manifest = build_index(config)
    assert manifest.stats["passages"] == 0 and manifest.stats["passages_missing_rows"] > 0
    assert not any(shard.dense_owners for shard in manifest.shards)
    assert HybridSearcher.open(config).search("pump seal kit", k=3, mode="dense").hits  # served, chunk vectors only

    report = embed_missing(DeltaCatalog.open(root, create=False), embedding=config.embedding,
                           layout=VectorLayout("chunk_and_passages", 300))
    assert report.passages > 0 and report.embedded == report.passages  # the chunk texts had their vectors
    rebuilt = build_index(config)
    assert rebuilt.stats["passages_missing_rows"] == 0 and rebuilt.stats["passages"] >= report.passages
    assert embed_missing(DeltaCatalog.open(root, create=False), embedding=config.embedding,
                         layout=VectorLayout("chunk_and_passages", 300)).embedded == 0


def test_under_the_default_layout_other_passages_are_refused_until_reembed_embeds_them(golden_kb, tmp_path):
    """index.vector_layout passages (the default): a long chunk's vectors are its passages' alone, so
    a build with another passage size has no vector for it and says so (the fix named), instead of
    indexing the chunk without one; kb-ray reembed with the new settings fills them."""
    from kb_ray.errors import CatalogError

    root = copy_kb(golden_kb, tmp_path / "kb")
    config = golden_config(root, "index.passage_chars=300")
    with pytest.raises(CatalogError, match=r"index.vector_layout passages, index.passage_chars 300.*kb-ray reembed"):
        build_index(config)
    report = embed_missing(DeltaCatalog.open(root, create=False), embedding=config.embedding,
                           layout=VectorLayout.from_settings(config.index))
    assert report.passages > 0
    rebuilt = build_index(config)  # a chunk's first passage vector is its row's own, the others count as passages
    assert rebuilt.stats["passages_missing_rows"] == 0 and 0 < rebuilt.stats["passages"] < report.passages


def test_purge_keeps_the_passage_vectors_of_live_chunks_and_verify_counts_them_referenced(golden_kb, tmp_path):
    from kb_ray.catalog.purge import purge
    from kb_ray.catalog.verify import verify_catalog

    root = copy_kb(golden_kb, tmp_path / "kb")
    catalog = DeltaCatalog.open(root, create=False)
    assert verify_catalog(catalog).ok(strict=True)
    assert verify_catalog(catalog, layout=VectorLayout(max_chars=0)).residue["unreferenced_embeddings"] > 0
    assert purge(catalog).deleted_rows["embeddings"] == 0
    manifest = build_index(golden_config(root))
    assert manifest.stats["passages"] > 0 and manifest.stats["passages_missing_rows"] == 0
