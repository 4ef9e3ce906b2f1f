"""The naive reference retriever: windows and overlap, per-page cutting, RRF, its search on
real bm25s and a real (tiny) embedder, and that ``run_eval`` runs and reports it."""

from __future__ import annotations

import pytest

from kb_ray.embedding.text import TextEmbedder
from kb_ray.embedding.tiny import build_tiny_text_model
from kb_ray.eval.naive import (
    NaiveRetriever,
    NaiveRetrieverError,
    Window,
    embed_cached,
    gold_units,
    label_by_gold,
    make_windows,
    page_ranges,
    rrf_fuse,
    window_bounds,
)
from kb_ray.eval.report import compare_to_naive, render_markdown
from kb_ray.eval.resolve import GoldSpan


def test_windows_are_800_chars_overlapping_by_100_and_cover_the_text():
    bounds = window_bounds(0, 2000)
    assert bounds == [(0, 800), (700, 1500), (1400, 2000)]
    assert all(b[0] - a[0] == 700 and a[1] - b[0] == 100 for a, b in zip(bounds, bounds[1:]))
    assert window_bounds(10, 310) == [(10, 310)]
    assert window_bounds(0, 1500) == [(0, 800), (700, 1500)]  # no window that lies inside the previous one
    assert window_bounds(5, 5) == []


@pytest.mark.parametrize("size, overlap", [(0, 0), (100, 100), (100, -1)])
def test_bad_window_sizes_are_refused(size, overlap):
    with pytest.raises(NaiveRetrieverError, match="overlap"):
        window_bounds(0, 1000, size=size, overlap=overlap)


def test_paginated_text_is_cut_per_page_and_other_text_per_document():
    elements = [(0, 50, 1), (52, 900, 1), (905, 1700, 2), (1702, 1800, 3)]
    assert page_ranges(1800, elements) == [(1, 0, 905), (2, 905, 1702), (3, 1702, 1800)]
    assert page_ranges(1200, [(0, 100, None), (101, 1200, None)]) == [(None, 0, 1200)]
    text = "x" * 1800
    windows = make_windows("v1", text, elements)
    assert [(w.page, w.start, w.end) for w in windows] == [
        (1, 0, 800), (1, 700, 905), (2, 905, 1702), (3, 1702, 1800)]
    assert all(w.window_id == f"naive:v1:{w.start}" for w in windows)


def test_blank_windows_are_dropped():
    windows = make_windows("v1", "a" * 10 + " " * 2000, [])
    assert [(w.start, w.end) for w in windows] == [(0, 800)]


def test_rrf_adds_reciprocal_ranks_with_k_60():
    fused = rrf_fuse([7, 3, 5], [3, 9], k=60)
    assert [row for row, _ in fused] == [3, 7, 9, 5]
    assert fused[0][1] == pytest.approx(1 / 62 + 1 / 61)


@pytest.fixture(scope="module")
def tiny_embedder(tmp_path_factory) -> TextEmbedder:
    return TextEmbedder(model_path=build_tiny_text_model(tmp_path_factory.mktemp("tiny")), model_id="tiny")


def _retriever(embedder) -> tuple[NaiveRetriever, dict[str, str]]:
    texts = {"a": "the pump seal kit " * 60 + "zeolite filter cartridge" + " water" * 200,
             "b": "dog and cat notes " * 80}
    windows = [w for vid, text in texts.items() for w in make_windows(vid, text, [])]
    return NaiveRetriever(windows, texts, embedder), texts


def test_lexical_search_finds_the_window_with_the_rare_words_and_relevance_is_overlap(tiny_embedder):
    retriever, texts = _retriever(tiny_embedder)
    start = texts["a"].index("zeolite")
    hits = retriever.search("zeolite cartridge", k=3, mode="naive-lexical")
    assert hits and all(texts[h["version_id"]][slice(*h["spans"][0])].count("zeolite") for h in hits)
    gold = [GoldSpan("a.txt", "a", start, start + len("zeolite filter"), None, "exact")]
    relevant = retriever.relevant(gold)
    assert hits[0]["chunk_id"] in relevant
    assert relevant == {w.window_id for w in retriever.windows if w.version_id == "a" and w.start <= start < w.end}


def test_dense_and_hybrid_return_k_hits_with_both_scores(tiny_embedder):
    retriever, _ = _retriever(tiny_embedder)
    dense = retriever.search("dog notes", k=4, mode="naive-dense")
    hybrid = retriever.search("zeolite", k=4, mode="naive-hybrid")
    assert len(dense) == 4 and [h["score"] for h in dense] == sorted((h["score"] for h in dense), reverse=True)
    assert len(hybrid) == 4 and hybrid[0]["scores"]["lexical"] is not None
    with pytest.raises(NaiveRetrieverError, match="unknown naive mode"):
        retriever.search("x", k=1, mode="naive-page")


def test_an_empty_corpus_is_a_clear_error(tiny_embedder):
    with pytest.raises(NaiveRetrieverError, match="no windows"):
        NaiveRetriever([], {}, tiny_embedder)
    assert Window("w", "v", 0, 1, None).page is None


def _mode(r1: float, mrr: float) -> dict:
    metrics = {"recall@1": r1, "recall@5": 0.9, "recall@10": 0.95, "mrr": mrr, "ndcg@10": 0.8}
    return {"available": True, "metrics": metrics}


def test_a_kb_ray_mode_below_naive_is_marked():
    modes = {"dense": _mode(0.5, 0.6), "hybrid+rerank": _mode(0.7, 0.8), "lexical": _mode(0.4, 0.5),
             "naive-dense": _mode(0.55, 0.58), "naive-hybrid": _mode(0.6, 0.7)}
    compared = compare_to_naive(modes)
    assert compared["dense"]["loses"] == ["recall@1"] and compared["hybrid+rerank"]["loses"] == []
    assert compared["hybrid+rerank"]["naive"] == "naive-hybrid" and "lexical" not in compared
    summary = {"dataset": "d", "split": "test", "generation": "g", "k": 20, "span_k": 5, "modes": {},
               "quotes": {"resolved": 0, "whitespace_normalized": [], "ambiguous": [], "no_chunk_covers": []},
               "vs_naive": compared}
    markdown = render_markdown(summary)
    assert "**LOSES: recall@1**" in markdown and "split `test`" in markdown


def test_run_eval_runs_and_reports_the_naive_reference(eval_summary_with_naive):
    summary = eval_summary_with_naive
    assert set(summary["modes"]) == {"lexical", "naive-lexical"}
    naive = summary["modes"]["naive-lexical"]
    assert naive["available"] and naive["answerable"] == summary["modes"]["lexical"]["answerable"]
    assert 0.0 < naive["metrics"]["recall@10"] <= 1.0
    assert summary["vs_naive"]["lexical"]["naive"] == "naive-lexical"
    assert "kb-ray vs the naive reference" in render_markdown(summary)


def test_windows_covering_the_same_quotes_count_once_and_a_second_one_is_a_duplicate():
    gold = [GoldSpan("a.txt", "a", 720, 760, None, "exact"), GoldSpan("a.txt", "a", 1900, 1950, None, "exact")]
    hits = [{"chunk_id": f"naive:a:{s}", "version_id": "a", "spans": [(s, e)]}
            for s, e in [(700, 1500), (0, 800), (2100, 2900), (1400, 2200)]]
    assert [h["chunk_id"] for h in label_by_gold(hits, gold)] == ["gold:0", "dup:naive:a:0", "naive:a:2100", "gold:1"]
    windows = make_windows("a", "x" * 3000, [])
    assert gold_units(gold, windows) == {"gold:0", "gold:1"}
    both = [GoldSpan("a.txt", "a", 10, 20, None, "exact"), GoldSpan("a.txt", "a", 300, 330, None, "exact")]
    assert gold_units(both, windows) == {"gold:0,1"}  # two quotes in one window: one unit, as in one chunk
    assert gold_units([GoldSpan("a.txt", "b", 0, 5, None, "exact")], windows) == set()


def test_window_vectors_are_cached_by_text_and_reused(tiny_embedder, tmp_path):
    import numpy as np

    first = ["pump seal kit", "dog and cat", "pump seal kit"]
    vectors = embed_cached(tiny_embedder, first, cache_dir=tmp_path)
    np.testing.assert_allclose(vectors, tiny_embedder.embed_texts(first), rtol=1e-5, atol=1e-6)
    (cache,) = tmp_path.glob("naive-*.npz")
    assert len(np.load(cache)["keys"]) == 2  # one vector per distinct text
    again = embed_cached(tiny_embedder, ["dog and cat", "water filter"], cache_dir=tmp_path)
    assert len(np.load(cache)["keys"]) == 3
    np.testing.assert_allclose(again[0], vectors[1], rtol=1e-6)
