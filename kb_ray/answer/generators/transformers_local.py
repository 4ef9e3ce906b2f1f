"""``TransformersGenerator``: answers from a local causal LM with transformers, CPU or GPU.

``AutoModelForCausalLM`` and ``AutoTokenizer`` load from ``answer.model_path`` only
(``local_files_only``; nothing is downloaded; a missing directory is a :class:`KbRayError`
at construction). The prompt goes through the tokenizer's chat template when it has one,
else as plain text (:func:`~kb_ray.answer.generators.prompt.plain_prompt`). Decoding is
greedy at ``temperature == 0``, else sampled at ``temperature``; ``max_new_tokens`` bounds
the answer and ``timeout_s`` is enforced through ``generate(max_time=...)`` (an answer cut
off by it is ``error="timeout"``). A prompt longer than the model's context is
``error="prompt_too_long"``; a runtime failure (e.g. out of memory) is ``error="model_error"``.
Token counts are the prompt's tokens and the generated ones up to the first end token.
``answer.device`` (``cpu``, ``cuda``, ``cuda:N``, ``auto``) and ``answer.dtype`` pick where
and how the weights run. One generation at a time per generator (a lock): the model is
not re-entrant.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

from kb_ray.answer.generators.prompt import ChatGenerator, plain_prompt
from kb_ray.answer.types import Generation
from kb_ray.config import AnswerSettings
from kb_ray.errors import KbRayError
from kb_ray.model_dirs import local_model_dir

logger = logging.getLogger(__name__)


def resolve_answer_model_path(model_path: str | None, *, backend: str) -> Path:
    if not model_path:
        raise KbRayError(f"answer.generator={backend} needs answer.model_path: a local causal-LM directory "
                         "(models are never downloaded; `kb-ray dev tiny-models` writes a tiny one, lm-tiny)")
    return local_model_dir(model_path, what="answer model", kind="causal language model")


class TransformersGenerator(ChatGenerator):
    """Writes answers with a local ``AutoModelForCausalLM`` in this process."""

    backend = "transformers"

    def __init__(self, settings: AnswerSettings) -> None:
        torch, transformers = _imports()
        from kb_ray.embedding.torch_runtime import resolve_device

        self.path = resolve_answer_model_path(settings.model_path, backend="transformers")
        super().__init__(settings, model=settings.model_id or self.path.name)
        self.device = resolve_device(settings.device, torch)
        self._torch = torch
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(self.path, local_files_only=True)
        attention = "sdpa" if self.device.startswith("cuda") else "eager"
        network = transformers.AutoModelForCausalLM.from_pretrained(
            self.path, local_files_only=True, dtype=getattr(torch, settings.dtype), attn_implementation=attention)
        self._network = network.to(self.device).eval()
        self._end_ids = _end_token_ids(self._network, self.tokenizer)
        self._context = _context_length(self._network)
        self._lock = threading.Lock()
        logger.info("loaded answer model %s from %s on %s", self.model, self.path, self.device)

    def render(self, messages: list[dict[str, str]]) -> str:
        """The prompt text: the tokenizer's chat template, else :func:`plain_prompt`."""
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return plain_prompt(messages)

    def complete(self, messages: list[dict[str, str]]) -> Generation:
        inputs = self.tokenizer(self.render(messages), return_tensors="pt", add_special_tokens=False)
        prompt_tokens = int(inputs["input_ids"].shape[1])
        if prompt_tokens + self.settings.max_new_tokens > self._context:
            logger.warning("answer prompt of %d tokens + %d new exceeds the model's %d", prompt_tokens,
                           self.settings.max_new_tokens, self._context)
            return Generation(text="", error="prompt_too_long", prompt_tokens=prompt_tokens)
        try:
            tokens, seconds = self._generate(inputs.to(self.device))
        except RuntimeError as exc:
            logger.warning("answer generation failed: %s", exc)
            return Generation(text="", error="model_error", prompt_tokens=prompt_tokens)
        return self._decode(tokens, prompt_tokens=prompt_tokens, timed_out=seconds >= self.settings.timeout_s)

    def _generate(self, inputs: Any) -> tuple[list[int], float]:
        started = time.perf_counter()
        with self._lock, self._torch.inference_mode():
            output = self._network.generate(**inputs, **self._generation_kwargs())
        return output[0, inputs["input_ids"].shape[1]:].tolist(), time.perf_counter() - started

    def _generation_kwargs(self) -> dict[str, Any]:
        s = self.settings
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
        kwargs: dict[str, Any] = {"max_new_tokens": s.max_new_tokens, "max_time": s.timeout_s,
                                  "pad_token_id": pad, "do_sample": s.temperature > 0}
        if s.temperature > 0:
            kwargs["temperature"] = s.temperature
        return kwargs

    def _decode(self, tokens: list[int], *, prompt_tokens: int, timed_out: bool) -> Generation:
        ended = next((i for i, token in enumerate(tokens) if token in self._end_ids), None)
        generated = tokens if ended is None else tokens[:ended + 1]
        counts = {"prompt_tokens": prompt_tokens, "completion_tokens": len(generated)}
        if ended is None and len(generated) < self.settings.max_new_tokens and timed_out:
            return Generation(text="", error="timeout", **counts)
        text = self.tokenizer.decode(generated, skip_special_tokens=True)
        if not text.strip():
            return Generation(text="", error="empty_answer", **counts)
        return Generation(text=text, **counts)

    def close(self) -> None:
        self._network = None


def _end_token_ids(model: Any, tokenizer: Any) -> frozenset[int]:
    eos = model.generation_config.eos_token_id
    ids = eos if isinstance(eos, list) else [eos]
    return frozenset(i for i in [*ids, tokenizer.eos_token_id] if i is not None)


def _context_length(model: Any) -> int:
    config = model.config
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return 2048


def _imports() -> tuple[Any, Any]:
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise KbRayError("answer.generator=transformers needs torch and transformers: pip install kb-ray[embed]"
                         ) from exc
    return torch, transformers
