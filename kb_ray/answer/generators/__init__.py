"""Answer generators behind one interface (:class:`kb_ray.answer.types.Generator`).

``make_generator`` is the one factory: ``extractive`` (the embedded default) needs no model;
``openai``, ``vllm`` and ``transformers`` call or load the configured model and never
download one.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kb_ray.answer.types import Generator
from kb_ray.config import AnswerSettings
from kb_ray.errors import KbRayError

GENERATORS = ("extractive", "openai", "vllm", "transformers")


def make_generator(settings: AnswerSettings, *, embed: Callable[[list[str]], np.ndarray] | None = None,
                   abstain_below: float | None = None) -> Generator:
    """The generator ``settings.generator`` names. ``embed`` (the packaged text embedder) and
    ``abstain_below`` (the search's confidence threshold) are read by ``extractive``."""
    if settings.generator == "extractive":
        from kb_ray.answer.generators.extractive import ExtractiveGenerator

        return ExtractiveGenerator(settings, embed=embed, abstain_below=abstain_below)
    if settings.generator in GENERATORS:
        raise KbRayError(f"answer.generator={settings.generator} is not available in this build; "
                         "use answer.generator=extractive")
    raise KbRayError(f"unknown answer.generator {settings.generator!r}; use one of {', '.join(GENERATORS)}")
