"""Responses made of several verified parts (summary sections, compare cells).

Each part is written and verified against its own evidence pack, numbered 1..m; the response
numbers citations once across all parts: :class:`CitationBook` gives each distinct passage
(same version, same spans) one global number and rewrites a part's ``[n]`` markers and
sentence citations to it. A marker a part's pack did not give becomes ``[?]`` (its sentence
stays flagged ``unknown_citation``), so it can never point at another part's passage.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, replace
from typing import Any

from kb_ray.answer.answerer import Answerer, Draft
from kb_ray.answer.types import Passage, Sentence

_MARKER = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")
VERIFICATION_ORDER = ("ok", "repaired", "flagged", "refused")


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
    """The evidence pack of a search for ``query`` in one document; empty when the search
    abstains. ``timings`` keeps the sum over all the parts' searches."""
    own: dict[str, float] = {}
    result, passages = answerer.retrieve(query, k=k, filter={"document_ids": [document_id]}, timings=own)
    for stage, ms in own.items():
        timings[stage] = round(timings.get(stage, 0.0) + ms, 3)
    return [] if result.get("abstain") else passages
