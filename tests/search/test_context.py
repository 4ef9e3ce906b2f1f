"""Context around a hit (kb_ray/search/context.py): neighbours of the same section, bounded."""

from __future__ import annotations

import pytest

from kb_ray.search.context import hit_context

SECTION = ["Guide", "Install"]


def _chunks(n=6, size=100, other_section_at=None):
    rows = {}
    for i in range(n):
        path = ["Guide", "Other"] if i == other_section_at else SECTION
        rows[("v1", i)] = {"chunk_id": f"c{i}", "ordinal": i, "text": " ".join(f"w{i}" for _ in range(size // 3)),
                           "heading_path": path}
    return lambda version_id, ordinal: rows.get((version_id, ordinal))


@pytest.mark.parametrize("budget", [0, 1, 5, 40, 99, 150, 250, 1000])
def test_context_never_exceeds_its_budget(budget):
    context = hit_context(version_id="v1", ordinal=2, heading_path=SECTION, context_chars=budget,
                          neighbour=_chunks())
    texts = [c["text"] for c in context["before"] + context["after"]]
    assert sum(map(len, texts)) == context["chars"] <= budget
    assert all(c["chunk_id"] != "c2" for c in context["before"] + context["after"])


def test_neighbours_alternate_after_then_before_in_reading_order():
    context = hit_context(version_id="v1", ordinal=2, heading_path=SECTION, context_chars=10_000, neighbour=_chunks())
    assert [c["ordinal"] for c in context["before"]] == [0, 1]
    assert [c["ordinal"] for c in context["after"]] == [3, 4, 5]
    assert not any(c["truncated"] for c in context["before"] + context["after"])


def test_a_cut_neighbour_is_cut_at_a_word_on_its_far_side():
    context = hit_context(version_id="v1", ordinal=2, heading_path=SECTION, context_chars=150, neighbour=_chunks())
    after, before = context["after"][0], context["before"][-1]
    assert not after["truncated"] and before["truncated"]
    assert before["text"].startswith("w1") and not before["text"].startswith(" ")


def test_context_stops_at_another_section():
    context = hit_context(version_id="v1", ordinal=2, heading_path=SECTION, context_chars=10_000,
                          neighbour=_chunks(other_section_at=4))
    assert [c["ordinal"] for c in context["after"]] == [3]
