"""Evidence inside a hit: the shortest verbatim passage of the chunk that best supports the query.

Pure (no Ray, no index). A chunk's text is ``"\\n".join(canonical[s:e] for s, e in spans)``,
so a passage found inside one of those pieces maps back to exactly one canonical span and
``evidence.quote == canonical[start:end]`` holds by construction.

Passages are windows of 1..``max_sentences`` consecutive sentences of one piece. Sentences
come from a regex segmenter (a line break always ends a sentence: list items, table rows
and headings are their own sentences; ``.!?`` ends one before a capital, digit or quote
unless the word before is a known abbreviation or an initial). A window is scored by
query-term coverage (distinct content words of the query found in it) and, when vectors
are given, by its cosine to the query; a longer window must beat a shorter one by
``WINDOW_MARGIN`` to win, so the shortest good passage is kept.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

Span = tuple[int, int]
MAX_SENTENCES = 3
MAX_PASSAGE_CHARS = 700
LEXICAL_WEIGHT = 2.0  # coverage weight next to the cosine: on the realdocs dev split 2.0 kept overlap (0.771) with shorter passages than 1.0
WINDOW_MARGIN = 0.03  # score a window of n+1 sentences needs above the best n-sentence window inside it
_BOUNDARY = re.compile(r"[.!?][\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])|\n+")
_WORD = re.compile(r"\w+")
_ABBREVIATIONS = frozenset(
    "e.g i.e etc vs cf al fig figs no nos eq eqs ch sec vol pp approx dr mr mrs ms prof st jr sr inc ltd co "
    "resp min max ref refs art dept est".split())
STOPWORDS = frozenset(
    "a an and are as at be by can do does for from has have how i in is it its of on or that the this to "
    "was what when where which who why will with you your my me we our they their there these those not "
    "if then than so into about should would could may might must shall any all some my is are".split())


@dataclass(frozen=True)
class Passage:
    """One candidate window: its place in the chunk text and in the canonical text."""

    start: int  # offset in the chunk text
    end: int
    canonical: Span  # the same characters in the version's canonical text
    sentences: int


def sentence_bounds(text: str) -> list[Span]:
    """Half-open spans of the sentences of ``text``, stripped of surrounding whitespace."""
    bounds, start = [], 0
    for match in _BOUNDARY.finditer(text):
        if match.group(0)[0] in ".!?" and _is_abbreviation(text, match.start()):
            continue
        cut = match.start() + len(match.group(0).rstrip())
        bounds.append((start, cut))
        start = match.end()
    bounds.append((start, len(text)))
    return [s for s in (_strip(text, a, b) for a, b in bounds) if s is not None]


def _is_abbreviation(text: str, dot: int) -> bool:
    word = re.search(r"([\w.]+)$", text[:dot])
    if word is None:
        return False
    token = word.group(1).lower().rstrip(".")
    return token in _ABBREVIATIONS or (len(token) == 1 and token.isalpha())


def _strip(text: str, start: int, end: int) -> Span | None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if end > start else None


def candidate_passages(text: str, spans: Sequence[Span], *, max_sentences: int = MAX_SENTENCES,
                       max_chars: int = MAX_PASSAGE_CHARS) -> list[Passage]:
    """Every window of 1..``max_sentences`` sentences within one piece of the chunk text."""
    passages: list[Passage] = []
    offset = 0
    for start, end in spans:
        piece = text[offset: offset + end - start]
        sentences = sentence_bounds(piece)
        for i in range(len(sentences)):
            for n in range(1, max_sentences + 1):
                if i + n > len(sentences):
                    break
                a, b = sentences[i][0], sentences[i + n - 1][1]
                if n > 1 and b - a > max_chars:
                    break
                passages.append(Passage(offset + a, offset + b, (start + a, start + b), n))
        offset += end - start + 1  # the "\n" that joins pieces
    return passages


def query_terms(query: str) -> set[str]:
    """Distinct content words of the query (lower-cased, stopwords dropped; all words if none left)."""
    words = [w.lower() for w in _WORD.findall(query)]
    content = {w for w in words if w not in STOPWORDS}
    return content or set(words)


def _stem(word: str) -> str:
    for suffix in ("ing", "es", "ed", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def coverage(terms: set[str], text: str) -> float:
    """Share of ``terms`` found in ``text`` (light suffix stemming on both sides)."""
    if not terms:
        return 0.0
    found = {_stem(w.lower()) for w in _WORD.findall(text)}
    return sum(_stem(t) in found for t in terms) / len(terms)


def window_coverage(terms: set[str], text: str, passages: Sequence[Passage]) -> np.ndarray:
    """``coverage(terms, text[p.start:p.end])`` of every passage, with ``text`` tokenized once:
    a window starts and ends at sentence bounds, so no word crosses its edges."""
    if not terms:
        return np.zeros(len(passages))
    wanted = {_stem(t) for t in terms}
    words = [(m.start(), stem) for m in _WORD.finditer(text) if (stem := _stem(m.group(0).lower())) in wanted]
    starts = [start for start, _ in words]
    stems = [_stem(t) for t in terms]
    out = np.empty(len(passages), dtype=np.float64)
    for n, p in enumerate(passages):
        found = {stem for _, stem in words[bisect_left(starts, p.start):bisect_left(starts, p.end)]}
        out[n] = sum(stem in found for stem in stems) / len(terms)
    return out


def best_passage(query: str, text: str, passages: list[Passage], *, cosines: np.ndarray | None = None,
                 lexical_weight: float = LEXICAL_WEIGHT, dense_weight: float = 1.0) -> tuple[int, dict[str, float]]:
    """Index of the best passage and its signals (``coverage``, ``cosine`` when given)."""
    cover = window_coverage(query_terms(query), text, passages)
    score = lexical_weight * cover
    if cosines is not None:
        score = score + dense_weight * np.asarray(cosines, dtype=np.float64)
    size = np.array([p.sentences for p in passages])
    adjusted = score - WINDOW_MARGIN * (size - 1)
    best = int(np.lexsort(([p.end - p.start for p in passages], -adjusted))[0])
    signals = {"coverage": float(cover[best])}
    if cosines is not None:
        signals["cosine"] = float(cosines[best])
    return best, signals


def passage_regions(span: Span, element_regions: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Regions (page + bbox) of the element parts that overlap the canonical ``span``: a
    region with a character sub-span (a PDF line) counts by that sub-span, else by its element's."""
    start, end = span
    out: list[dict[str, Any]] = []
    for region in element_regions:
        if region["start"] is not None and region["start"] < end and start < region["end"]:
            item = {"page": region["page"], "bbox": [round(region[c], 4) for c in ("x0", "y0", "x1", "y1")]}
            if item not in out:
                out.append(item)
    return out


