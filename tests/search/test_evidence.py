"""Evidence selection (kb_ray/search/evidence.py): segmentation, passage choice, spans, regions."""

from __future__ import annotations

import random

import numpy as np
import pytest

from kb_ray.search.evidence import (
    ChunkText,
    candidate_passages,
    coverage,
    passage_regions,
    query_terms,
    select_evidence,
    sentence_bounds,
    stored_window_cosines,
    window_coverage,
)


def _sentences(text: str) -> list[str]:
    return [text[a:b] for a, b in sentence_bounds(text)]


def test_sentences_split_at_terminal_punctuation_and_line_breaks():
    text = "The pump is rated at 8 bar. Do not exceed it!\n- Check the seal.\n| a | b |\nIs it primed? Yes."
    assert _sentences(text) == ["The pump is rated at 8 bar.", "Do not exceed it!", "- Check the seal.",
                                "| a | b |", "Is it primed?", "Yes."]


@pytest.mark.parametrize("text", [
    "Use a torque wrench, e.g. Model 7, for the bolts.",
    "See Fig. 3 for the layout.",
    "Written by J. Smith in 2024.",
    "The value is 3.5 bar at rest.",
    "It costs $12.00 per day.",
])
def test_abbreviations_initials_and_decimals_do_not_end_a_sentence(text):
    assert _sentences(text) == [text]


def test_every_passage_maps_to_the_same_canonical_characters():
    rng = random.Random(7)
    words = "pump seal bar pressure valve. Check it! Why? e.g. Fig. 2 rated 3.5 kW\n- item".split(" ")
    for _ in range(200):
        pieces, spans, canonical = [], [], "# Title\n\n"
        for _ in range(rng.randint(1, 3)):
            piece = " ".join(rng.choice(words) for _ in range(rng.randint(1, 40))).strip() or "x"
            canonical += "| h |\n"
            spans.append((len(canonical), len(canonical) + len(piece)))
            canonical += piece + "\n\n"
            pieces.append(piece)
        text = "\n".join(pieces)
        for passage in candidate_passages(text, spans):
            start, end = passage.canonical
            assert text[passage.start:passage.end] == canonical[start:end]
            assert any(s <= start and end <= e for s, e in spans)


def test_the_passage_with_the_query_words_wins_and_stays_short():
    text = ("The AF-220 ships with a two-year warranty. The mechanical seal kit has part number AF-SK-118. "
            "Replace it every 4,000 hours. Store spare parts in a dry place.")
    found = select_evidence("mechanical seal kit part number", [ChunkText(text, ((100, 100 + len(text)),))])[0]
    assert found["quote"] == "The mechanical seal kit has part number AF-SK-118."
    assert found["spans"] == [(100 + text.index("The mechanical"), 100 + text.index("118.") + 4)]
    assert found["signals"]["coverage"] == 1.0


def test_stored_cosines_decide_when_no_word_matches():
    text = "Alpha sentence here. Beta sentence there. Gamma sentence elsewhere."
    chunk = ChunkText(text, ((0, len(text)),))
    beta = (text.index("Beta"), text.index("there.") + 6)
    stored = ([(0, beta[0] - 1), beta, (beta[1] + 1, len(text))], np.array([0.1, 0.9, 0.2]))
    found = select_evidence("zzz", [chunk], stored=[stored])[0]
    assert found["quote"] == "Beta sentence there."
    assert found["signals"]["cosine"] == 0.9


def test_a_window_over_two_stored_passages_reads_their_cosines_by_shared_characters():
    text = "One two three four. Five six seven eight."
    passages = candidate_passages(text, ((0, len(text)),))
    both = next(p for p in passages if p.sentences == 2)
    first = next(p for p in passages if p.sentences == 1 and p.start == 0)
    cut = text.index("Five")
    cosines = stored_window_cosines([both, first], [(0, cut - 1), (cut, len(text))], np.array([0.2, 0.8]))
    shares = np.array([cut - 1, len(text) - cut], dtype=float)
    assert cosines[0] == pytest.approx(float(shares @ [0.2, 0.8] / shares.sum()))
    assert cosines[1] == pytest.approx(0.2)


