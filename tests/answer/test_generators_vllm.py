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


def test_serve_binds_a_gpu_generator_deployment_only_for_vllm():
    from kb_ray.config import KbConfig
    from kb_ray.serving.app import build_app
    from kb_ray.serving.generator_deployment import bind_generator

    assert bind_generator(AnswerSettings(generator="openai")) is None
    assert bind_generator(AnswerSettings()) is None
    settings = AnswerSettings(generator="vllm", model_path="/models/qwen", num_gpus=1.0)
    bound = bind_generator(settings)._bound_deployment
    assert bound.name == "AnswerGenerator" and bound.ray_actor_options["num_gpus"] == 1.0
    assert bound.init_args == (settings,)
    ingress = build_app(KbConfig(answer=settings))._bound_deployment
    assert ingress.init_args[4]._bound_deployment.name == "AnswerGenerator"
    assert build_app(KbConfig())._bound_deployment.init_args[4] is None
