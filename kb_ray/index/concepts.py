"""Concepts of a text: key terms, short noun phrases and identifiers, normalized (docs/graph.md).

A measured simple extractor (no NLP model: none ships on PyPI without a download), RAKE-like:
the text is cut into compound tokens with the index analyzer's pattern
(kb_ray/index/analyzer.py: ``os.path.join``, ``--verbose``, ``AF-SK-118``, ``\\section``), and

* a token that is an identifier — joined by ``.``, ``-``, ``::``, ``/`` or ``_``, led by ``-``
  or ``\\``, or camelCase — is one concept of kind ``identifier``, lowercased, unstemmed;
* the other tokens form runs of content words, broken by stopwords, numbers, identifiers and
  any punctuation between two tokens; each word of a run of at least :data:`MIN_WORD` letters is
  a ``term`` (Snowball-stemmed with PyStemmer) and each two adjacent words of a run a ``phrase``
  (``"mechan seal"``): the noun phrases of technical text are mostly such runs.

The key (``concept_id = "cpt_" + sha256(key)[:32]``) is the concept's identity across chunks,
versions and documents; the same extractor runs on queries (kb_ray/search/graph.py).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from kb_ray.index.analyzer import COMPOUND, STOPWORDS_EN, _stem

EXTRACTOR_VERSION = 1
MIN_WORD = 3
_CAMEL = re.compile(r"[a-z][A-Z]|[A-Z]{2}[a-z]")
_GAP_BREAK = re.compile(r"[^\s]")  # anything but whitespace between two tokens ends a run
KINDS = ("term", "phrase", "identifier")


@dataclass(frozen=True)
class Concept:
    key: str
    label: str  # the surface form it was found as
    kind: str


def concept_id(key: str) -> str:
    return "cpt_" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


class ConceptExtractor:
    """Text → its concepts, in order of appearance, repeats included."""

    def __init__(self, *, phrases: bool = True) -> None:
        self.phrases = phrases

    @property
    def fingerprint(self) -> str:
        spec = f"v{EXTRACTOR_VERSION}:min_word={MIN_WORD}:phrases={self.phrases}:snowball-en:{COMPOUND.pattern}"
        return "concepts:" + hashlib.sha256(spec.encode("utf-8")).hexdigest()[:16]

    def concepts(self, text: str) -> list[Concept]:
        out: list[Concept] = []
        run: list[tuple[str, str]] = []  # (stem, surface) of the current run of content words
        end = 0
        for match in COMPOUND.finditer(text or ""):
            token = match.group(0)
            if _GAP_BREAK.search(text, end, match.start()):
                run = []
            end = match.end()
            if _is_identifier(token):
                out.append(Concept(token.lower(), token, "identifier"))
                run = []
                continue
            word = token.lower()
            if len(word) < MIN_WORD or word in STOPWORDS_EN or not word.isalpha():
                run = []
                continue
            stem = _stem(word)
            out.append(Concept(stem, word, "term"))
            if self.phrases and run:
                out.append(Concept(f"{run[-1][0]} {stem}", f"{run[-1][1]} {word}", "phrase"))
            run.append((stem, word))
        return out

    def counts(self, text: str) -> dict[str, tuple[int, Concept]]:
        """key → (occurrences, the first occurrence)."""
        found: dict[str, tuple[int, Concept]] = {}
        for concept in self.concepts(text):
            count, first = found.get(concept.key, (0, concept))
            found[concept.key] = (count + 1, first)
        return found

    def query_keys(self, query: str) -> Counter:
        return Counter(concept.key for concept in self.concepts(query))


def _is_identifier(token: str) -> bool:
    return not token.isalnum() or bool(_CAMEL.search(token))


def version_concepts(version_id: str, chunks: Iterator[tuple[str, str]], extractor: ConceptExtractor,
                     ) -> tuple[list[dict], list[dict]]:
    """``concepts`` and ``mentions`` rows of one version from its ``(chunk_id, text)`` pairs."""
    fp = extractor.fingerprint
    mentions: list[dict] = []
    per_concept: dict[str, dict] = {}
    labels: dict[str, Counter] = {}
    for chunk_id, text in chunks:
        for key, (count, first) in extractor.counts(text).items():
            cid = concept_id(key)
            mentions.append({"version_id": version_id, "chunk_id": chunk_id, "concept_id": cid,
                             "extractor_fp": fp, "count": count})
            row = per_concept.setdefault(cid, {"version_id": version_id, "concept_id": cid, "extractor_fp": fp,
                                               "key": key, "kind": first.kind, "chunks": 0, "mentions": 0})
            row["chunks"] += 1
            row["mentions"] += count
            labels.setdefault(cid, Counter())[first.label] += count
    for cid, row in per_concept.items():
        row["label"] = min(labels[cid].items(), key=lambda item: (-item[1], item[0]))[0]
    return sorted(per_concept.values(), key=lambda r: r["concept_id"]), mentions
