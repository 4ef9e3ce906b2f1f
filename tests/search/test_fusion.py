"""RRF: order invariance and deterministic ties (property-based)."""

from __future__ import annotations

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
