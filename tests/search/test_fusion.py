"""Fusion: RRF and convex combinations; order invariance and deterministic ties (property-based)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kb_ray.search.fusion import rrf

ids = st.lists(st.sampled_from([f"ch_{i}" for i in range(12)]), unique=True, max_size=10)
lists = st.dictionaries(st.sampled_from(["dense", "lexical", "pages"]), ids, max_size=3)
weights = st.dictionaries(st.sampled_from(["dense", "lexical", "pages"]), st.floats(0.1, 3.0), max_size=3)


@given(lists, weights, st.randoms())
def test_rrf_is_invariant_to_the_order_of_input_lists(ranked, weight_map, random):
    names = list(ranked)
    random.shuffle(names)
    shuffled = {name: ranked[name] for name in names}
    assert rrf(shuffled, k=60, weights=weight_map) == rrf(ranked, k=60, weights=weight_map)


@given(lists)
def test_rrf_sorts_by_score_then_id(ranked):
    fused = rrf(ranked)
    assert fused == sorted(fused, key=lambda pair: (-pair[1], pair[0]))
    assert {item for _, items in ranked.items() for item in items} == {item for item, _ in fused}


def test_rrf_ties_are_broken_by_id_and_weights_apply():
    assert rrf({"a": ["x", "y"], "b": ["y", "x"]}) == [("x", 1 / 61 + 1 / 62), ("y", 1 / 61 + 1 / 62)]
    fused = rrf({"a": ["x"], "b": ["y"]}, weights={"b": 2.0})
    assert [item for item, _ in fused] == ["y", "x"]
    assert rrf({"a": ["z", "y"]}, k=0) == [("z", 1.0), ("y", 0.5)]


# -- convex combination of normalized scores -------------------------------------------------

from kb_ray.search.fusion import convex, fuse  # noqa: E402

scored = st.lists(st.tuples(st.sampled_from([f"ch_{i}" for i in range(12)]), st.floats(-5, 50)), max_size=10)
scored_lists = st.dictionaries(st.sampled_from(["dense", "lexical", "pages"]), scored, max_size=3)


@given(scored_lists, weights, st.sampled_from(["minmax", "zscore"]), st.randoms())
def test_convex_is_invariant_to_the_order_of_input_lists(lists_, weight_map, normalization, random):
    names = list(lists_)
    random.shuffle(names)
    shuffled = {name: lists_[name] for name in names}
    assert convex(shuffled, normalization=normalization, weights=weight_map) == \
        convex(lists_, normalization=normalization, weights=weight_map)


def test_minmax_rescales_each_list_and_weights_apply():
    lists_ = {"dense": [("a", 0.9), ("b", 0.5), ("c", 0.1)], "lexical": [("c", 30.0), ("a", 10.0)]}
    fused = dict(convex(lists_, weights={"dense": 0.5, "lexical": 0.5}))
    assert fused == {"a": 0.5 * 1.0 + 0.5 * 0.0, "b": 0.5 * 0.5, "c": 0.5 * 0.0 + 0.5 * 1.0}
    assert [item for item, _ in convex(lists_, weights={"dense": 0.2, "lexical": 0.8})] == ["c", "a", "b"]


def test_zscore_gives_a_missing_document_the_lists_lowest_value():
    lists_ = {"dense": [("a", 3.0), ("b", 1.0)], "lexical": [("b", 5.0), ("c", 5.0)]}
    fused = dict(convex(lists_, normalization="zscore"))
    assert fused["a"] == 1.0 + 0.0 and fused["b"] == -1.0 + 0.0 and fused["c"] == -1.0 + 0.0  # lexical: equal, z = 0


def test_ties_follow_the_tie_keys_then_the_id():
    lists_ = {"a": ["x", "y"], "b": ["y", "x"]}
    assert [i for i, _ in rrf(lists_, tie_keys={"x": "2", "y": "1"})] == ["y", "x"]
    assert [i for i, _ in rrf(lists_, tie_keys={"x": "1", "y": "1"})] == ["x", "y"]
    assert [i for i, _ in convex({"d": [("x", 1.0), ("y", 1.0)]}, tie_keys={"x": "b", "y": "a"})] == ["y", "x"]


def test_fuse_dispatches_and_rejects_unknown_methods():
    lists_ = {"dense": [("a", 0.9), ("b", 0.5)], "lexical": [("b", 4.0)]}
    assert fuse(lists_, method="rrf", rrf_k=60) == rrf({"dense": ["a", "b"], "lexical": ["b"]}, k=60)
    assert fuse(lists_, method="minmax") == convex(lists_)
    with pytest.raises(ValueError, match="unknown fusion"):
        fuse(lists_, method="borda")
    with pytest.raises(ValueError, match="normalization"):
        convex(lists_, normalization="rank")


# -- RRF ties broken by a retriever's rank (search.rrf_tie_break) ----------------------------

def test_rrf_tie_break_orders_equal_scores_by_that_retrievers_rank():
    lists_ = {"dense": ["x", "y", "z"], "lexical": ["y", "q", "x"]}  # x: ranks (1, 3), y: (2, 1): no tie
    tied = {"dense": ["x", "m", "y"], "lexical": ["y", "n", "x"]}  # x: dense 1 + lexical 3 == y: lexical 1 + dense 3
    keys = {"x": "0", "y": "1"}  # the content hash alone puts x first
    assert [i for i, _ in rrf(tied, tie_keys=keys)][:2] == ["x", "y"]
    assert [i for i, _ in rrf(tied, tie_keys=keys, tie_break=("lexical",))][:2] == ["y", "x"]
    assert [i for i, _ in rrf(tied, tie_keys=keys, tie_break=("dense",))][:2] == ["x", "y"]
    assert rrf(lists_, tie_break=("lexical",)) == rrf(lists_)  # no ties: the same ranking


def test_rrf_tie_break_puts_a_missing_item_last_and_ignores_an_absent_retriever():
    tied = {"dense": ["a", "b"], "page": ["b", "a"]}  # a and b tie; neither is in a lexical list
    assert [i for i, _ in rrf(tied, tie_keys={"a": "1", "b": "0"}, tie_break=("lexical",))] == ["b", "a"]
    only_dense = {"dense": ["a"], "lexical": ["c"], "page": ["c", "a"]}  # a: 1/61 + 1/62 == c
    assert [i for i, _ in rrf(only_dense, tie_break=("lexical",))] == ["c", "a"]


def test_rrf_tie_break_treats_scores_equal_to_12_decimals_as_tied():
    three = {"a": ["x", "y"], "b": ["y", "z", "x"], "c": ["z", "x", "y"]}  # x and y: ranks 1, 2, 3 in some order
    fused = dict(rrf(three))
    assert round(fused["x"], 12) == round(fused["y"], 12)
    assert [i for i, _ in rrf(three, tie_keys={"x": "0", "y": "1"}, tie_break=("b",))][:2] == ["y", "x"]
    assert [i for i, _ in rrf(three, tie_keys={"x": "0", "y": "1"}, tie_break=("c",))][:2] == ["x", "y"]


def test_fuse_passes_the_tie_break_to_rrf_only():
    tied = {"dense": [("x", 0.9), ("y", 0.1)], "lexical": [("y", 9.0), ("x", 1.0)]}
    assert [i for i, _ in fuse(tied, tie_keys={"x": "0", "y": "1"}, tie_break=("lexical",))] == ["y", "x"]
    assert [i for i, _ in fuse(tied, tie_keys={"x": "0", "y": "1"})] == ["x", "y"]
    assert fuse(tied, method="minmax", tie_break=("lexical",)) == convex(tied)


def test_the_rrf_tie_break_setting_defaults_to_the_content_order_and_is_checked():
    from kb_ray.config import load_config
    from kb_ray.errors import ConfigError
    from kb_ray.search.fusion import tie_break_retrievers

    assert load_config().search.rrf_tie_break == "content" and tie_break_retrievers("content") == ()
    chosen = load_config(overrides=["search.rrf_tie_break=lexical"]).search.rrf_tie_break
    assert tie_break_retrievers(chosen) == ("lexical",)
    with pytest.raises(ConfigError):
        load_config(overrides=["search.rrf_tie_break=bm25"])
