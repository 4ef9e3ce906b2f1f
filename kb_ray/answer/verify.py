"""Verification: every answer sentence checked against only the passages it cites.

``split_sentences`` cuts at ``.!?`` followed by white space (so decimals, version numbers
and ``e.g.`` stay inside their sentence; a word before the dot that is a known
abbreviation or an initial does not end one, nor does a dot followed by a lower-case
word) and at every line break; ``[n]`` markers written after the full stop belong to the
sentence before them. ``citation_numbers`` reads ``[1]``, ``[1, 2]`` and ``[1][2]``.

The support of a sentence is its content-word coverage by the cited passages (the share of
its distinct content words, lightly stemmed, that occur in them); with ``embed``, for a
sentence not found verbatim in a cited passage, it is the mean of that coverage and the best
cosine between the sentence and one cited passage (a verbatim sentence embeds nothing). A
number in the sentence that no cited passage contains sets the support to 0: a wrong
figure is the claim most worth catching. The measurement behind the default threshold is
in docs/answers.md.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from kb_ray.answer.types import Passage, Sentence
from kb_ray.search.evidence import coverage, query_terms

Embed = Callable[[list[str]], np.ndarray]
_MARKERS = r"(?:\s*\[\d+(?:\s*,\s*\d+)*\])+"
_END = re.compile(r"[.!?]+[\"')\]]*(" + _MARKERS + r")?(?=\s|$)")
_MARKER = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")
_MARKER_WITH_SPACE = re.compile(r"\s*\[\d+(?:\s*,\s*\d+)*\]")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_ABBREVIATIONS = frozenset(
    "e.g i.e etc vs cf al fig figs no nos eq eqs ch sec vol pp approx dr mr mrs ms prof st jr sr inc ltd co "
    "resp min max ref refs art dept est".split())


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text``, stripped, each with the ``[n]`` markers that close it."""
    out: list[str] = []
    for line in text.splitlines():
        start = 0
        for match in _END.finditer(line):
            if not match.group(1) and not _ends_sentence(line, match.start(), match.end()):
                continue
            out.append(line[start:match.end()])
            start = match.end()
        out.append(line[start:])
    return [s.strip() for s in out if s.strip() and not _only_markers(s)]


def _ends_sentence(line: str, dot: int, end: int) -> bool:
    if line[:dot].rstrip().endswith("]") and _MARKER.search(line[:dot].rstrip()[-12:]):
        return True  # "... [2]." : a marker before the full stop closes the sentence
    following = line[end:].lstrip()
    if following[:1].islower():
        return False
    if line[dot] != ".":
        return True
    word = re.search(r"([\w.]+)$", line[:dot])
    token = word.group(1).lower().rstrip(".") if word else ""
    return not (token in _ABBREVIATIONS or (len(token) == 1 and token.isalpha()))


def _only_markers(text: str) -> bool:
    return not _MARKER.sub("", text).strip(" .,;:")


def citation_numbers(sentence: str) -> list[int]:
    """The passage numbers cited in ``sentence``, in order of first mention."""
    numbers: list[int] = []
    for match in _MARKER.finditer(sentence):
        for part in match.group(1).split(","):
            if int(part) not in numbers:
                numbers.append(int(part))
    return numbers


def claim_text(sentence: str) -> str:
    """The sentence without its ``[n]`` markers."""
    return " ".join(_MARKER_WITH_SPACE.sub("", sentence).split())


def lexical_support(claim: str, quotes: list[str]) -> float:
    """Share of the claim's distinct content words found in the quotes (0 if it has a number they lack)."""
    joined = "\n".join(quotes)
    if not numbers_found(claim, joined):
        return 0.0
    return coverage(query_terms(claim), joined)


def numbers_found(claim: str, text: str) -> bool:
    """Whether every number of ``claim`` occurs in ``text`` (thousands separators ignored)."""
    have = {_number_key(n) for n in _NUMBER.findall(text)}
    return all(_number_key(n) in have for n in _NUMBER.findall(claim))


def _number_key(number: str) -> str:
    plain = re.sub(r",(?=\d{3}\b)", "", number).rstrip(".,")
    try:
        return repr(float(plain.replace(",", ".")))
    except ValueError:
        return plain


def verify_text(text: str, passages: list[Passage], *, threshold: float,
                embed: Embed | None = None) -> list[Sentence]:
    """One :class:`Sentence` per sentence of ``text``, scored against only its cited passages."""
    given = {p.n: p for p in passages}
    sentences = [(s, citation_numbers(s), claim_text(s)) for s in split_sentences(text)]
    lexical = [lexical_support(claim, [given[n].quote for n in cited if n in given]) for _, cited, claim in sentences]
    dense = _dense_support(sentences, given, embed) if embed is not None else [None] * len(sentences)
    out = []
    for (sentence, cited, _), lex, cos in zip(sentences, lexical, dense):
        support = lex if cos is None or lex == 0.0 else (lex + max(cos, 0.0)) / 2
        out.append(_judge(sentence, cited, given, round(float(support), 4), threshold))
    return out


def _judge(sentence: str, cited: list[int], given: dict[int, Passage], support: float, threshold: float) -> Sentence:
    if not cited:
        return Sentence(sentence, cited, False, 0.0, "no_citation")
    if any(n not in given for n in cited):
        return Sentence(sentence, cited, False, support, "unknown_citation")
    if support < threshold:
        return Sentence(sentence, cited, False, support, "unsupported")
    return Sentence(sentence, cited, True, support, None)


def _dense_support(sentences: list[tuple[str, list[int], str]], given: dict[int, Passage],
                   embed: Embed) -> list[float | None]:
    """Best cosine between each claim and one of its cited passages (one embedding batch).
    A claim found verbatim in a cited passage gets None (its coverage decides): it is the
    passage's own text, so nothing indexed is embedded again (an extractive answer embeds
    nothing at all)."""
    def verbatim(claim: str, cited: list[int]) -> bool:
        folded = " ".join(claim.split())
        return any(folded in " ".join(given[n].quote.split()) for n in cited if n in given)

    checked = [any(n in given for n in cited) and not verbatim(claim, cited) for _, cited, claim in sentences]
    claims = [claim for (_, _, claim), check in zip(sentences, checked) if check]
    if not claims:
        return [None] * len(sentences)
    cited_ns = sorted({n for (_, cited, _), check in zip(sentences, checked) if check for n in cited if n in given})
    vectors = _normalized(embed(claims + [given[n].quote for n in cited_ns]))
    claim_rows, passage_rows = iter(vectors[: len(claims)]), dict(zip(cited_ns, vectors[len(claims):]))
    out: list[float | None] = []
    for (_, cited, _), check in zip(sentences, checked):
        row = next(claim_rows) if check else None
        out.append(None if row is None else max(float(row @ passage_rows[n]) for n in cited if n in given))
    return out


def _normalized(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)
