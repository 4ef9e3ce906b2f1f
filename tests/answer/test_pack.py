"""The evidence pack: evidence first, generated hits and repeats skipped, budgets held."""

from __future__ import annotations

from kb_ray.answer.pack import evidence_pack
from kb_ray.config import AnswerSettings


def hit(n: int, text: str, *, evidence: str | None = None, generated: bool = False, version: str | None = None,
        context: dict | None = None) -> dict:
    out = {"chunk_id": f"c{n}", "document_id": f"d{n}", "version_id": version or f"v{n}", "title": f"T{n}",
           "uri": f"file:///doc{n}.pdf", "text": text, "quote": None if generated else text, "generated": generated,
           "spans": [(100, 100 + len(text))], "pages": [2, 3], "confidence": 0.9 - n / 100, "heading_path": ["H"],
           "regions": [{"page": 2, "bbox": [0.1, 0.1, 0.9, 0.2]}, {"page": 3, "bbox": [0.1, 0.1, 0.9, 0.2]}],
           "evidence": None}
    if evidence is not None:
        start = 100 + text.index(evidence)
        out["evidence"] = {"quote": evidence, "spans": [(start, start + len(evidence))], "pages": [3],
                           "regions": [{"page": 3, "bbox": [0.1, 0.1, 0.9, 0.2]}], "signals": {}}
    if context is not None:
        out["context"] = context
    return out


def test_evidence_is_the_passage_and_generated_hits_and_repeats_are_skipped():
    hits = [hit(1, "Intro words. The seal kit is AF-SK-118. More.", evidence="The seal kit is AF-SK-118."),
            hit(2, "a figure described by a model", generated=True),
            hit(3, "Intro words. The seal kit is AF-SK-118. More.", evidence="The seal kit is AF-SK-118."),  # same text
            hit(4, "Pressure stays below 8 bar.")]
    passages = evidence_pack(hits=hits, settings=AnswerSettings())
    assert [(p.n, p.chunk_id) for p in passages] == [(1, "c1"), (2, "c4")]
    first = passages[0]
    assert (first.quote, first.spans, first.pages) == ("The seal kit is AF-SK-118.", [(113, 139)], [3])
    assert first.citation()["spans"] == [[113, 139]] and "confidence" not in first.citation()
    assert passages[1].quote == "Pressure stays below 8 bar." and passages[1].pages == [2, 3]


def test_budgets_bound_the_pack_without_cutting_a_quote():
    long, short = "x " * 150, "short passage"
    hits = [hit(1, "first passage"), hit(2, long.strip()), hit(3, short), hit(4, "fourth"), hit(5, "fifth")]
    passages = evidence_pack(hits=hits, settings=AnswerSettings(max_chars=200, max_passages=3))
    assert [p.chunk_id for p in passages] == ["c1", "c3", "c4"]  # the 299-character quote did not fit
    assert sum(len(p.quote) for p in passages) <= 200


def test_section_context_rides_along_only_when_asked():
    context = {"before": [{"text": "Earlier text."}], "after": [{"text": "Later text."}], "chars": 24}
    hits = [hit(1, "The passage.", context=context)]
    assert evidence_pack(hits=hits, settings=AnswerSettings()).pop().context is None
    passage = evidence_pack(hits=hits, settings=AnswerSettings(context_chars=400)).pop()
    assert passage.context == "Earlier text.\nThe passage.\nLater text." and passage.quote == "The passage."
    assert "context" not in passage.citation()
