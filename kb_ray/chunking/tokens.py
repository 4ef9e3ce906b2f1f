"""Token counting for chunk budgets.

Two counters behind one interface (:class:`TokenCounter`):

* :class:`WordPieceCounter` (the default): the embedding model's own tokenizer
  (``tokenizer.json`` through ``tokenizers``), so a chunk's budget is what the embedder
  actually sees and nothing is lost to truncation. The default tokenizer is the packaged
  all-MiniLM-L6-v2's (256 WordPiece positions, two of them special tokens).
* :class:`RegexCounter`: a token is a run of Unicode word characters or a single
  punctuation mark (regex ``\\w+|[^\\w\\s]``). It needs no model and is identical on
  every machine; it also gives ``Chunk.token_count``. For English prose it lands within
  about 15 % of WordPiece counts, but technical text (identifiers, paths, options) splits
  much further in WordPiece: at a 200-token regex budget 2.1 % of the real-document set's
  chunks ran past MiniLM's 256 positions (benchmarks/results/eval.md, "Chunk budget").
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any, Protocol

from kb_ray.errors import KbRayError

TOKEN_PATTERN = re.compile(r"\w+|[^\w\s]")
SPECIAL_TOKENS = 2  # [CLS] and [SEP]: what a BERT-style encoder adds to every input


def count_tokens(text: str) -> int:
    return sum(1 for _ in TOKEN_PATTERN.finditer(text))


def token_end_offsets(text: str) -> list[int]:
    """Character offset just past each token, in order."""
    return [match.end() for match in TOKEN_PATTERN.finditer(text)]


class TokenCounter(Protocol):
    name: str  # recorded in the chunker's config, so a different tokenizer is a different chunker

    def count(self, text: str) -> int: ...

    def cuts(self, text: str, budget: int) -> list[int]:
        """Character offsets at which to cut ``text`` so that no piece has over ``budget``
        tokens (empty when it fits); cuts fall at word ends where a word fits the budget."""


class RegexCounter:
    name = "regex-words-v1"

    def count(self, text: str) -> int:
        return count_tokens(text)

    def cuts(self, text: str, budget: int) -> list[int]:
        offsets = token_end_offsets(text)
        return [offsets[index] for index in range(budget - 1, len(offsets) - 1, budget)]


class WordPieceCounter:
    """Counts with a model's fast tokenizer (no special tokens, no truncation)."""

    def __init__(self, tokenizer_dir: str | Path) -> None:
        path = Path(tokenizer_dir) / "tokenizer.json"
        if not path.is_file():
            raise KbRayError(f"no tokenizer.json in {tokenizer_dir}: chunking.tokenizer_path must name a model "
                             "directory with a fast tokenizer, or set chunking.tokenizer: regex")
        self._tokenizer = _load(path)
        self.name = f"tokenizer-{hashlib.sha256(path.read_bytes()).hexdigest()[:16]}"

    def count(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def cuts(self, text: str, budget: int) -> list[int]:
        """Greedy: each piece takes up to ``budget`` word pieces and ends after the last whole
        word that fits; a single word longer than the budget is cut between its pieces."""
        encoding = self._tokenizer.encode(text, add_special_tokens=False)
        offsets, words = encoding.offsets, encoding.word_ids
        cuts: list[int] = []
        first = 0  # index of the first piece of the current chunk
        while len(offsets) - first > budget:
            last = first + budget - 1  # the last piece that fits
            word_end = last if words[last] != words[last + 1] else _last_word_end(words, first, last)
            cuts.append(offsets[word_end][1])
            first = word_end + 1
        return cuts


def _last_word_end(words: list[int | None], first: int, last: int) -> int:
    """The last piece in ``first..last`` that ends a word, else ``last`` (a giant word)."""
    for index in range(last - 1, first - 1, -1):
        if words[index] != words[index + 1]:
            return index
    return last


def _load(path: Path) -> Any:
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise KbRayError("chunking.tokenizer: wordpiece needs the tokenizers package (pip install tokenizers), "
                         "or set chunking.tokenizer: regex") from exc
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer
