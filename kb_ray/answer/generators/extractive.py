"""The extractive generator: a short answer of verbatim evidence sentences, each cited.

No model is needed. The candidates are the sentences of the packed passages (each passage
is already the retrieval's best evidence window of its hit). A sentence scores

    COVERAGE_WEIGHT * query-word coverage + cosine + CONFIDENCE_WEIGHT * hit confidence

where the cosine is the passage's (its evidence window's cosine to the query, read from the
vectors the index stores, ``Passage.cosine``; none with lexical evidence): nothing is
embedded at answer time (until #38 every sentence was, with the question). The best sentence is kept, then
every other one that scores at least ``KEEP_RATIO`` of it and is not a near-duplicate
(``DUPLICATE_JACCARD`` of content words) of one already kept, up to ``max_sentences``. A
sentence is relevant only if it shares a query word or its cosine reaches ``MIN_COSINE``.
Markdown headings are not candidates (a title restates the question, it does not answer
it). The answer lists passages by hit confidence and, within one passage, sentences in document
order; each sentence carries its ``[n]``. It abstains with the configured refusal when no
passage is given, when the best hit confidence is below the search's ``abstain_below``, or
when no sentence is relevant. ``repair`` drops the flagged sentences and selects again.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import dataclass

from kb_ray.answer.types import AnswerMode, Generation, Passage, Sentence
from kb_ray.answer.verify import claim_text, split_sentences
from kb_ray.config import AnswerSettings
from kb_ray.search.evidence import coverage, query_terms, sentence_bounds

COVERAGE_WEIGHT = 2.0  # as the evidence selector's lexical weight (kb_ray/search/evidence.py)
CONFIDENCE_WEIGHT = 0.5
KEEP_RATIO = 0.8
MIN_COSINE = 0.35
DUPLICATE_JACCARD = 0.7
COMPARE_SENTENCES = 2  # a compare cell is one short statement
_HAS_MARKER = re.compile(r"\[\d+(?:\s*,\s*\d+)*\]")
_CLOSING = re.compile(r"([.!?]+[\"')\]]*)$")


@dataclass(frozen=True)
class Candidate:
    n: int
    position: int  # offset in the passage's quote
    text: str
    confidence: float
    score: float
    relevant: bool


class ExtractiveGenerator:
    """Composes answers from the evidence sentences themselves (see the module docstring)."""

    backend = "extractive"
    model = None

    def __init__(self, settings: AnswerSettings, *, abstain_below: float | None = None) -> None:
        self.max_sentences = settings.max_sentences
        self.refusal = settings.refusal
        self.abstain_below = abstain_below
        parameters = {"backend": self.backend, "max_sentences": self.max_sentences, "coverage": COVERAGE_WEIGHT,
                      "confidence": CONFIDENCE_WEIGHT, "keep": KEEP_RATIO, "min_cosine": MIN_COSINE,
                      "duplicate": DUPLICATE_JACCARD, "compare_sentences": COMPARE_SENTENCES, "summary": "lead", "dense": "stored passage cosine", "abstain_below": abstain_below,
                      "refusal": self.refusal}
        self.fingerprint = hashlib.sha256(json.dumps(parameters, sort_keys=True).encode()).hexdigest()

    def generate(self, *, question: str, passages: list[Passage], mode: AnswerMode) -> Generation:
        started = time.perf_counter()
        return Generation(text=self._write(question, passages, mode, excluded=set()),
                          seconds=time.perf_counter() - started)

    def repair(self, *, question: str, passages: list[Passage], mode: AnswerMode, answer: str,
               flagged: list[Sentence]) -> Generation:
        started = time.perf_counter()
        excluded = {claim_text(sentence.text) for sentence in flagged}
        return Generation(text=self._write(question, passages, mode, excluded=excluded),
                          seconds=time.perf_counter() - started)

    def _write(self, question: str, passages: list[Passage], mode: AnswerMode, *, excluded: set[str]) -> str:
        """``summary``: the passages' opening sentences (:func:`lead_summary`); ``compare``: as
        ``qa`` but at most COMPARE_SENTENCES and no heading lines; ``qa``: see the module doc."""
        if mode == "summary":
            return lead_summary(passages, max_sentences=self.max_sentences, excluded=excluded) or self.refusal
        if mode == "compare":
            return self._compose(question, passages, excluded=excluded, limit=COMPARE_SENTENCES, headings=False)
        return self._compose(question, passages, excluded=excluded)

    def _compose(self, question: str, passages: list[Passage], *, excluded: set[str], limit: int | None = None,
                 headings: bool = True) -> str:
        if not passages or self._below_threshold(passages):
            return self.refusal
        candidates = [c for c in self.candidates(question, passages) if " ".join(c.text.split()) not in excluded
                      and (headings or not _is_heading(c.text))]
        chosen = self.select(candidates, limit=limit)
        if not chosen:
            return self.refusal
        rank = {p.n: (-(p.confidence or 0.0), p.n) for p in passages}
        chosen.sort(key=lambda c: (rank[c.n], c.position))
        return join_cited([(c.text, c.n) for c in chosen])

    def _below_threshold(self, passages: list[Passage]) -> bool:
        known = [p.confidence for p in passages if p.confidence is not None]
        return self.abstain_below is not None and bool(known) and max(known) < self.abstain_below

    def candidates(self, question: str, passages: list[Passage]) -> list[Candidate]:
        """Every citable sentence of the passages, scored for ``question``."""
        pieces = [(p, position, text) for p in passages for position, text in passage_sentences(p.quote)]
        terms = query_terms(question)
        out = []
        for passage, position, text in pieces:
            cosine, cover = passage.cosine, coverage(terms, text)
            confidence = passage.confidence or 0.0
            score = COVERAGE_WEIGHT * cover + (cosine or 0.0) + CONFIDENCE_WEIGHT * confidence
            relevant = cover > 0 or (cosine is not None and cosine >= MIN_COSINE)
            out.append(Candidate(passage.n, position, text, confidence, score, relevant))
        return out

    def select(self, candidates: list[Candidate], *, limit: int | None = None) -> list[Candidate]:
        """The best relevant sentence, then those close to it that add something new."""
        ranked = sorted((c for c in candidates if c.relevant), key=lambda c: (-c.score, c.n, c.position))
        chosen: list[Candidate] = []
        for candidate in ranked:
            if len(chosen) >= (limit or self.max_sentences) or (chosen and candidate.score < KEEP_RATIO * chosen[0].score):
                break
            if not any(_near_duplicate(candidate.text, kept.text) for kept in chosen):
                chosen.append(candidate)
        return chosen


def passage_sentences(quote: str) -> list[tuple[int, str]]:
    """(offset, text) of the sentences of ``quote`` that verification will read back as one
    sentence each; pieces without a word or holding a ``[n]``-like marker are left out."""
    out = []
    for start, end in sentence_bounds(quote):
        piece = quote[start:end]
        offset = 0
        for sentence in split_sentences(piece):
            offset = piece.find(sentence, offset)
            if re.search(r"\w\w", sentence) and not _HAS_MARKER.search(sentence) and not sentence.startswith("#"):
                out.append((start + offset, sentence))
            offset += len(sentence)
    return out


def join_cited(sentences: list[tuple[str, int]]) -> str:
    """``text [n].`` per sentence (the marker before a closing full stop), one space between
    sentences that end with one and a line break after those that do not."""
    text = ""
    for sentence, n in sentences:
        closing = _CLOSING.search(sentence)
        body, end = (sentence[: closing.start()], closing.group(1)) if closing else (sentence, "")
        cited = f"{body.rstrip()} [{n}]{end}"
        text += ("" if not text else " " if text.endswith((".", "!", "?")) else "\n") + cited
    return text


def _near_duplicate(a: str, b: str) -> bool:
    left, right = query_terms(a), query_terms(b)
    union = left | right
    return bool(union) and len(left & right) / len(union) >= DUPLICATE_JACCARD


def lead_summary(passages: list[Passage], *, max_sentences: int, excluded: set[str]) -> str:
    """Summary mode: the opening sentences of the passages, taken in turn (every passage's
    first, then every passage's second, ...) up to ``max_sentences``, in passage order;
    headings and near-duplicates are skipped. Empty when no passage has a sentence."""
    per_passage = [[(p.n, position, text) for position, text in passage_sentences(p.quote)
                    if not _is_heading(text) and " ".join(text.split()) not in excluded] for p in passages]
    chosen: list[tuple[int, int, str]] = []
    for depth in range(max((len(s) for s in per_passage), default=0)):
        for sentences in per_passage:
            if len(chosen) < max_sentences and depth < len(sentences) and \
                    not any(_near_duplicate(sentences[depth][2], kept[2]) for kept in chosen):
                chosen.append(sentences[depth])
    chosen.sort()
    return join_cited([(text, n) for n, _, text in chosen])


def _is_heading(sentence: str) -> bool:
    return sentence.lstrip().startswith("#")
