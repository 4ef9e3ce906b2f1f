"""A tiny random-weight Qwen2-VL captioning model, built offline for tests and ``conf/tiny.yaml``.

The same Qwen2-VL as the tiny ColQwen2 (:mod:`kb_ray.pages.tiny`: 2-layer text model,
2-block vision tower, byte-level BPE tokenizer with the Qwen2-VL special tokens, PIL image
processor with small pixel limits), saved as a ``Qwen2VLForConditionalGeneration`` with a
processor whose chat template places ``<|vision_start|><|image_pad|><|vision_end|>`` for
each image part, so ``processor.apply_chat_template`` works as with a real Qwen2-VL. Its
captions are gibberish. Same ``seed``, same weights. About 1 MB, a few seconds.

No video processor is saved: transformers' Qwen2-VL video processor needs torchvision,
which these machines do not install; :class:`~kb_ray.enrich.captioners_local.TransformersCaptioner`
loads Qwen2-VL-family processors image-only when the full processor cannot be built.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from kb_ray.errors import KbRayError
from kb_ray.pages import tiny

logger = logging.getLogger(__name__)

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}"
    "{% if part['type'] == 'image' or part['type'] == 'image_url' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _imports() -> dict:
    m = tiny._imports()
    try:
        from transformers import (
            Qwen2VLConfig,
            Qwen2VLForConditionalGeneration,
            Qwen2VLProcessor,
        )
    except ImportError as exc:  # pragma: no cover - same extra as the tiny ColQwen2
        raise KbRayError(f"building the tiny VLM needs {exc.name}: pip install kb-ray[embed]") from exc
    return {**m, "Qwen2VLConfig": Qwen2VLConfig, "Qwen2VLForConditionalGeneration": Qwen2VLForConditionalGeneration,
            "Qwen2VLProcessor": Qwen2VLProcessor}


def build_tiny_vlm(out_dir: str | Path, *, seed: int = 0) -> str:
    """Write a tiny Qwen2-VL image-text-to-text model + processor to ``out_dir``; return its path."""
    from kb_ray.enrich.captioners_local import image_only_processor_class

    m = _imports()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = _tokenizer(m)
    processor_class = image_only_processor_class(m["Qwen2VLProcessor"])
    processor = processor_class(image_processor=tiny.tiny_image_processor(m), tokenizer=tokenizer,
                                chat_template=CHAT_TEMPLATE)
    m["torch"].manual_seed(seed)
    config = m["Qwen2VLConfig"](**tiny.tiny_qwen2_vl_config(tokenizer))
    model = m["Qwen2VLForConditionalGeneration"](config).eval()
    _set_generation_defaults(model, tokenizer)
    model.save_pretrained(out)
    processor.save_pretrained(out)
    _name_processor_class(out, "Qwen2VLProcessor")
    logger.info("tiny VLM written to %s", out)
    return str(out)


def _tokenizer(m: dict):
    """The tiny ColQwen2's tokenizer, left-padded for batched generation."""
    tokenizer = tiny.build_tiny_tokenizer(m)
    tokenizer.padding_side = "left"
    return tokenizer


def _set_generation_defaults(model, tokenizer) -> None:
    """Stop at ``<|im_end|>`` or ``<|endoftext|>``, pad with ``<|endoftext|>`` (as Qwen2-VL-Instruct does)."""
    end_ids = [tokenizer.convert_tokens_to_ids(token) for token in ("<|im_end|>", "<|endoftext|>")]
    model.generation_config.eos_token_id = end_ids
    model.generation_config.pad_token_id = end_ids[1]
    model.generation_config.do_sample = False


def _name_processor_class(out: Path, name: str) -> None:
    """Record the real processor class so other loaders (AutoProcessor with torchvision, vLLM) find it."""
    path = out / "processor_config.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["processor_class"] = name
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
