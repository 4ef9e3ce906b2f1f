"""Fixtures for visual page retrieval: the tiny ColQwen2 (built once per session) and a
small catalog (2 golden PDFs) ingested with pages enabled, indexed once per module."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kb_ray.config import PagesSettings
from tests.conftest import GOLDEN_SOURCES

PDFS = ("manual.pdf", "figure.pdf")


@pytest.fixture(scope="session")
def tiny_colqwen2(tmp_path_factory) -> str:
    from kb_ray.pages.tiny import build_tiny_colqwen2

    return build_tiny_colqwen2(tmp_path_factory.mktemp("models") / "colqwen2-tiny")


@pytest.fixture(scope="session")
def page_settings(tiny_colqwen2) -> PagesSettings:
    return PagesSettings(enabled=True, model_path=tiny_colqwen2, model_id="kb-ray/tiny-colqwen2", dpi=72)


@pytest.fixture(scope="session")
def page_embedder(page_settings):
    from kb_ray.pages.embedder import PageEmbedder

    return PageEmbedder(page_settings)


@pytest.fixture(scope="module")
def pdf_sources(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("sources")
    for name in PDFS:
        shutil.copy(GOLDEN_SOURCES / name, folder / name)
    return folder


def page_overrides(model_path: str) -> list[str]:
    return ["pages.enabled=true", f"pages.model_path={model_path}", "pages.dpi=72", "pages.model_id=kb-ray/tiny-colqwen2",
            "ray.parse.num_cpus=0.5", "ray.embed.num_cpus=0.5", "ray.render.num_cpus=0.25",
            "ray.page_embed.num_cpus=0.25", "ray.render.batch_size=2", "ray.page_embed.batch_size=2"]
