"""Eval metrics and the gate on hand-made inputs."""

from __future__ import annotations

import math

import pytest

from kb_ray.eval.gate import GateError, gate_failures, load_thresholds
from kb_ray.eval.metrics import (
    all_quotes_found,
    best_threshold,
    distribution,
    quote_matches,
    ranking_metrics,
    span_scores,
    token_offsets,
    tokens_in,
)


def test_ranking_metrics_by_hand():
    qrels = {"q1": {"a"}, "q2": {"b", "c"}, "none": set()}
    run = {"q1": ["x", "a", "y"], "q2": ["b", "x", "c"], "none": ["a"]}
    per = ranking_metrics(qrels, run)
    assert set(per) == {"q1", "q2"}  # a query without relevant chunks is not ranked
    assert per["q1"]["recall@1"] == 0 and per["q1"]["recall@5"] == 1 and per["q1"]["mrr"] == 0.5
    assert per["q1"]["ndcg@10"] == pytest.approx(1 / math.log2(3))
    assert per["q2"]["recall@1"] == 0.5 and per["q2"]["recall@20"] == 1 and per["q2"]["mrr"] == 1
    assert per["q2"]["ndcg@10"] == pytest.approx((1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3)))


def test_rank_order_not_ids_decides_and_misses_score_zero():
    per = ranking_metrics({"q": {"a"}, "empty": {"a"}, "absent": {"a"}, "wrong": {"a"}},
                          {"q": ["z", "b", "a", "a"], "empty": [], "wrong": ["b", "c"]})
    assert per["q"]["mrr"] == pytest.approx(1 / 3)  # duplicates dropped, order kept
    for qid in ("empty", "absent", "wrong"):  # must fail: no relevant chunk retrieved
        assert per[qid] == dict.fromkeys(per[qid], 0.0)


def test_all_quotes_found_needs_every_quote_in_the_top_k():
    quotes = {0: [("v", 10, 20)], 1: [("w", 500, 520)]}  # two passages in two documents
    first_only = [{"version_id": "v", "spans": [(0, 100)]}] + [{"version_id": "x", "spans": [(0, 9)]}] * 9
    second_at_7 = first_only[:6] + [{"version_id": "w", "spans": [(400, 510)]}] + first_only[7:]
    # any-hit recall would call the first list a hit at rank 1; all@k must not
    assert all_quotes_found(first_only, quotes) == {"all@5": 0.0, "all@10": 0.0, "all@20": 0.0}
    assert all_quotes_found(second_at_7, quotes) == {"all@5": 0.0, "all@10": 1.0, "all@20": 1.0}
    same_offsets_other_doc = [{"version_id": "v", "spans": [(0, 100), (500, 520)]}]
    assert all_quotes_found(same_offsets_other_doc, quotes)["all@5"] == 0.0  # offsets match, version does not
    touching = [{"version_id": "v", "spans": [(20, 30)]}, {"version_id": "w", "spans": [(490, 501)]}]
    assert all_quotes_found(touching, quotes)["all@5"] == 0.0  # [20, 30) only touches [10, 20)
    ambiguous = {0: [("v", 10, 20), ("v", 300, 310)], 1: [("w", 500, 520)]}
    both = [{"version_id": "w", "spans": [(510, 515)]}, {"version_id": "v", "spans": [(305, 306)]}]
    assert all_quotes_found(both, ambiguous)["all@5"] == 1.0  # any occurrence of a quote counts
    assert all_quotes_found([], quotes)["all@20"] == 0.0 and all_quotes_found(both, {}) == {}


def test_tokens_and_span_scores():
    text = "alpha beta gamma delta epsilon"
    offsets = {"v": token_offsets(text), "w": token_offsets(text)}
    assert tokens_in(offsets["v"], [(7, 8)]) == {1}  # a partial overlap counts the token
    gold = {"v": [(6, 16)]}  # "beta gamma"
    scores = span_scores({"v": [(11, 30)]}, gold, offsets)  # "gamma delta epsilon"
    assert scores == pytest.approx({"span_precision": 1 / 3, "span_recall": 1 / 2, "span_iou": 1 / 4})
    assert span_scores({"v": [(0, 30)]}, gold, offsets)["span_recall"] == 1
    miss = span_scores({"w": [(6, 16)]}, gold, offsets)  # same text, other version: no overlap
    assert miss == {"span_precision": 0.0, "span_recall": 0.0, "span_iou": 0.0}
    assert span_scores({}, gold, offsets)["span_precision"] == 0.0


def test_quote_matches_canonical_text_at_spans():
    canonical = "Header row\nrow one\nrow two"
    assert quote_matches({"quote": "Header row\nrow two", "spans": [(0, 10), (19, 26)]}, canonical)
    assert not quote_matches({"quote": "Header row row two", "spans": [(0, 10), (19, 26)]}, canonical)
    assert not quote_matches({"quote": "row one", "spans": [(11, 17)]}, canonical)


def test_distribution_and_threshold():
    assert distribution([3.0, 1.0, 2.0]) == {"n": 3, "min": 1.0, "median": 2.0, "max": 3.0}
    assert distribution([])["median"] is None
    assert best_threshold([0.9, 0.8, 0.7], [0.2, 0.5]) == {"threshold": 0.7, "accuracy": 1.0}
    assert best_threshold([0.5], [0.9])["accuracy"] == 0.5  # inseparable: best is all-answer or all-abstain
    assert best_threshold([0.5], [])["threshold"] is None


def _summary(recall: float, quote_ok: float = 1.0) -> dict:
    return {"modes": {"hybrid": {"available": True, "metrics": {"recall@5": recall, "mrr": 0.7},
                                 "citations": {"quote_ok": quote_ok}},
                      "page": {"available": False, "note": "not available"}}}


def test_gate_passes_at_threshold_and_fails_on_a_drop(tmp_path):
    thresholds = {"mode": "hybrid", "minimums": {"recall@5": 0.9, "quote_ok": 1.0}}
    assert gate_failures(_summary(0.9), thresholds) == []
    assert gate_failures(_summary(0.85), thresholds) == ["hybrid recall@5 = 0.85 is below the threshold 0.9"]
    assert len(gate_failures(_summary(0.95, quote_ok=0.99), thresholds)) == 1
    assert "not evaluated" in gate_failures(_summary(0.9), {"mode": "page", "minimums": {}})[0]
    with pytest.raises(GateError, match="unknown metric 'recall@3'"):
        gate_failures(_summary(0.9), {"mode": "hybrid", "minimums": {"recall@3": 0.5}})
    bad = tmp_path / "t.json"
    bad.write_text('{"minimums": {}}')
    with pytest.raises(GateError, match="needs a 'mode'"):
        load_thresholds(bad)


def test_the_gate_over_the_other_kinds_sees_a_regression_a_new_kind_would_hide():
    def summary(factoid_recall: float) -> dict:
        by_kind = {"factoid": {"queries": 3, "recall@1": factoid_recall}, "table": {"queries": 1, "recall@1": 1.0},
                   "multi-hop": {"queries": 4, "recall@1": 0.5}}
        return {"modes": {"hybrid": {"available": True, "metrics": {"recall@1": 0.6}, "citations": {},
                                     "by_kind": by_kind}}}

    thresholds = {"mode": "hybrid", "minimums": {"recall@1": 0.55},
                  "minimums_without_kinds": {"kinds": ["multi-hop"], "minimums": {"recall@1": 0.7}}}
    assert gate_failures(summary(0.6), thresholds) == []  # (3 * 0.6 + 1.0) / 4 = 0.7
    assert gate_failures(summary(0.5), thresholds) == [
        "hybrid recall@1 without multi-hop = 0.625 is below the threshold 0.7"]
    with pytest.raises(GateError, match="per-kind table does not have"):
        gate_failures(summary(0.6), {**thresholds, "minimums_without_kinds": {"kinds": [], "minimums": {"x": 1}}})
