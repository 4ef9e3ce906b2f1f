"""A tiny random-weight cross-encoder, built offline for tests.

A 2-layer BERT sequence classifier (one label) with the WordPiece vocabulary of
:func:`kb_ray.embedding.tiny.tiny_vocabulary`, saved so that
``CrossEncoder(path, num_labels=1)`` loads it without any download. Its scores mean
nothing; it exercises the real reranking code path. Same ``seed``, same weights.
"""

from __future__ import annotations

import logging
from pathlib import Path

from kb_ray.embedding.tiny import tiny_vocabulary
from kb_ray.errors import KbRayError

logger = logging.getLogger(__name__)


def build_tiny_cross_encoder(out_dir: str | Path, *, seed: int = 0) -> str:
    """Write a tiny cross-encoder to ``out_dir`` and return its path."""
    try:
        import torch
        from transformers import BertConfig, BertForSequenceClassification, BertTokenizer
    except ImportError as exc:
        raise KbRayError(f"building the tiny cross-encoder needs {exc.name}: pip install kb-ray[embed]") from exc
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    vocab = tiny_vocabulary()
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=256, num_labels=1)
    torch.manual_seed(seed)
    BertForSequenceClassification(config).eval().save_pretrained(out)
    vocab_file = out / "vocab.txt"
    vocab_file.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    BertTokenizer(vocab_file=str(vocab_file), model_max_length=256).save_pretrained(out)
    logger.info("tiny cross-encoder written to %s", out)
    return str(out)
