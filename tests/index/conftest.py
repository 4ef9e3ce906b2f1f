"""Fixtures for index tests: the golden catalog (ingested once per session) and helpers."""

from tests.index_fixtures import golden_kb, text_embedder  # noqa: F401  (pytest fixtures)