def test_the_chunks_own_vector_gives_way_to_its_passages_and_stands_alone_otherwise():
    text = "One two three four. Five six seven eight."
    passages = candidate_passages(text, ((0, len(text)),))
    cut = text.index("Five")
    with_own = stored_window_cosines(passages, [(0, len(text)), (0, cut - 1), (cut, len(text))],
                                     np.array([0.99, 0.2, 0.8]))
    assert max(with_own) == pytest.approx(0.8)  # the whole-chunk 0.99 is not mixed in
    alone = stored_window_cosines(passages, [(0, len(text))], np.array([0.5]))
    assert list(alone) == [0.5] * len(passages)
    assert stored_window_cosines(passages, [(0, 0)], np.array([0.5])) is None


def test_regions_are_those_of_the_lines_the_passage_overlaps():
    lines = [{"start": 0, "end": 30, "page": 2, "x0": 0.1, "y0": 0.10, "x1": 0.9, "y1": 0.12},
             {"start": 31, "end": 60, "page": 2, "x0": 0.1, "y0": 0.12, "x1": 0.9, "y1": 0.14},
             {"start": 61, "end": 90, "page": 3, "x0": 0.1, "y0": 0.05, "x1": 0.9, "y1": 0.07}]
    assert passage_regions((35, 50), lines) == [{"page": 2, "bbox": [0.1, 0.12, 0.9, 0.14]}]
    assert [r["page"] for r in passage_regions((20, 70), lines)] == [2, 2, 3]


def test_evidence_regions_lie_within_the_chunk_regions_and_fall_back_to_them():
    text = "First sentence about pumps. Second sentence about seals."
    element = [{"start": 0, "end": 27, "page": 1, "x0": 0.1, "y0": 0.1, "x1": 0.5, "y1": 0.2},
               {"start": 28, "end": len(text), "page": 1, "x0": 0.1, "y0": 0.2, "x1": 0.5, "y1": 0.3}]
    fallback = ({"page": 1, "bbox": [0.1, 0.1, 0.5, 0.3]},)
    with_lines = ChunkText(text, ((0, len(text)),), tuple(element), fallback)
    without = ChunkText(text, ((0, len(text)),), (), fallback)
    a, b = select_evidence("seals", [with_lines, without])
    assert a["regions"] == [{"page": 1, "bbox": [0.1, 0.2, 0.5, 0.3]}] and a["pages"] == [1]
    assert b["regions"] == list(fallback)


def test_an_empty_chunk_has_no_evidence():
    assert select_evidence("pump", [ChunkText("   ", ((0, 3),))]) == [None]


def test_query_terms_drop_stopwords_unless_nothing_is_left():
    assert query_terms("What is the seal kit part number?") == {"seal", "kit", "part", "number"}
    assert query_terms("what is it") == {"what", "is", "it"}
    assert coverage({"seals", "valve"}, "one seal") == 0.5


def test_window_coverage_equals_the_coverage_of_each_window_text():
    """The one-pass tokenization (the default search's evidence cost, #12) matches scoring each
    window's text on its own: no word crosses a window's edge."""
    rng = random.Random(7)
    vocab = ["pump", "pumps", "seal", "sealing", "kit", "AF-SK-118", "e.g.", "Dr.", "rated", "bar", "(see", "it)"]
    for _ in range(50):
        pieces = [" ".join(rng.choice(vocab) + rng.choice(["", ".", "!", "?", ".\n", ","]) for _ in range(12))
                  for _ in range(rng.randint(1, 3))]
        text = "\n".join(pieces)
        spans, offset = [], 100
        for piece in pieces:
            spans.append((offset, offset + len(piece)))
            offset += len(piece) + 5
        passages = candidate_passages(text, spans)
        for query in ("seal kit pumps", "the rated bar", "AF-SK-118", ""):
            terms = query_terms(query)
            expected = [coverage(terms, text[p.start:p.end]) for p in passages]
            assert window_coverage(terms, text, passages).tolist() == expected
