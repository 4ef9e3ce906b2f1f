"""Fixtures for answer tests: the golden catalog (one ingest per session) and the packaged embedder."""

from tests.index_fixtures import golden_kb, text_embedder  # noqa: F401  (pytest fixtures)
