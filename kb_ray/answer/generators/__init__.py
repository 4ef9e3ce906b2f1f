"""Answer generators behind one interface (:class:`kb_ray.answer.types.Generator`).

``make_generator`` is the one factory: ``extractive`` (the embedded default) needs no model;
``openai``, ``vllm`` and ``transformers`` call or load the configured model and never
download one.
"""

from __future__ import annotations

from kb_ray.answer.types import Generator
from kb_ray.config import AnswerSettings, SearchSettings
from kb_ray.errors import KbRayError

GENERATORS = ("extractive", "openai", "vllm", "transformers")


def make_generator(settings: AnswerSettings, *, abstain_below: float | None = None) -> Generator:
    """The generator ``settings.generator`` names. ``abstain_below`` (the search's confidence
    threshold) is read by ``extractive``."""
    if settings.generator == "extractive":
        from kb_ray.answer.generators.extractive import ExtractiveGenerator

        return ExtractiveGenerator(settings, abstain_below=abstain_below)
    if settings.generator == "openai":
        from kb_ray.answer.generators.openai import OpenAIGenerator

        return OpenAIGenerator(settings)
    if settings.generator == "transformers":
        from kb_ray.answer.generators.transformers_local import TransformersGenerator

        return TransformersGenerator(settings)
    if settings.generator == "vllm":
        from kb_ray.answer.generators.vllm import VllmGenerator

        return VllmGenerator(settings)
    raise KbRayError(f"unknown answer.generator {settings.generator!r}; use one of {', '.join(GENERATORS)}")


def abstain_threshold(settings: SearchSettings, *, evidence: str | None = None) -> float | None:
    """The confidence under which the search abstains: ``search.abstain_below``, else the
    threshold fitted with the confidence model of the ``evidence`` mode the searches use
    (default ``search.evidence``; kb_ray/search/confidence.py)."""
    if settings.abstain_below is not None:
        return settings.abstain_below
    from kb_ray.search.confidence import ConfidenceModel, packaged_model_path

    path = settings.confidence_model_path or packaged_model_path(evidence or settings.evidence)
    return ConfidenceModel.load(path).abstain_below
