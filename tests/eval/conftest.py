"""Fixtures for eval tests: the session golden catalog (tests/index_fixtures.py)."""

from tests.index_fixtures import golden_kb, text_embedder  # noqa: F401  (pytest fixtures)
