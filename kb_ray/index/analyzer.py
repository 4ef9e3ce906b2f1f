"""``TextAnalyzer``: text → BM25 terms, one analyzer for indexing and for queries.

Lowercases, splits into *compound* tokens (words joined by ``.``, ``-``, ``::`` or ``/``,
optionally led by ``\\``, ``-`` or ``--``: ``os.path.join``, ``--long-option``,
``\\section``, ``v2.1.3``, ``AF-SK-118``, ``/etc/apt/sources.list``), then emits

* ``words``: each part (split further on ``_`` and camelCase), English stopwords dropped,
  parts of one character dropped, Snowball-stemmed (PyStemmer) when ``stem``;
* the compound itself, unstemmed, when it has more than one part or a lead
  (``snake_case``, ``8.4``, ``--verbose``): ``identifiers``.

``terms(text)`` returns both (the body channel); ``exact_terms(text)`` only the compounds
and the numbers (the exact channel: identifiers and figures that stemming and splitting
would blur). Both switches are off by default (``index.lexical_stem``,
``index.lexical_identifiers``): on the realdocs dev split they lowered MRR
(benchmarks/results/eval.md "Lexical / fusion changes").
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache

import bm25s.stopwords

COMPOUND = re.compile(r"(?:\\|--?)?\w+(?:(?:\.|-|::|/)\w+)*")
_PARTS = re.compile(r"[^\W_]+")
_CAMEL = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
STOPWORDS_EN = frozenset(bm25s.stopwords.STOPWORDS_EN)
ANALYZER_VERSION = 1


class TextAnalyzer:
    """Terms of a text; ``stem`` (Snowball English) and ``identifiers`` (keep compounds)."""

    def __init__(self, *, stem: bool = False, identifiers: bool = False) -> None:
        self.stem = stem
        self.identifiers = identifiers

    def spec(self) -> dict:
        return {"version": ANALYZER_VERSION, "stem": self.stem, "identifiers": self.identifiers,
                "stopwords": "bm25s STOPWORDS_EN", "compound": COMPOUND.pattern}

    def terms(self, text: str) -> list[str]:
        out: list[str] = []
        for match in COMPOUND.finditer(text or ""):
            out.extend(_token_terms(match.group(0), self.stem, self.identifiers))
        return out

    def exact_terms(self, text: str) -> list[str]:
        """Compounds and numbers only, lowercased, unstemmed."""
        return [token.lower() for token in (m.group(0) for m in COMPOUND.finditer(text or ""))
                if _is_compound(token) or any(c.isdigit() for c in token)]



@lru_cache(maxsize=500_000)
def _token_terms(token: str, stem: bool, identifiers: bool) -> tuple[str, ...]:
    """The terms of one compound token (cached: a corpus repeats its tokens Zipf-wise)."""
    words = []
    for part in _PARTS.findall(token):
        pieces = _CAMEL.findall(part) if identifiers and _is_camel(part) else [part]
        if identifiers and len(pieces) > 1:
            pieces = [part] + pieces  # keep "getScores" whole as well as "get", "scores"
        for piece in pieces:
            piece = piece.lower()
            if len(piece) > 1 and piece not in STOPWORDS_EN:
                words.append(_stem(piece) if stem else piece)
    if identifiers and _is_compound(token):
        words.append(token.lower())
    return tuple(words)


def _is_camel(part: str) -> bool:
    """ASCII mixed case that is not just Capitalized: ``getScores``, ``HTTPServer``, not ``Use``, ``NASA``."""
    return part.isascii() and not (part.islower() or part.isupper() or part.istitle())


def _is_compound(token: str) -> bool:
    return not token.isalnum()


_LOCAL = threading.local()


def _stem(word: str) -> str:
    """Snowball English; one PyStemmer object per thread (they are not thread-safe)."""
    stemmer = getattr(_LOCAL, "stemmer", None)
    if stemmer is None:
        try:
            import Stemmer
        except ImportError as error:  # pragma: no cover - PyStemmer is a core dependency
            raise ImportError("stemming needs PyStemmer: pip install PyStemmer") from error
        stemmer = _LOCAL.stemmer = Stemmer.Stemmer("english")
    return stemmer.stemWord(word)
