"""Responses made of several verified parts (summary sections, compare cells).

Each part is written and verified against its own evidence pack, numbered 1..m; the response
numbers citations once across all parts: :class:`CitationBook` gives each distinct passage
(same version, same spans) one global number and rewrites a part's ``[n]`` markers and
sentence citations to it. A marker a part's pack did not give becomes ``[?]`` (its sentence
stays flagged ``unknown_citation``), so it can never point at another part's passage.
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass, replace
from typing import Any

from kb_ray.answer.answerer import Answerer, Draft
from kb_ray.answer.pack import evidence_pack
from kb_ray.answer.types import Passage, Sentence

_MARKER = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")
VERIFICATION_ORDER = ("ok", "repaired", "flagged", "refused")
MIN_TOPIC_COVERAGE = 0.5  # share of a topic's content words a passage must hold when the search abstains


@dataclass
class Part:
    """One verified part with global citation numbers."""

    text: str
    sentences: list[Sentence]
    citations: list[int]
    draft: Draft | None  # None: no evidence, nothing was generated


class CitationBook:
    def __init__(self) -> None:
        self.passages: list[Passage] = []
        self._numbers: dict[tuple[str, tuple[tuple[int, int], ...]], int] = {}

    def number(self, passage: Passage) -> int:
        key = (passage.version_id, tuple(tuple(span) for span in passage.spans))
        if key not in self._numbers:
            self._numbers[key] = len(self.passages) + 1
            self.passages.append(replace(passage, n=self._numbers[key]))
        return self._numbers[key]

    def part(self, draft: Draft, passages: list[Passage]) -> Part:
        """The draft with its citations renumbered; passages are numbered only when cited."""
        if draft.abstained:
            return Part(draft.text, [], [], draft)
        given = {p.n: p for p in passages}
        cited = {n for s in draft.sentences for n in s.citations if n in given}
        local = {n: self.number(given[n]) for n in sorted(cited)}
        sentences = [replace(s, text=_renumber(s.text, local), citations=[local[n] for n in s.citations if n in local])
                     for s in draft.sentences]
        numbers = sorted(set(local.values()))
        return Part(_renumber(draft.text, local), sentences, numbers, draft)

    def citations(self, numbers: set[int]) -> list[dict[str, Any]]:
        return [p.citation() for p in self.passages if p.n in numbers]


def _renumber(text: str, local: dict[int, int]) -> str:
    def swap(match: re.Match) -> str:
        parts = [local.get(int(n)) for n in match.group(1).split(",")]
        return "[" + ", ".join(str(n) if n else "?" for n in parts) + "]"

    return _MARKER.sub(swap, text)


def combined_fields(parts: list[Part], book: CitationBook, timings: dict[str, float]) -> dict[str, Any]:
    """The response fields every mode shares, over all parts (``Answerer.respond``'s shape)."""
    drafts = [p.draft for p in parts if p.draft is not None]
    usage = {"prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0}
    for draft in drafts:
        for key in usage:
            usage[key] += draft.usage[key]
        for stage, ms in draft.timings_ms.items():
            timings[stage] = round(timings.get(stage, 0.0) + ms, 3)
    usage["cost_usd"] = round(usage["cost_usd"], 8)
    answered = [d for d in drafts if not d.abstained]
    verification = max((d.verification for d in answered), key=VERIFICATION_ORDER.index, default="refused")
    cited = {n for p in parts for n in p.citations}
    out = {"abstained": not answered, "sentences": [asdict(s) for p in parts for s in p.sentences],
           "citations": book.citations(cited), "timings_ms": timings, "usage": usage,
           "repaired": any(d.repaired for d in drafts), "verification": verification}
    errors = sorted({d.error for d in drafts if d.error})
    if errors:
        out["error"] = errors[0]
    return out


def search_within(answerer: Answerer, query: str, document_id: str, timings: dict[str, float], *,
                  k: int | None = None) -> list[Passage]:
    """The evidence pack of a search for ``query`` in one document. When the search abstains
    (its confidence model is fitted on questions, and a section title or a dimension is a
    two- or three-word topic, which it scores low), only passages whose evidence holds at
    least MIN_TOPIC_COVERAGE of the query's content words stay. ``timings`` keeps the sum
    over all the parts' searches."""
    started = time.perf_counter()
    result = answerer.search({"query": query, "k": k or answerer.settings.k, "mode": "hybrid",
                              "filter": {"document_ids": [document_id]}, "rerank": None,
                              "context_chars": answerer.settings.context_chars, "evidence": answerer.settings.evidence})
    timings["search"] = round(timings.get("search", 0.0) + (time.perf_counter() - started) * 1000, 3)
    hits = result.get("hits") or []
    if result.get("abstain"):
        hits = [hit for hit in hits if _signals(hit).get("coverage", 0.0) >= MIN_TOPIC_COVERAGE]
    return evidence_pack(hits=[_beyond_heading(hit) for hit in hits], settings=answerer.settings)


def _signals(hit: dict[str, Any]) -> dict[str, float]:
    return (hit.get("evidence") or {}).get("signals") or {}


def _beyond_heading(hit: dict[str, Any]) -> dict[str, Any]:
    """A hit whose evidence is only a heading line cites its whole chunk instead: a topic's
    words are often its section's heading, and a heading states nothing."""
    quote = (hit.get("evidence") or {}).get("quote") or ""
    if quote.lstrip().startswith("#") and "\n" not in quote.strip():
        return {**hit, "evidence": None}
    return hit