Embed = Callable[[list[str]], np.ndarray]


@dataclass(frozen=True)
class ChunkText:
    """What evidence selection needs of one hit: its text, spans and element regions."""

    text: str
    spans: tuple[Span, ...]
    element_regions: tuple[dict[str, Any], ...] = ()
    fallback_regions: tuple[dict[str, Any], ...] = ()


StoredCosines = tuple[Sequence[Span], np.ndarray]  # the chunk-text span each stored vector stands for, its cosine


def select_evidence(query: str, chunks: Sequence[ChunkText], *,
                    stored: Sequence[StoredCosines | None] | None = None) -> list[dict[str, Any] | None]:
    """Per chunk its ``evidence`` (``quote``, ``spans`` = one canonical span, ``pages``,
    ``regions``, ``signals``), or ``None`` when it has nothing to quote. With ``stored`` (per
    chunk, the cosines to the query of the vectors the index holds for it and the spans they
    stand for), a window's cosine is read from them (:func:`stored_window_cosines`): nothing is
    embedded at query time."""
    candidates = [candidate_passages(chunk.text, chunk.spans) for chunk in chunks]
    out: list[dict[str, Any] | None] = []
    for n, (chunk, found) in enumerate(zip(chunks, candidates)):
        if not found:
            out.append(None)
            continue
        given = stored[n] if stored is not None else None
        cos = stored_window_cosines(found, *given) if given is not None else None
        index, signals = best_passage(query, chunk.text, found, cosines=cos)
        out.append(evidence_dict(chunk, found[index], signals))
    return out


def stored_window_cosines(passages: Sequence[Passage], spans: Sequence[Span],
                          cosines: np.ndarray) -> np.ndarray | None:
    """Each window's cosine: the mean of the cosines of the stored passage vectors it overlaps,
    weighted by the characters it shares with each. A chunk stored as one vector (no
    passages) gives every window that vector's cosine."""
    parts = [(a, b, float(c)) for (a, b), c in zip(spans, cosines) if b > a]
    if not parts:
        return None
    first, rest = parts[0], parts[1:]
    use = rest if rest and all(first[0] <= a and b <= first[1] for a, b, _ in rest) else parts  # the chunk's own vector gives way to its passages'
    values = np.array([c for _, _, c in use])
    out = np.empty(len(passages), dtype=np.float64)
    for n, p in enumerate(passages):
        weights = np.array([max(0, min(b, p.end) - max(a, p.start)) for a, b, _ in use], dtype=np.float64)
        total = weights.sum()
        out[n] = float(weights @ values / total) if total > 0 else float(values.max())
    return out


def window_cosines(chunks: Sequence[ChunkText], candidates: list[list[Passage]], embed: Embed,
                   query_vector: np.ndarray) -> list[np.ndarray]:
    """Cosine to the query of every window, each distinct sentence embedded once and a window's
    vector the normalized mean of its sentences' (the query-time evidence before #38, kept for
    benchmarks/evidence_select.py and benchmarks/answer_support.py to compare against)."""
    sentences: dict[tuple[int, int, int], int] = {}  # (chunk, start, end) -> row
    texts: list[str] = []
    for n, (chunk, found) in enumerate(zip(chunks, candidates)):
        for p in found:
            if p.sentences == 1 and (n, p.start, p.end) not in sentences:
                sentences[(n, p.start, p.end)] = len(texts)
                texts.append(chunk.text[p.start:p.end])
    vectors = np.asarray(embed(texts), dtype=np.float32)
    out = []
    for n, found in enumerate(candidates):
        singles = sorted((a, b) for (m, a, b) in sentences if m == n)
        rows = []
        for p in found:
            members = [sentences[(n, a, b)] for a, b in singles if p.start <= a and b <= p.end]
            mean = vectors[members].mean(axis=0)
            rows.append(float(mean @ query_vector / max(np.linalg.norm(mean), 1e-9)))
        out.append(np.array(rows))
    return out


def evidence_dict(chunk: ChunkText, passage: Passage, signals: dict[str, float]) -> dict[str, Any]:
    regions = passage_regions(passage.canonical, chunk.element_regions) if chunk.element_regions else []
    regions = regions or [dict(r) for r in chunk.fallback_regions]
    return {"quote": chunk.text[passage.start:passage.end], "spans": [passage.canonical],
            "pages": sorted({r["page"] for r in regions}), "regions": regions,
            "signals": {k: round(v, 4) for k, v in signals.items()}}
