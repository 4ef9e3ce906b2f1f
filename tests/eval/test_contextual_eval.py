"""``kb-ray eval --contextual-generation``: the contextual generation's hybrid search is mode
``contextual``, compared with the naive hybrid reference of the same run."""

from __future__ import annotations

from kb_ray.eval.report import COMPARE, compare_to_naive


def _mode(value: float) -> dict:
    return {"available": True, "metrics": {name: value for name in COMPARE}}


def test_contextual_is_compared_with_naive_hybrid():
    compared = compare_to_naive({"hybrid": _mode(0.7), "contextual": _mode(0.5), "naive-hybrid": _mode(0.6)})
    assert compared["contextual"]["naive"] == "naive-hybrid"
    assert compared["contextual"]["recall@1"] == {"kb_ray": 0.5, "naive": 0.6}
    assert compared["contextual"]["loses"] == ["recall@1", "mrr"] and compared["hybrid"]["loses"] == []
