"""The vLLM generator on a machine without vLLM (these CPU machines): a clear error, nothing else.

The engine code itself (kb_ray/answer/generators/vllm.py) runs only on a CUDA machine with
vLLM installed; no test here exercises it."""

from __future__ import annotations

import importlib.util

import pytest

from kb_ray.config import AnswerSettings
from kb_ray.errors import KbRayError

pytestmark = pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")


def test_vllm_generator_without_vllm_says_how_to_get_it(tmp_path):
    from kb_ray.answer.generators.vllm import VllmGenerator

    settings = AnswerSettings(generator="vllm", model_path=str(tmp_path))
    with pytest.raises(KbRayError, match="needs vLLM, which is not installed") as raised:
        VllmGenerator(settings)
    assert "answer.generator=transformers" in str(raised.value) and "answer.generator=openai" in str(raised.value)
