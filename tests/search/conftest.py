"""Fixtures for search tests: the same golden catalog as tests/index (one ingest per session)."""

from tests.index_fixtures import golden_kb, text_embedder  # noqa: F401  (pytest fixtures)
