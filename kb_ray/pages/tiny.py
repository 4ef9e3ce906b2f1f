"""A tiny random-weight ColQwen2, built offline for tests and ``conf/tiny.yaml``.

The real loading and inference code (:class:`~kb_ray.pages.embedder.PageEmbedder`) runs
unchanged on it: a Qwen2-VL with a 2-layer text model (hidden 64, 4 heads), a 2-block
vision tower whose merger outputs the text hidden size, a 128-d ColQwen2 projection, a
byte-level BPE tokenizer trained here on a few sentences (with the Qwen2-VL special
tokens) and a PIL image processor with small pixel limits. Its vectors mean nothing.
Same ``seed``, same weights.
"""

from __future__ import annotations

import logging
from pathlib import Path

from kb_ray.errors import KbRayError

logger = logging.getLogger(__name__)

TEXT_HIDDEN = 64
EMBEDDING_DIM = 128
PATCH_SIZE = 14
MERGE_SIZE = 2
MIN_PIXELS = (PATCH_SIZE * MERGE_SIZE) ** 2 * 4
MAX_PIXELS = (PATCH_SIZE * MERGE_SIZE) ** 2 * 64  # at most 64 image tokens per page
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                  "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"]
_CORPUS = [
    "Describe the image.", "Query: what is on this page?", "user assistant system",
    "The pump manual lists the mechanical seal kit and its part number.",
    "Eelgrass shoots were transplanted along the estuary in spring.",
    "A day pass costs less than a monthly subscription.",
    "Tables, figures, captions, headings and paragraphs of a report.",
    "0123456789 kW degrees Celsius percent page section chapter",
]


def _imports():
    try:  # the names are returned through locals()
        import torch  # noqa: F401
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: F401
        from transformers import (  # noqa: F401
            ColQwen2Config,
            ColQwen2ForRetrieval,
            ColQwen2Processor,
            Qwen2TokenizerFast,
        )
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil  # noqa: F401
    except ImportError as exc:
        raise KbRayError(f"building the tiny ColQwen2 needs {exc.name}: pip install kb-ray[embed]") from exc
    return locals()


def build_tiny_tokenizer(m: dict):
    """A byte-level BPE (vocabulary ~400) with the Qwen2-VL special tokens, as a Qwen2 fast tokenizer."""
    tok = m["Tokenizer"](m["models"].BPE(unk_token=None))
    tok.pre_tokenizer = m["pre_tokenizers"].ByteLevel(add_prefix_space=False)
    tok.decoder = m["decoders"].ByteLevel()
    trainer = m["trainers"].BpeTrainer(vocab_size=400, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                       initial_alphabet=m["pre_tokenizers"].ByteLevel.alphabet())
    tok.train_from_iterator(_CORPUS, trainer=trainer)
    return m["Qwen2TokenizerFast"](tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|endoftext|>",
                                   unk_token=None, bos_token=None, model_max_length=4096)


def tiny_config(m: dict, tokenizer):
    return m["ColQwen2Config"](vlm_config=tiny_qwen2_vl_config(tokenizer), embedding_dim=EMBEDDING_DIM)


def tiny_qwen2_vl_config(tokenizer) -> dict:
    """The tiny Qwen2-VL as a config dict (``model_type`` qwen2_vl); shared with the tiny captioning VLM."""
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in SPECIAL_TOKENS}
    head_dim = TEXT_HIDDEN // 4
    text = {"vocab_size": len(tokenizer), "hidden_size": TEXT_HIDDEN, "intermediate_size": 128,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
            "max_position_embeddings": 4096, "eos_token_id": ids["<|endoftext|>"], "bos_token_id": None,
            "pad_token_id": ids["<|endoftext|>"],
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                                "mrope_section": _mrope_section(head_dim // 2)}}
    vision = {"depth": 2, "embed_dim": 32, "hidden_size": TEXT_HIDDEN, "num_heads": 2, "mlp_ratio": 2,
              "patch_size": PATCH_SIZE, "spatial_merge_size": MERGE_SIZE, "temporal_patch_size": 2}
    return {"model_type": "qwen2_vl", "text_config": text, "vision_config": vision,
            "image_token_id": ids["<|image_pad|>"], "video_token_id": ids["<|video_pad|>"],
            "vision_start_token_id": ids["<|vision_start|>"], "vision_end_token_id": ids["<|vision_end|>"]}


def tiny_image_processor(m: dict):
    """The PIL Qwen2-VL image processor with small pixel limits (4 to 64 image tokens)."""
    return m["Qwen2VLImageProcessorPil"](min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS,
                                         patch_size=PATCH_SIZE, merge_size=MERGE_SIZE)


def _mrope_section(half: int) -> list[int]:
    """Temporal, height, width sections summing to head_dim / 2."""
    t = half // 4
    h = (half - t) // 2
    return [t, h, half - t - h]


def build_tiny_colqwen2(out_dir: str | Path, *, seed: int = 0) -> str:
    """Write a tiny ColQwen2 model + processor to ``out_dir`` and return its path."""
    m = _imports()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tiny_tokenizer(m)
    processor = m["ColQwen2Processor"](image_processor=tiny_image_processor(m), tokenizer=tokenizer)
    m["torch"].manual_seed(seed)
    model = m["ColQwen2ForRetrieval"](tiny_config(m, tokenizer)).eval()
    model.save_pretrained(out)
    processor.save_pretrained(out)
    logger.info("tiny ColQwen2 written to %s", out)
    return str(out)
