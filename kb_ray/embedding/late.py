"""Late pooling: several vectors of one text from one forward pass over its tokens.

A chunk's passage vectors (``index.vector_layout: late``, kb_ray/index/vector_layout.py) are
not embedded as texts of their own: the chunk's embedded text (heading path + text) is
tokenized once, encoded in windows of the model's input length, and each passage's vector is
the mean of the token states the windows give its tokens, normalized as the model normalizes
its sentence vectors. The pooling is the model's own mean pooling, restricted:

* **Windows.** A text that fits the model's input (``max_seq_length`` minus the special
  tokens) is one window: ``[CLS] heading text [SEP]``. A longer one is cut into ``m`` windows
  of equal body length, the fewest that fit with at least ``overlap_tokens`` tokens shared
  by neighbours, and every window repeats the heading tokens after ``[CLS]`` (cut to a
  quarter of the input where a heading path is longer), so each sees its section's name as
  a separately embedded passage does.
* **Ownership.** Each body token is pooled from one window: the one it sits furthest from an
  edge in (neighbours split their shared tokens at the middle).
* **A span's vector** is the mean over its body tokens (each from its window) plus the
  frame — ``[CLS]``, heading tokens, ``[SEP]`` — of every window that owns one of them.
  The whole body over one window is therefore every token of the model's own input, and
  its vector is the model's sentence embedding of the text (tests/embedding/test_late.py
  checks it to 1e-5).

A span's tokens are those whose characters overlap it (the fast tokenizer's offsets), so a
word cut between two spans counts in both.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kb_ray.errors import KbRayError

Span = tuple[int, int]


@dataclass(frozen=True)
class LateItem:
    """One text to encode once: ``body_start`` is where its body begins (before it: the
    heading path, repeated in every window); ``spans`` are the character spans of ``text``
    whose vectors are wanted (e.g. the whole body, then each passage)."""

    text: str
    body_start: int
    spans: tuple[Span, ...]


@dataclass(frozen=True)
class Window:
    start: int  # body tokens [start, end) in this window
    end: int
    own_start: int  # the body tokens [own_start, own_end) pooled from this window
    own_end: int


@dataclass
class LatePlan:
    """The forward passes of one :class:`LateItem` and, per span, the token positions pooled."""

    windows: list[list[int]]  # token ids of each window, special tokens included
    selections: list[list[tuple[int, np.ndarray]]]  # per span: (window, positions in it)

    @property
    def tokens(self) -> int:
        return sum(len(ids) for ids in self.windows)


def plan_windows(body_tokens: int, capacity: int, overlap: int) -> list[Window]:
    """The fewest windows of at most ``capacity`` body tokens covering ``body_tokens`` with
    at least ``overlap`` shared by neighbours, all of one length, and what each owns."""
    if body_tokens <= capacity:
        return [Window(0, body_tokens, 0, body_tokens)]
    overlap = min(overlap, capacity // 2)
    count = math.ceil((body_tokens - overlap) / (capacity - overlap))
    width = math.ceil((body_tokens + (count - 1) * overlap) / count)
    starts = [k * (body_tokens - width) // (count - 1) for k in range(count)]
    cuts = [0] + [(starts[k + 1] + starts[k] + width) // 2 for k in range(count - 1)] + [body_tokens]
    return [Window(s, s + width, cuts[k], cuts[k + 1]) for k, s in enumerate(starts)]


class LatePooler:
    """Plans the windows of texts for a model (its tokenizer and input length) and pools
    token states into span vectors."""

    def __init__(self, tokenizer: Any, *, max_seq_length: int, overlap_tokens: int = 0,
                 normalize: bool = True) -> None:
        self.tokenizer = tokenizer
        probe = tokenizer.encode("x")  # the special tokens around one text, e.g. [CLS] x [SEP]
        content = [i for i, special in enumerate(probe.special_tokens_mask) if not special]
        self.prefix = list(probe.ids[:content[0]])
        self.suffix = list(probe.ids[content[-1] + 1:])
        self.capacity = max_seq_length - len(self.prefix) - len(self.suffix)
        self.overlap_tokens = overlap_tokens
        self.normalize = normalize

    @classmethod
    def from_model_path(cls, path: Path, **kwargs: Any) -> LatePooler:
        return cls(load_offsets_tokenizer(path), **kwargs)

    def count_tokens(self, texts: Sequence[str], *, embedded: bool = True) -> list[int]:
        """Tokens the model reads for each text embedded on its own (special tokens included,
        cut at the model's input length); ``embedded`` False: its word pieces."""
        encodings = self.tokenizer.encode_batch(list(texts), add_special_tokens=False)
        if not embedded:
            return [len(e.ids) for e in encodings]
        return [min(len(e.ids), self.capacity) + len(self.prefix) + len(self.suffix) for e in encodings]

    def plan(self, item: LateItem) -> LatePlan:
        encoding = self.tokenizer.encode(item.text, add_special_tokens=False)
        starts = np.array([a for a, _ in encoding.offsets], np.int64)
        ends = np.array([b for _, b in encoding.offsets], np.int64)
        heading = int(np.searchsorted(starts, item.body_start, side="left"))
        if len(encoding.ids) > self.capacity:  # several windows: each repeats the heading, cut to a quarter
            heading_kept = min(heading, self.capacity // 4)
        else:
            heading_kept = heading
        body_ids = encoding.ids[heading:]
        windows = plan_windows(len(body_ids), self.capacity - heading_kept, self.overlap_tokens)
        frame_ids = self.prefix + encoding.ids[:heading_kept]
        ids = [frame_ids + body_ids[w.start:w.end] + self.suffix for w in windows]
        body_starts, body_ends = starts[heading:], ends[heading:]
        selections = [self._select(span, body_starts, body_ends, windows, len(frame_ids), ids) for span in item.spans]
        return LatePlan(windows=ids, selections=selections)

    def _select(self, span: Span, starts: np.ndarray, ends: np.ndarray, windows: list[Window], frame: int,
                ids: list[list[int]]) -> list[tuple[int, np.ndarray]]:
        tokens = np.flatnonzero((starts < span[1]) & (ends > span[0]))
        if not len(tokens):  # nothing the tokenizer keeps (e.g. only zero-width characters): the frame alone
            after = int(np.searchsorted(starts, span[0]))
            owner = next((k for k, w in enumerate(windows) if w.own_start <= after < w.own_end), len(windows) - 1)
            return [(owner, self._frame(frame, len(ids[owner])))]
        first, last = int(tokens[0]), int(tokens[-1]) + 1
        out = []
        for k, window in enumerate(windows):
            lo, hi = max(first, window.own_start), min(last, window.own_end)
            if lo < hi:
                body = np.arange(lo, hi) - window.start + frame
                out.append((k, np.concatenate([self._frame(frame, len(ids[k])), body])))
        return out

    def _frame(self, frame: int, length: int) -> np.ndarray:
        return np.concatenate([np.arange(frame), np.arange(length - len(self.suffix), length)]).astype(np.int64)

    def embed(self, items: Sequence[LateItem], token_states: Callable[[list[list[int]]], list[np.ndarray]], *,
              batch_size: int) -> tuple[list[np.ndarray], int]:
        """Per item, its span vectors, and the tokens read. ``token_states`` runs one forward pass
        over a batch of windows. Items are taken longest first in groups of about ``4 × batch_size``
        windows; a group's windows are sorted by length into batches of ``batch_size``, so memory
        holds one group's token states."""
        out: list[np.ndarray] = [np.zeros((0, 0), np.float32)] * len(items)
        order = np.argsort(-np.array([len(item.text) for item in items], dtype=np.int64), kind="stable")
        tokens, group, windows = 0, [], 0
        for index in order:
            plan = self.plan(items[index])
            group.append((int(index), plan))
            windows += len(plan.windows)
            if windows >= 4 * batch_size:
                tokens += self._pool_group(group, token_states, batch_size, out)
                group, windows = [], 0
        return out, tokens + (self._pool_group(group, token_states, batch_size, out) if group else 0)

    def _pool_group(self, group: list[tuple[int, LatePlan]], token_states: Callable, batch_size: int,
                    out: list[np.ndarray]) -> int:
        windows = sorted(((g, k, ids) for g, (_, plan) in enumerate(group) for k, ids in enumerate(plan.windows)),
                         key=lambda window: -len(window[2]))
        states: list[dict[int, np.ndarray]] = [{} for _ in group]
        for start in range(0, len(windows), batch_size):
            batch = windows[start:start + batch_size]
            for (g, k, _), hidden in zip(batch, token_states([ids for _, _, ids in batch])):
                states[g][k] = hidden
        for g, (index, plan) in enumerate(group):
            out[index] = self.pool(plan, [states[g][k] for k in range(len(plan.windows))])
        return sum(plan.tokens for _, plan in group)

    def pool(self, plan: LatePlan, states: Sequence[np.ndarray]) -> np.ndarray:
        """``[spans, dim]``: each span's mean token state (``states[k]``: window ``k``'s,
        ``[tokens, dim]``), L2-normalized when the model normalizes."""
        vectors = np.stack([np.concatenate([states[k][positions] for k, positions in selection]).mean(axis=0)
                            for selection in plan.selections]).astype(np.float32)
        if self.normalize:
            vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return vectors


def padded_windows(batch: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """``(input_ids, attention_mask)`` int64 ``[windows, longest]`` of token id sequences,
    zero-padded: what both encoder runtimes feed their transformer for ``token_states``."""
    width = max(len(ids) for ids in batch)
    input_ids = np.zeros((len(batch), width), dtype=np.int64)
    mask = np.zeros((len(batch), width), dtype=np.int64)
    for row, ids in enumerate(batch):
        input_ids[row, :len(ids)] = ids
        mask[row, :len(ids)] = 1
    return input_ids, mask


def check_late_pooling(layout: Any, path: Path) -> None:
    """Late pooling averages the transformer's token states, which is the model's own sentence
    vector only for a mean-pooling model (``ModelLayout``) without layers after the pooling."""
    if tuple(layout.pooling_modes) != ("mean_tokens",) or not set(layout.module_types) <= {
            "Transformer", "Pooling", "Normalize"}:
        raise KbRayError(f"{path}: index.vector_layout late pools token states by their mean, but this model is "
                         f"{list(layout.module_types)} with pooling {list(layout.pooling_modes)}: use a mean-pooling "
                         "model (Transformer → Pooling → [Normalize]) or another vector layout")


def load_offsets_tokenizer(path: Path) -> Any:
    """The model's fast tokenizer (``tokenizers.Tokenizer``) without truncation or padding."""
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise KbRayError("late pooling needs the tokenizers package: pip install tokenizers") from exc
    if (path / "tokenizer.json").is_file():
        tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
    else:  # a model saved with a slow tokenizer only: transformers converts it
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True).backend_tokenizer
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer
