"""A tiny random-weight sentence-transformers model, built offline for tests.

The real loading and inference code (:class:`~kb_ray.embedding.text.TextEmbedder`) runs
unchanged on it: a 2-layer BERT with hidden size 32, a WordPiece tokenizer whose
vocabulary is built here from a word list, mean pooling and a Normalize module. Its
vectors mean nothing; it exists so tests can exercise a second model in well under a
second. Building is deterministic: the same ``seed`` writes the same weights.
"""

from __future__ import annotations

import logging
import string
import tempfile
from pathlib import Path

from kb_ray.errors import KbRayError

logger = logging.getLogger(__name__)

TINY_HIDDEN_SIZE = 32
_SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
_WORDS = """
the a an of to in and or is are was be on for with as by at from this that it not
document page section table figure chunk text search index query answer result model
data ray delta lake vector embed embedding token heading title report summary cat dog
neural network learning machine language retrieval catalog version citation source
""".split()


def tiny_vocabulary() -> list[str]:
    """Special tokens, the word list, single characters and ``##`` continuations."""
    chars = list(string.ascii_lowercase + string.digits + string.punctuation)
    vocab = _SPECIAL_TOKENS + _WORDS + chars + [f"##{c}" for c in string.ascii_lowercase + string.digits]
    return list(dict.fromkeys(vocab))  # stable de-duplication


def build_tiny_text_model(out_dir: str | Path, *, seed: int = 0) -> str:
    """Write a tiny sentence-transformers model to ``out_dir`` and return its path."""
    try:
        import torch
        from sentence_transformers import SentenceTransformer
        from sentence_transformers.base.modules import Normalize, Transformer
        from sentence_transformers.sentence_transformer.modules import Pooling
        from transformers import BertConfig, BertModel, BertTokenizer
    except ImportError as exc:
        raise KbRayError(f"building the tiny model needs {exc.name}: pip install kb-ray[embed]") from exc

    out = Path(out_dir)
    vocab = tiny_vocabulary()
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=TINY_HIDDEN_SIZE,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    with tempfile.TemporaryDirectory() as tmp:
        torch.manual_seed(seed)
        BertModel(config).eval().save_pretrained(tmp)
        BertTokenizer(vocab={token: i for i, token in enumerate(vocab)}).save_pretrained(tmp)
        transformer = Transformer(tmp, max_seq_length=128)
        modules = [transformer, Pooling(TINY_HIDDEN_SIZE, "mean"), Normalize()]
        SentenceTransformer(modules=modules, device="cpu").save(str(out))
    logger.info("tiny text model written to %s", out)
    return str(out)
