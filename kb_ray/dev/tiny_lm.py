"""A tiny random-weight causal LM, built offline for tests: ``kb-ray dev tiny-models`` writes it as ``lm-tiny``.

A 2-layer ``LlamaForCausalLM`` (hidden size 64) with a byte-level BPE tokenizer trained here
on a few sentences and the answer prompt's fixed text (up to 1,000 tokens; any text encodes) and a ChatML chat template
(``<|im_start|>role ... <|im_end|>``), saved as a ``PreTrainedTokenizerFast``. The real
answer code (:class:`~kb_ray.answer.generators.transformers_local.TransformersGenerator`)
loads and runs it unchanged; its answers are gibberish, which verification must flag.
``chat_template=False`` saves it without a template (the plain-prompt path). Same ``seed``,
same weights. About 0.5 MB, a second or two.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from kb_ray.errors import KbRayError

logger = logging.getLogger(__name__)

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
_CORPUS = [
    "system user assistant Evidence passages: Task: Question: Answer the question. page pages",
    "[1] [2] [3] [4] [5] [6] The pump manual lists the mechanical seal kit and its part number [1].",
    "Eelgrass shoots were transplanted along the estuary in spring [2].",
    "A day pass costs less than a monthly subscription. The knowledge base has no passage that answers this.",
    "Tables, figures, captions, headings and paragraphs of a report, section and chapter.",
    "0123456789 kW degrees Celsius percent",
]


def build_tiny_lm(out_dir: str | Path, *, seed: int = 0, chat_template: bool = True) -> str:
    """Write a tiny causal LM + tokenizer to ``out_dir``; return its path."""
    m = _imports()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = _tokenizer(m, chat_template=chat_template)
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in SPECIAL_TOKENS}
    config = m["LlamaConfig"](vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=8192,
                              bos_token_id=None, eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"],
                              tie_word_embeddings=False, initializer_range=0.5)
    m["torch"].manual_seed(seed)
    model = m["LlamaForCausalLM"](config).eval()
    model.generation_config.eos_token_id = [ids["<|im_end|>"], ids["<|endoftext|>"]]
    model.generation_config.pad_token_id = ids["<|endoftext|>"]
    model.generation_config.do_sample = False
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    logger.info("tiny causal LM written to %s", out)
    return str(out)


def _tokenizer(m: dict[str, Any], *, chat_template: bool) -> Any:
    bpe = m["Tokenizer"](m["models"].BPE(unk_token=None))
    bpe.pre_tokenizer = m["pre_tokenizers"].ByteLevel(add_prefix_space=False)
    bpe.decoder = m["decoders"].ByteLevel()
    trainer = m["trainers"].BpeTrainer(vocab_size=1000, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                       initial_alphabet=m["pre_tokenizers"].ByteLevel.alphabet())
    bpe.train_from_iterator([*_CORPUS, *_prompt_texts()], trainer=trainer)
    tokenizer = m["PreTrainedTokenizerFast"](tokenizer_object=bpe, eos_token="<|im_end|>",
                                             pad_token="<|endoftext|>", model_max_length=8192)
    if chat_template:
        tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def _prompt_texts() -> list[str]:
    """The answer prompt's fixed text, so it encodes into few tokens (short prompts, fast tests)."""
    from kb_ray.answer.generators import prompt
    from kb_ray.config import REFUSAL

    templates = [prompt.SYSTEM_TEMPLATE, prompt.USER_TEMPLATE, prompt.REPAIR_TEMPLATE, REFUSAL,
                 *prompt.MODE_INSTRUCTIONS.values(), *prompt.PROBLEMS.values()]
    return [line for text in templates for line in text.splitlines() if line.strip()]


def _imports() -> dict[str, Any]:
    try:
        import torch
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
        from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
    except ImportError as exc:
        raise KbRayError(f"building the tiny causal LM needs {exc.name}: pip install kb-ray[embed]") from exc
    return {"torch": torch, "Tokenizer": Tokenizer, "decoders": decoders, "models": models,
            "pre_tokenizers": pre_tokenizers, "trainers": trainers, "LlamaConfig": LlamaConfig,
            "LlamaForCausalLM": LlamaForCausalLM, "PreTrainedTokenizerFast": PreTrainedTokenizerFast}
